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
/* One warning per slice in this long, with the figures of the check that charged it. */
#define WARN_EVERY_NS (60ull * 1000000000ull)
/* Checks after which their cost is said in the log (10 s at the default period). */
#define COST_AFTER 20
/* A check of a GPU this long is said at once: the loop thread waits for it (NVML's read and the
 * processes' attribution: on the sim 75-85 us, at most 0.2 ms beside a build). */
#define COST_SLOW_NS 10000000ull

static void charge_cb(struct loop *l, uint64_t id, void *data);

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
  /* Each slice's device time, and its process with the most, by registry index. */
  struct {
    uint64_t ns, most;
    pid_t pid;
  } by[REGISTRY_MAX] = {{0}};
  for (unsigned i = 0; i < n; i++) {
    int k = t[i].ns ? owner_of(d, t[i].pid) : -1;
    if (k < 0)
      continue;
    by[k].ns += t[i].ns;
    if (t[i].ns > by[k].most) {
      by[k].most = t[i].ns;
      by[k].pid = t[i].pid;
    }
  }
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

int charge_start(struct daemon *d) {
  if (!d->cfg.charge_check_ms)
    return 0;
  arm(d);
  return d->charge.timer ? 0 : -ENOMEM;
}

void charge_reload(struct daemon *d) {
  if (d->charge.timer)
    loop_del_timer(d->loop, d->charge.timer);
  /* Off, or a new period: the next check of each GPU compares from itself on. */
  for (uint32_t i = 0; i < GS_MAX_GPUS; i++)
    d->charge.at[i] = 0;
  arm(d);
}
