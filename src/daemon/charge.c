/* SPDX-License-Identifier: Apache-2.0 */
/* The charge check (charge.h): NVML's device time of each slice's processes against its charges,
 * one GPU after another on the loop's timer. */
#include "charge.h"

#include <errno.h>
#include <inttypes.h>

#include "authz.h"
#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "proc.h"

/* Processes with samples on one GPU in one read (NVML lists those that ran). */
#define CHARGE_PROCS 256
/* How often NVML's running-process list is read, to learn each GPU process's slice while it
 * lives: a process of 50 ms is seen twice. */
#define POLL_NS (20ull * 1000000ull)
/* New processes tied to a slice in one poll of a GPU (each may read its ancestors from /proc):
 * the rest at the next. */
#define POLL_NEW_MAX 16
/* Polls after which their cost is said in the log (10 s). */
#define POLL_COST_AFTER 500
/* One warning per slice in this long, with the figures of the check that charged it. */
#define WARN_EVERY_NS (60ull * 1000000000ull)
/* Checks after which their cost is said in the log (10 s at the default period). */
#define COST_AFTER 20
/* A check of a GPU this long is said at once: the loop thread waits for it (NVML's read and the
 * processes' attribution: on the sim 75-85 us, at most 0.2 ms beside a build). */
#define COST_SLOW_NS 10000000ull

static void charge_cb(struct loop *l, uint64_t id, void *data);
static void poll_cb(struct loop *l, uint64_t id, void *data);

static uint64_t period_ns(const struct daemon *d) {
  return d->cfg.charge_check_ms * 1000000ull;
}

/* Whether c is a hook connection of pid, still the process that connected (a pid reused since
 * is someone else). */
static bool conn_is(const struct conn *c, pid_t pid) {
  uint64_t start = 0;
  int exited = 1;

  return c->role == GS_ROLE_HOOK && c->pid == pid && gs_proc_identity(pid, &start, &exited) == 0 &&
         !exited && start == c->start;
}

/* The registry index of the slice process `pid` is of: a hook connection's peer, else a process
 * below a slice's runner that never connected (its launches go around the gate: the slice's time
 * all the same, and the fourth attack run's zero-charge holder beside such a workload gave it 93%
 * of the device). -1: none (another slice's process is never counted to this one). */
static int owner_of(struct daemon *d, pid_t pid) {
  for (uint32_t k = 0; k < d->reg.n; k++)
    for (const struct conn *c = d->reg.slices[k]->conns; c; c = c->slice_next)
      if (c->pid == pid)
        return conn_is(c, pid) ? (int)k : -1;
  uint32_t id = authz_slice_of_pid(d, pid);
  for (uint32_t k = 0; id && k < d->reg.n; k++)
    if (d->reg.slices[k]->id == id)
      return (int)k;
  return -1;
}

/* How long a gone process's slice is remembered: its samples come at the next check, or a few
 * later where a check was late. */
static uint64_t horizon_ns(const struct daemon *d) {
  uint64_t h = 4 * period_ns(d);
  return h > 2000000000ull ? h : 2000000000ull;
}

static bool fresh(const struct daemon *d, const struct charge_pid *e, uint64_t now) {
  return e->pid && now - e->seen_ns <= horizon_ns(d);
}

/* Notes pid (started at `start`) alive now, of slice id (0: none). A process once a slice's stays
 * that slice's (id 0 does not undo it). Full, the oldest entry goes; that one's samples, if any
 * come, are nobody's: said once. */
static void remember(struct daemon *d, pid_t pid, uint64_t start, uint32_t id, uint64_t now) {
  struct charge *ch = &d->charge;
  struct charge_pid *spare = NULL, *oldest = NULL;

  for (unsigned i = 0; i < CHARGE_PIDS; i++) {
    struct charge_pid *e = &ch->pids[i];
    if (e->pid == pid && e->start == start) {
      e->seen_ns = now;
      if (id)
        e->slice_id = id;
      return;
    }
    if (!fresh(d, e, now)) {
      if (!spare)
        spare = e;
    } else if (!oldest || e->seen_ns < oldest->seen_ns) {
      oldest = e;
    }
  }
  if (!spare && !ch->said_evicted)
    gs_log(GS_LOG_WARNING,
           "charge check: more than %d GPU processes in %.1f s: the oldest are forgotten before "
           "NVML's samples of them are read (their device time is then no slice's; said once)",
           CHARGE_PIDS, (double)horizon_ns(d) / 1e9);
  if (!spare)
    ch->said_evicted = true;
  *(spare ? spare : oldest) =
      (struct charge_pid){.pid = pid, .slice_id = id, .start = start, .seen_ns = now};
}

static struct charge_pid *find(struct daemon *d, pid_t pid, uint64_t start) {
  for (unsigned i = 0; i < CHARGE_PIDS; i++)
    if (d->charge.pids[i].pid == pid && d->charge.pids[i].start == start)
      return &d->charge.pids[i];
  return NULL;
}

/* The registry index of slice id, -1 when it is gone. */
static int index_of(const struct daemon *d, uint32_t id) {
  for (uint32_t k = 0; id && k < d->reg.n; k++)
    if (d->reg.slices[k]->id == id)
      return (int)k;
  return -1;
}

/* The registry index of the slice whose process `pid` with samples is: a live one as owner_of
 * finds it (and remembered), else the slice the latest process of that pid was remembered of
 * within the horizon, unless the pid is now another live process's (a sample does not say which
 * of the two it is). -1: none. */
static int slice_of_sample(struct daemon *d, pid_t pid, uint64_t now) {
  uint64_t start = 0;
  int exited = 1;
  bool live = gs_proc_identity(pid, &start, &exited) == 0 && !exited;
  int k = live ? owner_of(d, pid) : -1;

  if (k >= 0) {
    remember(d, pid, start, d->reg.slices[k]->id, now);
    return k;
  }
  /* The latest process of that pid: one of no slice after it had the pid last. */
  const struct charge_pid *best = NULL;
  for (unsigned i = 0; i < CHARGE_PIDS; i++) {
    const struct charge_pid *e = &d->charge.pids[i];
    if (e->pid == pid && fresh(d, e, now) && (!best || e->seen_ns > best->seen_ns))
      best = e;
  }
  if (!best || (live && best->start != start))
    return -1;
  return index_of(d, best->slice_id);
}

/* Each slice's hook connections' processes, remembered without a read of /proc (a connection
 * knows its peer's start time). */
static void poll_conns(struct daemon *d, uint64_t now) {
  for (uint32_t k = 0; k < d->reg.n; k++)
    for (const struct conn *c = d->reg.slices[k]->conns; c; c = c->slice_next)
      if (c->role == GS_ROLE_HOOK && c->pid > 0)
        remember(d, c->pid, c->start, d->reg.slices[k]->id, now);
}

/* The entry of pid seen alive at the last poll (at `last`), NULL if none. */
static struct charge_pid *seen_at(struct daemon *d, pid_t pid, uint64_t last) {
  for (unsigned i = 0; last && i < CHARGE_PIDS; i++)
    if (d->charge.pids[i].pid == pid && d->charge.pids[i].seen_ns >= last)
      return &d->charge.pids[i];
  return NULL;
}

/* NVML's running processes of one GPU: the known ones marked seen, up to POLL_NEW_MAX new ones
 * tied to their slice (or to none). A pid seen at the last poll is the same process without a
 * read of /proc (its pid reused in those 20 ms would take every other pid in between): with 72
 * processes the reads were most of a poll's 6 ms on a loaded host. */
static void poll_gpu(struct daemon *d, uint32_t gpu, uint64_t now, uint64_t last) {
  pid_t pids[CHARGE_PROCS];
  unsigned n = 0, walked = 0;

  if (gpus_running_pids(d, gpu, pids, CHARGE_PROCS, &n) < 0)
    return;
  for (unsigned i = 0; i < n; i++) {
    uint64_t start = 0;
    int exited = 1;
    struct charge_pid *e = pids[i] > 0 ? seen_at(d, pids[i], last) : NULL;
    if (!e && (pids[i] <= 0 || gs_proc_identity(pids[i], &start, &exited) < 0 || exited))
      continue;
    if (e || (e = find(d, pids[i], start))) {
      e->seen_ns = now;
      /* Of no slice so far: asked again while it lives, within the poll's new ones. A walk that
       * ran out of its budget answers 0 until it ends (attrib.c), and a deep process that exits
       * before is otherwise remembered as nobody's: its samples, read after it, charged to none. */
      if (!e->slice_id && walked++ < POLL_NEW_MAX) {
        int k = owner_of(d, pids[i]);
        if (k >= 0)
          e->slice_id = d->reg.slices[k]->id;
      }
      continue;
    }
    if (walked++ >= POLL_NEW_MAX)
      continue;
    int k = owner_of(d, pids[i]);
    remember(d, pids[i], start, k >= 0 ? d->reg.slices[k]->id : 0, now);
  }
}

static void warn_charged(struct gpu *g, struct slice *s, pid_t pid, uint64_t period,
                         const struct sched_check_figures *f, uint64_t now) {
  if (s->unreported_warned_at && now - s->unreported_warned_at < WARN_EVERY_NS)
    return;
  s->unreported_warned_at = now;
  gs_log(GS_LOG_WARNING,
         "gpu %u: slice %u '%s': NVML saw its processes (most: pid %d) run %.1f ms on the device "
         "in the last %.0f ms, its releases reported %.1f ms (tolerance %.1f ms): %.1f ms charged "
         "to it (a process of the slice reports less device time than it runs: a hook that is "
         "not gslice's, or one changed; said once a minute)",
         g->index, s->id, s->spec.name, (int)pid, (double)f->device_ns / 1e6, (double)period / 1e6,
         (double)f->charged_ns / 1e6, (double)f->allowance_ns / 1e6, (double)f->excess_ns / 1e6);
}

/* The check's cost, once: NVML's read is synchronous on the loop thread, and a process no hook
 * connection accounts for has its ancestors read from /proc. */
static void note_cost(struct daemon *d, uint64_t ns) {
  struct charge *ch = &d->charge;

  ch->cost_ns += ns;
  if (ns > ch->cost_max_ns)
    ch->cost_max_ns = ns;
  if (ns > COST_SLOW_NS)
    gs_log(GS_LOG_WARNING,
           "charge check: one GPU's took %.1f ms (NVML's per-process samples and their "
           "processes), the daemon's loop waiting; raise charge_check_ms (or 0: off) if this "
           "repeats",
           (double)ns / 1e6);
  if (++ch->calls == COST_AFTER)
    gs_log(GS_LOG_INFO,
           "charge check: %.0f us a GPU (NVML's per-process samples and their processes; mean of "
           "%d, most %.0f us)",
           (double)ch->cost_ns / COST_AFTER / 1e3, COST_AFTER, (double)ch->cost_max_ns / 1e3);
}

/* Said once per GPU: which call its samples come from, or that it has none. */
static void say_source(struct daemon *d, struct gpu *g, int r) {
  if (r == -EIO) {
    if (!d->charge.said_failed[g->index])
      gs_log(GS_LOG_WARNING,
             "gpu %u: reading NVML's per-process samples failed: slices' charges are not checked "
             "while it fails (said once)",
             g->index);
    d->charge.said_failed[g->index] = true;
    return;
  }
  if (d->charge.said[g->index])
    return;
  d->charge.said[g->index] = true;
  if (r == -ENOTSUP || r == -ENODEV)
    gs_log(GS_LOG_WARNING,
           "gpu %u: %s: slices' charges are not checked on it (a process that reports less device "
           "time than it runs is not caught; docs/compute.md, \"The charge check\")",
           g->index,
           r == -ENODEV ? "no NVML"
                        : "NVML has no per-process samples (nvmlDeviceGetProcessUtilization and "
                          "nvmlDeviceGetProcessesUtilizationInfo: Not Supported)");
  else
    gs_log(GS_LOG_INFO, "gpu %u: slices' charges checked against %s every %" PRIu64 " ms", g->index,
           gpus_samples_name(g->samples.source), d->cfg.charge_check_ms);
}

/* A slice's device time in one period, and its process with the most. */
struct slice_time {
  uint64_t ns, most;
  pid_t pid;
};

static void add_time(struct slice_time *st, pid_t pid, uint64_t ns) {
  st->ns += ns;
  if (ns > st->most) {
    st->most = ns;
    st->pid = pid;
  }
}

/* A truncated answer and no call that gives every process's samples: the device's busy time that
 * the samples read leave unexplained is charged, in equal parts, to the slices with a process on
 * the GPU that has no sample in the answer (the ones it may have left out). */
static void charge_unexplained(struct daemon *d, struct gpu *g, const struct gpu_proc_time *t,
                               unsigned n, uint64_t period, uint64_t now, struct slice_time *by) {
  pid_t pids[CHARGE_PROCS];
  unsigned np = 0, nleft = 0;
  bool left[REGISTRY_MAX] = {false};
  double busy = 0;
  uint64_t explained = 0;

  if (gpus_busy_ratio(d, g->index, &busy) < 0 ||
      gpus_running_pids(d, g->index, pids, CHARGE_PROCS, &np) < 0)
    return;
  for (unsigned i = 0; i < n; i++)
    explained += t[i].ns;
  if ((double)explained >= busy * (double)period)
    return;
  for (unsigned i = 0; i < np; i++) {
    bool sampled = false;
    for (unsigned j = 0; j < n && !sampled; j++)
      sampled = t[j].pid == pids[i];
    int k = sampled ? -1 : slice_of_sample(d, pids[i], now);
    if (k >= 0 && !left[k]) {
      left[k] = true;
      nleft++;
    }
  }
  uint64_t part = nleft ? (uint64_t)(busy * (double)period - (double)explained) / nleft : 0;
  for (uint32_t k = 0; part && k < d->reg.n; k++)
    if (left[k])
      add_time(&by[k], 0, part);
}

static void check_gpu(struct daemon *d, struct gpu *g, uint64_t now) {
  struct gpu_proc_time t[CHARGE_PROCS]; /* 4 KiB */
  uint64_t period = now - d->charge.at[g->index];
  unsigned n = 0;
  bool prime = !d->charge.at[g->index];
  int r = gpus_proc_times(d, g->index, prime ? period_ns(d) / 1000 : period / 1000, t, CHARGE_PROCS,
                          &n);

  say_source(d, g, r);
  if (r < 0) {
    d->charge.at[g->index] = 0;
    return;
  }
  d->charge.at[g->index] = now;
  if (prime) {
    sched_check_reset(&g->s, now);
    return;
  }
  /* Each slice's device time, by registry index: its live processes', and those gone since whose
   * slice was remembered. */
  struct slice_time by[REGISTRY_MAX] = {{0}};
  for (unsigned i = 0; i < n; i++) {
    int k = t[i].ns ? slice_of_sample(d, t[i].pid, now) : -1;
    if (k >= 0)
      add_time(&by[k], t[i].pid, t[i].ns);
  }
  if (g->samples.truncated)
    charge_unexplained(d, g, t, n, period, now, by);
  for (uint32_t k = 0; k < d->reg.n; k++) {
    struct slice *s = d->reg.slices[k];
    struct sched_check_figures f;
    if ((slice_mask(s) & (1u << g->index)) &&
        sched_check_charge(&g->s, s->id, by[k].ns, period, now, &f))
      warn_charged(g, s, by[k].pid, period, &f, now);
  }
}

static void arm(struct daemon *d) {
  d->charge.timer = 0;
  if (d->cfg.charge_check_ms &&
      loop_add_timer(d->loop, loop_now() + period_ns(d), charge_cb, d, &d->charge.timer) < 0)
    d->charge.timer = 0;
}

static void arm_poll(struct daemon *d) {
  d->charge.poll_timer = 0;
  if (d->cfg.charge_check_ms &&
      loop_add_timer(d->loop, loop_now() + POLL_NS, poll_cb, d, &d->charge.poll_timer) < 0)
    d->charge.poll_timer = 0;
}

static void charge_cb(struct loop *l, uint64_t id, void *data) {
  struct daemon *d = data;
  uint64_t now = loop_now();

  (void)l;
  (void)id;
  for (uint32_t i = 0; i < d->ngpus; i++) {
    struct gpu *g = &d->gpus[i];
    /* A GPU without samples is not read again: said once, NOT_SUPPORTED does not change. */
    if (g->samples.source != GPU_SAMPLES_NONE || !d->charge.said[i]) {
      uint64_t t0 = gs_mono_ns();
      check_gpu(d, g, now);
      note_cost(d, gs_mono_ns() - t0);
    }
  }
  arm(d);
}

static void poll_cb(struct loop *l, uint64_t id, void *data) {
  struct daemon *d = data;
  struct charge *ch = &d->charge;
  uint64_t now = loop_now(), t0 = gs_mono_ns();

  (void)l;
  (void)id;
  poll_conns(d, now);
  for (uint32_t i = 0; i < d->ngpus; i++)
    if (d->gpus[i].samples.source != GPU_SAMPLES_NONE)
      poll_gpu(d, i, now, ch->polled_at);
  ch->polled_at = now;
  uint64_t ns = gs_mono_ns() - t0;
  ch->poll_ns += ns;
  if (ns > ch->poll_max_ns)
    ch->poll_max_ns = ns;
  if (++ch->polls == POLL_COST_AFTER)
    gs_log(GS_LOG_INFO,
           "charge check: NVML's running processes read every %llu ms, %.0f us each (mean of %d, "
           "most %.0f us)",
           POLL_NS / 1000000ull, (double)ch->poll_ns / POLL_COST_AFTER / 1e3, POLL_COST_AFTER,
           (double)ch->poll_max_ns / 1e3);
  arm_poll(d);
}

int charge_start(struct daemon *d) {
  if (!d->cfg.charge_check_ms)
    return 0;
  arm(d);
  arm_poll(d);
  return d->charge.timer && d->charge.poll_timer ? 0 : -ENOMEM;
}

void charge_reload(struct daemon *d) {
  if (d->charge.timer)
    loop_del_timer(d->loop, d->charge.timer);
  if (d->charge.poll_timer)
    loop_del_timer(d->loop, d->charge.poll_timer);
  /* Off, or a new period: the next check of each GPU compares from itself on. */
  for (uint32_t i = 0; i < GS_MAX_GPUS; i++)
    d->charge.at[i] = 0;
  arm(d);
  arm_poll(d);
}
