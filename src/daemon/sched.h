/* SPDX-License-Identifier: Apache-2.0 */
/* The token scheduler of one GPU: pure policy over plain structs and a clock value, no I/O. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "status.h"

#define SCHED_RING_BUCKETS 100
#define SCHED_STATS_WINDOW_NS (10ull * 1000000000)
/* Processes of one slice whose kernel lengths make its time per launch (sched_set_kernel). */
#define SCHED_KERNEL_PROCS 16

/* Device time per bucket over a sliding window: the newest bucket is filled,
 * the oldest falls off as time moves on. */
struct sched_ring {
  uint64_t bucket_ns;
  uint64_t head_start; /* start time of the newest bucket */
  uint32_t nbuckets;
  uint32_t head;
  uint64_t v[SCHED_RING_BUCKETS];
};

struct sched_cfg {
  uint64_t window_ns;      /* requests and fair share are over this window */
  uint64_t quantum_min_ns; /* bounds of the adaptive quantum */
  uint64_t quantum_max_ns;
  uint64_t quantum_init_ns; /* before a slice's kernels have been measured */
  uint32_t quantum_kernels; /* quantum = this many of the slice's kernels (sched_set_kernel) */
  bool lone_quantum;        /* sched_lone_quantum: false, never */
};

struct sched_params {
  uint32_t request_pct; /* 0..100 */
  uint32_t limit_pct;   /* request..100, 1..100 */
  int32_t priority;     /* enum gs_priority */
  uint32_t weight;      /* 1..1000 */
};

/* One slice as this GPU's scheduler sees it. */
struct sched_slice {
  uint32_t id;
  struct sched_params p;
  bool waiting; /* some process of the slice has work for the GPU */
  uint64_t waiting_since;
  uint64_t last_wanted; /* last time it asked for the token */
  uint64_t eligible_at; /* pacing of the limit: no token before this */
  uint64_t late_ns;     /* how long the current token came after the slice could have had it */
  bool backlogged;      /* asked again before its own token ended: never idle since */
  /* Its time per launch, of its processes' reports for kernel_gen, its latest token that
   * reported any (sched_set_kernel); 0: none reported yet. */
  uint64_t kernel_ns;
  uint64_t paid_kernel_ns; /* of its last release that charged: no longer than that charge */
  uint32_t kernel_gen;
  uint32_t token_gen; /* its latest token's generation */
  uint32_t nreports;
  struct {
    uint32_t proc;
    uint64_t kernel_ns;
  } report[SCHED_KERNEL_PROCS];
  uint64_t burst_used_ns; /* charged to the token being held */
  /* The request: device time owed, accrued at request_pct of the clock and
   * paid by the tokens granted on it (token_on_request). Capped near one
   * burst: idle time banks no more than that. */
  double credit_ns;
  uint64_t credit_at;
  bool token_on_request; /* its last token was granted for its request */
  bool token_aged;       /* ... or after waiting a window (ahead of higher classes) */
  /* Its token was lengthened for being alone on the GPU (sched_lone_quantum): when another slice
   * waits, it is taken back from then on (sched_preempt_at), the end of the quantum it would have
   * had. 0: not lengthened. */
  uint64_t token_cut_at;
  /* Fair share of what the requests leave: start-time fair queueing. The
   * slice's virtual time is its device time on fair tokens over its weight;
   * the lowest goes first, and one that comes back (from idle, from its
   * limit) starts no earlier than the virtual time in service, so it banks
   * nothing. Exact over any run, whatever the burst lengths. */
  double vtime;
  /* A revoked token is charged the time it was held until its late release
   * says what really ran (held_gen: that token's generation, 0: none). */
  uint32_t held_gen;
  uint64_t held_ns;
  bool held_on_request;
  bool held_contended;                 /* others waited at that token's end */
  uint64_t held_span_ns;               /* that token's time held in all */
  uint64_t revoke_forgiven_at;         /* a revoked token's idle time last forgiven (once a 10 s) */
  uint64_t idle_free_ns, idle_free_at; /* the fixed allowance left, refilled over time */
  /* The last token released at the handoff: its limit pacing was set by an estimate, and its
   * charges (one per process of the slice) correct it as they come. */
  uint32_t est_gen;
  struct sched_ring stats; /* 10 s, for status */
  uint64_t used_total_ns;
  uint64_t launches_total;
  uint64_t tokens_total;
  uint64_t wait_total_ns;
  uint64_t wait_count;
  uint64_t wait_bucket[GS_WAIT_BUCKETS + 1]; /* not cumulative: one count per bucket */
  /* The charge check (sched_check_charge): its state at the last check, and the device time
   * it charged the slice in all (in used_total_ns too). */
  struct {
    uint64_t used_at;     /* used_total_ns then */
    uint64_t idle_at;     /* idle_charged_total_ns then */
    uint64_t inflight_ns; /* the time its token had been held then, 0: none held */
    double bucket_ns;     /* device time beyond the charges and allowances, not yet charged */
  } check;
  uint64_t unreported_total_ns;
  /* The time it held tokens idle while others waited, past the allowance, charged to it
   * (sched_token_done): not device time, not in used_total_ns. */
  uint64_t idle_charged_total_ns;
  uint64_t held_total_ns; /* the time it held tokens in all */
};

struct sched_grant {
  uint32_t slice_id;
  uint32_t generation;
  uint64_t quantum_ns;
  uint64_t valid_until_ns;
};

#define SCHED_MAX_SLICES 256

struct sched {
  struct sched_cfg cfg;
  struct sched_slice *slices[SCHED_MAX_SLICES];
  uint32_t nslices;
  int holder; /* index into slices, -1: the token is free */
  uint32_t generation;
  uint64_t granted_at;
  uint64_t valid_until;
  /* The quantum the holder's launch budget is made of (the grant's quantum_ns): the token's
   * length, but for one lengthened for being alone (sched_lone_quantum), whose processes still
   * queue no more than a usual quantum's work at a time, so that a slice that takes the token
   * from it at the cut finds no longer a queue on the device than before. */
  uint64_t quantum_ns;
  double vnow;            /* virtual time of the last fair token (start-time fair queueing) */
  struct sched_ring busy; /* device time charged to anyone, 10 s */
  /* Device time lost to token switches while a slice was waiting: a token's
   * time held beyond what it was charged, and the gap from one token to the
   * next. 10 s, as busy; its total since start. */
  struct sched_ring lost;
  uint64_t lost_total_ns;
  uint64_t done_at;    /* when the token was last freed */
  bool done_contended; /* another slice was waiting then */
  double accrual;      /* requests are owed at this fraction of the clock (<= 1) */
};

/* The defaults (config.c's table reads them; docs/compute.md has the reasons). Measured: a token
 * switch costs ~0.1 ms of idle device on the sim under load, so 5 ms keeps switching under 2%;
 * 50 ms bounds what a high-priority burst waits behind a long-kernel slice. */
#define SCHED_DEFAULT_WINDOW_MS 1000
#define SCHED_DEFAULT_QUANTUM_MIN_US 5000
#define SCHED_DEFAULT_QUANTUM_MAX_US 50000
#define SCHED_DEFAULT_QUANTUM_INIT_US 10000
#define SCHED_DEFAULT_QUANTUM_KERNELS 8
/* Returns 0 or -EINVAL when the bounds make no sense. */
int sched_cfg_check(const struct sched_cfg *cfg);

void sched_init(struct sched *s, const struct sched_cfg *cfg, uint64_t now);
void sched_fini(struct sched *s);

/* Returns 0, -EEXIST, -ENOSPC or -ENOMEM. */
int sched_add(struct sched *s, uint32_t id, const struct sched_params *p, uint64_t now);
/* Forgets the slice; if it held the token, the token is free. */
void sched_remove(struct sched *s, uint32_t id);
/* New limits take effect at the next token. Returns 0 or -ENOENT. */
int sched_set_params(struct sched *s, uint32_t id, const struct sched_params *p);
struct sched_slice *sched_find(struct sched *s, uint32_t id);
/* The id of the slice holding the token, 0: free (ids start at 1). */
uint32_t sched_holder(const struct sched *s);

/* Whether the slice has work waiting for the GPU. */
void sched_set_waiting(struct sched *s, uint32_t id, bool waiting, uint64_t now);

/* If the token is free and a waiting slice may have it, grants it: returns 0
 * and fills *ret. -EBUSY: held. -EAGAIN: nobody eligible now (see
 * sched_next_wakeup). */
int sched_pick(struct sched *s, uint64_t now, struct sched_grant *ret);

/* Process `proc` of the slice reports its mean kernel length (its hook's event measurement: device
 * time per launch as that process sees it) with a release of token `generation`; 0: nothing to
 * report. The slice's kernel length, of which its quantum is made and which its release grace
 * covers, is its time per launch over the processes that reported for its latest token: their
 * launch rates add, 1 / sum(1 / k). A process's own figure includes the kernels of the others
 * that ran between its own (two processes of 2 ms kernels each see ~3.9 ms), and its launch
 * budget is the quantum over that figure, so the budgets add up to quantum_kernels launches of
 * the slice, as one process's do. A later report of the same process replaces its earlier one
 * (the handoff's PENDING and CHARGE); a report for an older token is ignored once a newer one
 * has come (unless none had); past SCHED_KERNEL_PROCS processes, the rest are not counted. */
void sched_set_kernel(struct sched *s, uint32_t id, uint32_t generation, uint32_t proc,
                      uint64_t kernel_ns);

/* A release of the slice reported kernel_ns with a charge of used_ns: the kernel length its
 * release grace may count on (sched_slice.paid_kernel_ns) is no longer than what that release paid
 * for. A release that charged nothing leaves none. */
void sched_set_paid_kernel(struct sched *s, uint32_t id, uint64_t kernel_ns, uint64_t used_ns);

/* Charges measured device time (and the launches behind it) to a slice; it
 * may arrive for the current token or late, for an old one. The kernel length is not derived
 * from charges (spans, clipped, or estimates): sched_set_kernel has the hook's. */
void sched_charge(struct sched *s, uint32_t id, uint64_t used_ns, uint64_t launches, uint64_t now);

/* The holder is done with the token (every process closed its burst, or is
 * gone): the token is free and the holder's limit pacing is set. */
void sched_token_done(struct sched *s, uint64_t now);

/* Earliest time a waiting slice (other than the holder) may have the token: its limit's pacing
 * time, or `now` where that has passed (a pick at an earlier clock reading missed it);
 * UINT64_MAX if none is waiting. */
uint64_t sched_next_wakeup(const struct sched *s, uint64_t now);

/* When the holder's token is to be taken back for a waiting slice of a higher class that the
 * policy would pick before it (the holder keeps a token at least sched_preempt_hold), or, where
 * it was lengthened for being alone, for any slice waiting (sched_lone_quantum): now or later;
 * UINT64_MAX: not. The mechanism takes it back as a revoke (the holder
 * stops launching; sched_charge_held, then sched_token_done) and grants the next. */
uint64_t sched_preempt_at(struct sched *s, uint64_t now);
/* The least a token is held before a higher class takes it: quantum_min / 5 (1 ms at the
 * defaults). */
uint64_t sched_preempt_hold(const struct sched *s);

/* The quantum of a slice alone on its GPU: no other has waited for it or held it within the
 * window, and no higher class wants it. A token is the unit of the limit's pacing and of the
 * switching between slices, and with nobody to switch to each one costs its holder a release, a
 * pick and a grant for nothing (a launching thread ~45 us on a loaded host: 1% of a 5 ms quantum).
 * So alone, a slice holds quantum_max (a hard-limited one quantum_max x limit: paced in runs no
 * longer than that), and a slice that comes to want the GPU takes it back at the end of the quantum
 * the holder would have had otherwise: it waits no longer than before. 0: not alone, or no longer
 * than now. */
uint64_t sched_lone_quantum(const struct sched *s, const struct sched_slice *sl, uint64_t now);
/* The quantum the slice would get now. */
uint64_t sched_quantum(const struct sched *s, const struct sched_slice *sl);

/* Fraction of the device's time lost to token switches over the last 10 s,
 * of the time it was busy or switching. */
double sched_lost_ratio(struct sched *s, uint64_t now);

/* The slice's request credit at now, ns: > 0 while it is below its request. */
double sched_credit(const struct sched *s, struct sched_slice *sl, uint64_t now);

/* The holder's token is taken back (it did not release in time): until its
 * late release says what ran, it is charged the time it held the token, so
 * a hook that never releases gets nothing for free. Call before
 * sched_token_done. */
void sched_charge_held(struct sched *s, uint64_t held_ns, uint64_t now);

/* The holder released its token at the handoff, before its burst's work had run: until the
 * charge comes (sched_charge_late, the same generation), it is charged `est_ns` (the time it held
 * the token), and paced by it; the charge then replaces both. Call before sched_token_done. */
void sched_charge_estimate(struct sched *s, uint64_t est_ns, uint64_t now);

/* A release for a token that is no longer current: a revoked one's (its
 * held-time charge is replaced by what it reports) or a late one's. */
void sched_charge_late(struct sched *s, uint32_t id, uint32_t generation, uint64_t used_ns,
                       uint64_t launches, uint64_t now);

/* Device time over the window ending at now, in ns. */
uint64_t sched_ring_sum(struct sched_ring *r, uint64_t now);
void sched_ring_init(struct sched_ring *r, uint64_t span_ns, uint32_t nbuckets, uint64_t now);
void sched_ring_add(struct sched_ring *r, uint64_t v, uint64_t now);

/* The charge check's tolerance (docs/compute.md, "The charge check"): per period, NVML's device
 * time may exceed the charges by SCHED_CHECK_ALLOW_PERIOD_PCT of the period plus
 * SCHED_CHECK_ALLOW_CHARGE_PCT of the charge; what exceeds that gathers in a bucket of
 * SCHED_CHECK_BURST_QUANTA longest quanta, and once it overflows, all of it is charged. */
#define SCHED_CHECK_ALLOW_PERIOD_PCT 5
/* A token's time held beyond its charge while another slice waits is charged to its holder past
 * this much a token and this part of the time held (sched_token_done). */
#define SCHED_IDLE_FREE_NS 2000000ull
#define SCHED_IDLE_FREE_PCT 4
/* The fixed part refills at SCHED_IDLE_FREE_NS per this much of the clock, a slice. */
#define SCHED_IDLE_FREE_REFILL_NS 50000000ull
/* A revoked token's idle time is forgiven once per this long, a slice (a process the host kept
 * from a CPU); revoked again within it, it stays charged. */
#define SCHED_REVOKE_FORGIVE_NS 10000000000ull
#define SCHED_CHECK_ALLOW_CHARGE_PCT 10
#define SCHED_CHECK_BURST_QUANTA 2

struct sched_check_figures {
  uint64_t device_ns;    /* NVML's, the period's length at most */
  uint64_t charged_ns;   /* the releases' charges over the period, its token in flight counted */
  uint64_t allowance_ns; /* the tolerance of this period */
  uint64_t excess_ns;    /* charged now (0: within the tolerance) */
};

/* One period of the charge check for slice `id`: `device_ns` is the device time NVML attributed
 * to its processes over the last `period_ns` (ending now). Beside what it was charged over the
 * same period (used_total_ns since the last check, with the time its token in flight has been
 * held counted as charged until its release says), NVML's figure beyond the tolerance is charged
 * to the slice as its releases' charges are (its request credit or virtual time, its limit's
 * pacing, its device time in the stats): a process that reports less than it runs pays what it
 * ran. The figures go to *ret (not NULL). Returns the excess charged, 0 when none. */
uint64_t sched_check_charge(struct sched *s, uint32_t id, uint64_t device_ns, uint64_t period_ns,
                            uint64_t now, struct sched_check_figures *ret);
/* Starts the check afresh for every slice of s (at its first period, or after it was off): what
 * came before is not compared. */
void sched_check_reset(struct sched *s, uint64_t now);
