/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's housekeeping (housekeeping.h): what each second calls, in order. */
#include "housekeeping.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "regions.h"
#include "requests.h"
#include "snapshot.h"
#include "sock.h"
#include "token.h"

#define HOUSEKEEPING_NS 1000000000ull
/* Freed buffers of big replies stay in the heap (below the top or in the free lists) unless
 * handed back: trimmed once this much was freed. */
#define TRIM_AFTER (1u << 20)

/* A slice whose runner is gone (or is another process now) and that no process of it is
 * connected to; never a held one (its registrant, gslice-node, removes it with its pod). */
static bool slice_gone(const struct slice *s) {
  uint64_t start = 0;
  int exited = 1;

  if (s->flags & GS_REGISTER_HELD)
    return false;
  if (gs_proc_identity(s->runner_pid, &start, &exited) == 0 && !exited &&
      (s->runner_start == 0 || start == s->runner_start))
    return false;
  return !s->conns;
}

static void remove_gone_slices(struct daemon *d) {
  for (uint32_t i = 0; i < d->reg.n; i++) {
    struct slice *s = d->reg.slices[i];
    if (!slice_gone(s))
      continue;
    gs_log(GS_LOG_INFO, "slice %u '%s': its runner (pid %d) and processes are gone; removed", s->id,
           s->spec.name, (int)s->runner_pid);
    requests_remove_slice(d, s->id);
    i--; /* registry_remove moved the last slice here */
  }
}

/* The charge check's counters of every slice on each of its GPUs. */
static void publish_charges(struct daemon *d) {
  struct gs_metrics_charge *c = calloc(d->reg.n * d->ngpus + 1, sizeof(*c));
  uint32_t n = 0;

  if (!c)
    return;
  for (uint32_t k = 0; k < d->reg.n; k++) {
    const struct slice *s = d->reg.slices[k];
    for (uint32_t i = 0; i < d->ngpus; i++) {
      const struct sched_slice *sl = sched_find(&d->gpus[i].s, s->id);
      if (!sl)
        continue;
      c[n] = (struct gs_metrics_charge){
          .slice_id = s->id,
          .gpu = i,
          .unreported_seconds_total = (double)sl->unreported_total_ns / 1e9,
          .idle_held_seconds_total = (double)sl->idle_charged_total_ns / 1e9};
      memcpy(c[n++].name, s->spec.name, sizeof(c[0].name));
    }
  }
  gs_metrics_publish_charges(d->metrics, c, n);
  free(c);
}

static void publish_metrics(struct daemon *d) {
  struct gs_status st;

  if (d->metrics && snapshot_take(d, &st) == 0) {
    gs_metrics_publish(d->metrics, &st);
    gs_status_free(&st);
    publish_charges(d);
  }
}

/* Each slice's measured share of each of its GPUs over the last second, into its region. */
static void write_utils(struct daemon *d) {
  uint64_t now = loop_now();

  for (uint32_t i = 0; i < d->reg.n; i++) {
    struct slice *s = d->reg.slices[i];
    int pct[GS_MAX_GPUS];
    uint64_t period = 0;
    for (uint32_t g = 0; g < d->ngpus && g < GS_MAX_GPUS; g++) {
      unsigned p;
      uint64_t span;
      pct[g] = -1;
      if (snapshot_recent_share(d, s, g, now, &p, &span) == 0) {
        pct[g] = (int)p;
        period = span;
      }
    }
    regions_write_util(d, s, pct, now, period);
  }
}

static void housekeeping_cb(struct loop *l, uint64_t id, void *data) {
  struct daemon *d = data;

  (void)id;
  sock_housekeeping(d);
  remove_gone_slices(d);
  token_watchdog(d);
  regions_housekeeping(d);
  write_utils(d);
  if (d->conns.freed_since_trim >= TRIM_AFTER) {
    malloc_trim(0);
    d->conns.freed_since_trim = 0;
  }
  publish_metrics(d);
  gs_log_flush();
  loop_add_timer(l, loop_now() + HOUSEKEEPING_NS, housekeeping_cb, d, &d->housekeeping_timer);
}

int housekeeping_start(struct daemon *d) {
  return loop_add_timer(d->loop, loop_now() + HOUSEKEEPING_NS, housekeeping_cb, d,
                        &d->housekeeping_timer);
}
