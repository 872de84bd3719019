/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the daemon's event loop (daemon/loop.c): timers in order, fds, removal inside
 * callbacks. */
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "loop.h"
#include "test.h"

struct ctx {
  int order[8];
  int n;
  int fds[2][2];
  int reads;
  int fd_calls;
  uint64_t cancel;
  int rearms;
  int wake_fd; /* written by the first rearm_cb */
};

static void record_cb(struct loop *l, uint64_t id, void *data);
static struct ctx *g_ctx;

static void record_cb(struct loop *l, uint64_t id, void *data) {
  g_ctx->order[g_ctx->n++] = (int)(intptr_t)data;
  if (g_ctx->n == 3)
    loop_stop(l);
  (void)id;
}

static void stop_cb(struct loop *l, uint64_t id, void *data) {
  (void)id;
  (void)data;
  loop_stop(l);
}

/* Records, and cancels the timer in c->cancel: due in the same run, it must not fire. */
static void record_cancel_cb(struct loop *l, uint64_t id, void *data) {
  loop_del_timer(l, g_ctx->cancel);
  record_cb(l, id, data);
}

/* Reads one fd, and deletes the other pair's fd: its pending event (same epoll batch) must not
 * fire. The loop goes on (a timer stops it after the batch), so a loop that ran the callback of
 * a deleted fd shows here as a second call and a second read. */
static void fd_cb(struct loop *l, int fd, uint32_t events, void *data) {
  struct ctx *c = data;
  char b;
  (void)events;
  c->fd_calls++;
  if (read(fd, &b, 1) == 1)
    c->reads++;
  loop_del_fd(l, fd == c->fds[0][0] ? c->fds[1][0] : c->fds[0][0]);
}

/* A timer that re-arms itself already due; its first call makes an fd readable, which must
 * still get its turn. */
static void rearm_cb(struct loop *l, uint64_t id, void *data) {
  struct ctx *c = data;
  (void)id;
  if (c->rearms == 0 && write(c->wake_fd, "z", 1) != 1)
    return;
  if (++c->rearms > 10000) {
    loop_stop(l); /* starved: the check on fd_calls below fails */
    return;
  }
  loop_add_timer(l, 0, rearm_cb, c, NULL);
}

static void fd_stop_cb(struct loop *l, int fd, uint32_t events, void *data) {
  struct ctx *c = data;
  char b;
  (void)events;
  if (read(fd, &b, 1) == 1)
    c->fd_calls++;
  loop_stop(l);
}

int main(void) {
  struct loop *l;
  struct ctx c = {0};
  uint64_t now, id;

  g_ctx = &c;
  CHECK_EQ_INT(loop_new(&l), 0);
  now = loop_now();
  /* Timers fire in time order whatever the order they were added in; a
   * cancelled one never fires. */
  CHECK_EQ_INT(loop_add_timer(l, now + 3000000, record_cb, (void *)(intptr_t)3, &id), 0);
  CHECK_EQ_INT(loop_add_timer(l, now + 1000000, record_cb, (void *)(intptr_t)1, &id), 0);
  CHECK_EQ_INT(loop_add_timer(l, now + 2000000, record_cb, (void *)(intptr_t)9, &c.cancel), 0);
  CHECK_EQ_INT(loop_add_timer(l, now + 2500000, record_cb, (void *)(intptr_t)2, &id), 0);
  loop_del_timer(l, c.cancel);
  CHECK_EQ_INT(loop_run(l), 0);
  CHECK_EQ_INT(c.n, 3);
  CHECK_EQ_INT(c.order[0], 1);
  CHECK_EQ_INT(c.order[1], 2);
  CHECK_EQ_INT(c.order[2], 3);
  CHECK(loop_now() - now >= 3000000);

  /* Several timers due in one turn (deadlines already past, as after a stall of the loop on
   * a loaded machine): they fire in deadline order, not in the order they were added; one
   * cancelled by an earlier callback of the same turn does not fire. */
  c.n = 0;
  now = loop_now();
  CHECK_EQ_INT(loop_add_timer(l, now - 1000, record_cb, (void *)(intptr_t)3, &id), 0);
  CHECK_EQ_INT(loop_add_timer(l, now - 3000, record_cancel_cb, (void *)(intptr_t)1, &id), 0);
  CHECK_EQ_INT(loop_add_timer(l, now - 1500, record_cb, (void *)(intptr_t)9, &c.cancel), 0);
  CHECK_EQ_INT(loop_add_timer(l, now - 2000, record_cb, (void *)(intptr_t)2, &id), 0);
  CHECK_EQ_INT(loop_run(l), 0);
  CHECK_EQ_INT(c.n, 3);
  CHECK_EQ_INT(c.order[0], 1);
  CHECK_EQ_INT(c.order[1], 2);
  CHECK_EQ_INT(c.order[2], 3);
  /* Equal deadlines: in the order added. */
  c.n = 0;
  now = loop_now();
  CHECK_EQ_INT(loop_add_timer(l, now - 1000, record_cb, (void *)(intptr_t)4, &id), 0);
  CHECK_EQ_INT(loop_add_timer(l, now - 1000, record_cb, (void *)(intptr_t)5, &id), 0);
  CHECK_EQ_INT(loop_add_timer(l, now - 1000, record_cb, (void *)(intptr_t)6, &id), 0);
  CHECK_EQ_INT(loop_run(l), 0);
  CHECK_EQ_INT(c.order[0], 4);
  CHECK_EQ_INT(c.order[1], 5);
  CHECK_EQ_INT(c.order[2], 6);

  /* Two readable fds in one turn; the first callback removes the other:
   * no callback for it (it would be a use after free without the deferral). */
  CHECK_EQ_INT(pipe(c.fds[0]), 0);
  CHECK_EQ_INT(pipe(c.fds[1]), 0);
  CHECK_EQ_INT(loop_add_fd(l, c.fds[0][0], EPOLLIN, fd_cb, &c), 0);
  CHECK_EQ_INT(loop_add_fd(l, c.fds[1][0], EPOLLIN, fd_cb, &c), 0);
  CHECK_EQ_INT(loop_add_fd(l, c.fds[1][0], EPOLLIN, fd_cb, &c), -EEXIST);
  CHECK_EQ_INT(write(c.fds[0][1], "x", 1), 1);
  CHECK_EQ_INT(write(c.fds[1][1], "y", 1), 1);
  /* Due at once: fires after the fd batch of the first turn, both fds' events in that batch. */
  CHECK_EQ_INT(loop_add_timer(l, 0, stop_cb, NULL, &id), 0);
  CHECK_EQ_INT(loop_run(l), 0);
  CHECK_EQ_INT(c.fd_calls, 1);
  CHECK_EQ_INT(c.reads, 1);
  CHECK_EQ_INT(loop_mod_fd(l, 12345, EPOLLIN), -ENOENT);
  /* Whichever fd was left is still watched: drop it. */
  loop_del_fd(l, c.fds[0][0]);
  loop_del_fd(l, c.fds[1][0]);

  /* A timer that keeps re-arming itself due now does not starve a ready fd. */
  int p[2];
  CHECK_EQ_INT(pipe(p), 0);
  c.fd_calls = 0;
  CHECK_EQ_INT(loop_add_fd(l, p[0], EPOLLIN, fd_stop_cb, &c), 0);
  c.wake_fd = p[1];
  CHECK_EQ_INT(loop_add_timer(l, 0, rearm_cb, &c, &id), 0);
  CHECK_EQ_INT(loop_run(l), 0);
  CHECK_EQ_INT(c.fd_calls, 1);
  CHECK(c.rearms < 10);
  loop_del_fd(l, p[0]);
  close(p[0]);
  close(p[1]);
  loop_free(l);
  for (int i = 0; i < 2; i++) {
    close(c.fds[i][0]);
    close(c.fds[i][1]);
  }
  return test_done();
}
