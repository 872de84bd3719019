/* Unit tests of the daemon's event loop (daemon/loop.c): timers in order, fds, removal inside callbacks. */
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
  uint64_t cancel;
};


static void record_cb(struct loop *l, uint64_t id, void *data);
static struct ctx *g_ctx;

static void record_cb(struct loop *l, uint64_t id, void *data) {
  g_ctx->order[g_ctx->n++] = (int)(intptr_t)data;
  if (g_ctx->n == 3)
    loop_stop(l);
  (void)id;
}

/* Reads one fd, and deletes the other pair's fd: its pending event must not fire. */
static void fd_cb(struct loop *l, int fd, uint32_t events, void *data) {
  struct ctx *c = data;
  char b;
  (void)events;
  if (read(fd, &b, 1) == 1)
    c->reads++;
  loop_del_fd(l, fd == c->fds[0][0] ? c->fds[1][0] : c->fds[0][0]);
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

  /* Two readable fds in one turn; the first callback removes the other:
   * no callback for it (it would be a use after free without the deferral). */
  CHECK_EQ_INT(pipe(c.fds[0]), 0);
  CHECK_EQ_INT(pipe(c.fds[1]), 0);
  CHECK_EQ_INT(loop_add_fd(l, c.fds[0][0], EPOLLIN, fd_cb, &c), 0);
  CHECK_EQ_INT(loop_add_fd(l, c.fds[1][0], EPOLLIN, fd_cb, &c), 0);
  CHECK_EQ_INT(loop_add_fd(l, c.fds[1][0], EPOLLIN, fd_cb, &c), -EEXIST);
  CHECK_EQ_INT(write(c.fds[0][1], "x", 1), 1);
  CHECK_EQ_INT(write(c.fds[1][1], "y", 1), 1);
  CHECK_EQ_INT(loop_run(l), 0);
  CHECK_EQ_INT(c.reads, 1);
  CHECK_EQ_INT(loop_mod_fd(l, 12345, EPOLLIN), -ENOENT);
  loop_free(l);
  for (int i = 0; i < 2; i++) {
    close(c.fds[i][0]);
    close(c.fds[i][1]);
  }
  return test_done();
}
