/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's side of each slice's memory region (regions.h): caps written and read back,
 * usage and processes read, all through with_region. */
#include "regions.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "guard.h"
#include "log.h"

static int region_slot(struct gs_region *rg, const struct gpu *g, int create, unsigned *ret) {
  if (!g->has_uuid)
    return -ENODEV;
  return gs_region_device(rg, g->uuid_bin, create, ret);
}

/* ---- every daemon access to a slice's region goes through with_region ----
 *
 * The region is a file the slice's processes may write, and truncate: a read through the mapping
 * past the new end is SIGBUS, which would kill the whole daemon (a slice looping truncate and
 * rewrite hits the daemon's window at will). The open already refuses a file shorter than
 * the layout (fstat before mmap); what is left is the race after it, which only a guard closes.
 * A fault jumps back here: the mapping and handle are released without touching the memory, and
 * the slice's region is given up on for the slice's life in this daemon: its memory shows as 0,
 * its cap cannot change, one warning.
 *
 * Nothing a slice writes in its region can do worse: the daemon reads and writes only its own
 * mapping of the layout's fixed size, checks every index it reads, and never hands the region's
 * mutex to glibc (region.c: glibc's robust list would write and follow pointers that live in the
 * slice's memory). A file grown past the layout is cut back to it at each open (region.c), so a
 * container's region mount holds at most what it wrote since the daemon's last look: each
 * housekeeping (every second) and each snapshot. */

typedef int (*region_fn)(struct daemon *d, struct slice *s, struct gs_region *rg, void *arg);

/* Separate from with_region so that nothing the jump could leave stale lives in its frame. */
static int region_call(struct daemon *d, struct slice *s, int create, region_fn fn, void *arg,
                       struct gs_region *volatile *ret_rg) {
  struct gs_region *rg;
  /* The slice's processes run as its owner and write the region: a root daemon gives it to
   * them through the descriptor it checked (gs_region_open_as), never by path. Never waiting
   * for the region's lock, which any of them can hold (gs_region_open_nowait): one stopped
   * holding it would make every STATUS and housekeeping wait, and every slice's tokens with
   * them. */
  int root = create && geteuid() == 0;
  int r = gs_region_open_nowait(s->dir, create, root ? s->uid : (uid_t)-1,
                                root ? s->gid : (gid_t)-1, &rg);

  if (r < 0)
    return r;
  *ret_rg = rg;
  if (gs_region_cut(rg) && !s->region_grown) {
    s->region_grown = true;
    gs_log(GS_LOG_WARNING,
           "slice %u '%s': its memory region %s/%s had grown by %" PRIu64 " bytes past its size "
           "(written by a process of the slice): cut back, and at each look from now on (logged "
           "once)",
           s->id, s->spec.name, s->dir, GS_REGION_FILE, gs_region_cut(rg));
  }
  return fn(d, s, rg, arg);
}

/* The daemon holds the region file open for the slice's life (slice.region_fd): the kernel
 * grants a lease (fcntl F_SETLEASE) only on a file nobody else has open for writing, so with
 * this descriptor held no process of the slice can make the daemon's next open wait out a lease
 * break. A lease taken before (a gsliced restart) makes that open fail at once instead
 * (O_NONBLOCK: region.c), which starts the break; the next look gets the file. */
static void region_hold(struct slice *s) {
  char path[GS_PROTO_PATH_MAX + 32];
  struct stat st;

  /* A container's slice only: its region is root's and 0666, so a container's root may take a
   * lease on it (a `gslice run` slice's user owns its own dir anyway). */
  if (s->region_held || !(s->flags & GS_REGISTER_ANY_UID))
    return;
  snprintf(path, sizeof(path), "%s/%s", s->dir, GS_REGION_FILE);
  int fd = open(path, O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    close(fd);
    return;
  }
  s->region_fd = fd;
  s->region_held = true;
}

static int with_region(struct daemon *d, struct slice *s, int create, region_fn fn, void *arg) {
  sigjmp_buf jb;
  struct gs_region *volatile rg = NULL;
  volatile int r = -EBADMSG;

  if (s->region_broken)
    return -EBADMSG;
  if (sigsetjmp(jb, 1) == 0) {
    guard_arm(&jb);
    r = region_call(d, s, create, fn, arg, &rg);
    guard_disarm();
  } else {
    guard_recovered();
    if (rg)
      gs_region_close(rg);
    else
      gs_region_forget_open();
    rg = NULL;
    s->region_broken = true;
    gs_log(GS_LOG_WARNING,
           "slice %u '%s': its memory region %s/%s was truncated while the daemon read it (by a "
           "process of the slice): ignored from now on, its memory shows as 0 and its cap cannot "
           "change; the slice's own accounting is broken until it is run again",
           s->id, s->spec.name, s->dir, GS_REGION_FILE);
    return -EBADMSG;
  }
  if (rg)
    gs_region_close(rg);
  if (r >= 0 || r == -EBUSY)
    region_hold(s);
  return r;
}

/* Writes each GPU's cap the slice's region does not already hold as the daemon's: 1 when one was
 * written (read back at the next housekeeping: a process setting its GSLICE_MEMORY_LIMIT cap at
 * that moment may have overwritten it, caps being stored without the lock), 0 when all were in
 * place, -EBUSY when a device entry could not be added while a process of the slice held the
 * region's lock (tried again at housekeeping). */
static int apply_cap(struct daemon *d, struct slice *s, struct gs_region *rg, void *arg) {
  int busy = 0, wrote = 0;

  (void)arg;
  for (uint32_t i = 0; i < d->ngpus; i++) {
    struct gs_region_device_info info;
    unsigned slot;
    if (!(slice_mask(s) & (1u << i)))
      continue;
    uint64_t cap = gs_spec_memory_cap(&s->spec, i), want = cap ? cap : GS_REGION_NO_CAP;
    int r = region_slot(rg, &d->gpus[i], 1, &slot);
    if (r == 0 && gs_region_device_info(rg, slot, &info) == 0 && info.cap == want &&
        info.source == GS_CAP_FROM_DAEMON)
      continue;
    if (r == 0 && (r = gs_region_set_cap(rg, slot, want, GS_CAP_FROM_DAEMON)) == 0)
      wrote = 1;
    if (r == -EBUSY)
      busy = 1;
    else if (r < 0 && r != -ENODEV)
      gs_log(GS_LOG_WARNING, "slice %u: cannot set its memory cap on GPU %u: %s", s->id, i,
             strerror(-r));
  }
  return busy ? -EBUSY : wrote;
}

/* Whether the slice has a memory cap on any of its GPUs (each GPU's is its own). */
static bool slice_capped(const struct slice *s) {
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++)
    if ((slice_mask(s) & (1u << g)) && gs_spec_memory_cap(&s->spec, g))
      return true;
  return false;
}

int regions_apply_cap(struct daemon *d, struct slice *s) {
  /* Without NVML there is no UUID to key the cap on; the hook still
   * enforces GSLICE_MEMORY_LIMIT from its environment. Without a cap, only a region the slice
   * made already needs "no cap" written into it. */
  bool capped = slice_capped(s);
  int r = with_region(d, s, capped, apply_cap, NULL);

  /* -EWOULDBLOCK: a process of the slice holds a lease on the file; tried again at the next
   * housekeeping, once the break has ended it. */
  s->cap_pending = r == -EBUSY || r == -EWOULDBLOCK || r > 0;
  if (s->cap_pending)
    return 0;
  if (r < 0 && !capped && !s->region_broken)
    return 0;
  if (r < 0 && !s->region_broken)
    gs_log(GS_LOG_ERROR, "slice %u: cannot open its memory region in %s: %s", s->id, s->dir,
           strerror(-r));
  return r;
}

/* The measured shares of write_util's call: per GPU of the daemon, a percent or -1. */
struct util_arg {
  const int *pct;
  uint64_t now, period_ns;
};

/* The slice's measured share of each of its GPUs, into the region slots of those GPUs (the
 * hook's nvmlDeviceGetUtilizationRates answers from it: docs/nvml.md); a slot of no GPU of the
 * slice's gets none. The open itself cut a grown file back. */
static int write_util(struct daemon *d, struct slice *s, struct gs_region *rg, void *arg) {
  const struct util_arg *a = arg;
  uint8_t pct[GS_REGION_MAX_DEVICES];

  memset(pct, GS_REGION_UTIL_NONE, sizeof(pct));
  for (uint32_t i = 0; i < d->ngpus; i++) {
    unsigned slot;
    if (!(slice_mask(s) & (1u << i)) || a->pct[i] < 0 || region_slot(rg, &d->gpus[i], 0, &slot) < 0)
      continue;
    pct[slot] = (uint8_t)a->pct[i];
  }
  return gs_region_set_util(rg, pct, a->now, (uint32_t)(a->period_ns / 1000000));
}

int regions_write_util(struct daemon *d, struct slice *s, const int *pct, uint64_t now,
                       uint64_t period_ns) {
  struct util_arg a = {pct, now, period_ns};
  return with_region(d, s, 0, write_util, &a);
}

void regions_housekeeping(struct daemon *d) {
  for (uint32_t i = 0; i < d->reg.n; i++) {
    struct slice *s = d->reg.slices[i];
    if (s->cap_pending)
      regions_apply_cap(d, s);
  }
}

static int read_usage(struct daemon *d, struct slice *s, struct gs_region *rg, void *arg) {
  struct region_usage *u = arg;
  struct gs_region_device_info info;
  unsigned slot;

  (void)s;
  if (region_slot(rg, &d->gpus[u->gpu], 0, &slot) == 0 &&
      gs_region_device_info(rg, slot, &info) == 0) {
    u->used = info.used;
    if (info.cap != GS_REGION_NO_CAP)
      u->cap = info.cap;
  }
  return 0;
}

uint64_t regions_memory_used(struct daemon *d, struct slice *s, uint32_t gpu) {
  struct region_usage u = {.gpu = gpu, .used = 0, .cap = gs_spec_memory_cap(&s->spec, gpu)};

  with_region(d, s, 0, read_usage, &u);
  return u.used;
}

static int read_slice(struct daemon *d, struct slice *s, struct gs_region *rg, void *arg) {
  struct region_read *sr = arg;

  if (gs_region_procs(rg, sr->procs, GS_REGION_MAX_PROCS, &sr->nprocs) < 0)
    sr->nprocs = 0;
  for (uint32_t i = 0; i < d->ngpus; i++)
    if (slice_mask(s) & (1u << i))
      read_usage(d, s, rg, &sr->usage[i]);
  return 0;
}

/* The slice's own caps and nothing used: what a slice without a readable region shows. */
static void read_defaults(struct daemon *d, struct slice *s, struct region_read *ret) {
  ret->nprocs = 0;
  for (uint32_t i = 0; i < d->ngpus; i++)
    ret->usage[i] =
        (struct region_usage){.gpu = i, .used = 0, .cap = gs_spec_memory_cap(&s->spec, i)};
}

int regions_read(struct daemon *d, struct slice *s, struct region_read *ret) {
  read_defaults(d, s, ret);
  int r = with_region(d, s, 0, read_slice, ret);
  if (r < 0)
    read_defaults(d, s, ret); /* a jump out of the read leaves none of the region's figures */
  return r;
}
