/* SPDX-License-Identifier: Apache-2.0 */
/* The charge check (charge.c): every charge_check_ms, on each GPU, the device time NVML's
 * per-process samples give each slice's processes (its hook connections' peers) against what its
 * releases were charged over the same period; what exceeds the tolerance is charged to the slice
 * (sched_check_charge), counted and logged. docs/compute.md, "The charge check". */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "status.h"

struct daemon;

/* A GPU process the check tied to a slice (or to none), by pid and start time (a reused pid is
 * someone else), remembered after it is gone: NVML's samples of a process outlive it, and a slice
 * whose work ran in processes of 50 ms, each gone by the check, was charged none of it (the
 * fifth attack run). */
struct charge_pid {
  pid_t pid;         /* 0: a free entry */
  uint32_t slice_id; /* 0: of no slice (not walked again until the next check) */
  uint64_t start;    /* its start time (gs_proc_identity) */
  uint64_t seen_ns;  /* last seen alive (loop clock) */
};

/* Processes remembered at once: 1024 new GPU processes within the samples' horizon (a few seconds)
 * evict the oldest. */
#define CHARGE_PIDS 1024

struct charge {
  uint64_t timer;                /* 0: not armed (charge_check_ms = 0) */
  uint64_t poll_timer;           /* the running-process poll's */
  uint64_t polled_at;            /* the last poll (loop clock) */
  uint64_t at[GS_MAX_GPUS];      /* each GPU's last check (loop clock), 0: the next one primes */
  bool said[GS_MAX_GPUS];        /* that it has no per-process samples, or which call gives them */
  bool said_failed[GS_MAX_GPUS]; /* that a read failed */
  bool said_evicted;             /* that a process was forgotten before its samples' horizon */
  uint64_t calls, cost_ns, cost_max_ns; /* the NVML reads' cost, said once in the log */
  uint64_t polls, poll_ns, poll_max_ns; /* the running-process poll's, said once too */
  struct charge_pid pids[CHARGE_PIDS];
};

/* Arms the check when charge_check_ms is set. 0 or -errno. */
int charge_start(struct daemon *d);
/* SIGHUP: charge_check_ms turned on, off or changed. */
void charge_reload(struct daemon *d);
