/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's event loop (loop.h): epoll for file descriptors, a small timer array, one thread. */
#include "loop.h"

#include "clock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* Few timers live at once (one per GPU plus housekeeping): a flat array
 * scanned at each turn is simpler than a heap and as fast at this size. */
#define LOOP_MAX_TIMERS 256
#define LOOP_MAX_EVENTS 64

struct fd_handler {
  int fd;
  bool dead; /* removed during this turn: freed after the batch */
  loop_fd_cb cb;
  void *data;
  struct fd_handler *next; /* on the dead list only */
};

struct timer {
  uint64_t id;
  uint64_t when;
  loop_timer_cb cb;
  void *data;
};

struct loop {
  int epfd;
  int tfd; /* one timerfd armed at the earliest timer: ns precision, unlike epoll's ms */
  uint64_t armed;
  bool stop;
  /* Indexed by fd, as Redis's events[fd]: adding, changing and removing a watch is O(1), not a
   * walk of every connection (each reply re-arms its fd). Grown to the highest fd seen. */
  struct fd_handler **byfd;
  int nbyfd;
  struct fd_handler *dead; /* removed this turn; events of the batch may still point at them */
  struct timer timers[LOOP_MAX_TIMERS];
  uint32_t ntimers;
  uint64_t next_timer_id;
};

uint64_t loop_now(void) {
  return gs_mono_ns();
}

int loop_new(struct loop **ret) {
  struct loop *l = calloc(1, sizeof(*l));

  if (!l)
    return -ENOMEM;
  l->epfd = epoll_create1(EPOLL_CLOEXEC);
  l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (l->epfd < 0 || l->tfd < 0) {
    int r = -errno;
    if (l->epfd >= 0)
      close(l->epfd);
    if (l->tfd >= 0)
      close(l->tfd);
    free(l);
    return r;
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) < 0) {
    int r = -errno;
    close(l->epfd);
    close(l->tfd);
    free(l);
    return r;
  }
  *ret = l;
  return 0;
}

static void reap_dead(struct loop *l) {
  while (l->dead) {
    struct fd_handler *h = l->dead;
    l->dead = h->next;
    free(h);
  }
}

void loop_free(struct loop *l) {
  if (!l)
    return;
  for (int fd = 0; fd < l->nbyfd; fd++)
    free(l->byfd[fd]);
  free(l->byfd);
  reap_dead(l);
  close(l->epfd);
  close(l->tfd);
  free(l);
}

static struct fd_handler *find(struct loop *l, int fd) {
  return fd >= 0 && fd < l->nbyfd ? l->byfd[fd] : NULL;
}

int loop_add_fd(struct loop *l, int fd, uint32_t events, loop_fd_cb cb, void *data) {
  struct epoll_event ev = {.events = events};
  struct fd_handler *h;

  if (fd < 0)
    return -EBADF;
  if (find(l, fd))
    return -EEXIST;
  if (fd >= l->nbyfd) {
    int n = l->nbyfd ? l->nbyfd : 64;
    while (n <= fd)
      n *= 2;
    struct fd_handler **p = realloc(l->byfd, (size_t)n * sizeof(*p));
    if (!p)
      return -ENOMEM;
    memset(p + l->nbyfd, 0, (size_t)(n - l->nbyfd) * sizeof(*p));
    l->byfd = p;
    l->nbyfd = n;
  }
  h = calloc(1, sizeof(*h));
  if (!h)
    return -ENOMEM;
  *h = (struct fd_handler){.fd = fd, .cb = cb, .data = data};
  ev.data.ptr = h;
  if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
    int r = -errno;
    free(h);
    return r;
  }
  l->byfd[fd] = h;
  return 0;
}

int loop_mod_fd(struct loop *l, int fd, uint32_t events) {
  struct fd_handler *h = find(l, fd);
  struct epoll_event ev = {.events = events};

  if (!h)
    return -ENOENT;
  ev.data.ptr = h;
  return epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
}

void loop_del_fd(struct loop *l, int fd) {
  struct fd_handler *h = find(l, fd);

  if (!h)
    return;
  epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
  /* Events of this turn may still point at h: free it after the batch. The fd's number may be
   * given to a new connection in this very turn; its slot is free for it. */
  h->dead = true;
  l->byfd[fd] = NULL;
  h->next = l->dead;
  l->dead = h;
}

int loop_add_timer(struct loop *l, uint64_t when, loop_timer_cb cb, void *data, uint64_t *ret_id) {
  if (l->ntimers >= LOOP_MAX_TIMERS)
    return -ENOSPC;
  l->timers[l->ntimers++] =
      (struct timer){.id = ++l->next_timer_id, .when = when, .cb = cb, .data = data};
  if (ret_id)
    *ret_id = l->next_timer_id;
  return 0;
}

void loop_del_timer(struct loop *l, uint64_t id) {
  for (uint32_t i = 0; i < l->ntimers; i++)
    if (l->timers[i].id == id) {
      l->timers[i] = l->timers[--l->ntimers];
      return;
    }
}

/* Fires the timers due, earliest deadline first (ties in the order they were added: ids
 * grow). The array is unordered, so each pick scans it: firing in array order ran a later
 * deadline before an earlier one whenever both were due in one turn, as on a loaded machine.
 * A callback may add or delete timers. One added during this run waits for the next turn even
 * if already due: a callback re-arming itself at "now" would otherwise starve the fds. */
static void run_timers(struct loop *l) {
  uint64_t now = loop_now(), last_id = l->next_timer_id;

  while (!l->stop) {
    uint32_t pick = UINT32_MAX;
    for (uint32_t i = 0; i < l->ntimers; i++) {
      const struct timer *t = &l->timers[i];
      if (t->when > now || t->id > last_id)
        continue;
      if (pick == UINT32_MAX || t->when < l->timers[pick].when ||
          (t->when == l->timers[pick].when && t->id < l->timers[pick].id))
        pick = i;
    }
    if (pick == UINT32_MAX)
      return;
    struct timer t = l->timers[pick];
    l->timers[pick] = l->timers[--l->ntimers];
    t.cb(l, t.id, t.data);
  }
}

static void arm(struct loop *l) {
  uint64_t first = UINT64_MAX;
  struct itimerspec its = {0};

  for (uint32_t i = 0; i < l->ntimers; i++)
    if (l->timers[i].when < first)
      first = l->timers[i].when;
  if (first == l->armed)
    return;
  l->armed = first;
  if (first != UINT64_MAX) {
    /* 0 would disarm: a timer already due fires at the next nanosecond. */
    if (first == 0)
      first = 1;
    its.it_value.tv_sec = (time_t)(first / 1000000000ull);
    its.it_value.tv_nsec = (long)(first % 1000000000ull);
  }
  timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

int loop_run(struct loop *l) {
  struct epoll_event evs[LOOP_MAX_EVENTS];

  l->stop = false;
  while (!l->stop) {
    arm(l);
    int n = epoll_wait(l->epfd, evs, LOOP_MAX_EVENTS, -1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    for (int i = 0; i < n && !l->stop; i++) {
      struct fd_handler *h = evs[i].data.ptr;
      if (!h) { /* the timerfd */
        uint64_t ticks;
        if (read(l->tfd, &ticks, sizeof(ticks)) < 0) {
          /* EAGAIN: re-armed since it fired; nothing to do. */
        }
        l->armed = UINT64_MAX - 1; /* force re-arming */
        continue;
      }
      if (!h->dead)
        h->cb(l, h->fd, evs[i].events, h->data);
    }
    reap_dead(l);
    run_timers(l);
  }
  return 0;
}

void loop_stop(struct loop *l) {
  l->stop = true;
}
