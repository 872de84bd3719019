/* SPDX-License-Identifier: Apache-2.0 */
/* Which slice a process is of: the nearest live runner among its ancestors, found by walks up
 * /proc of bounded steps, resumed across calls, and remembered by pid and start time in a
 * bounded table (docs/architecture.md, "Attribution"). Pure over a stat reader, so a unit test
 * drives it on a fake process tree. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The table: ATTRIB_SETS sets of ATTRIB_WAYS entries (least recently used replaced), about
 * 200 KiB. A process and every ancestor its walk read take one entry each. */
#define ATTRIB_SETS 1024
#define ATTRIB_WAYS 4
/* Ancestors read in one call (a walk that needs more is resumed by the next call for it). */
#define ATTRIB_STEPS_CALL 256

/* A live runner (its identity checked by the caller) and its slice. */
struct attrib_runner {
  pid_t pid;
  uint64_t start;
  uint32_t slice;
};

/* Reads a process's parent, start time and exit (gs_proc_stat's contract). */
typedef int (*attrib_stat_fn)(void *arg, pid_t pid, pid_t *ret_ppid, uint64_t *ret_start,
                              int *ret_exited);

struct attrib_entry {
  pid_t pid; /* 0: empty */
  bool pending;
  uint64_t start;
  uint64_t used; /* the table's clock when last used, for replacement */
  /* Resolved: the slice (0: none) and, for a slice, the runner it was found below; for none,
   * the runners' generation it was found under (a runner registered since may be above it). */
  uint32_t slice;
  pid_t rpid;
  uint64_t rstart, gen;
  /* Pending: the ancestor to read next (none of those read up to it is a runner), and the start
   * time of its child (a parent never started after its child: a reused pid is told so). */
  pid_t next;
  uint64_t child_start;
};

/* What the walks cost, since the start (for the log and the tests). */
struct attrib_stats {
  uint64_t calls;
  uint64_t reads;    /* /proc/<pid>/stat reads: each call's own, and its ancestors' */
  uint64_t steps;    /* of which ancestors */
  uint64_t walk_ns;  /* time in walks past the process's own read (with a clock) */
  uint64_t deferred; /* calls that ran out of steps and answered 0 until resumed */
  uint64_t hits;     /* calls answered from the table */
};

struct attrib {
  struct attrib_entry e[ATTRIB_SETS][ATTRIB_WAYS];
  uint64_t clock;
  struct attrib_stats stats;
};

/* What its callers' walks may spend: `steps` ancestors read and, with a clock, `ns` of its time
 * in each period_ns (what a walk needs beyond waits for the next period; the time bound holds
 * where a read of /proc costs more than it should, 13 us on a loaded 2-core VM against 2-4 on a
 * bare node). One per kind of caller, so that one kind cannot spend another's. */
struct attrib_budget {
  unsigned steps, left;
  uint64_t ns, ns_left;
  uint64_t period_ns, at;
  uint64_t (*clock)(void); /* monotonic ns; NULL: steps only */
};

void attrib_init(struct attrib *a);
void attrib_budget_init(struct attrib_budget *b, unsigned steps, uint64_t ns, uint64_t period_ns,
                        uint64_t (*clock)(void));

/* The slice of process pid: that of the nearest runner in r[0..nr) among its ancestors (not pid
 * itself), 0 when none, when pid is gone, or while its walk waits for steps (resumed by the next
 * call for it or for a process of the same chain). gen changes whenever the set of runners
 * does. now: a monotonic clock, for b. Reads /proc through stat: once for pid itself, and at
 * most ATTRIB_STEPS_CALL of its ancestors, within what b has left. */
uint32_t attrib_slice_of(struct attrib *a, struct attrib_budget *b, pid_t pid,
                         const struct attrib_runner *r, unsigned nr, uint64_t gen, uint64_t now,
                         attrib_stat_fn stat, void *arg);
