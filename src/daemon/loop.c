/* The daemon's event loop (loop.h): epoll for file descriptors, a small timer array, one thread. */
#include "loop.h"

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
  struct fd_handler *next;
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
  struct fd_handler *handlers;
  struct timer timers[LOOP_MAX_TIMERS];
  uint32_t ntimers;
  uint64_t next_timer_id;
};

uint64_t loop_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
  struct fd_handler **pp = &l->handlers;

  while (*pp) {
    struct fd_handler *h = *pp;
    if (h->dead) {
      *pp = h->next;
      free(h);
    } else {
      pp = &h->next;
    }
  }
}

void loop_free(struct loop *l) {
  if (!l)
    return;
  for (struct fd_handler *h = l->handlers; h; h = h->next)
    h->dead = true;
  reap_dead(l);
  close(l->epfd);
  close(l->tfd);
  free(l);
}

static struct fd_handler *find(struct loop *l, int fd) {
  for (struct fd_handler *h = l->handlers; h; h = h->next)
    if (h->fd == fd && !h->dead)
      return h;
  return NULL;
}

int loop_add_fd(struct loop *l, int fd, uint32_t events, loop_fd_cb cb, void *data) {
  struct epoll_event ev = {.events = events};
  struct fd_handler *h;

  if (find(l, fd))
    return -EEXIST;
  h = calloc(1, sizeof(*h));
  if (!h)
    return -ENOMEM;
  *h = (struct fd_handler){.fd = fd, .cb = cb, .data = data, .next = l->handlers};
  ev.data.ptr = h;
  if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
    int r = -errno;
    free(h);
    return r;
  }
  l->handlers = h;
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
  /* Events of this turn may still point at h: free it after the batch. */
  h->dead = true;
}

int loop_add_timer(struct loop *l, uint64_t when, loop_timer_cb cb, void *data, uint64_t *ret_id) {
  if (l->ntimers >= LOOP_MAX_TIMERS)
    return -ENOSPC;
  l->timers[l->ntimers++] = (struct timer){.id = ++l->next_timer_id, .when = when, .cb = cb, .data = data};
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
