/* SPDX-License-Identifier: Apache-2.0 */
/* The compute gate: the hook's token client in every launch path. Launches go ahead only while
 * the slice holds a token: a fast path while the burst is valid (no syscall, no lock, no
 * allocation), a slow path under C.mu that closes the burst, asks for and waits on the next
 * token, or paces the slice at its limit without a daemon; and the segments (a burst is charged
 * from a launch to the synchronize that waited for it). compute_burst.c times and closes bursts,
 * compute_link.c talks to the daemon. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "compute.h"
#include "compute_state.h"

/* ---- the launching threads' slots ---- */

/* This thread's slot: its index + 1 (0: none yet; -1: none to be had, it counts in C.shared). */
static __thread int tl_slot __attribute__((tls_model("initial-exec")));
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
static bool slot_key_ok;

/* A thread that exits gives its slot back; its counts stay for the next owner to go on from. It
 * runs in that thread: a launch from a later destructor of its counts in the shared slot (two
 * writers' plain stores to one counter would lose one, and a close would wait forever). */
static void slot_release(void *v) {
  uintptr_t i = (uintptr_t)v;
  tl_slot = -1;
  atomic_fetch_add(&C.shared_users, 1);
  if (i == 1)
    atomic_store(&C.slot0_tp, 0); /* before the slot is free: a later thread's pointer may match */
  if (i > 0 && i <= GATE_SLOTS)
    atomic_store(&C.slot_owned[i - 1], 0);
}

static void slot_key_make(void) {
  slot_key_ok = pthread_key_create(&slot_key, slot_release) == 0;
}

/* A thread claims its slot before its first launch enters a gate (gate_general), so that a
 * launch entered is always of a thread that has one or is counted in shared_users. */
__attribute__((noinline, cold)) static void slot_claim(void) {
  pthread_once(&slot_once, slot_key_make);
  tl_slot = -1;
  atomic_fetch_add(&C.shared_users, 1); /* taken back below when a slot is had */
  if (!slot_key_ok)
    return;
  for (unsigned i = 0; i < GATE_SLOTS; i++) {
    uint8_t free_ = 0;
    if (!atomic_compare_exchange_strong(&C.slot_owned[i], &free_, 1))
      continue;
    unsigned n = atomic_load(&C.nslots);
    while (n < i + 1 && !atomic_compare_exchange_weak(&C.nslots, &n, i + 1))
      ;
    if (pthread_setspecific(slot_key, (void *)(uintptr_t)(i + 1)) != 0) {
      atomic_store(&C.slot_owned[i], 0);
      return;
    }
    tl_slot = (int)i + 1;
    if (i == 0)
      atomic_store(&C.slot0_tp, gs_thread_pointer());
    atomic_fetch_sub(&C.shared_users, 1);
    return;
  }
}

/* What gs_compute_after_launch counts a launch of GPU dev done in: this thread's own counter, or
 * (bit 0) the shared one. */
static inline uintptr_t slot_done(int dev) {
  if (__builtin_expect(tl_slot == 0, 0))
    slot_claim();
  if (tl_slot < 0)
    return (uintptr_t)&C.shared.c[dev].done | 1;
  return (uintptr_t)&C.slots[tl_slot - 1].c[dev].done;
}

/* Entered less done, the gate word read before and after the slots: if no launch entered
 * between the two reads, every done counted is of a launch counted in it. A gate that keeps
 * moving (other threads launching) after a few tries: in flight, the caller looks again. *snap:
 * the gate word the answer is of. */
static uint32_t inflight_at(const struct burst *b, uint64_t *snap) {
  unsigned dev = b->dev;
  /* The calling thread is the only one that ever launched (slot 1, the slots' high-water mark,
   * nobody counting in the shared one), and it is not in a launch: a thread's slot is claimed
   * before its first launch enters. The usual single-threaded program's every synchronize. */
  if (gs_thread_pointer() == atomic_load_explicit(&C.slot0_tp, memory_order_relaxed) &&
      atomic_load(&C.nslots) == 1 && atomic_load(&C.shared_users) == 0) {
    *snap = atomic_load(&b->gate);
    return 0;
  }
  for (int tries = 0; tries < 4; tries++) {
    uint64_t g = *snap = atomic_load(&b->gate);
    uint32_t done = atomic_load_explicit(&C.shared.c[dev].done, memory_order_acquire), entered = 0;
    unsigned n = atomic_load(&C.nslots);
    /* A slot's done before its entered: what it entered meanwhile is counted in flight (more
     * than there are, never fewer: the caller looks again). */
    for (unsigned i = 0; i < n; i++) {
      done += atomic_load_explicit(&C.slots[i].c[dev].done, memory_order_acquire);
      entered += atomic_load(&C.slots[i].c[dev].entered);
    }
    if (GATE_ENTERED(atomic_load(&b->gate)) == GATE_ENTERED(g))
      return (GATE_ENTERED(g) + entered - done) & GATE_COUNT_MASK;
  }
  return 1;
}

uint32_t gs_gate_inflight(const struct burst *b) {
  uint64_t g;
  return inflight_at(b, &g);
}

/* The burst's launches of gate word g: less what its allowances left unused. */
static uint64_t launches_of(const struct burst *b, uint64_t g) {
  uint64_t n = GATE_LAUNCHES(g), unused = 0;
  /* The slots that ever took an allowance (none: a thread alone never does). */
  unsigned ns = atomic_load(&C.allowance_slots), dev = b->dev;
  if (ns == 0)
    return n;
  uint32_t e = atomic_load(&b->open_epoch);
  for (unsigned i = 0; i < ns; i++) {
    const struct gate_count *c = &C.slots[i].c[dev];
    uint32_t left = atomic_load(&c->left);
    if (atomic_load(&c->epoch) == e)
      unused += left;
  }
  return n > unused ? n - unused : 0;
}

uint64_t gs_gate_launches(const struct burst *b) {
  return launches_of(b, atomic_load(&b->gate));
}

uint64_t gs_gate_quiesce(const struct burst *b) {
  uint64_t g;
  while (inflight_at(b, &g) > 0)
    sched_yield();
  return launches_of(b, g);
}

uint32_t gs_gate_entered(const struct burst *b) {
  uint32_t e = GATE_ENTERED(atomic_load(&b->gate));
  unsigned ns = atomic_load(&C.nslots), dev = b->dev;
  for (unsigned i = 0; ns > 1 && i < ns; i++)
    e += atomic_load(&C.slots[i].c[dev].entered);
  return e & GATE_COUNT_MASK;
}

void gs_gate_slots_forked(void) {
  for (unsigned i = 0; i < GATE_SLOTS; i++) {
    memset(&C.slots[i], 0, sizeof(C.slots[i]));
    atomic_store(&C.slot_owned[i], tl_slot == (int)i + 1);
  }
  memset(&C.shared, 0, sizeof(C.shared));
  atomic_store(&C.allowance_slots, 0);
  atomic_store(&C.shared_users, tl_slot < 0);
  atomic_store(&C.slot0_tp, tl_slot == 1 ? gs_thread_pointer() : 0);
}

/* ---- the gate ---- */

/* The open burst takes one more launch of ctx: within its time and budget. */
static bool burst_takes(struct burst *b, CUcontext ctx, uint64_t now) {
  return b->open && now < atomic_load(&b->valid_until) && LAUNCHES(b) < atomic_load(&b->budget) &&
         b->ctx == ctx;
}

/* A launch after a synchronize that found all of the burst's work done: the time from that
 * synchronize to now was the process's own, not charged (compute_state.h). The launch is
 * counted already, so a synchronize whose stamp raced it takes the stamp back (stamp_idle). */
__attribute__((noinline)) static void take_idle(struct burst *b) {
  uint64_t since = atomic_exchange(&b->idle_since, 0);
  if (since) {
    uint64_t now = gs_gate_ticks();
    if (now > since)
      atomic_fetch_add(&b->gap_ticks, now - since);
  }
}

/* A launch joins the valid burst: this stream is new to it, or its last segment ended at a
 * synchronize and this launch begins the next one. */
static void join_burst(struct burst *b, CUstream stream) {
  if (atomic_load(&b->idle_since)) {
    if (b->seg_open)
      take_idle(b);
    else
      atomic_store(&b->idle_since, 0); /* the segment's end leaves that time out already */
  }
  if (!b->seg_open) {
    b->seg_open = true;
    if (gs_burst_record(b->seg_start, stream) != CUDA_SUCCESS)
      b->thread_local_stream = true;
  }
  gs_burst_add_stream(b, stream);
  /* The first launch the fast path let go by its gate word's launches, which count the
   * allowances whole (a single thread's: its launches). */
  if (!b->handoff_set && GATE_LAUNCHES(atomic_load(&b->gate)) >= atomic_load(&b->fast_budget) &&
      atomic_load(&b->fast_budget) < atomic_load(&b->budget)) {
    gs_burst_mark_handoff(b);
    /* Marked: the tail's launches go the fast path to the budget (one by one under the lock,
     * they were 3% of a launch-bound loop's launches, and most of what the gate cost it). */
    if (b->handoff_set)
      atomic_store(&b->fast_budget, atomic_load(&b->budget));
  }
  atomic_fetch_add(&b->gate, GATE_ENTER + 1);
}

/* The previous holder's tail is still running and ends soon. */
static bool tail_running(const struct burst *b, uint64_t now) {
  return b->granted && b->grant.busy_until_ns > now + HANDOFF_LEAD_NS &&
         b->grant.busy_until_ns < now + 2 * HANDOFF_LEAD_NS + HANDOFF_NS * 4;
}

/* Queues behind the previous holder's tail just before it ends, not beside it (the device
 * would take turns between the two, each charged the other's). */
static void queue_behind_tail(struct burst *b) {
  uint64_t at = b->grant.busy_until_ns - HANDOFF_LEAD_NS;
  uint32_t gen = b->grant.generation;
  struct timespec ts = {.tv_sec = (time_t)(at / 1000000000ull),
                        .tv_nsec = (long)(at % 1000000000ull)};
  b->gate_waiters++;
  pthread_mutex_unlock(&C.mu);
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
  pthread_mutex_lock(&C.mu);
  b->gate_waiters--;
  /* A revoke meanwhile dropped that grant (compute_link.c), and another may have come: its
   * own previous tail is still to be waited for. */
  if (b->granted && b->grant.generation == gen)
    b->grant.busy_until_ns = 0;
}

static void take_grant(int dev, struct burst *b, CUcontext ctx, CUstream stream, uint64_t now) {
  b->granted = false;
  if (now < b->grant.valid_until_ns) {
    gs_burst_open(b, ctx, stream, b->grant.generation, b->grant.valid_until_ns,
                  b->grant.quantum_ns);
    b->self_burst = false;
    /* No wake-up for the helper: it read the grant, and looks again within UNUSED_GRANT_NS
     * (then it watches the burst: expiry, idle). The first launch goes straight on. */
  } else {
    /* Expired before we got to it: give it back unused. */
    struct gs_msg_token_release rel = {.gpu = (uint32_t)dev, .generation = b->grant.generation};
    gs_link_send(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel));
  }
}

/* Asks the daemon for a token (once) and waits for it, bounded: a late grant sends a PING, and
 * no PONG in time means the daemon is not there (the request stays out: its grant is taken
 * when it comes). */
static void wait_for_grant(int dev, struct burst *b, uint64_t now) {
  if (!b->waiting) {
    struct gs_msg_token_request q = {.gpu = (uint32_t)dev};
    if (gs_link_send(GS_MSG_TOKEN_REQUEST, &q, sizeof(q)) < 0) {
      gs_link_wake();
      pthread_cond_wait(&C.cv, &C.mu);
      return;
    }
    b->waiting = true;
    b->requested_at = now;
  }
  uint64_t deadline = C.ping_at ? C.ping_at + PING_WAIT_NS : b->requested_at + GRANT_WAIT_NS;
  if (now >= deadline) {
    if (!C.ping_at) {
      struct gs_msg_ping p = {.cookie = ++C.ping_cookie};
      C.ping_at = now;
      gs_link_send(GS_MSG_PING, &p, sizeof(p));
    } else {
      C.unresponsive = true;
      gs_log(GS_LOG_WARN,
             "the gslice daemon has not answered for %llu ms (stopped?): slice "
             "%u runs at no more than its %u%% limit until it does",
             (unsigned long long)((now - b->requested_at) / NS_PER_MS), C.slice_id, C.limit_pct);
      pthread_cond_broadcast(&C.cv);
    }
    return;
  }
  struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull),
                        .tv_nsec = (long)(deadline % 1000000000ull)};
  b->gate_waiters++;
  pthread_cond_timedwait(&C.cv, &C.mu, &ts);
  b->gate_waiters--;
}

/* No daemon (or it refused this GPU): the slice paces itself at its limit. */
static void pace_self(struct burst *b, CUcontext ctx, CUstream stream, uint64_t now) {
  if (now < b->self_next) {
    struct timespec ts = {.tv_sec = (time_t)(b->self_next / 1000000000ull),
                          .tv_nsec = (long)(b->self_next % 1000000000ull)};
    pthread_cond_timedwait(&C.cv, &C.mu, &ts);
    return;
  }
  gs_burst_open(b, ctx, stream, 0, now + SELF_QUANTUM_NS, SELF_QUANTUM_NS);
  b->self_burst = true;
  gs_link_wake();
}

/* Under C.mu, one step at a time until this launch may go: join the valid burst; or hand the
 * token off, close the burst, wait for another thread's close, queue behind the previous
 * holder's tail, take a grant, wait for one, or pace without a daemon, and look again. */
__attribute__((noinline, cold)) static CUresult slow_path(int dev, CUcontext ctx, CUstream stream,
                                                          uintptr_t *done) {
  struct burst *b = &C.b[dev];

  pthread_mutex_lock(&C.mu);
  int mode = gs_burst_relax(false);
  if (atomic_load(&C.captures) && gs_burst_stream_captured(stream)) {
    /* It began capturing since the look before the fast path (under mu it cannot now). */
    gs_burst_unrelax(mode);
    pthread_mutex_unlock(&C.mu);
    return CUDA_SUCCESS;
  }
  for (;;) {
    uint64_t now = gs_mono_ns();
    if (mode < 0)
      mode = gs_burst_relax(false); /* a capture began while this thread waited */
    if (burst_takes(b, ctx, now)) {
      join_burst(b, stream);
      break;
    }
    if (b->open && b->handoff_set && !b->released && b->ctx == ctx) {
      /* Budget spent or token expired: this thread waits anyway, so it hands the token off as
       * the tail runs (a close here would release only once the whole queue has drained). */
      if (b->handing)
        pthread_cond_wait(&C.cv, &C.mu);
      else
        gs_burst_handoff(dev);
    } else if (b->open) {
      gs_burst_close(dev, false, true);
    } else if (b->closing || b->handing) {
      /* Another thread's close waits for the GPU: its release comes first, and the events are
       * its until then. */
      pthread_cond_wait(&C.cv, &C.mu);
    } else if (tail_running(b, now)) {
      queue_behind_tail(b);
    } else if (b->granted) {
      take_grant(dev, b, ctx, stream, now);
    } else if (C.mode == MODE_DAEMON && !b->denied && !C.unresponsive) {
      wait_for_grant(dev, b, now);
    } else {
      pace_self(b, ctx, stream, now);
    }
  }
  gs_burst_unrelax(mode);
  pthread_mutex_unlock(&C.mu);
  *done = slot_done(dev);
  return CUDA_SUCCESS;
}

/* Takes back a launch the fast path counted but did not let through (the slow path counts it
 * again): its entry exactly, and its launch unless a burst's open reset the launches since
 * (gs_burst_open, under mu, while this thread was between its add and here). A plain subtract
 * of GATE_ENTER + 1 borrowed from the entered count then: one fewer entered than done for
 * ever, every later close waiting for a launch in flight that never was (a 2-thread gate_bench
 * spun in gs_burst_close for 16 min). An open now waits for this take-back before its reset
 * (gs_gate_quiesce), so the launch taken is always this one's. */
static void uncount(struct burst *b) {
  uint64_t g = atomic_load(&b->gate);
  while (!atomic_compare_exchange_weak(&b->gate, &g, g - GATE_ENTER - (GATE_LAUNCHES(g) ? 1 : 0)))
    ;
}

/* ---- contexts ---- */

void gs_compute_context_seen(CUcontext ctx, int dev) {
  CUcontext first = NULL;

  if (!ctx || dev < 0 || dev >= GS_MAX_GPUS || atomic_load(&C.multi_ctx))
    return;
  if (atomic_compare_exchange_strong(&C.first_ctx[dev], &first, ctx) || first == ctx)
    return;
  atomic_store(&C.multi_ctx, true);
  gs_log(GS_LOG_DEBUG,
         "compute: a second context on device %d: launches on the legacy and "
         "per-thread streams look their context up",
         dev);
}

/* The launch's stream is the burst's in its context too: a stream of the current context's own
 * (gs_stream_of_ctx) is the burst's only in the burst's context, once a process has had two on a
 * device (before, a second context's NULL launches passed as the burst's, uncharged: its events
 * were the first's; the fifth attack run's G5). *ctx: looked up here when not yet, NULL. */
static bool burst_ctx_holds(const struct burst *b, CUstream s, CUcontext *ctx) {
  if (!gs_stream_of_ctx(s) || !atomic_load(&C.multi_ctx))
    return true;
  if (!*ctx && gs_burst_current_dev(ctx) < 0)
    return false;
  return *ctx == atomic_load(&b->ctx);
}

/* Everything but the one-GPU fast path: set-up, the gate off, a capture in progress, several
 * GPUs, a context's own stream in a process of several contexts (burst_ctx_holds), and a launch
 * the fast path did not let through (counted in w: the stream new to the burst, the budget
 * spent, no burst open, an idle stamp to take, no slot yet). */
__attribute__((noinline)) static CUresult gate_general(CUstream stream, uintptr_t *done,
                                                       bool counted, uint64_t w) {
  CUcontext ctx = NULL;
  int dev = 0;

  if (!counted) {
    if (atomic_load_explicit(&C.state, memory_order_acquire) == 0)
      gs_link_ensure_setup();
    if (C.mode == MODE_OFF)
      return CUDA_SUCCESS;
    /* Into a capture, a launch only adds a node to the program's graph: nothing runs, nothing
     * is gated or counted (its replay is, by cuGraphLaunch). */
    if (atomic_load(&C.captures) && gs_burst_stream_captured(stream))
      return CUDA_SUCCESS;
    /* One GPU: device 0 whatever the context (a launch without a context is counted, and fails
     * in the driver); the slow path looks the context up. */
    if (!C.one_gpu && (dev = gs_burst_current_dev(&ctx)) < 0)
      return CUDA_SUCCESS; /* no context: the driver will say so */
    if (tl_slot == 0)
      slot_claim();
    w = atomic_fetch_add(&C.b[dev].gate, GATE_ENTER + 1);
  }
  struct burst *b = &C.b[dev];
  if (GATE_LAUNCHES(w) < atomic_load(&b->fast_budget) && atomic_load(&b->valid_until) &&
      gs_burst_stream_known(b, stream) && burst_ctx_holds(b, stream, &ctx)) {
    if (atomic_load(&b->idle_since) != 0)
      take_idle(b);
    *done = slot_done(dev);
    return CUDA_SUCCESS;
  }
  uncount(b); /* the slow path counts it, under mu */
  if (C.one_gpu && (dev = gs_burst_current_dev(&ctx)) < 0)
    return CUDA_SUCCESS;
  return slow_path(dev, ctx, stream, done);
}

/* One launch through the gate word (one atomic add): the budget checked against its launches. */
static inline CUresult single_launch(struct burst *b, struct gate_count *c, CUstream stream,
                                     uintptr_t *done) {
  uint64_t w = atomic_fetch_add(&b->gate, GATE_ENTER + 1);
  if (__builtin_expect(GATE_LAUNCHES(w) < atomic_load(&b->fast_budget) &&
                           atomic_load(&b->valid_until) && gs_burst_stream_known(b, stream),
                       1)) {
    /* The first launch after a quick synchronize: the gap since is the process's own. */
    if (__builtin_expect(atomic_load(&b->idle_since) != 0, 0))
      take_idle(b);
    *done = (uintptr_t)&c->done;
    return CUDA_SUCCESS;
  }
  return gate_general(stream, done, true, w);
}

/* A new allowance of the open burst (epoch e) for this thread's slot: ALLOWANCE launches of its
 * fast budget, one add to the gate's launches, while the budget has room for one for every slot
 * and more; 0: no room (or the burst changed), the launch takes its one from the gate. The
 * thread's entry is in flight already, so a close counts the allowance once it is stored. */
__attribute__((noinline)) static uint32_t allowance_take(struct burst *b, struct gate_count *c,
                                                         uint32_t e) {
  uint64_t fb = atomic_load(&b->fast_budget);
  if (!atomic_load(&b->valid_until) ||
      GATE_LAUNCHES(atomic_load(&b->gate)) + ALLOWANCE_ROOM(atomic_load(&C.nslots)) > fb)
    return 0;
  uint64_t w = atomic_fetch_add(&b->gate, ALLOWANCE);
  if (GATE_LAUNCHES(w) + ALLOWANCE > fb || atomic_load(&b->epoch) != e) {
    /* Past the budget (threads beyond the room took theirs at once) or in a burst since: kept as
     * burst e's, so that its launches (gs_gate_launches) do not count them, and never taken
     * (the next launch wants a new one, and finds no room or another burst). */
    atomic_store(&c->full, 1);
    atomic_store(&c->left, ALLOWANCE);
    atomic_store(&c->epoch, e);
    return 0;
  }
  /* Its launches counted in the gate's already, and not yet left in the slot: others count them
   * launched (more, never fewer) until the epoch says whose they are. */
  unsigned slot = (unsigned)(((uintptr_t)c - (uintptr_t)C.slots) / sizeof(C.slots[0])) + 1;
  for (unsigned n = atomic_load(&C.allowance_slots);
       n < slot && !atomic_compare_exchange_weak(&C.allowance_slots, &n, slot);)
    ;
  atomic_store(&c->left, ALLOWANCE);
  atomic_store(&c->full, 0);
  atomic_store(&c->epoch, e);
  return ALLOWANCE;
}

/* Takes back this thread's entry of a launch that did not go (counted done: nothing in flight). */
static inline void entry_back(struct gate_count *c) {
  atomic_store_explicit(&c->done, atomic_load_explicit(&c->done, memory_order_relaxed) + 1,
                        memory_order_release);
}

/* Where several threads launch: the launch is entered in the thread's own slot (the add is the
 * barrier: a close that stopped the burst before it is seen below, one after it waits for it)
 * and taken from its allowance, which it renews one add to the gate at a time: no line that
 * other threads' launches write is written, but one in ALLOWANCE. */
__attribute__((noinline)) static CUresult allowance_launch(struct burst *b, struct gate_count *c,
                                                           CUstream stream, uintptr_t *done) {
  uint32_t e = atomic_load(&b->epoch);
  atomic_fetch_add(&c->entered, 1);
  uint32_t left = atomic_load_explicit(&c->left, memory_order_relaxed);
  if (atomic_load_explicit(&c->epoch, memory_order_relaxed) != e ||
      atomic_load_explicit(&c->full, memory_order_relaxed) || left == 0) {
    if ((left = allowance_take(b, c, e)) == 0) {
      entry_back(c);
      return single_launch(b, c, stream, done);
    }
  }
  atomic_store_explicit(&c->left, left - 1, memory_order_relaxed);
  if (__builtin_expect(atomic_load(&b->valid_until) && atomic_load(&b->epoch) == e &&
                           gs_burst_stream_known(b, stream),
                       1)) {
    if (__builtin_expect(atomic_load(&b->idle_since) != 0, 0))
      take_idle(b);
    *done = (uintptr_t)&c->done;
    return CUDA_SUCCESS;
  }
  atomic_store_explicit(&c->left, left, memory_order_relaxed);
  entry_back(c);
  return gate_general(stream, done, false, 0);
}

/* The fast path, in a process that sees one GPU (a slice's) with the gate on, no capture in
 * progress, and a stream that is one context's (or a process of one context): one atomic add, a few
 * loads of three lines (C's first, the burst's first and its gate line), no call, no clock read
 * (the helper closes the burst at its expiry: valid_until 0). The add is a full barrier: a close
 * that stopped the burst (valid_until 0) before it is seen here; one after it counts this launch in
 * flight (gs_gate_inflight). The thread with slot 0 finds it by its thread pointer, the others by
 * their TLS. */
CUresult gs_compute_before_launch(CUstream stream, uintptr_t *done) {
  if (__builtin_expect(
          atomic_load_explicit(&C.state, memory_order_acquire) == 0 || C.mode == MODE_OFF ||
              atomic_load_explicit(&C.captures, memory_order_relaxed) != 0 || !C.one_gpu ||
              (atomic_load_explicit(&C.multi_ctx, memory_order_relaxed) &&
               gs_stream_of_ctx(stream)),
          0))
    return C.mode == MODE_OFF && atomic_load(&C.state) ? CUDA_SUCCESS
                                                       : gate_general(stream, done, false, 0);
  struct burst *b = &C.b[0];
  struct gate_count *c;
  if (__builtin_expect(
          gs_thread_pointer() == atomic_load_explicit(&C.slot0_tp, memory_order_relaxed), 1))
    c = &C.slots[0].c[0];
  else if (tl_slot > 0)
    c = &C.slots[tl_slot - 1].c[0];
  else
    return gate_general(stream, done, false, 0);
  if (__builtin_expect(atomic_load_explicit(&C.nslots, memory_order_relaxed) > 1, 0))
    return allowance_launch(b, c, stream, done);
  return single_launch(b, c, stream, done);
}

/* ---- segments: the idle time between a synchronize and the next launch is not charged ---- */

#define MARK_EPOCH(m) ((uint32_t)((m) >> 40))
#define MARK_ENTERED(m) ((uint32_t)((m) >> 8) & GATE_COUNT_MASK)
#define EPOCH_BITS 0xffffffu

/* The legacy stream (NULL) and the per-thread one are the current context's: a query of one says
 * something of the burst only in the burst's context (*ctx: looked up here when not yet, NULL). */
static bool query_stream(struct burst *b, CUstream s, CUcontext *ctx) {
  if (gs_stream_of_ctx(s)) {
    if (!*ctx && gs_burst_current_dev(ctx) < 0)
      return false;
    if (*ctx != atomic_load(&b->ctx))
      return false;
  }
  return gs_real()->cuStreamQuery(s) == CUDA_SUCCESS;
}

/* A synchronize longer than this waited for the device: a synchronize of work that has all run
 * is a call into the driver (0.1 µs on the sim, about 1 µs on a GPU), a wait is a kernel's end
 * and the host's wake after it (several µs on a GPU). */
#define SYNC_WAIT_NS 5000u

/* The burst as a quick synchronize needs it: open, its segment open on known streams, no
 * capture, no launch on its way, its budget not spent. The mark (epoch, entered, dev + 1) to
 * check it against after the synchronize (quick_holds); 0: not so. */
static uint64_t quick_state(struct burst *b) {
  uint32_t epoch = atomic_load(&b->epoch);
  uint64_t g = atomic_load(&b->gate);
  uint32_t entered = gs_gate_entered(b);

  if (atomic_load(&C.captures) || atomic_load(&b->nstreams) == 0 || !atomic_load(&b->valid_until) ||
      !atomic_load(&b->seg_open) || atomic_load(&b->thread_local_stream) ||
      GATE_LAUNCHES(g) >= atomic_load(&b->budget) || gs_gate_inflight(b) ||
      gs_gate_entered(b) != entered)
    return 0;
  return (uint64_t)(epoch & EPOCH_BITS) << 40 | (uint64_t)entered << 8 | (b->dev + 1);
}

/* A synchronize of a burst whose work has all run already (a launch-bound loop's): no event, no
 * lock, no segment end; the burst is idle from now to its next launch (stamp_idle), whatever the
 * synchronize waits for. Every stream of the burst is asked (several threads on a stream each:
 * one query per stream, the burst idle only when all are). 0: not so (work still queued on one of
 * them, or quick_state's), and *asked: whether the streams were asked. A synchronize of one
 * stream (`own`, `one`) asks on past its own stream's queue: *other_busy, work is queued on
 * another. The queries go without mu, counted in `querying`: a stream's destroy takes it out of
 * the burst and waits for them before the driver's (gs_compute_stream_destroy), so none names a
 * destroyed stream. */
static uint64_t quick_mark(struct burst *b, bool one, CUstream own, CUcontext *ctx, bool *asked,
                           bool *other_busy) {
  uint64_t mark = quick_state(b);
  unsigned n = atomic_load(&b->nstreams);

  *asked = *other_busy = false;
  if (!gs_real()->cuStreamQuery || !mark)
    return 0;
  bool done = true;
  *asked = true;
  atomic_fetch_add(&b->querying, 1);
  for (unsigned i = 0; i < n && (done || one) && !*other_busy; i++) {
    uintptr_t s = atomic_load(&b->streams[i]);
    if (s != BURST_STREAM_GONE && query_stream(b, (CUstream)s, ctx))
      continue;
    done = false;
    *other_busy = one && s != BURST_STREAM_GONE && s != (uintptr_t)own;
  }
  atomic_fetch_sub(&b->querying, 1);
  return done ? mark : 0;
}

/* The burst the quick mark was taken in, open, no launch entered its gate since (none was in
 * flight at the mark). */
static bool quick_holds(struct burst *b, uint64_t mark) {
  return (atomic_load(&b->epoch) & EPOCH_BITS) == MARK_EPOCH(mark) &&
         gs_gate_entered(b) == MARK_ENTERED(mark) && atomic_load(&b->valid_until);
}

/* Stamped (at `now`), then looked at again: a launch that counted itself before the stamp either
 * took it (a gap of nothing) or is seen here, and the stamp goes back. */
static void stamp_idle(struct burst *b, uint64_t mark, uint64_t now) {
  if (!quick_holds(b, mark))
    return;
  atomic_store(&b->idle_since, now);
  if (!quick_holds(b, mark))
    atomic_compare_exchange_strong(&b->idle_since, &now, 0);
}

/* The synchronize waits for every stream of the burst: all of the current context's (the burst's
 * context), or the burst's one stream (the legacy one: in the burst's context). */
static bool sync_covers(struct burst *b, enum gs_sync_kind kind, CUstream s, CUcontext *ctx) {
  if (kind == GS_SYNC_STREAM &&
      (atomic_load(&b->nstreams) != 1 || atomic_load(&b->streams[0]) != (uintptr_t)s))
    return false;
  if (kind == GS_SYNC_STREAM && !gs_stream_of_ctx(s))
    return true;
  if (kind == GS_SYNC_OTHER || (!*ctx && gs_burst_current_dev(ctx) < 0))
    return false;
  return *ctx == atomic_load(&b->ctx);
}

/* A quick synchronize taken for one without asking (syncs_find_done): once it returned, all the
 * burst's work is done and the burst is idle from now, so nothing is charged that ran (the
 * synchronize's own length is, a wake's few µs when it waited after all). One that waited is
 * told by its length: the next synchronize asks again, and ends the segment with events where
 * work is still queued (the exact end, not the wake). */
static void sync_quick(const struct gs_sync_mark *m) {
  struct burst *b = &C.b[(m->mark & 0xff) - 1];
  uint64_t now = gs_gate_ticks();
  if (now - m->t0 > atomic_load_explicit(&C.sync_wait_ticks, memory_order_relaxed))
    atomic_store(&b->syncs_find_done, false);
  stamp_idle(b, m->mark, now);
}

/* The synchronize ends the burst's segment with end events behind its queue (under mu): the
 * event mark for gs_compute_after_sync, or 0 (nothing to mark, a handoff made instead). */
static uint64_t event_mark(struct burst *b, int dev, CUcontext ctx) {
  uint64_t mark = 0;
  pthread_mutex_lock(&C.mu);
  int mode = gs_burst_relax(false);
  if (b->open && b->handoff_set && !b->released && !b->handing && b->ctx == ctx &&
      LAUNCHES(b) >= atomic_load(&b->budget)) {
    /* Its budget spent, the thread waits for the burst's work: it hands the token off as the
     * tail runs, and the close measures the burst (no segment mark needed). */
    gs_burst_handoff(dev);
    gs_burst_unrelax(mode);
    pthread_mutex_unlock(&C.mu);
    return 0;
  }
  if (b->open && b->seg_open && b->have_events && !b->thread_local_stream && b->ctx == ctx &&
      INFLIGHT(b) == 0) {
    /* End events right behind what is queued: they complete when that work has, and time it. */
    unsigned n = atomic_load(&b->nstreams);
    bool ok = n > 0;
    for (unsigned i = 0; i < n && ok; i++) {
      uintptr_t s = atomic_load(&b->streams[i]);
      if (s != BURST_STREAM_GONE) /* its end event was recorded as it went */
        ok = gs_burst_record(b->end[i], (CUstream)s) == CUDA_SUCCESS;
    }
    if (ok) {
      b->mark_launches = LAUNCHES(b);
      mark = (++b->sync_seq << 8) | (uint64_t)(dev + 1);
    }
  }
  gs_burst_unrelax(mode);
  pthread_mutex_unlock(&C.mu);
  return mark;
}

void gs_compute_before_sync(enum gs_sync_kind kind, CUstream stream, struct gs_sync_mark *m) {
  CUcontext ctx = NULL;
  int dev = 0;
  bool asked, other_busy;

  m->mark = m->t0 = 0;
  if (atomic_load_explicit(&C.state, memory_order_acquire) == 0 || C.mode == MODE_OFF)
    return;
  /* One GPU: device 0, and the context is looked up only where needed. */
  if (!C.one_gpu && (dev = gs_burst_current_dev(&ctx)) < 0)
    return;
  struct burst *b = &C.b[dev];
  if (atomic_load(&b->valid_until) == 0)
    return; /* no burst open: nothing to mark */
  if (atomic_load(&b->syncs_find_done) && sync_covers(b, kind, stream, &ctx) &&
      (m->mark = quick_state(b)) != 0) {
    m->t0 = gs_gate_ticks();
    return;
  }
  uint64_t mark = quick_mark(b, kind == GS_SYNC_STREAM, stream, &ctx, &asked, &other_busy);
  if (asked) {
    uint64_t wait = atomic_load(&C.sync_wait_ticks);
    if (!wait && (wait = gs_ns_ticks(SYNC_WAIT_NS)) != 0)
      atomic_store(&C.sync_wait_ticks, wait);
    atomic_store(&b->syncs_find_done, mark != 0 && wait != 0);
  }
  if (mark != 0) {
    stamp_idle(b, mark, gs_gate_ticks());
    return;
  }
  /* A synchronize of one stream while another stream of the burst has work queued (threads
   * launching on a stream each): the segment goes on through it (the other's work runs on, and
   * the other's next launch would make end events recorded now stale before this one returned:
   * the lock and the records for nothing, +116 ns a synchronize with two threads). Unless the
   * budget is spent: then the handoff. */
  if (other_busy && LAUNCHES(b) < atomic_load(&b->budget))
    return;
  if (!ctx && gs_burst_current_dev(&ctx) < 0)
    return;
  /* Nothing to mark under mu either (a launch on its way, a per-thread stream, the segment ended,
   * another context), unless the budget is spent: the lock is not worth taking. */
  if (LAUNCHES(b) < atomic_load(&b->budget) &&
      (INFLIGHT(b) || atomic_load(&b->thread_local_stream) || !atomic_load(&b->seg_open) ||
       atomic_load(&b->ctx) != ctx))
    return;
  m->mark = event_mark(b, dev, ctx);
}

void gs_compute_after_sync(const struct gs_sync_mark *m) {
  const struct gs_real *r = gs_real();
  uint64_t mark = m->mark;
  int dev = (int)(mark & 0xff) - 1;

  if (!mark || dev < 0 || dev >= GS_MAX_GPUS)
    return;
  if (m->t0) {
    sync_quick(m);
    return;
  }
  struct burst *b = &C.b[dev];
  pthread_mutex_lock(&C.mu);
  int mode = gs_burst_relax(false);
  if (b->open && b->seg_open && !b->thread_local_stream && b->sync_seq == mark >> 8 &&
      LAUNCHES(b) == b->mark_launches) {
    /* Launches from here on take the slow path (no stream is known), which opens the next
     * segment under mu; wait for any that passed the fast path meanwhile. */
    unsigned n = atomic_load(&b->nstreams);
    atomic_store(&b->nstreams, 0);
    while (INFLIGHT(b) > 0)
      sched_yield();
    float seg_ms = 0, span_ms = 0;
    bool ok = LAUNCHES(b) == b->mark_launches;
    for (unsigned i = 0; i < n && ok; i++) {
      float a, z;
      /* The synchronize may have waited for one stream only: every one must be done. */
      ok = r->cuEventQuery(b->end[i]) == CUDA_SUCCESS &&
           gs_burst_elapsed_ms(&a, b->seg_start, b->end[i]) &&
           gs_burst_elapsed_ms(&z, b->start, b->end[i]);
      if (ok && a > seg_ms)
        seg_ms = a;
      if (ok && z > span_ms)
        span_ms = z;
    }
    if (ok) {
      b->seg_used_ns += (uint64_t)((double)seg_ms * 1e6);
      b->seg_span_ns = (uint64_t)((double)span_ms * 1e6);
      b->seg_open = false;
      atomic_store(&b->idle_since, 0); /* another thread's stamp: the segment's end covers it */
      b->probe_set = false;
      b->idle_ticks = 0;
    } else {
      atomic_store(&b->nstreams, n);
    }
  }
  gs_burst_unrelax(mode);
  pthread_mutex_unlock(&C.mu);
}

/* ---- streams destroyed ---- */

void gs_compute_stream_destroy(CUstream stream) {
  if (atomic_load_explicit(&C.state, memory_order_acquire) == 0 || C.mode == MODE_OFF)
    return;
  pthread_mutex_lock(&C.mu);
  int mode = gs_burst_relax(false);
  gs_burst_stream_gone(stream);
  gs_burst_unrelax(mode);
  pthread_mutex_unlock(&C.mu);
}

/* ---- stream capture ---- */

int gs_compute_capture_begin(void) {
  if (atomic_load_explicit(&C.state, memory_order_acquire) == 0)
    gs_link_ensure_setup();
  atomic_fetch_add(&C.captures, 1);
  /* A close already in its context synchronize finishes first (close_ctx_sync); later ones see
   * the capture and synchronize nothing. */
  while (atomic_load(&C.ctx_syncing))
    sched_yield();
  if (C.mode == MODE_OFF)
    return 0;
  pthread_mutex_lock(&C.mu);
  return 1;
}

void gs_compute_capture_begun(int token, CUresult rc) {
  if (rc != CUDA_SUCCESS)
    atomic_fetch_sub(&C.captures, 1);
  if (token)
    pthread_mutex_unlock(&C.mu);
}

void gs_compute_capture_ended(CUresult rc) {
  unsigned n = atomic_load(&C.captures);
  if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    return; /* not capturing, another stream or thread: the capture (if any) goes on */
  /* Never below 0: a capture begun where the hook did not see it. */
  while (n && !atomic_compare_exchange_weak(&C.captures, &n, n - 1))
    ;
}
