/* SPDX-License-Identifier: Apache-2.0 */
/* attrib.c on a fake process tree: the nearest runner wins, a chain deeper than one call's steps
 * is resolved over several (the fifth attack run's 300 forks, G2) and its siblings from the
 * table, each call's /proc reads bounded (G4), and a pid reused (the process or an ancestor, or
 * a runner's) never taken for the one it was. */
#include <errno.h>

#include "attrib.h"
#include "test.h"

#define NPROC 20000
#define PERIOD 500000000ull

struct tree {
  pid_t ppid[NPROC];
  uint64_t start[NPROC];
  bool alive[NPROC];
  unsigned reads;
};

static struct tree t;
static struct attrib a;

static int fake_stat(void *arg, pid_t pid, pid_t *ret_ppid, uint64_t *ret_start, int *ret_exited) {
  struct tree *tr = arg;

  tr->reads++;
  if (pid <= 0 || pid >= NPROC || !tr->alive[pid])
    return -ESRCH;
  *ret_ppid = tr->ppid[pid];
  *ret_start = tr->start[pid];
  *ret_exited = 0;
  return 0;
}

static void spawn(pid_t pid, pid_t parent, uint64_t start) {
  t.ppid[pid] = parent;
  t.start[pid] = start;
  t.alive[pid] = true;
}

/* A chain of n processes from first, each the child of the one before, the first of parent. */
static void chain(pid_t first, unsigned n, pid_t parent, uint64_t start) {
  for (unsigned i = 0; i < n; i++)
    spawn(first + (pid_t)i, i ? first + (pid_t)i - 1 : parent, start + i);
}

static uint32_t ask(struct attrib_budget *b, pid_t pid, const struct attrib_runner *r, unsigned nr,
                    uint64_t gen, uint64_t now, unsigned *ret_reads) {
  t.reads = 0;
  uint32_t s = attrib_slice_of(&a, b, pid, r, nr, gen, now, fake_stat, &t);
  *ret_reads = t.reads;
  return s;
}

static void test_shallow_and_nested(void) {
  struct attrib_budget b;
  struct attrib_runner r[2] = {{100, 10, 7}, {200, 30, 8}};
  unsigned reads;

  attrib_budget_init(&b, 256, 0, PERIOD, NULL);
  spawn(1, 0, 1);
  spawn(100, 1, 10);   /* slice 7's runner */
  spawn(101, 100, 20); /* its workload's shell */
  spawn(102, 101, 25);
  spawn(200, 102, 30); /* a gslice run inside slice 7: slice 8's runner */
  spawn(201, 200, 40);
  spawn(300, 1, 50); /* outside every slice */
  CHECK_EQ_INT(ask(&b, 102, r, 2, 1, 1, &reads), 7);
  CHECK_EQ_INT(reads, 3); /* its own, its parent's, and the runner's to be it */
  CHECK_EQ_INT(ask(&b, 102, r, 2, 1, 2, &reads), 7); /* from the table: its own read only */
  CHECK_EQ_INT(reads, 1);
  CHECK_EQ_INT(ask(&b, 201, r, 2, 1, 3, &reads), 8); /* the nearest runner */
  CHECK_EQ_INT(ask(&b, 300, r, 2, 1, 4, &reads), 0);
  CHECK_EQ_INT(ask(&b, 100, r, 2, 1, 5, &reads), 0); /* a runner is not its own slice's */
  /* Slice 8's runner gone: its workload is slice 7's (the subreaper above catches it). */
  t.ppid[201] = 100;
  CHECK_EQ_INT(ask(&b, 201, r, 1, 2, 6, &reads), 7);
  /* No runner left: none, though the table said 7. */
  CHECK_EQ_INT(ask(&b, 102, r, 0, 3, 7, &reads), 0);
}

static void test_deep_chain(void) {
  struct attrib_budget b;
  struct attrib_runner r[1] = {{1000, 100, 5}};
  unsigned reads, calls = 0, most = 0;
  uint64_t now = 1;
  uint32_t got = 0;

  attrib_budget_init(&b, 256, 0, PERIOD, NULL);
  spawn(1000, 1, 100);
  chain(1001, 1000, 1000, 200); /* 1001..2000, each below the one before */
  spawn(2001, 2000, 5000);      /* the GPU process, 1001 levels below the runner */
  spawn(2002, 2000, 5001);      /* and its sibling */
  while (!got && calls < 20) {
    got = ask(&b, 2001, r, 1, 1, now, &reads);
    most = reads > most ? reads : most;
    calls++;
    now += PERIOD; /* one charge check a period */
  }
  CHECK_EQ_INT(got, 5);
  CHECK_EQ_INT(calls, 4); /* 1001 ancestors at 256 a period */
  CHECK(most <= 1 + ATTRIB_STEPS_CALL);
  CHECK(a.stats.deferred >= 3);
  /* The sibling: its own read and its parent's, and one for each period the walk waited (the
   * ancestor it waited at); the next sibling two reads. */
  CHECK_EQ_INT(ask(&b, 2002, r, 1, 1, now, &reads), 5);
  CHECK(reads <= 2 + 3);
  spawn(2003, 2000, 5002);
  CHECK_EQ_INT(ask(&b, 2003, r, 1, 1, now, &reads), 5);
  CHECK_EQ_INT(reads, 2);
  /* A process halfway up, from the table too. */
  CHECK_EQ_INT(ask(&b, 1500, r, 1, 1, now, &reads), 5);
  CHECK(reads <= 2);
}

static void test_budget_shared(void) {
  struct attrib_budget b;
  struct attrib_runner r[1] = {{3000, 100, 6}};
  unsigned reads, total = 0;
  uint64_t now = 1;

  attrib_budget_init(&b, 256, 0, PERIOD, NULL);
  spawn(3000, 1, 100);
  /* 8 chains 300 deep, each with its GPU process: asked in one period, 256 ancestors read in
   * all; what is left waits. */
  for (pid_t k = 0; k < 8; k++) {
    chain(3001 + k * 301, 300, 3000, 200);
    spawn(3001 + k * 301 + 300, 3001 + k * 301 + 299, 1000);
  }
  for (pid_t k = 0; k < 8; k++) {
    ask(&b, 3001 + k * 301 + 300, r, 1, 1, now, &reads);
    total += reads;
  }
  CHECK(total <= 8 + 256);
  /* Within 8 * 300 / 256 + 1 periods (and a few for ways of the table replaced), all found. */
  unsigned found = 0;
  for (int p = 0; p < 14 && found < 8; p++) {
    now += PERIOD;
    found = 0;
    for (pid_t k = 0; k < 8; k++)
      found += ask(&b, 3001 + k * 301 + 300, r, 1, 1, now, &reads) == 6;
  }
  CHECK_EQ_INT(found, 8);
}

static void test_reuse(void) {
  struct attrib_budget b;
  struct attrib_runner r[1] = {{5000, 100, 9}};
  unsigned reads;

  attrib_budget_init(&b, 256, 0, PERIOD, NULL);
  spawn(5000, 1, 100);
  spawn(5001, 5000, 200);
  spawn(5002, 5001, 300);
  CHECK_EQ_INT(ask(&b, 5002, r, 1, 1, 1, &reads), 9);
  /* 5002 exits; its pid goes to a process outside the slice: not slice 9's. */
  spawn(5002, 1, 400);
  CHECK_EQ_INT(ask(&b, 5002, r, 1, 1, 2, &reads), 0);
  /* A pending walk's next ancestor exits and its pid is reused by a later process: the walk
   * does not go on through it (a parent never starts after its child). */
  struct attrib_budget small;
  attrib_budget_init(&small, 2, 0, PERIOD, NULL);
  chain(6001, 10, 5000, 500);
  spawn(6011, 6010, 600);
  CHECK_EQ_INT(ask(&small, 6011, r, 1, 1, 1, &reads), 0); /* pending at 6008 */
  spawn(6008, 1, 700); /* 6008's pid reused outside; 6009 reparented to the runner */
  t.ppid[6009] = 5000;
  uint32_t got = 0;
  for (uint64_t now = 1 + PERIOD; !got && now < 40 * PERIOD; now += PERIOD)
    got = ask(&small, 6011, r, 1, 1, now, &reads);
  CHECK_EQ_INT(got, 9);
  /* The runner's pid reused while a stale list still names it: a process started before that
   * runner cannot be its child. */
  spawn(7000, 1, 50);
  spawn(7001, 7000, 60);
  struct attrib_runner stale[1] = {{7000, 55, 4}};
  CHECK_EQ_INT(ask(&b, 7001, stale, 1, 1, 3, &reads), 0);
}

int main(void) {
  attrib_init(&a);
  test_shallow_and_nested();
  test_deep_chain();
  test_budget_shared();
  test_reuse();
  return test_done();
}
