/* SPDX-License-Identifier: Apache-2.0 */
/* The compute gate's bursts: what a process launched under one token, timed with events on its
 * streams; opened at a grant, closed at expiry, revoke, idle or a spent budget, and charged to
 * the daemon. The helper's periodic look at a burst (expiry, idle) is here too. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "clock.h"
#include "compute.h"
#include "compute_state.h"

static __thread CUcontext tl_ctx __attribute__((tls_model("initial-exec")));
static __thread int tl_dev __attribute__((tls_model("initial-exec"))) = -1;

/* ---- bursts (mu held) ---- */

int gs_burst_current_dev(CUcontext *ret_ctx) {
  const struct gs_real *r = gs_real();
  CUcontext ctx = NULL;
  CUdevice dev;

  if (!r->cuCtxGetCurrent || r->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
    return -1;
  if (ctx != tl_ctx || tl_dev < 0) {
    if (!r->cuCtxGetDevice || r->cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
        dev >= GS_MAX_GPUS)
      return -1;
    tl_ctx = ctx;
    tl_dev = dev;
    /* A context the hook did not see made (a green context's, one made before it was loaded). */
    gs_compute_context_seen(ctx, dev);
  }
  *ret_ctx = ctx;
  return tl_dev;
}

static void destroy_events(struct burst *b) {
  const struct gs_real *r = gs_real();
  if (!b->have_events || !r->cuEventDestroy_v2)
    return;
  r->cuEventDestroy_v2(b->start);
  r->cuEventDestroy_v2(b->seg_start);
  for (int i = 0; i < BURST_STREAMS; i++) {
    r->cuEventDestroy_v2(b->end[i]);
    r->cuEventDestroy_v2(b->probe[i]);
    r->cuEventDestroy_v2(b->handoff[i]);
  }
  b->have_events = false;
}

/* Events live in the burst's context: made once, again only if the context changes. */
static int make_events(struct burst *b, CUcontext ctx) {
  const struct gs_real *r = gs_real();

  if (b->have_events && b->ctx == ctx)
    return 0;
  destroy_events(b);
  b->ctx = ctx;
  if (!r->cuEventCreate || r->cuEventCreate(&b->start, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
      r->cuEventCreate(&b->seg_start, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
    return -EIO;
  for (int i = 0; i < BURST_STREAMS; i++)
    if (r->cuEventCreate(&b->end[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
        r->cuEventCreate(&b->probe[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
        r->cuEventCreate(&b->handoff[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS)
      return -EIO;
  b->have_events = true;
  return 0;
}

bool gs_burst_stream_captured(CUstream s) {
  const struct gs_real *r = gs_real();
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;

  if (!r->cuStreamIsCapturing)
    return false; /* a driver without capture */
  return r->cuStreamIsCapturing(s, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult gs_burst_record(CUevent ev, CUstream s) {
  const struct gs_real *r = gs_real();
  if (!r->cuEventRecord)
    return CUDA_ERROR_NOT_FOUND;
  if (atomic_load(&C.captures) && gs_burst_stream_captured(s))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return r->cuEventRecord(ev, s);
}

int gs_burst_relax(bool always) {
  const struct gs_real *r = gs_real();
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;

  if ((!always && !atomic_load(&C.captures)) || !r->cuThreadExchangeStreamCaptureMode ||
      r->cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS)
    return -1;
  return (int)m;
}

void gs_burst_unrelax(int saved) {
  const struct gs_real *r = gs_real();
  CUstreamCaptureMode m = (CUstreamCaptureMode)saved;

  if (saved >= 0)
    r->cuThreadExchangeStreamCaptureMode(&m);
}

bool gs_burst_elapsed_ms(float *ret_ms, CUevent from, CUevent to) {
  const struct gs_real *r = gs_real();
  CUresult er = r->cuEventElapsedTime_v2 ? r->cuEventElapsedTime_v2(ret_ms, from, to)
                                         : r->cuEventElapsedTime(ret_ms, from, to);
  return er == CUDA_SUCCESS;
}

/* A slot of a destroyed stream whose work has run, for a new stream to take: the events of the
 * slots still there are recorded later than that work ended, and so end later. -1: none. */
static int reusable_slot(struct burst *b, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    if (atomic_load(&b->streams[i]) == BURST_STREAM_GONE &&
        (!b->have_events || b->thread_local_stream ||
         gs_real()->cuEventQuery(b->end[i]) == CUDA_SUCCESS))
      return (int)i;
  return -1;
}

/* A stream joins the burst before its first launch in it. */
void gs_burst_add_stream(struct burst *b, CUstream s) {
  unsigned n = atomic_load(&b->nstreams);
  if (gs_burst_stream_known(b, s))
    return;
  if (s == CU_STREAM_PER_THREAD)
    b->thread_local_stream = true;
  int slot = reusable_slot(b, n);
  if (slot >= 0) {
    atomic_store(&b->streams[slot], (uintptr_t)s);
    return;
  }
  if (n >= BURST_STREAMS) {
    /* Too many to time one by one: the close syncs the whole context. */
    b->thread_local_stream = true;
    return;
  }
  atomic_store(&b->streams[n], (uintptr_t)s);
  atomic_store(&b->nstreams, n + 1);
}

/* Stream i of an open burst leaves it before its destroy. Its slot's events are recorded on it
 * one last time, where the burst's next records would have found its queue's end (it takes no
 * more work): the end event (the next mark or close skips the slot and times it by this one), the
 * probe unless the helper's last one still holds, the handoff's unless marked already. Then no
 * record or query of the gate names it (BURST_STREAM_GONE), and the quick synchronizes that may
 * have read it before are waited for. A record refused: the close synchronizes the context. */
static void stream_leaves(struct burst *b, unsigned i) {
  const struct gs_real *r = gs_real();
  CUstream s = (CUstream)atomic_load(&b->streams[i]);
  CUcontext ctx = atomic_load(&b->ctx), saved = NULL;

  if (b->have_events && !b->thread_local_stream) {
    r->cuCtxGetCurrent(&saved);
    if (saved != ctx)
      r->cuCtxSetCurrent(ctx);
    bool ok = gs_burst_record(b->end[i], s) == CUDA_SUCCESS;
    if (ok && !(b->probe_set && b->probe_launches == LAUNCHES(b)))
      ok = gs_burst_record(b->probe[i], s) == CUDA_SUCCESS;
    if (ok && !b->handoff_set)
      ok = gs_burst_record(b->handoff[i], s) == CUDA_SUCCESS;
    if (saved != ctx)
      r->cuCtxSetCurrent(saved);
    if (!ok)
      b->thread_local_stream = true;
  }
  atomic_store(&b->streams[i], BURST_STREAM_GONE);
  while (atomic_load(&b->querying))
    sched_yield();
}

void gs_burst_stream_gone(CUstream s) {
  if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
    return; /* not destroyed: the driver refuses it */
  for (int dev = 0; dev < GS_MAX_GPUS; dev++) {
    struct burst *b = &C.b[dev];
    if (!b->open) /* a close in progress copied its streams under mu and records on none */
      continue;
    unsigned n = atomic_load(&b->nstreams);
    for (unsigned i = 0; i < n; i++)
      if (atomic_load(&b->streams[i]) == (uintptr_t)s)
        stream_leaves(b, i);
  }
}

void gs_burst_open(struct burst *b, CUcontext ctx, CUstream s, uint32_t gen, uint64_t until,
                   uint64_t quantum) {
  uint64_t k = b->kernel_ns;

  b->open = true;
  b->generation = gen;
  b->thread_local_stream = false;
  b->probe_set = false;
  b->idle_ticks = 0;
  atomic_store(&b->nstreams, 0);
  /* Launches of the last burst: 0, once a launch that entered after its close has taken itself
   * back (its take-back would otherwise come off this burst's: 57599 of 57600 launches counted
   * in compute_threads' 300 threads). */
  gs_gate_quiesce(b);
  atomic_fetch_and(&b->gate, ~GATE_LAUNCHES_MASK);
  /* Launches are asynchronous: without a budget a slice could queue seconds
   * of work inside one token. The budget keeps what is queued near the
   * quantum, by this process's measured kernel length. */
  uint64_t budget = k ? quantum / k : FIRST_BUDGET;
  if (budget < 1)
    budget = 1;
  if (budget > MAX_BUDGET)
    budget = MAX_BUDGET;
  atomic_store(&b->budget, budget);
  /* The handoff: the last launches whose kernels make up HANDOFF_NS (one at least) are the
   * tail; the launch before them marks it. Only for a token of the daemon and a burst timed
   * with events; a first burst (no kernel length yet) hands off at its end. */
  uint64_t tail = k ? (HANDOFF_NS + k - 1) / k : 0;
  if (tail >= budget)
    tail = budget - 1;
  b->handoff_set = false;
  b->handoff_tail_ns = tail * k;
  b->release_at = 0;
  b->tail_final = false;
  b->released = false;
  b->handoff_at = gen && C.mode == MODE_DAEMON ? budget - tail : budget;
  atomic_store(&b->fast_budget, b->handoff_at);
  b->seg_open = true;
  b->seg_used_ns = b->seg_span_ns = 0;
  b->sync_seq++;
  atomic_store(&b->idle_since, 0);
  atomic_store(&b->gap_ticks, 0);
  atomic_store(&b->open_epoch, atomic_fetch_add(&b->epoch, 1) + 1);
  if (make_events(b, ctx) < 0 || gs_burst_record(b->start, s) != CUDA_SUCCESS ||
      gs_burst_record(b->seg_start, s) != CUDA_SUCCESS)
    b->thread_local_stream = true; /* no events: wall time it is */
  /* The burst's device time is anchored here: its events time from their record on, and a start
   * taken before them (making the events, a preemption) moved every interval it reported early
   * against the next holder's, which the daemon then clipped too little (0.55% of the device
   * charged twice beside a build). */
  b->opened_at = gs_mono_ns();
  gs_burst_add_stream(b, s);
  /* Which stream the start event went on: a _ptsz launch on NULL must be
   * timed on its thread's stream, never on the legacy one (launch.c). */
  gs_log(GS_LOG_DEBUG, "compute: burst %u opened on the %s stream", gen,
         s == CU_STREAM_PER_THREAD            ? "per-thread"
         : s == NULL || s == CU_STREAM_LEGACY ? "legacy"
                                              : "created");
  atomic_store(&b->valid_until, until);
}

/* What a close reads of its burst under mu, to time it with mu dropped. */
struct close_view {
  CUstream streams[BURST_STREAMS];
  unsigned n;
  uint64_t launches;
  bool timed, seg_open, use_probe;
  uint64_t seg_used, seg_span;
  uint64_t gap_ticks;  /* gaps after quick synchronizes, inside the segments: not charged */
  uint64_t idle_since; /* idle since a quick synchronize until this close: 0, not */
  uint64_t ends_at;    /* when the close recorded its end events (gs_gate_ticks all three) */
};

/* What the burst ran of `used`: less its idle gaps and, idle at its close, the time since. */
static uint64_t less_idle(const struct close_view *v, uint64_t used, uint64_t end) {
  uint64_t ticks = v->gap_ticks;
  if (v->idle_since && end > v->idle_since)
    ticks += end - v->idle_since;
  uint64_t idle = gs_ticks_ns(ticks);
  return used > idle ? used - idle : 0;
}

/* The burst's context made current for a close's records and waits (the helper's is another, and
 * so is a launching thread's of a second context, whose NULL stream is its own): returns the one
 * to put back with leave_ctx. */
static CUcontext enter_ctx(const struct burst *b) {
  const struct gs_real *r = gs_real();
  CUcontext saved = NULL, ctx = atomic_load(&b->ctx);

  if (!r->cuCtxGetCurrent || !r->cuCtxSetCurrent || r->cuCtxGetCurrent(&saved) != CUDA_SUCCESS)
    return ctx;
  if (saved != ctx)
    r->cuCtxSetCurrent(ctx);
  return saved;
}

static void leave_ctx(const struct burst *b, CUcontext saved) {
  if (saved != atomic_load(&b->ctx))
    gs_real()->cuCtxSetCurrent(saved);
}

/* The end events behind each stream's queue, recorded under mu (a capture begins only under mu,
 * so none can begin on a stream between the look and the record), in the burst's context. False
 * when one failed. */
static bool close_record_ends(struct burst *b, const struct close_view *v) {
  CUcontext saved = enter_ctx(b);
  bool ok = true;

  for (unsigned i = 0; i < v->n && ok; i++)
    if ((uintptr_t)v->streams[i] != BURST_STREAM_GONE)
      ok = gs_burst_record(b->end[i], v->streams[i]) == CUDA_SUCCESS;
  leave_ctx(b, saved);
  return ok;
}

/* Stops the burst's launches (the ones past the gate get in first) and marks it closing: its
 * events are this close's until it ends. */
static void close_begin(struct burst *b, struct close_view *v) {
  b->sync_seq++;
  atomic_fetch_add(&b->epoch, 1);
  atomic_store(&b->valid_until, 0);
  v->launches = gs_gate_quiesce(b);
  v->n = atomic_load(&b->nstreams);
  for (unsigned i = 0; i < v->n; i++)
    v->streams[i] = (CUstream)atomic_load(&b->streams[i]);
  b->open = false;
  b->closing = true;
  v->timed = b->have_events && !b->thread_local_stream;
  v->seg_open = b->seg_open;
  v->idle_since = atomic_exchange(&b->idle_since, 0);
  v->gap_ticks = atomic_load(&b->gap_ticks);
  /* Idle since a quick synchronize: end events recorded now complete at once, and the time since
   * that synchronize comes off (a probe would need its own record time). */
  v->use_probe = b->probe_set && b->probe_launches == v->launches && !v->idle_since;
  v->seg_used = b->seg_used_ns;
  v->seg_span = b->seg_span_ns;
  v->ends_at = gs_gate_ticks();
  if (v->timed && v->seg_open && !v->use_probe && !close_record_ends(b, v))
    v->timed = false;
}

/* The device time of the open segment from the events on each stream (the helper's last probe
 * when nothing was launched since: it marks the true end, not the moment someone noticed).
 * False when an event failed. */
static bool close_time_events(struct burst *b, const struct close_view *v, uint64_t *used,
                              uint64_t *span) {
  const struct gs_real *r = gs_real();
  float seg_ms = 0, span_ms = 0;
  bool ok = true;

  for (unsigned i = 0; i < v->n && ok; i++) {
    CUevent e = v->use_probe ? b->probe[i] : b->end[i];
    float a, z;
    ok = r->cuEventSynchronize(e) == CUDA_SUCCESS;
    ok = ok && gs_burst_elapsed_ms(&a, b->seg_start, e) && gs_burst_elapsed_ms(&z, b->start, e);
    if (ok && a > seg_ms)
      seg_ms = a;
    if (ok && z > span_ms)
      span_ms = z;
  }
  if (!ok)
    return false;
  *used = less_idle(v, v->seg_used + (uint64_t)((double)seg_ms * 1e6), v->ends_at);
  *span = (uint64_t)((double)span_ms * 1e6);
  if (*span < v->seg_span)
    *span = v->seg_span;
  return true;
}

/* A context synchronize for a burst without events, unless a capture is in progress (any mode
 * prohibits it then, and it would invalidate the capture): then the burst's wall time so far is
 * what it ran. A capture begins only once no close is here (gs_compute_capture_begin). */
static void close_ctx_sync(void) {
  const struct gs_real *r = gs_real();

  atomic_fetch_add(&C.ctx_syncing, 1);
  if (atomic_load(&C.captures) == 0 && r->cuCtxSynchronize)
    r->cuCtxSynchronize();
  atomic_fetch_sub(&C.ctx_syncing, 1);
}

/* Waits for the burst's work to end (mu dropped) and measures it: by its events, or by the
 * wall clock after a context synchronize when it has none (then v->timed is cleared). */
static void close_measure(struct burst *b, struct close_view *v, uint64_t *used, uint64_t *span) {
  int mode = gs_burst_relax(true);
  CUcontext saved = enter_ctx(b);

  if (v->timed && !v->seg_open) {
    /* Ended at a synchronize, nothing launched since. */
    *used = less_idle(v, v->seg_used, 0);
    *span = v->seg_span;
  } else if (v->timed && !close_time_events(b, v, used, span)) {
    v->timed = false;
  }
  if (!v->timed) {
    close_ctx_sync();
    *span = gs_mono_ns() - b->opened_at;
    *used = less_idle(v, *span, gs_gate_ticks());
  }
  leave_ctx(b, saved);
  gs_burst_unrelax(mode);
}

/* A burst's time per launch errs high, never low: its start event goes before its first kernel
 * can run (behind the previous holder's tail, or another context's timeslice), so a lower one
 * is the better figure and is taken faster; a figure too high leaves the device idle at each
 * handoff for the tail thought longer than it is. */
static void close_kernel_ns(struct burst *b, uint64_t launches, uint64_t used) {
  if (launches && used) {
    uint64_t k = used / launches;
    b->kernel_ns = !b->kernel_ns      ? k
                   : k < b->kernel_ns ? (b->kernel_ns + k) / 2
                                      : (3 * b->kernel_ns + k) / 4;
  } else if (launches) {
    b->kernel_ns = 1000; /* free kernels: count them as 1 us so the budget stays finite */
  }
}

/* Charges the burst: a release to the daemon, or without one the pace of the slice's limit. */
static void close_charge(int dev, struct burst *b, uint64_t used, uint64_t span, uint64_t launches,
                         bool more) {
  if (C.mode == MODE_DAEMON && !b->denied && !b->self_burst) {
    /* The burst's end stays where it was; its start moves up by the idle time left out, so a
     * lone participant's span is what it ran, and a shared token's span still ends where the
     * last participant's work did. */
    uint64_t idle = span > used ? span - used : 0;
    struct gs_msg_token_release rel = {.gpu = (uint32_t)dev,
                                       .generation = b->generation,
                                       .used_ns = used,
                                       .launches = launches,
                                       .more = b->released ? 0 : more,
                                       .flags = b->released ? GS_RELEASE_CHARGE : 0,
                                       .start_ns = b->opened_at + idle,
                                       .kernel_ns = b->kernel_ns};
    if (gs_link_send(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel)) == 0 && more && !b->released) {
      b->waiting = true;
      b->requested_at = gs_mono_ns();
    }
  } else if (C.limit_pct < 100) {
    b->self_next = b->opened_at + used * 100 / C.limit_pct;
  }
}

/* Closes the burst of GPU `dev`: no launch passes from here on; what was
 * queued runs to its end (a kernel cannot be cut), and the burst's device
 * time, overrun included, is what gets charged. Called with mu held; mu is
 * dropped while the GPU finishes the burst's work, so that neither the
 * helper nor another launching thread waits on the GPU behind this one (the
 * burst is `closing` meanwhile: its events are this call's). */
void gs_burst_close(int dev, bool from_helper, bool more) {
  struct burst *b = &C.b[dev];
  struct close_view v;
  uint64_t used = 0, span = 0;

  if (!b->open)
    return;
  close_begin(b, &v);
  pthread_mutex_unlock(&C.mu);
  close_measure(b, &v, &used, &span);
  pthread_mutex_lock(&C.mu);
  b->closing = false;
  if (!v.timed)
    b->thread_local_stream = true;
  pthread_cond_broadcast(&C.cv); /* launching threads wait for the close (slow path) */
  close_kernel_ns(b, v.launches, used);
  gs_log(GS_LOG_DEBUG, "compute: gpu %d burst %u closed by %s: %llu ns, %llu launches%s", dev,
         b->generation, from_helper ? "helper" : "gate", (unsigned long long)used,
         (unsigned long long)v.launches, v.timed ? "" : " (wall time)");
  close_charge(dev, b, used, span, v.launches, more);
}

/* Whether the work before the burst's tail has run (its handoff events completed); then when
 * the tail should end and when to hand off. */
static bool handoff_due(struct burst *b, uint64_t now, bool expired) {
  const struct gs_real *r = gs_real();
  unsigned n = atomic_load(&b->nstreams);
  float ms = 0, e;
  uint64_t tail_ns = b->handoff_tail_ns, mark = b->handoff_at, launches = LAUNCHES(b),
           budget = atomic_load(&b->budget);

  for (unsigned i = 0; i < n; i++) {
    if (r->cuEventQuery(b->handoff[i]) != CUDA_SUCCESS)
      return false;
    if (gs_burst_elapsed_ms(&e, b->start, b->handoff[i]) && e > ms)
      ms = e;
  }
  /* When it completed by the events, not when someone noticed. */
  uint64_t at = b->opened_at + (uint64_t)((double)ms * 1e6);
  /* Once nothing more can join the burst (its budget spent, or expired), its tail is what was
   * launched after the mark, not what the budget allowed: a burst that expired two launches into
   * a tail of three otherwise held the token a kernel longer, the device idle. */
  if ((expired || launches >= budget) && budget > mark && launches >= mark) {
    tail_ns = tail_ns / (budget - mark) * (launches - mark);
    b->tail_final = true;
  }
  if (at > now || at + tail_ns < now)
    at = now; /* an event clock at odds with ours: from when we saw it */
  b->tail_end = at + tail_ns;
  b->release_at = b->tail_end > HANDOFF_NS ? b->tail_end - HANDOFF_NS : 1;
  return true;
}

/* The tail is down to HANDOFF_NS: the token goes back now, so that the next holder's first
 * launch is queued before this burst's work has run out; the close waits for that work and
 * sends what it ran (GS_RELEASE_CHARGE). It wants more: its budget ran out. */
static void hand_off(int dev, bool from_helper, uint64_t now) {
  struct burst *b = &C.b[dev];
  struct gs_msg_token_release rel = {.gpu = (uint32_t)dev,
                                     .generation = b->generation,
                                     .more = 1,
                                     .flags = GS_RELEASE_PENDING,
                                     .start_ns = b->opened_at,
                                     .tail_end_ns = b->tail_end,
                                     .kernel_ns = b->kernel_ns};

  gs_log(GS_LOG_DEBUG,
         "compute: gpu %d burst %u handed off %llu us after it opened, by the %s; tail until %.3f",
         dev, b->generation, (unsigned long long)((now - b->opened_at) / 1000),
         from_helper ? "helper" : "gate", (double)b->tail_end / 1e6);
  if (gs_link_send(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel)) == 0) {
    b->released = true;
    b->waiting = true;
    b->requested_at = now;
  }
  gs_burst_close(dev, from_helper, true);
}

void gs_burst_handoff(int dev) {
  const struct gs_real *r = gs_real();
  struct burst *b = &C.b[dev];
  uint32_t gen = b->generation;
  unsigned n = atomic_load(&b->nstreams);

  if (!b->open || !b->handoff_set || b->released || b->handing || b->self_burst)
    return;
  /* The events are this burst's while `handing`: a close waits for nothing of ours. */
  b->handing = true;
  pthread_mutex_unlock(&C.mu);
  int mode = gs_burst_relax(true);
  for (unsigned i = 0; i < n; i++)
    r->cuEventSynchronize(b->handoff[i]);
  gs_burst_unrelax(mode);
  pthread_mutex_lock(&C.mu);
  b->handing = false;
  uint64_t now = gs_mono_ns();
  if (b->open && !b->released && b->generation == gen &&
      handoff_due(b, now, now >= atomic_load(&b->valid_until)) && b->release_at > now) {
    struct timespec ts = {.tv_sec = (time_t)(b->release_at / 1000000000ull),
                          .tv_nsec = (long)(b->release_at % 1000000000ull)};
    b->handing = true;
    pthread_mutex_unlock(&C.mu);
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    pthread_mutex_lock(&C.mu);
    b->handing = false;
    now = gs_mono_ns();
  }
  if (b->open && !b->released && b->generation == gen && b->release_at)
    hand_off(dev, false, now);
  pthread_cond_broadcast(&C.cv);
}

/* When a grant nobody has taken up goes back. */
static uint64_t unused_grant_at(const struct burst *b) {
  return b->granted_at + UNUSED_GRANT_NS;
}

/* A marked handoff's look: hands off when due. True when the look ends there: handed off, or
 * expired with the handoff marked (a close now would hold the token until the whole queue has
 * drained, the device idle behind it while the release, the pick and the next holder's wake-up
 * go by; nothing more joins the burst, the slow path stopping at expiry and the fast one at the
 * mark, so the handoff comes at the end of what is queued, less HANDOFF_NS; work that never
 * ends is the release deadline's: a revoke closes the burst). */
static bool check_handoff(int dev, struct burst *b, uint64_t now, bool expired) {
  if (!b->release_at || (expired && !b->tail_final))
    handoff_due(b, now, expired);
  if (b->release_at && now >= b->release_at) {
    hand_off(dev, true, now);
    return true;
  }
  return expired;
}

/* Records a probe on each stream of the burst: where its queue ends now. */
static void probe_queue(struct burst *b, uint64_t launches) {
  const struct gs_real *r = gs_real();
  unsigned n = atomic_load(&b->nstreams);
  CUcontext saved = NULL;
  bool ok = true;

  r->cuCtxGetCurrent(&saved);
  r->cuCtxSetCurrent(b->ctx);
  for (unsigned i = 0; i < n; i++) {
    uintptr_t s = atomic_load(&b->streams[i]);
    if (s != BURST_STREAM_GONE)
      ok = ok && gs_burst_record(b->probe[i], (CUstream)s) == CUDA_SUCCESS;
  }
  r->cuCtxSetCurrent(saved);
  b->probe_set = ok;
  b->probe_launches = launches;
  b->idle_ticks = 0;
}

/* Whether every probe has completed: the queue the last probe marked has run. */
static bool probes_done(const struct burst *b) {
  const struct gs_real *r = gs_real();
  unsigned n = atomic_load(&b->nstreams);

  for (unsigned i = 0; i < n; i++)
    if (r->cuEventQuery(b->probe[i]) != CUDA_SUCCESS)
      return false;
  return true;
}

/* The helper's look at a GPU: a grant left unused, an expired burst, or an idle one. */
void gs_burst_check(int dev, uint64_t now) {
  struct burst *b = &C.b[dev];

  if (b->granted && !b->open && b->gate_waiters == 0 && now >= unused_grant_at(b)) {
    struct gs_msg_token_release rel = {.gpu = (uint32_t)dev, .generation = b->grant.generation};
    b->granted = false;
    gs_link_send(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel));
    return;
  }
  if (!b->open)
    return;
  uint64_t launches = LAUNCHES(b);
  bool expired = now >= atomic_load(&b->valid_until);
  if (b->handoff_set && !b->released && check_handoff(dev, b, now, expired))
    return;
  if (expired) {
    /* Expired while the process is probably synchronizing on what it queued:
     * it will want more, so it stays in the running for the next pick (an
     * unused grant comes back after UNUSED_GRANT_NS). */
    gs_log(GS_LOG_DEBUG, "compute: gpu %d burst %u expired: %llu of %llu launches, handoff %s%s",
           dev, b->generation, (unsigned long long)launches,
           (unsigned long long)atomic_load(&b->budget), b->handoff_set ? "marked" : "not marked",
           b->handing ? ", a thread handing off" : "");
    gs_burst_close(dev, true, launches > 0);
    return;
  }
  if (!b->have_events || b->thread_local_stream)
    return;
  if (!b->probe_set || b->probe_launches != launches) {
    /* A launch counted but not yet in the driver (it passed the gate a moment ago, often the
     * one that opened the burst and woke us): a probe now would land before its kernel and
     * complete at once, and the close would take it for the end, charging the burst almost
     * nothing and the next holder, queued behind it, the rest. Looked at next tick. */
    if (INFLIGHT(b) == 0)
      probe_queue(b, launches);
    return;
  }
  if (!probes_done(b)) {
    b->idle_ticks = 0;
    return;
  }
  /* Nothing queued and nothing launched: after IDLE_TICKS looks, nothing is
   * left to run, and the token goes back at once. */
  if (++b->idle_ticks >= IDLE_TICKS) {
    gs_log(GS_LOG_DEBUG, "compute: gpu %d burst %u idle: %llu of %llu launches%s", dev,
           b->generation, (unsigned long long)launches, (unsigned long long)atomic_load(&b->budget),
           b->handing ? ", a thread handing off" : "");
    gs_burst_close(dev, true, false);
  }
}

void gs_burst_mark_handoff(struct burst *b) {
  unsigned n = atomic_load(&b->nstreams);
  bool ok = n > 0 && b->have_events && !b->thread_local_stream && !b->self_burst;

  for (unsigned i = 0; i < n && ok; i++) {
    uintptr_t s = atomic_load(&b->streams[i]);
    if (s != BURST_STREAM_GONE)
      ok = gs_burst_record(b->handoff[i], (CUstream)s) == CUDA_SUCCESS;
  }
  /* The helper looks at the handoff events within its tick (no wake-up in the launch path); a
   * thread that waits for the queue anyway hands off at once (gs_burst_handoff). */
  b->handoff_set = ok;
}

uint64_t gs_burst_next_look(const struct burst *b, uint64_t now, uint64_t wake) {
  uint64_t t = now + IDLE_TICK_NS, v = atomic_load(&b->valid_until);

  if (!b->open) {
    if (!b->granted)
      return wake;
    /* A grant not taken up goes back; one taken up opens a burst the helper is not woken for
     * (the fast path reads no clock): it looks by the grant's expiry at the latest. */
    t = unused_grant_at(b);
    if (b->grant.valid_until_ns && b->grant.valid_until_ns < t)
      t = b->grant.valid_until_ns;
    return t < wake ? t : wake;
  }
  if (b->handoff_set && !b->released) {
    /* Half the tail between looks: the events say when the work before the tail completed, so
     * a late look costs nothing while release_at is ahead, and a faster poll takes the CPU from
     * the launching threads of a loaded machine. */
    uint64_t tick =
        b->handoff_tail_ns / 2 > HANDOFF_TICK_NS ? b->handoff_tail_ns / 2 : HANDOFF_TICK_NS;
    t = b->release_at ? b->release_at : now + tick;
  }
  if (v && v < t && (v > now || !b->handoff_set || b->released))
    t = v; /* past expiry, a marked handoff is waited for by its own ticks (gs_burst_check) */
  return t < wake ? t : wake;
}
