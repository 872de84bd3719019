/* SPDX-License-Identifier: Apache-2.0 */
/* The node snapshot (snapshot.h) from the schedulers, the registry, each slice's memory region
 * and NVML. */
#include "snapshot.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "authz.h"
#include "conn.h"
#include "daemon.h"
#include "regions.h"

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

/* The window the ratios are over: the stats window, or the daemon's uptime while shorter. */
static double window_seconds(const struct daemon *d, uint64_t now) {
  uint64_t span = now - d->started;

  if (span > SCHED_STATS_WINDOW_NS)
    span = SCHED_STATS_WINDOW_NS;
  if (span < 1000000)
    span = 1000000;
  return (double)span / 1e9;
}

static double ratio(uint64_t ns, double window) {
  return (double)ns / 1e9 / window;
}

static void gpu_status(struct daemon *d, uint32_t i, uint64_t now, double window,
                       struct gs_gpu_status *gs) {
  struct gpu *g = &d->gpus[i];

  gs->index = i;
  memcpy(gs->name, g->name, sizeof(gs->name));
  memcpy(gs->uuid, g->uuid, sizeof(gs->uuid));
  gs->memory_used_bytes = g->memory_used;
  gs->memory_total_bytes = g->memory_total;
  gs->busy_ratio = ratio(sched_ring_sum(&g->s.busy, now), window);
  if (gs->busy_ratio > 1)
    gs->busy_ratio = 1;
  gs->window_seconds = window;
  gs->switch_lost_ratio = ratio(sched_ring_sum(&g->s.lost, now), window);
  if (gs->switch_lost_ratio > 1)
    gs->switch_lost_ratio = 1;
  gs->switch_lost_seconds_total = (double)g->s.lost_total_ns / 1e9;
  gs->compute_requested = registry_committed(&d->reg, i, 0);
}

/* The scheduler's figures of slice s on GPU i (none when it is not on that GPU's scheduler). */
static void slice_gpu_status(struct daemon *d, const struct slice *s, uint32_t i, uint64_t now,
                             double window, const struct region_usage *u,
                             struct gs_slice_gpu_status *sg) {
  struct sched_slice *sl = sched_find(&d->gpus[i].s, s->id);

  sg->gpu = i;
  sg->compute_request = gs_spec_request(&s->spec, i);
  sg->memory_used_bytes = u->used;
  sg->memory_cap_bytes = u->cap;
  if (!sl)
    return;
  sg->share_ratio = ratio(sched_ring_sum(&sl->stats, now), window);
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

/* One slice's status; its processes (hooks connected, and those its region knows: a process
 * that holds memory but never launched has no connection yet) go into acc too. sr is scratch. */
static void slice_status(struct daemon *d, struct slice *s, uint64_t now, double window,
                         struct region_read *sr, struct accounted *acc,
                         struct gs_slice_status *ss) {
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
      account(acc, c->pid);
    }
  regions_read(d, s, sr);
  for (unsigned p = 0; p < sr->nprocs; p++) {
    add_pid(ss, (int32_t)sr->procs[p].pid);
    account(acc, (pid_t)sr->procs[p].pid);
  }
  for (uint32_t i = 0; i < d->ngpus; i++)
    if (slice_mask(s) & (1u << i))
      slice_gpu_status(d, s, i, now, window, &sr->usage[i], &ss->gpus[ss->ngpus++]);
}

/* NVML's view of each GPU beside the slices': the processes no slice accounts for, each with
 * the slice whose runner it descends from, if any. */
static void device_views(struct daemon *d, struct accounted *acc, struct gs_status *st) {
  for (uint32_t i = 0; i < d->ngpus; i++) {
    struct gs_gpu_status *gs = &st->gpus[i];
    gpus_device_view(d, i, is_accounted, acc, gs);
    uint32_t n =
        gs->unaccounted_count < GS_UNACCOUNTED_MAX ? gs->unaccounted_count : GS_UNACCOUNTED_MAX;
    for (uint32_t k = 0; k < n; k++)
      gs->unaccounted[k].slice_id = authz_slice_of_unaccounted(d, gs->unaccounted[k].pid);
  }
}

int snapshot_take(struct daemon *d, struct gs_status *ret) {
  struct gs_status st = {0};
  struct accounted acc = {0};
  struct region_read *sr = NULL;
  struct timespec ts;
  uint64_t now = loop_now();
  double window = window_seconds(d, now);

  clock_gettime(CLOCK_REALTIME, &ts);
  st.time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  gpus_refresh_memory(d);
  st.ngpus = d->ngpus;
  for (uint32_t i = 0; i < d->ngpus; i++)
    gpu_status(d, i, now, window, &st.gpus[i]);
  if (d->reg.n) {
    st.slices = calloc(d->reg.n, sizeof(*st.slices));
    sr = malloc(sizeof(*sr)); /* 40 KiB: off the loop thread's stack */
    if (!st.slices || !sr) {
      free(st.slices);
      free(sr);
      return -ENOMEM;
    }
  }
  for (uint32_t k = 0; k < d->reg.n; k++)
    slice_status(d, d->reg.slices[k], now, window, sr, &acc, &st.slices[st.nslices++]);
  device_views(d, &acc, &st);
  free(acc.pids);
  free(sr);
  *ret = st;
  return 0;
}

/* The device time of the ring's newest span_ns / bucket_ns buckets, the one being filled among
 * them, and in *ret_period_ns the time they cover up to now: span_ns less up to one bucket. */
static uint64_t ring_recent(struct sched_ring *r, uint64_t now, uint64_t span_ns,
                            uint64_t *ret_period_ns) {
  uint32_t k = (uint32_t)(span_ns / r->bucket_ns);
  uint64_t sum = 0;

  (void)sched_ring_sum(r, now); /* moves the head to now */
  if (k < 1)
    k = 1;
  if (k > r->nbuckets)
    k = r->nbuckets;
  for (uint32_t i = 0; i < k; i++)
    sum += r->v[(r->head + r->nbuckets - i) % r->nbuckets];
  *ret_period_ns = (uint64_t)(k - 1) * r->bucket_ns + (now - r->head_start);
  return sum;
}

int snapshot_recent_share(struct daemon *d, const struct slice *s, uint32_t gpu, uint64_t now,
                          unsigned *ret_pct, uint64_t *ret_period_ns) {
  struct sched_slice *sl = gpu < d->ngpus ? sched_find(&d->gpus[gpu].s, s->id) : NULL;
  uint64_t period;

  if (!sl)
    return -ENOENT;
  uint64_t busy = ring_recent(&sl->stats, now, 1000000000ull, &period);
  if (period == 0)
    period = 1;
  uint64_t pct = (busy * 100 + period / 2) / period;
  *ret_pct = pct > 100 ? 100 : (unsigned)pct;
  *ret_period_ns = period;
  return 0;
}
