/* SPDX-License-Identifier: Apache-2.0 */
/* The compute gate's state, shared by its three files: the gate (compute.c: the fast and slow
 * path, segments), the bursts (compute_burst.c: events, open, close, the helper's look at a burst)
 * and the daemon link (compute_link.c: the connection, the helper thread, messages, set-up). One
 * instance, C; what in it is not atomic changes under C.mu. Only those three files include this
 * header; the rest of the hook goes through compute.h. */
#pragma once
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "clock.h"
#include "hook.h"
#include "proto.h"

#define NS_PER_MS 1000000ull
#define BURST_STREAMS 8
/* A burst's stream the program destroyed (gs_compute_stream_destroy): its slot keeps the events
 * recorded on it before it went, and nothing is recorded on it or queried of it again. No driver
 * handle has this value, so no launch's stream matches it. */
#define BURST_STREAM_GONE UINTPTR_MAX
/* The helper's tick while a burst is open. A process is idle when two looks in a row find
 * nothing queued and no launch: 0.5-1 ms, longer than a synchronize-and-relaunch takes (tens
 * of us), so a process between two batches keeps its token, and one that stopped hands it
 * back about a millisecond after its last kernel ended. */
#define IDLE_TICK_NS 500000ull
#define IDLE_TICKS 2
/* A grant nobody here takes up within this is handed back. */
#define UNUSED_GRANT_NS 2000000ull
/* Without a daemon: bursts of this length, paced at the slice's limit. */
#define SELF_QUANTUM_NS (10 * NS_PER_MS)
#define RECONNECT_NS (200 * NS_PER_MS)
/* A grant later than this: the hook asks whether the daemon is there at all (PING). A slice can
 * rightly wait longer (others' guarantees come first), so a late grant alone proves nothing. */
#define GRANT_WAIT_NS (1000 * NS_PER_MS)
/* No PONG within this: the daemon is stopped (SIGSTOP, a debugger) or hung; the slice paces
 * itself at its limit until the daemon answers, as when it is lost (else a stopped daemon
 * stops every slice's GPU work). */
#define PING_WAIT_NS (500 * NS_PER_MS)
/* The handoff: a burst that has spent its budget gives its token back when this much of its
 * queued work is left to run, so that the next holder's grant, wake-up and first launch (0.1-0.4
 * ms on a loaded machine, docs/compute.md) overlap the tail instead of leaving the device idle. */
#define HANDOFF_NS 500000ull
/* How often the helper looks at handoff events while they are due. */
#define HANDOFF_TICK_NS 100000ull
/* The next holder's first launch goes this long before the previous holder's tail is due to
 * end: the launch's own way to the device, so that no idle gap is left, and too short for the
 * two contexts to take turns on the device (a GPU time-slices contexts by the millisecond). */
#define HANDOFF_LEAD_NS 100000ull
/* Launches per burst when nothing is known yet about this process's kernels. */
#define FIRST_BUDGET 16
#define MAX_BUDGET (1u << 20)

/* A burst's gate word: the launches that passed the gate in this burst (low 40 bits, 1 each) and,
 * in the top 24 bits, every launch that ever entered it (GATE_ENTER each, wrapping harmlessly):
 * one atomic add a launch. A launch back from the driver counts itself done in its thread's own
 * slot (struct gate_slot) with a plain store, so the launches still in flight are the entered
 * ones less the slots' done ones (gs_gate_inflight), and no launch writes a shared line twice.
 * Where several threads launch (nslots > 1), a thread takes its launches from the burst's
 * budget ALLOWANCE at a time (one add of that many to the launches), and enters each in its own
 * slot (struct gate_count): its launches write no line another thread's launches write. The
 * burst's launches are then the gate's less what the allowances of this burst left unused
 * (gs_gate_launches), and those entered the gate's and the slots' (gs_gate_entered). */
#define GATE_ENTER_SHIFT 40
#define GATE_ENTER (1ull << GATE_ENTER_SHIFT)
#define GATE_LAUNCHES_MASK (GATE_ENTER - 1)
#define GATE_LAUNCHES(g) ((g)&GATE_LAUNCHES_MASK)
#define GATE_ENTERED(g) ((uint32_t)((g) >> GATE_ENTER_SHIFT))
#define GATE_COUNT_MASK 0xffffffu /* entered and done counts: mod 2^24 */
#define LAUNCHES(b) gs_gate_launches(b)
#define INFLIGHT(b) gs_gate_inflight(b)
/* Launching threads with a slot of their own (more at once share one, with atomic adds). */
#define GATE_SLOTS 256
/* Launches a thread takes from the budget at once where several launch (one shared add each):
 * only while the fast budget has room for one allowance per slot and more (ALLOWANCE_ROOM). */
#define ALLOWANCE 32
#define ALLOWANCE_ROOM(nslots) ((uint64_t)(nslots)*ALLOWANCE * 2)

enum mode { MODE_OFF, MODE_DAEMON, MODE_SELF };

/* One GPU (as this process numbers them) of this process. A launch and a quick synchronize read
 * and write three lines of it (the first two, read-mostly, and the gate's), the first line of
 * struct compute and the thread's slot: after a program's own work between batches has taken them
 * from the CPU's caches, each is a miss (tens of ns), so everything those paths touch is kept in
 * them (docs/benchmarks.md, "Gate cost": 2 MB of the program's own work a batch). */
struct burst {
  /* What every launch and quick synchronize reads, written at an open, a close, a segment's start
   * or a stream's first launch: apart from the counters every launch writes (with several
   * threads launching, the line those writes take from one CPU to the next would otherwise take
   * these with it). The streams end the line: a burst of one stream reads no other. */
  _Atomic uint64_t valid_until; /* launches go ahead before this; 0: no burst open */
  /* The fast path's share of the budget: the launch that reaches it takes the slow path and
   * marks the handoff (HANDOFF_NS) first, which raises it to the budget; = budget when the burst
   * hands off no earlier. */
  _Atomic uint64_t fast_budget;
  _Atomic uint64_t budget; /* launches allowed in this burst: the quantum over the mean kernel */
  _Atomic(CUcontext) ctx;
  _Atomic unsigned nstreams;
  _Atomic uint32_t epoch; /* bumped at each open and close: a stale stamp is not set */
  /* The epoch of the burst's open (epoch then, until the next open): its allowances' mark. */
  _Atomic uint32_t open_epoch;
  uint32_t dev;          /* its index in C.b, set up before C.state */
  _Atomic bool seg_open; /* a segment is open: seg_start marks where it began */
  /* A per-thread stream, or more than BURST_STREAMS: only a context sync sees all of it. Read
   * without mu by the synchronize wrappers, as are ctx and seg_open. */
  _Atomic bool thread_local_stream;
  /* The burst's last synchronize that asked found all its work done (a launch-bound loop): the
   * next one that covers every stream of the burst is taken for the same without asking (no
   * query), and tells by its own length whether it waited after all (compute.c: sync_quick).
   * Kept from burst to burst: it is the program's pattern. */
  _Atomic bool syncs_find_done;
  _Atomic uintptr_t streams[BURST_STREAMS] __attribute__((aligned(8)));
  /* The launches of this burst and those ever entered (GATE_ENTER_SHIFT): one atomic add a
   * launch, the only write a launch makes to a line other threads' launches write too. */
  _Atomic uint64_t gate __attribute__((aligned(64)));
  /* A synchronize that found all of the burst's work done when called ends no segment (no event,
   * no lock): it stamps idle_since (the gate's clock) when called, the next launch (any thread)
   * takes the stamp and adds the gap to gap_ticks, and a close finds a stamp still there for the
   * trailing idle time. Those gaps lie inside the open segments and come off the burst's time. */
  _Atomic uint64_t idle_since; /* gs_gate_ticks; 0: none */
  _Atomic uint64_t gap_ticks;  /* gs_ticks_ns makes them ns */
  /* Quick synchronizes querying the burst's streams without mu: a stream's destroy waits for
   * them once its slot is BURST_STREAM_GONE (a query of a destroyed handle is undefined). */
  _Atomic unsigned querying;
  bool open __attribute__((aligned(64)));
  bool closing; /* a close waits (mu dropped) for the GPU: the burst's events are its */
  uint32_t generation;
  uint64_t opened_at;
  CUevent start, end[BURST_STREAMS], probe[BURST_STREAMS], handoff[BURST_STREAMS];
  /* The handoff: events behind all but the burst's last `handoff_tail_ns` of launches; once they
   * have completed and that tail is down to HANDOFF_NS, the token goes back (released) while the
   * tail runs, and the close sends the charge when it has. */
  bool handoff_set;
  uint64_t handoff_tail_ns; /* the work queued after the handoff events, by the mean kernel */
  uint64_t handoff_at;      /* the launches before the tail (the fast budget at the open) */
  uint64_t release_at;      /* the handoff events completed: release then; 0: not yet */
  uint64_t tail_end;        /* when the tail should have run (the next holder's cue) */
  bool released;            /* the token went back at the handoff; the charge is still due */
  bool handing;             /* a thread waits (mu dropped) to hand the token off */
  bool tail_final;          /* tail_end counts the launches made, not the budget's */
  /* A burst is charged its segments: from a launch to the synchronize that waited for it. The
   * idle time between a synchronize and the next launch is the process's own, not the device's
   * (charged, it puts a slice that synchronizes often above what it ran, and under its request
   * where requests add up to 100%). */
  CUevent seg_start;
  uint64_t seg_used_ns;   /* device time of the burst's closed segments */
  uint64_t seg_span_ns;   /* from the burst's start to its last closed segment's end */
  uint64_t sync_seq;      /* bumped at each mark, burst open and close: a stale mark is ignored */
  uint64_t mark_launches; /* launches when the last mark's end events were recorded */
  bool have_events;
  bool probe_set;
  uint64_t probe_launches;
  uint32_t idle_ticks; /* helper looks in a row that found nothing queued and no launch */
  /* EWMA of device time per launch: the budget and the handoff tail here, and, sent with every
   * release, the daemon's quanta (the one kernel-length estimate). */
  uint64_t kernel_ns;
  /* Daemon side of the token. */
  bool waiting; /* a TOKEN_REQUEST is out */
  bool granted; /* a grant arrived, not yet opened */
  bool denied;  /* the daemon refused this GPU: pace at the limit */
  struct gs_msg_token_grant grant;
  uint64_t granted_at;   /* when the grant arrived */
  int gate_waiters;      /* launching threads waiting for a token */
  uint64_t self_next;    /* self-paced: no burst before this */
  uint64_t requested_at; /* when the TOKEN_REQUEST out went */
  bool self_burst;       /* the open burst is self-paced, not the daemon's token */
};

/* One launching thread's counts of one GPU, written by that thread alone (plain stores, but
 * `entered`'s add: the barrier between its entry and its look at the burst), read by whoever
 * waits for the launches in flight or counts the burst's. */
struct gate_count {
  _Atomic uint32_t done;    /* launches back from the driver, and entries taken back (mod 2^24) */
  _Atomic uint32_t entered; /* launches entered from its allowance (mod 2^24, never taken back) */
  _Atomic uint32_t left;    /* launches of its allowance not yet taken */
  _Atomic uint32_t epoch;   /* the allowance's burst: its open_epoch */
  _Atomic uint32_t full;    /* the allowance lies past the burst's budget: counted, never taken */
};

/* One launching thread's counts, per GPU (GPU 0's in the slot's first line). */
struct gate_slot {
  struct gate_count c[GS_MAX_GPUS];
} __attribute__((aligned(64)));

struct compute {
  /* What every launch and synchronize reads first: one line, written at set-up, a capture's begin
   * and end, and a launching thread's first launch and exit. */
  _Atomic int state __attribute__((aligned(64))); /* 0: not set up, 1: set up */
  _Atomic int mode; /* enum mode: the fast path reads it, the helper changes it */
  /* Stream captures begun through the hook and not ended: while there are any, a launch into a
   * capturing stream passes ungated (it only becomes a graph node), the gate records no event
   * into a stream that captures, and no context synchronize (compute_burst.c). Changed only with
   * mu held during the real begin, so that an event record under mu never races a capture
   * beginning on its stream. */
  _Atomic unsigned captures;
  /* The process sees one GPU (a slice's: CUDA_VISIBLE_DEVICES): every context is on device 0, and
   * the fast path asks the driver for none. Set up before state, never changed. */
  bool one_gpu;
  /* The clock of the idle gaps (gs_gate_ticks): the TSC, and where it stood against
   * CLOCK_MONOTONIC at set-up. Set up before state, never changed. */
  bool tsc;
  /* A second context has been seen on one device (gs_compute_context_seen; never cleared): a
   * launch's NULL, legacy or per-thread stream (gs_stream_of_ctx) is then a stream of whichever
   * context is current, not the burst's by its handle, and its launches look the context up
   * (gate_general). Every other stream handle is one context's. */
  _Atomic bool multi_ctx;
  /* The launching threads' slots (compute.c): claimed at a thread's first launch, given back at
   * its exit (their counts stay: the next owner goes on from them); slots[nslots..] never used.
   * A thread that finds none free counts in `shared` with atomic adds. */
  _Atomic unsigned nslots;
  _Atomic unsigned shared_users; /* threads counting in `shared`, or about to claim a slot */
  _Atomic unsigned ctx_syncing;  /* closes in a context synchronize: a capture begins after them */
  /* The thread pointer (gs_thread_pointer) of slot 0's owner, 0: none. That thread's launches
   * find their slot without reading their TLS: its line and the GOT's entry for its offset are
   * two more misses a batch after the program's own work (its thread pointer's line, which
   * libc and the stack protector read all the time, is not). */
  _Atomic uintptr_t slot0_tp;
  uint64_t tsc0, mono0;
  /* A synchronize longer than this (ticks) waited for work: SYNC_WAIT_NS once the TSC's rate is
   * known (gs_ns_ticks), 0 before. */
  _Atomic uint64_t sync_wait_ticks;
  pthread_mutex_t init_mu __attribute__((aligned(64)));
  uint32_t slice_id;
  uint64_t slice_nonce; /* GSLICE_SLICE_NONCE: the slice's identity beyond its id */
  bool stale;           /* the daemon's slice of this id is another one: never reconnect */
  uint32_t limit_pct;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int fd;      /* the daemon connection, -1 when lost */
  int wake_fd; /* eventfd: wakes the helper */
  bool said_lost;
  uint64_t ping_at;  /* a PING is out since then, 0: none */
  bool unresponsive; /* no PONG within PING_WAIT_NS: self-paced until the daemon answers */
  uint64_t ping_cookie;
  uint64_t next_connect;
  unsigned char in[1024] __attribute__((aligned(8)));
  size_t inlen;
  struct burst b[GS_MAX_GPUS];
  /* The slots that ever took an allowance (the highest's index + 1): what counts a burst's
   * launches looks at these (gs_gate_launches), none in a program with one launching thread. */
  _Atomic unsigned allowance_slots;
  struct gate_slot slots[GATE_SLOTS];
  _Atomic uint8_t slot_owned[GATE_SLOTS];
  struct gate_slot shared;
  /* Each device's first context seen (gs_compute_context_seen): another one sets multi_ctx. */
  _Atomic(CUcontext) first_ctx[GS_MAX_GPUS];
};

/* What the fast path and a quick synchronize read stays in one line of each (see above). */
_Static_assert(offsetof(struct compute, sync_wait_ticks) + sizeof(uint64_t) <= 64,
               "struct compute: the fast path's fields in its first line");
_Static_assert(offsetof(struct burst, streams) + sizeof(uintptr_t) <= 64,
               "struct burst: the fast path's fields and its first stream in its first line");

/* The hook's init-once table for compute (compute_link.c). */
extern struct compute gs_compute_state;
#define C gs_compute_state

/* The calling thread's thread pointer: on x86-64 the TCB's first word (the ABI's TLS variant II:
 * it points to itself) read through %fs, elsewhere the compiler's builtin. Never 0. */
static inline uintptr_t gs_thread_pointer(void) {
#if defined(__x86_64__)
  uintptr_t tp;
  __asm__("mov %%fs:0, %0" : "=r"(tp));
  return tp;
#else
  return (uintptr_t)__builtin_thread_pointer();
#endif
}

/* The clock of the idle gaps after quick synchronizes (two reads a synchronize, compute.c): the
 * TSC where the kernel keeps its own time by it (x86-64; 13 ns a read on the build machine, where
 * clock_gettime takes 32), else CLOCK_MONOTONIC. In ticks: gs_ticks_ns makes a length of them ns
 * (compute_link.c). */
static inline uint64_t gs_gate_ticks(void) {
#if defined(__x86_64__)
  if (C.tsc)
    return __rdtsc();
#endif
  return gs_mono_ns();
}
uint64_t gs_ticks_ns(uint64_t ticks);
/* The other way: ns in the gate's ticks; 0 while the TSC's rate is not known well yet (its first
 * 10 ms). */
uint64_t gs_ns_ticks(uint64_t ns);

/* compute_link.c: the daemon link (mu held, except the last). */
void gs_link_wake(void);
int gs_link_send(uint32_t type, const void *body, size_t len);
/* Sets compute up at the first launch (reads the environment, connects, starts the helper). */
void gs_link_ensure_setup(void);

/* compute.c: the launches of burst b past its gate and not yet back from the driver (0: none);
 * any thread, no lock. */
uint32_t gs_gate_inflight(const struct burst *b);
/* compute.c: the launches of burst b (those of its unused allowances not counted), and those
 * that ever entered its gate (mod 2^24: a change says a launch came); any thread, no lock. */
uint64_t gs_gate_launches(const struct burst *b);
/* compute.c: waits until none of b's launches is in flight (valid_until 0: those entering now
 * take themselves back), and returns its launches as of then: a launch that entered after, and
 * took itself back, is in neither. */
uint64_t gs_gate_quiesce(const struct burst *b);
uint32_t gs_gate_entered(const struct burst *b);
/* compute.c: in a child after fork, the slots are the forking thread's alone, every count 0. */
void gs_gate_slots_forked(void);

/* compute_burst.c: bursts (mu held, except the stream lookup of the fast path). */
int gs_burst_current_dev(CUcontext *ret_ctx);
/* Whether s takes part in a capture (or cannot be used while one goes on: the legacy stream
 * beside a blocking capture), or the driver cannot say: no launch there is gated, no event of
 * the gate recorded there. Any thread, any time. */
bool gs_burst_stream_captured(CUstream s);
/* cuEventRecord, refused (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) into a stream that captures:
 * the record would be a node of the program's graph, and the gate's look at it the call that
 * invalidates the capture. mu held. */
CUresult gs_burst_record(CUevent ev, CUstream s);
/* The calling thread in relaxed capture mode for the gate's own calls (event queries and
 * synchronizes, which a global capture of another thread prohibits to a thread in global mode):
 * returns what to give gs_burst_unrelax, -1 when nothing changed. `always`: even while no
 * capture is counted (for calls made with mu dropped, where one may begin meanwhile). */
int gs_burst_relax(bool always);
void gs_burst_unrelax(int saved);
bool gs_burst_elapsed_ms(float *ret_ms, CUevent from, CUevent to);
/* Whether the handle s names a stream of the calling thread's current context (NULL, the legacy
 * and the per-thread stream: each context has its own), not one stream. */
static inline bool gs_stream_of_ctx(CUstream s) {
  return (uintptr_t)s <= (uintptr_t)CU_STREAM_PER_THREAD;
}
/* Whether s is one of the burst's streams: the fast path's look, inline. */
static inline bool gs_burst_stream_known(struct burst *b, CUstream s) {
  unsigned n = atomic_load(&b->nstreams);
  for (unsigned i = 0; i < n; i++)
    if (atomic_load(&b->streams[i]) == (uintptr_t)s)
      return true;
  return false;
}
void gs_burst_add_stream(struct burst *b, CUstream s);
/* Under mu, before the real cuStreamDestroy of s: takes s out of every open burst
 * (BURST_STREAM_GONE), its work covered by the events recorded on it now. */
void gs_burst_stream_gone(CUstream s);
void gs_burst_open(struct burst *b, CUcontext ctx, CUstream s, uint32_t gen, uint64_t until,
                   uint64_t quantum);
void gs_burst_close(int dev, bool from_helper, bool more);
void gs_burst_check(int dev, uint64_t now);
/* Under mu, from a thread that would wait anyway (a launch past the budget, a synchronize):
 * waits with mu dropped until the burst's tail is down to HANDOFF_NS, hands the token off and
 * closes the burst. Returns with mu held; the burst may have been closed by others meanwhile. */
void gs_burst_handoff(int dev);
/* Under mu, before the launch that reaches the burst's fast budget: marks the handoff. */
void gs_burst_mark_handoff(struct burst *b);
/* When the helper should look at this GPU next (its grant not taken up, or its open burst), at
 * most `wake`. */
uint64_t gs_burst_next_look(const struct burst *b, uint64_t now, uint64_t wake);
