/* SPDX-License-Identifier: Apache-2.0 */
/* The node snapshot (STATUS, /metrics) from the schedulers, the registry and each slice's memory
 * region; and the daemon's side of memory caps. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "guard.h"
#include "log.h"
#include "region.h"

static int region_slot(struct gs_region *rg, const struct gpu *g, int create, unsigned *ret) {
  if (!g->has_uuid)
    return -ENODEV;
  return gs_region_device(rg, g->uuid_bin, create, ret);
}

/* ---- every daemon access to a slice's region goes through with_region ----
 *
 * The region is a file the slice's processes may write, and truncate: a read through the mapping
 * past the new end is SIGBUS, which used to kill the whole daemon (a slice looping truncate and
 * rewrite hit the daemon's window within a second). The open already refuses a file shorter than
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
   * holding it made every STATUS and housekeeping wait 3 s per read, and every slice's tokens
   * with them. */
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

int daemon_apply_memory_cap(struct daemon *d, struct slice *s) {
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

static int look(struct daemon *d, struct slice *s, struct gs_region *rg, void *arg) {
  (void)d, (void)s, (void)rg, (void)arg;
  return 0; /* the open itself cut a grown file back */
}

void daemon_regions_housekeeping(struct daemon *d) {
  for (uint32_t i = 0; i < d->reg.n; i++) {
    struct slice *s = d->reg.slices[i];
    if (s->cap_pending)
      daemon_apply_memory_cap(d, s);
    else
      with_region(d, s, 0, look, NULL);
  }
}

struct usage {
  uint32_t gpu;
  uint64_t used, cap;
};

static int read_usage(struct daemon *d, struct slice *s, struct gs_region *rg, void *arg) {
  struct usage *u = arg;
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

uint64_t daemon_slice_memory_used(struct daemon *d, struct slice *s, uint32_t gpu) {
  struct usage u = {.gpu = gpu, .used = 0, .cap = gs_spec_memory_cap(&s->spec, gpu)};

  with_region(d, s, 0, read_usage, &u);
  return u.used;
}

static void add_pid(struct gs_slice_status *ss, int32_t pid) {
  for (uint32_t i = 0; i < ss->nprocs; i++)
    if (ss->pids[i] == pid)
      return;
  if (ss->nprocs < GS_SLICE_MAX_PIDS)
    ss->pids[ss->nprocs++] = pid;
}

/* Every process some slice accounts for (its hook's connection, its region's entries): a
 * process the device shows that is none of these runs without the hook. */
struct accounted {
  pid_t *pids;
  size_t n, cap;
};

static void account(struct accounted *a, pid_t pid) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 64;
    pid_t *p = realloc(a->pids, cap * sizeof(*p));
    if (!p)
      return; /* then shown as unaccounted: an overstatement, never a miss */
    a->pids = p;
    a->cap = cap;
  }
  a->pids[a->n++] = pid;
}

static bool is_accounted(void *arg, pid_t pid) {
  const struct accounted *a = arg;
  for (size_t i = 0; i < a->n; i++)
    if (a->pids[i] == pid)
      return true;
  return false;
}

/* What a snapshot reads from one slice's region: its processes and its usage on each of its
 * GPUs, in one open. Into a copy first: a jump out of the read leaves the status with none of
 * the region's figures rather than some. */
struct slice_read {
  struct gs_region_proc_info procs[GS_REGION_MAX_PROCS];
  unsigned nprocs;
  struct usage usage[GS_MAX_GPUS];
};

static int read_slice(struct daemon *d, struct slice *s, struct gs_region *rg, void *arg) {
  struct slice_read *sr = arg;

  if (gs_region_procs(rg, sr->procs, GS_REGION_MAX_PROCS, &sr->nprocs) < 0)
    sr->nprocs = 0;
  for (uint32_t i = 0; i < d->ngpus; i++)
    if (slice_mask(s) & (1u << i))
      read_usage(d, s, rg, &sr->usage[i]);
  return 0;
}

int daemon_snapshot(struct daemon *d, struct gs_status *ret) {
  struct gs_status st = {0};
  struct accounted acc = {0};
  struct slice_read *sr = NULL;
  struct timespec ts;
  uint64_t now = loop_now(), span = now - d->started;
  double window;

  if (span > SCHED_STATS_WINDOW_NS)
    span = SCHED_STATS_WINDOW_NS;
  if (span < 1000000)
    span = 1000000;
  window = (double)span / 1e9;
  clock_gettime(CLOCK_REALTIME, &ts);
  st.time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  gpus_refresh_memory(d);
  st.ngpus = d->ngpus;
  for (uint32_t i = 0; i < d->ngpus; i++) {
    struct gpu *g = &d->gpus[i];
    struct gs_gpu_status *gs = &st.gpus[i];
    gs->index = i;
    memcpy(gs->name, g->name, sizeof(gs->name));
    memcpy(gs->uuid, g->uuid, sizeof(gs->uuid));
    gs->memory_used_bytes = g->memory_used;
    gs->memory_total_bytes = g->memory_total;
    gs->busy_ratio = (double)sched_ring_sum(&g->s.busy, now) / 1e9 / window;
    if (gs->busy_ratio > 1)
      gs->busy_ratio = 1;
    gs->window_seconds = window;
    gs->switch_lost_ratio = (double)sched_ring_sum(&g->s.lost, now) / 1e9 / window;
    if (gs->switch_lost_ratio > 1)
      gs->switch_lost_ratio = 1;
    gs->switch_lost_seconds_total = (double)g->s.lost_total_ns / 1e9;
    gs->compute_requested = registry_committed(&d->reg, i, 0);
  }
  if (d->reg.n) {
    st.slices = calloc(d->reg.n, sizeof(*st.slices));
    sr = malloc(sizeof(*sr)); /* 40 KiB: off the loop thread's stack */
    if (!st.slices || !sr) {
      free(st.slices);
      free(sr);
      return -ENOMEM;
    }
  }
  for (uint32_t k = 0; k < d->reg.n; k++) {
    struct slice *s = d->reg.slices[k];
    struct gs_slice_status *ss = &st.slices[st.nslices++];
    ss->id = s->id;
    memcpy(ss->name, s->spec.name, sizeof(ss->name));
    ss->compute_request = s->spec.compute_request;
    ss->compute_limit = s->spec.compute_limit;
    ss->priority = s->spec.priority;
    ss->weight = s->spec.weight;
    ss->memory_force = s->memory_force;
    for (struct conn *c = s->conns; c; c = c->slice_next)
      if (c->role == GS_ROLE_HOOK) {
        add_pid(ss, (int32_t)c->pid);
        account(&acc, c->pid);
      }
    /* Processes that hold memory but never launched have no connection yet:
     * the slice's region knows them. Without a region (or a readable one), nothing is used and
     * the cap is the slice's own. */
    for (uint32_t i = 0; i < d->ngpus; i++)
      sr->usage[i] = (struct usage){.gpu = i, .used = 0, .cap = gs_spec_memory_cap(&s->spec, i)};
    if (with_region(d, s, 0, read_slice, sr) < 0) {
      sr->nprocs = 0;
      for (uint32_t i = 0; i < d->ngpus; i++)
        sr->usage[i] = (struct usage){.gpu = i, .used = 0, .cap = gs_spec_memory_cap(&s->spec, i)};
    }
    for (unsigned p = 0; p < sr->nprocs; p++) {
      add_pid(ss, (int32_t)sr->procs[p].pid);
      account(&acc, (pid_t)sr->procs[p].pid);
    }
    for (uint32_t i = 0; i < d->ngpus; i++) {
      struct sched_slice *sl;
      if (!(slice_mask(s) & (1u << i)))
        continue;
      struct gs_slice_gpu_status *sg = &ss->gpus[ss->ngpus++];
      sg->gpu = i;
      sg->compute_request = gs_spec_request(&s->spec, i);
      sg->memory_used_bytes = sr->usage[i].used;
      sg->memory_cap_bytes = sr->usage[i].cap;
      sl = sched_find(&d->gpus[i].s, s->id);
      if (!sl)
        continue;
      sg->share_ratio = (double)sched_ring_sum(&sl->stats, now) / 1e9 / window;
      sg->busy_seconds_total = (double)sl->used_total_ns / 1e9;
      sg->launches_total = sl->launches_total;
      sg->tokens_total = sl->tokens_total;
      sg->wait_seconds_total = (double)sl->wait_total_ns / 1e9;
      sg->wait_count = sl->wait_count;
      uint64_t cum = 0;
      for (uint32_t b = 0; b <= GS_WAIT_BUCKETS; b++) {
        cum += sl->wait_bucket[b];
        sg->wait_bucket[b] = cum;
      }
    }
  }
  for (uint32_t i = 0; i < d->ngpus; i++)
    gpus_device_view(d, i, is_accounted, &acc, &st.gpus[i]);
  free(acc.pids);
  free(sr);
  *ret = st;
  return 0;
}
