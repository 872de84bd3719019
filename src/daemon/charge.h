/* SPDX-License-Identifier: Apache-2.0 */
/* The charge check (charge.c): every charge_check_ms, on each GPU, the device time NVML's
 * per-process samples give each slice's processes (its hook connections' peers) against what its
 * releases were charged over the same period; what exceeds the tolerance is charged to the slice
 * (sched_check_charge), counted and logged. docs/compute.md, "The charge check". */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "status.h"

struct daemon;

struct charge {
  uint64_t timer;                /* 0: not armed (charge_check_ms = 0) */
  uint64_t at[GS_MAX_GPUS];      /* each GPU's last check (loop clock), 0: the next one primes */
  bool said[GS_MAX_GPUS];        /* that it has no per-process samples, or which call gives them */
  bool said_failed[GS_MAX_GPUS]; /* that a read failed */
  uint64_t calls, cost_ns, cost_max_ns; /* the NVML reads' cost, said once in the log */
};

/* Arms the check when charge_check_ms is set. 0 or -errno. */
int charge_start(struct daemon *d);
/* SIGHUP: charge_check_ms turned on, off or changed. */
void charge_reload(struct daemon *d);
