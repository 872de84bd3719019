/* SPDX-License-Identifier: Apache-2.0 */
/* Unit test of the slice's accounting region: caps, process entries, reclaim, repair, refusal,
 * the daemon's utilization figure. */
#include "test.h"

/* The test reaches into the layout (to die holding the lock, to corrupt a header): the module's
 * private header. */
#include "../../src/common/region_layout.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/wait.h>

/* Frees entry proc (its bytes leave the slice's usage), as a process's exit does once reclaimed:
 * the library has no call for it, the tests end their fake processes with it. */
static int region_detach(struct gs_region *region, unsigned proc) {
  if (proc >= GS_REGION_MAX_PROCS)
    return -EINVAL;
  int e = region_lock(region);
  if (e < 0)
    return e;
  region_proc_clear(&region->map->proc[proc]);
  region_unlock(region);
  return 0;
}

static char dir[PATH_MAX - 64];

static void make_dir(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof(dir), "%s/gslice-region-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    exit(2);
  }
}

static void remove_dir(void) {
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "cleanup of %s failed\n", dir);
}

static const uint8_t uuid_a[16] = {0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
static const uint8_t uuid_b[16] = {0xbb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static uint64_t used_of(struct gs_region *r, unsigned slot) {
  struct gs_region_device_info info;
  if (gs_region_device_info(r, slot, &info) < 0)
    return UINT64_MAX;
  return info.used;
}

static void test_cap(void) {
  struct gs_region *r = NULL;
  CHECK_EQ_INT(gs_region_open(dir, &r), 0);
  unsigned a, b, b2, proc;
  CHECK_EQ_INT(gs_region_device(r, uuid_a, 0, &a), -ENOENT);
  CHECK_EQ_INT(gs_region_device(r, uuid_a, 1, &a), 0);
  CHECK_EQ_INT(gs_region_device(r, uuid_b, 1, &b), 0);
  CHECK_EQ_INT(gs_region_device(r, uuid_b, 0, &b2), 0);
  CHECK_EQ_INT(b, b2);
  CHECK(a != b);
  CHECK_EQ_INT(gs_region_attach(r, &proc), 0);
  /* No cap: anything goes. */
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 1ull << 40, NULL), 0);
  CHECK_EQ_INT(gs_region_release(r, proc, a, 1ull << 40), 0);
  CHECK_EQ_INT(gs_region_set_cap(r, a, 1000, GS_CAP_FROM_ENV), 0);
  struct gs_region_denial d = {0, 0};
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 600, &d), 0);
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 400, &d), 0);
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 1, &d), -ENOMEM);
  CHECK_EQ_U64(d.used, 1000);
  CHECK_EQ_U64(d.cap, 1000);
  /* The other device is not touched by this one's cap. */
  CHECK_EQ_INT(gs_region_reserve(r, proc, b, 5000, NULL), 0);
  CHECK_EQ_U64(used_of(r, a), 1000);
  CHECK_EQ_U64(used_of(r, b), 5000);
  CHECK_EQ_INT(gs_region_release(r, proc, a, 400), 0);
  CHECK_EQ_U64(used_of(r, a), 600);
  /* Live cap change: lowered under usage, new reservations fail, held bytes stay. */
  CHECK_EQ_INT(gs_region_set_cap(r, a, 500, GS_CAP_FROM_DAEMON), 0);
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 1, &d), -ENOMEM);
  CHECK_EQ_U64(d.used, 600);
  /* The daemon's cap wins over a later process's environment. */
  CHECK_EQ_INT(gs_region_set_cap(r, a, 4000, GS_CAP_FROM_ENV), -EPERM);
  CHECK_EQ_INT(gs_region_set_cap(r, a, 2000, GS_CAP_FROM_DAEMON), 0);
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 1400, &d), 0);
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 1, &d), -ENOMEM);
  struct gs_region_device_info info;
  CHECK_EQ_INT(gs_region_device_info(r, a, &info), 0);
  CHECK_EQ_U64(info.cap, 2000);
  CHECK_EQ_INT(info.source, GS_CAP_FROM_DAEMON);
  /* Release clamps at what the entry holds. */
  CHECK_EQ_INT(gs_region_release(r, proc, a, 1ull << 50), 0);
  CHECK_EQ_U64(used_of(r, a), 0);
  struct gs_region_device_info devs[GS_REGION_MAX_DEVICES];
  unsigned n = 0;
  CHECK_EQ_INT(gs_region_devices(r, devs, GS_REGION_MAX_DEVICES, &n), 0);
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_INT(region_detach(r, proc), 0);
  CHECK_EQ_U64(used_of(r, b), 0);
  gs_region_close(r);
}

/* Another process of the slice (a forked child) shares the budget, and its bytes come back
 * when it dies: SIGKILLed, and even while still a zombie. */
static void test_processes(void) {
  struct gs_region *r = NULL;
  CHECK_EQ_INT(gs_region_open(dir, &r), 0);
  unsigned a, proc;
  CHECK_EQ_INT(gs_region_device(r, uuid_a, 1, &a), 0);
  CHECK_EQ_INT(gs_region_set_cap(r, a, 1000, GS_CAP_FROM_DAEMON), 0);
  CHECK_EQ_INT(gs_region_attach(r, &proc), 0);
  int pipefd[2];
  CHECK_EQ_INT(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    unsigned cproc;
    char ok = gs_region_attach(r, &cproc) == 0 && gs_region_reserve(r, cproc, a, 700, NULL) == 0;
    if (write(pipefd[1], &ok, 1) != 1)
      _exit(3);
    pause();
    _exit(0);
  }
  char ok = 0;
  CHECK_EQ_INT(read(pipefd[0], &ok, 1), 1);
  CHECK(ok);
  struct gs_region_denial d;
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 400, &d), -ENOMEM);
  CHECK_EQ_U64(d.used, 700);
  struct gs_region_proc_info procs[8];
  unsigned n = 0;
  CHECK_EQ_INT(gs_region_procs(r, procs, 8, &n), 0);
  CHECK_EQ_INT(n, 2);
  kill(child, SIGKILL);
  /* Not reaped yet: a zombie still answers kill(0); the full check sees it exited. */
  usleep(1000);
  for (int i = 0; i < 1000; i++) {
    uint64_t st;
    int exited = 0;
    if (gs_proc_identity(child, &st, &exited) == 0 && exited)
      break;
    usleep(1000);
  }
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 400, &d), 0);
  CHECK_EQ_U64(used_of(r, a), 400);
  waitpid(child, NULL, 0);
  close(pipefd[0]);
  close(pipefd[1]);
  /* A stale entry whose pid is alive but started at another time (pid reuse) is reclaimed. */
  struct region_proc *fake = &r->map->proc[GS_REGION_MAX_PROCS - 1];
  pthread_mutex_lock(&r->map->lock);
  fake->pid = getppid();
  fake->start_time = 1;
  fake->pidns = r->pidns;
  fake->used[a] = 500;
  fake->in_use = 1;
  r->map->proc_hint = GS_REGION_MAX_PROCS;
  pthread_mutex_unlock(&r->map->lock);
  CHECK_EQ_U64(used_of(r, a), 900);
  CHECK_EQ_INT(gs_region_reclaim(r), 1);
  CHECK_EQ_U64(used_of(r, a), 400);
  CHECK_EQ_INT(region_detach(r, proc), 0);
  gs_region_close(r);
}

/* A process killed while holding the lock leaves the region usable. */
static void test_owner_dead(void) {
  struct gs_region *r = NULL;
  CHECK_EQ_INT(gs_region_open(dir, &r), 0);
  unsigned a, proc;
  CHECK_EQ_INT(gs_region_device(r, uuid_a, 1, &a), 0);
  CHECK_EQ_INT(gs_region_set_cap(r, a, 1000, GS_CAP_FROM_DAEMON), 0);
  pid_t child = fork();
  if (child == 0) {
    unsigned cproc;
    if (gs_region_attach(r, &cproc) == 0 && gs_region_reserve(r, cproc, a, 900, NULL) == 0)
      pthread_mutex_lock(&r->map->lock);
    raise(SIGKILL);
    _exit(1);
  }
  int status;
  waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  uint32_t repairs = r->map->repairs;
  CHECK_EQ_INT(gs_region_attach(r, &proc), 0);
  CHECK_EQ_U64(r->map->repairs, repairs + 1);
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 1000, NULL), 0);
  CHECK_EQ_INT(region_detach(r, proc), 0);
  gs_region_close(r);
}

static void write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "w");
  if (!f || fwrite(data, 1, len, f) != len) {
    perror(path);
    exit(2);
  }
  fclose(f);
}

static void test_refusal(void) {
  char sub[PATH_MAX], path[PATH_MAX + 32];
  struct gs_region *r = NULL;
  snprintf(sub, sizeof(sub), "%s/foreign", dir);
  CHECK_EQ_INT(mkdir(sub, 0700), 0);
  snprintf(path, sizeof(path), "%s/%s", sub, GS_REGION_FILE);
  write_file(path, "hello, not a region\n", 20);
  CHECK_EQ_INT(gs_region_open(sub, &r), -EBADMSG);
  write_file(path, "", 0);
  CHECK_EQ_INT(gs_region_open(sub, &r), -EBADMSG);

  /* A region of another layout version. */
  struct region_layout *l = calloc(1, sizeof(*l));
  region_layout_init(l);
  l->version = 99;
  write_file(path, l, sizeof(*l));
  CHECK_EQ_INT(gs_region_open(sub, &r), -EPROTONOSUPPORT);
  /* The right header with a wrong check, then a body with impossible values. */
  region_layout_init(l);
  l->max_procs = 7;
  write_file(path, l, sizeof(*l));
  CHECK_EQ_INT(gs_region_open(sub, &r), -EBADMSG);
  region_layout_init(l);
  l->dev[3].in_use = 77;
  write_file(path, l, sizeof(*l));
  CHECK_EQ_INT(gs_region_open(sub, &r), -EBADMSG);
  /* Truncated. */
  region_layout_init(l);
  write_file(path, l, sizeof(*l) / 2);
  CHECK_EQ_INT(gs_region_open(sub, &r), -EBADMSG);
  free(l);
  CHECK_EQ_INT(gs_region_open_existing("/nonexistent/gslice", &r), -ENOENT);
  CHECK_EQ_INT(gs_region_open("relative/dir", &r), -EINVAL);
}

/* What a slice's process may write into its own region file (it is theirs to write) must not
 * crash or fool a reader outside the slice (the daemon): counts past the table, a source out
 * of range, sums past 2^64. And sums never wrap through the API either, cap or no cap. */
static void test_tampered(void) {
  char sub[PATH_MAX];
  snprintf(sub, sizeof(sub), "%s/tampered", dir);
  struct gs_region *r = NULL;
  CHECK_EQ_INT(gs_region_open(sub, &r), 0);
  unsigned a, proc;
  CHECK_EQ_INT(gs_region_device(r, uuid_a, 1, &a), 0);
  CHECK_EQ_INT(gs_region_attach(r, &proc), 0);
  struct gs_region_denial d;
  /* No cap: the sum still has to fit in 64 bits. */
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, UINT64_MAX - 10, NULL), 0);
  CHECK_EQ_INT(gs_region_reserve(r, proc, a, 100, &d), -ENOMEM);
  CHECK_EQ_INT(gs_region_charge(r, proc, a, 100), -EOVERFLOW);
  uint64_t held = 0;
  CHECK_EQ_INT(gs_region_proc_used(r, proc, a, &held), 0);
  CHECK_EQ_U64(held, UINT64_MAX - 10);
  CHECK_EQ_INT(gs_region_release(r, proc, a, UINT64_MAX - 10), 0);

  r->map->proc_hint = UINT32_MAX;
  r->map->dev[a].source = 99;
  r->map->proc[proc].used[a] = UINT64_MAX - 1;
  r->map->proc[proc + 1].in_use = 1;
  r->map->proc[proc + 1].pid = getpid();
  r->map->proc[proc + 1].used[a] = 5;
  static struct gs_region_proc_info procs[2 * GS_REGION_MAX_PROCS];
  unsigned n = 0;
  CHECK_EQ_INT(gs_region_procs(r, procs, 2 * GS_REGION_MAX_PROCS, &n), 0);
  CHECK(n <= GS_REGION_MAX_PROCS);
  struct gs_region_device_info info;
  CHECK_EQ_INT(gs_region_device_info(r, a, &info), 0);
  CHECK_EQ_U64(info.used, UINT64_MAX); /* saturated, not wrapped to 3 */
  CHECK(info.source <= GS_CAP_FROM_DAEMON);
  gs_region_close(r);
}

/* Many processes racing to create and fill one region never overshoot the cap. */
static void test_race(void) {
  char sub[PATH_MAX];
  snprintf(sub, sizeof(sub), "%s/race/deeper", dir);
  enum { KIDS = 6 };
  pid_t kids[KIDS];
  for (int k = 0; k < KIDS; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      struct gs_region *cr = NULL;
      unsigned slot, proc;
      if (gs_region_open(sub, &cr) < 0 || gs_region_device(cr, uuid_a, 1, &slot) < 0 ||
          gs_region_set_cap(cr, slot, 10000, GS_CAP_FROM_ENV) < 0 ||
          gs_region_attach(cr, &proc) < 0)
        _exit(2);
      unsigned got = 0;
      for (int i = 0; i < 20000; i++) {
        if (gs_region_reserve(cr, proc, slot, 7, NULL) == 0)
          got++;
        if (i % 3 == 0 && got > 0 && gs_region_release(cr, proc, slot, 7) == 0)
          got--;
      }
      struct gs_region_device_info info;
      if (gs_region_device_info(cr, slot, &info) < 0 || info.used > info.cap)
        _exit(4);
      pause();
      _exit(0);
    }
  }
  struct gs_region *r = NULL;
  for (int i = 0; i < 5000 && gs_region_open_existing(sub, &r) < 0; i++)
    usleep(1000);
  CHECK(r != NULL);
  unsigned slot = 0;
  int waited = 0;
  while (r && waited++ < 20000) {
    struct gs_region_proc_info procs[KIDS];
    unsigned n = 0;
    gs_region_procs(r, procs, KIDS, &n);
    if (gs_region_device(r, uuid_a, 0, &slot) == 0 && n == KIDS && used_of(r, slot) > 9000)
      break;
    CHECK(gs_region_device(r, uuid_a, 0, &slot) < 0 || used_of(r, slot) <= 10000);
    usleep(500);
  }
  if (r)
    CHECK(used_of(r, slot) <= 10000);
  for (int k = 0; k < KIDS; k++)
    kill(kids[k], SIGKILL);
  for (int k = 0; k < KIDS; k++) {
    int status;
    waitpid(kids[k], &status, 0);
    CHECK(WIFSIGNALED(status));
  }
  if (r) {
    gs_region_reclaim(r);
    CHECK_EQ_U64(used_of(r, slot), 0);
    gs_region_close(r);
  }
}

static void *park(void *arg) {
  (void)arg;
  pause();
  return NULL;
}

/* A process whose main thread called pthread_exit is a zombie leader with live threads: alive. */
static void test_zombie_leader(void) {
  int pipefd[2];
  CHECK_EQ_INT(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    pthread_t t;
    pthread_create(&t, NULL, park, NULL);
    if (write(pipefd[1], "x", 1) != 1)
      _exit(3);
    pthread_exit(NULL);
  }
  char c;
  CHECK_EQ_INT(read(pipefd[0], &c, 1), 1);
  int exited = 1;
  for (int i = 0; i < 1000; i++) { /* until the leader shows as a zombie */
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)child);
    FILE *f = fopen(path, "r");
    if (f && fgets(buf, sizeof(buf), f) && strstr(buf, ") Z ")) {
      fclose(f);
      break;
    }
    if (f)
      fclose(f);
    usleep(1000);
  }
  uint64_t st;
  CHECK_EQ_INT(gs_proc_identity(child, &st, &exited), 0);
  CHECK_EQ_INT(exited, 0);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  CHECK_EQ_INT(gs_proc_identity(child, &st, &exited), 0);
  CHECK_EQ_INT(exited, 1);
  close(pipefd[0]);
  close(pipefd[1]);
}

static void test_uuid(void) {
  char buf[GS_UUID_STR_LEN];
  uint8_t u[16];
  gs_uuid_format(uuid_a, buf);
  CHECK_STR(buf, "GPU-aa010203-0405-0607-0809-0a0b0c0d0e0f");
  CHECK_EQ_INT(gs_uuid_parse(buf, u), 0);
  CHECK(memcmp(u, uuid_a, 16) == 0);
  CHECK_EQ_INT(gs_uuid_parse("GPU-aa01", u), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse("GPU-zz010203-0405-0607-0809-0a0b0c0d0e0f", u), -EINVAL);
}

/* The daemon's handle never hands the region's mutex to glibc: glibc writes and later follows
 * pointers in the mutex's __list, which the slice can rewrite. Caps are written without the lock
 * (even while a fake owner holds the word), a device is added only by a compare-and-swap of the
 * lock word (-EBUSY while held), and nothing else of the mutex is read or written. A file grown
 * past the layout is cut back by the daemon's open. */
static void test_daemon_handle(void) {
  char sub[PATH_MAX], path[PATH_MAX + 32];
  struct gs_region *h = NULL, *dh = NULL;
  static const uint8_t uuid_c[16] = {0xcc, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  snprintf(sub, sizeof(sub), "%s/daemon-handle", dir);
  snprintf(path, sizeof(path), "%s/%s", sub, GS_REGION_FILE);
  CHECK_EQ_INT(gs_region_open(sub, &h), 0);
  unsigned a, b, c, proc;
  CHECK_EQ_INT(gs_region_device(h, uuid_a, 1, &a), 0);
  CHECK_EQ_INT(gs_region_open_nowait(sub, 0, (uid_t)-1, (gid_t)-1, &dh), 0);
  pthread_mutex_t *m = &h->map->lock;
  int *word = &m->__data.__lock;
  void *bad_prev = (void *)0x4242424242424240ull, *bad_next = (void *)0x4141414141414140ull;
  m->__data.__list.__prev = bad_prev;
  m->__data.__list.__next = bad_next;
  m->__data.__owner = 0x2345;
  *word = 0x1234; /* an owner no thread of ours is */
  CHECK_EQ_INT(gs_region_set_cap(dh, a, 500, GS_CAP_FROM_DAEMON), 0);
  struct gs_region_device_info info;
  CHECK_EQ_INT(gs_region_device_info(dh, a, &info), 0);
  CHECK_EQ_U64(info.cap, 500);
  CHECK_EQ_INT(info.source, GS_CAP_FROM_DAEMON);
  CHECK_EQ_INT(gs_region_device(dh, uuid_a, 1, &b), 0); /* found: no lock needed */
  CHECK_EQ_INT(b, a);
  CHECK_EQ_INT(gs_region_device(dh, uuid_b, 1, &b), -EBUSY);
  CHECK_EQ_INT(*word, 0x1234);
  *word = 0;
  CHECK_EQ_INT(gs_region_device(dh, uuid_b, 1, &b), 0);
  CHECK_EQ_INT(*word, 0);
  /* A word a dead daemon left (its own owner value) is let go. */
  *word = (int)FUTEX_TID_MASK;
  CHECK_EQ_INT(gs_region_device(dh, uuid_c, 1, &c), 0);
  CHECK_EQ_INT(*word, 0);
  CHECK(m->__data.__list.__prev == bad_prev && m->__data.__list.__next == bad_next);
  CHECK_EQ_INT(m->__data.__owner, 0x2345);
  /* The hooks still lock among themselves (glibc rewrites __list at its lock), under the cap the
   * daemon wrote. */
  CHECK_EQ_INT(gs_region_attach(h, &proc), 0);
  CHECK_EQ_INT(gs_region_reserve(h, proc, a, 501, NULL), -ENOMEM);
  CHECK_EQ_INT(gs_region_reserve(h, proc, a, 500, NULL), 0);
  CHECK_EQ_INT(region_detach(h, proc), 0);
  gs_region_close(dh);
  /* Grown past the layout: a hook refuses it, the daemon's open cuts it back. */
  FILE *f = fopen(path, "a");
  CHECK(f && fwrite(path, 1, 100, f) == 100);
  if (f)
    fclose(f);
  struct gs_region *h2 = NULL;
  CHECK_EQ_INT(gs_region_open(sub, &h2), -EBADMSG);
  *word = (int)FUTEX_TID_MASK | (int)FUTEX_WAITERS; /* and a dead daemon's word, let go at open */
  CHECK_EQ_INT(gs_region_open_nowait(sub, 0, (uid_t)-1, (gid_t)-1, &dh), 0);
  CHECK_EQ_INT(*word, 0);
  CHECK_EQ_U64(gs_region_cut(dh), 100);
  struct stat st;
  CHECK(stat(path, &st) == 0 && (size_t)st.st_size == sizeof(struct region_layout));
  gs_region_close(dh);
  CHECK_EQ_INT(gs_region_open(sub, &h2), 0);
  gs_region_close(h2);
  gs_region_close(h);
}

/* The daemon's utilization figure: absent in a fresh region, written through the daemon's
 * handle and read through a hook's, refused out of range, not believed when the slice's
 * processes write one out of range; and only layout 1's padding changes (bytes 32..63), so a
 * hook or daemon of before it, which never reads there, sees the same file. */
static void test_util(void) {
  char sub[PATH_MAX];
  struct gs_region *h = NULL, *dh = NULL;
  unsigned a, b, pct = 0;
  uint64_t end = 0;
  snprintf(sub, sizeof(sub), "%s/util", dir);
  CHECK_EQ_INT(gs_region_open(sub, &h), 0);
  CHECK_EQ_INT(gs_region_device(h, uuid_a, 1, &a), 0);
  CHECK_EQ_INT(gs_region_device(h, uuid_b, 1, &b), 0);
  for (unsigned i = 0; i < GS_REGION_MAX_DEVICES; i++)
    CHECK_EQ_INT(gs_region_util(h, i, &pct, &end), -ENOENT);
  CHECK_EQ_INT(gs_region_util(h, GS_REGION_MAX_DEVICES, &pct, &end), -EINVAL);
  CHECK_EQ_INT(gs_region_open_nowait(sub, 0, (uid_t)-1, (gid_t)-1, &dh), 0);
  uint8_t v[GS_REGION_MAX_DEVICES];
  memset(v, GS_REGION_UTIL_NONE, sizeof(v));
  v[a] = 30;
  struct region_layout *before = malloc(sizeof(*before));
  CHECK(before != NULL);
  if (!before)
    return;
  memcpy(before, h->map, sizeof(*before));
  CHECK_EQ_INT(gs_region_set_util(dh, v, 12345, 1000), 0);
  const uint8_t *was = (const uint8_t *)before, *now = (const uint8_t *)h->map;
  for (size_t i = 0; i < sizeof(*before); i++)
    if (was[i] != now[i] && (i < 32 || i >= 64)) {
      CHECK(!"gs_region_set_util wrote outside layout 1's padding");
      break;
    }
  free(before);
  CHECK_EQ_INT(gs_region_util(h, a, &pct, &end), 0);
  CHECK_EQ_INT(pct, 30);
  CHECK_EQ_U64(end, 12345);
  CHECK_EQ_INT(gs_region_util(h, b, &pct, &end), -ENOENT); /* none for that slot */
  v[b] = 101;
  CHECK_EQ_INT(gs_region_set_util(dh, v, 23456, 1000), -EINVAL);
  v[b] = 100;
  CHECK_EQ_INT(gs_region_set_util(dh, v, 0, 1000), -EINVAL);
  CHECK_EQ_INT(gs_region_set_util(dh, v, 23456, 1000), 0);
  CHECK_EQ_INT(gs_region_util(h, b, &pct, &end), 0);
  CHECK_EQ_INT(pct, 100);
  CHECK_EQ_U64(end, 23456);
  h->map->util.pct[a] = 150; /* a process of the slice writing its own figure */
  CHECK_EQ_INT(gs_region_util(h, a, &pct, &end), -ENOENT);
  /* The header check is unchanged: both kinds of open still take the file. */
  gs_region_close(dh);
  struct gs_region *h2 = NULL;
  CHECK_EQ_INT(gs_region_open(sub, &h2), 0);
  gs_region_close(h2);
  CHECK_EQ_INT(gs_region_open_nowait(sub, 0, (uid_t)-1, (gid_t)-1, &dh), 0);
  gs_region_close(dh);
  gs_region_close(h);
}

int main(void) {
  make_dir();
  test_uuid();
  test_cap();
  test_processes();
  test_owner_dead();
  test_refusal();
  test_tampered();
  test_race();
  test_zombie_leader();
  test_daemon_handle();
  test_util();
  remove_dir();
  return test_done();
}
