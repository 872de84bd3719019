/* SPDX-License-Identifier: Apache-2.0 */
/* Attribution of processes to slices (attrib.h): bounded walks up a process's ancestors,
 * resumed across calls, and a table of what they found by pid and start time. */
#include "attrib.h"

#include <string.h>

/* One process the walk has read: pid and start time, its key. */
struct node {
  pid_t pid;
  uint64_t start;
};

void attrib_init(struct attrib *a) {
  memset(a, 0, sizeof(*a));
}

void attrib_budget_init(struct attrib_budget *b, unsigned steps, uint64_t ns, uint64_t period_ns,
                        uint64_t (*clock)(void)) {
  *b = (struct attrib_budget){.steps = steps,
                              .left = steps,
                              .ns = ns,
                              .ns_left = ns,
                              .period_ns = period_ns,
                              .clock = clock};
}

static struct attrib_entry *set_of(struct attrib *a, pid_t pid, uint64_t start) {
  uint64_t h = ((uint64_t)(uint32_t)pid * 0x9e3779b97f4a7c15ull) ^ (start * 0xc2b2ae3d27d4eb4full);
  return a->e[(h >> 32) % ATTRIB_SETS];
}

static struct attrib_entry *find(struct attrib *a, pid_t pid, uint64_t start) {
  struct attrib_entry *set = set_of(a, pid, start);

  for (int w = 0; w < ATTRIB_WAYS; w++)
    if (set[w].pid == pid && set[w].start == start) {
      set[w].used = ++a->clock;
      return &set[w];
    }
  return NULL;
}

/* The entry of (pid, start), made in its set's empty or least recently used way. */
static struct attrib_entry *take(struct attrib *a, pid_t pid, uint64_t start) {
  struct attrib_entry *set = set_of(a, pid, start), *e = &set[0];

  for (int w = 0; w < ATTRIB_WAYS; w++) {
    if (set[w].pid == pid && set[w].start == start) {
      e = &set[w];
      break;
    }
    if (set[w].used < e->used)
      e = &set[w];
  }
  memset(e, 0, sizeof(*e));
  e->pid = pid;
  e->start = start;
  e->used = ++a->clock;
  return e;
}

/* The runner whose pid is `pid`, read again to be it (the list may be older than its runner's
 * exit, and its pid someone else's since), and able to be the parent of a process started at
 * child_start (a parent never starts after its child). */
static const struct attrib_runner *runner_at(struct attrib *a, const struct attrib_runner *r,
                                             unsigned nr, pid_t pid, uint64_t child_start,
                                             attrib_stat_fn stat, void *arg) {
  for (unsigned i = 0; i < nr; i++) {
    pid_t pp;
    uint64_t start;
    int exited;
    if (r[i].pid != pid || r[i].start > child_start)
      continue;
    a->stats.reads++;
    if (stat(arg, pid, &pp, &start, &exited) == 0 && !exited && start == r[i].start)
      return &r[i];
  }
  return NULL;
}

/* Whether a resolved entry still holds: its runner is still a live runner of the same slice
 * (it ends with it: below a child subreaper a process stays below it while it lives), or, for
 * none, no runner came or went since (a new one may be above it). */
static bool holds(const struct attrib_entry *e, const struct attrib_runner *r, unsigned nr,
                  uint64_t gen) {
  if (!e->slice)
    return e->gen == gen;
  for (unsigned i = 0; i < nr; i++)
    if (r[i].pid == e->rpid && r[i].start == e->rstart && r[i].slice == e->slice)
      return true;
  return false;
}

static void resolve(struct attrib *a, const struct node *path, unsigned np, uint32_t slice,
                    const struct attrib_runner *by, uint64_t gen) {
  for (unsigned i = 0; i < np; i++) {
    struct attrib_entry *e = take(a, path[i].pid, path[i].start);
    e->slice = slice;
    e->gen = gen;
    if (by) {
      e->rpid = by->pid;
      e->rstart = by->start;
    }
  }
}

/* Out of steps: every process read waits at the same ancestor, so that the next call for any of
 * them (a sibling of the same chain, too) goes on from there. */
static void defer(struct attrib *a, const struct node *path, unsigned np, pid_t next,
                  uint64_t child_start) {
  for (unsigned i = 0; i < np; i++) {
    struct attrib_entry *e = take(a, path[i].pid, path[i].start);
    e->pending = true;
    e->next = next;
    e->child_start = child_start;
  }
  a->stats.deferred++;
}

/* The chain changed under the walk (an ancestor gone, or its pid reused): what it said of these
 * processes is forgotten, and so is every walk waiting at the same ancestor, so that the next
 * call reads them from their own parents again. Rare: a sweep of the table. */
static void forget(struct attrib *a, const struct node *path, unsigned np, pid_t next,
                   uint64_t child_start) {
  for (unsigned i = 0; i < np; i++) {
    struct attrib_entry *e = find(a, path[i].pid, path[i].start);
    if (e)
      memset(e, 0, sizeof(*e));
  }
  for (unsigned k = 0; k < ATTRIB_SETS; k++)
    for (int w = 0; w < ATTRIB_WAYS; w++) {
      struct attrib_entry *e = &a->e[k][w];
      if (e->pid && e->pending && e->next == next && e->child_start == child_start)
        memset(e, 0, sizeof(*e));
    }
}

static void refill(struct attrib_budget *b, uint64_t now) {
  if (!b->at || now - b->at >= b->period_ns) {
    b->at = now;
    b->left = b->steps;
    b->ns_left = b->ns;
  }
}

/* Whether b lets the walk that began at t0 read one more ancestor. */
static bool may_step(const struct attrib_budget *b, unsigned steps, uint64_t t0) {
  return steps < ATTRIB_STEPS_CALL && b->left > 0 && (!b->clock || b->clock() - t0 < b->ns_left);
}

/* One call's walk: what it looks for, what it may spend, how it reads. */
struct walk {
  struct attrib *a;
  struct attrib_budget *b;
  const struct attrib_runner *r;
  unsigned nr;
  uint64_t gen, t0;
  attrib_stat_fn stat;
  void *arg;
};

/* The walk up from pid (read already: parent next, start child_start). */
static uint32_t walk_up(const struct walk *w, pid_t pid, pid_t next, uint64_t child_start) {
  struct attrib *a = w->a;
  struct node path[ATTRIB_STEPS_CALL + 1];
  unsigned np = 0, steps = 0;
  int exited;

  path[np++] = (struct node){pid, child_start};
  for (struct attrib_entry *e = find(a, pid, child_start);;) {
    if (e && !e->pending && holds(e, w->r, w->nr, w->gen)) {
      struct attrib_runner by = {e->rpid, e->rstart, e->slice};
      a->stats.hits += np == 1;
      resolve(a, path, np, by.slice, by.slice ? &by : NULL, w->gen);
      return by.slice;
    }
    if (e && e->pending) {
      next = e->next;
      child_start = e->child_start;
    }
    if (next <= 1) {
      resolve(a, path, np, 0, NULL, w->gen);
      return 0;
    }
    const struct attrib_runner *by = runner_at(a, w->r, w->nr, next, child_start, w->stat, w->arg);
    if (by) {
      resolve(a, path, np, by->slice, by, w->gen);
      return by->slice;
    }
    if (!may_step(w->b, steps, w->t0)) {
      defer(a, path, np, next, child_start);
      return 0;
    }
    steps++;
    w->b->left--;
    a->stats.steps++;
    a->stats.reads++;
    pid_t pp;
    uint64_t start;
    if (w->stat(w->arg, next, &pp, &start, &exited) < 0 || exited || start > child_start) {
      forget(a, path, np, next, child_start);
      return 0;
    }
    path[np++] = (struct node){next, start};
    e = find(a, next, start);
    next = pp;
    child_start = start;
  }
}

uint32_t attrib_slice_of(struct attrib *a, struct attrib_budget *b, pid_t pid,
                         const struct attrib_runner *r, unsigned nr, uint64_t gen, uint64_t now,
                         attrib_stat_fn stat, void *arg) {
  pid_t next;
  uint64_t start;
  int exited;

  a->stats.calls++;
  a->stats.reads++;
  refill(b, now);
  if (pid <= 1 || stat(arg, pid, &next, &start, &exited) < 0 || exited)
    return 0;
  struct walk w = {a, b, r, nr, gen, b->clock ? b->clock() : 0, stat, arg};
  uint32_t slice = walk_up(&w, pid, next, start);
  if (b->clock) {
    uint64_t spent = b->clock() - w.t0;
    b->ns_left -= spent < b->ns_left ? spent : b->ns_left;
    a->stats.walk_ns += spent;
  }
  return slice;
}
