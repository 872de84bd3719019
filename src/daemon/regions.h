/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's side of each slice's memory region (regions.c): its caps written and read back,
 * its usage and processes read. The region is a file the slice's processes may write and
 * truncate: every access runs under the SIGBUS guard (guard.h), a file grown past the region's
 * size is cut back, and a slice that broke its region under the daemon is given up on for its
 * life (slice.region_broken). */
#pragma once
#include <stdint.h>

#include "proto.h"
#include "region.h"

struct daemon;
struct slice;

/* A slice's memory on one GPU as its region says: used, and the cap (the slice's own when the
 * region holds none). */
struct region_usage {
  uint32_t gpu;
  uint64_t used, cap;
};

/* What a snapshot reads from one slice's region, in one open. */
struct region_read {
  struct gs_region_proc_info procs[GS_REGION_MAX_PROCS];
  unsigned nprocs;
  struct region_usage usage[GS_MAX_GPUS];
};

/* Writes the slice's memory cap into its region (creating it). -EBADMSG once the slice broke
 * its region under the daemon. */
int regions_apply_cap(struct daemon *d, struct slice *s);
/* Memory the slice holds on a GPU, from its region (0 if none). */
uint64_t regions_memory_used(struct daemon *d, struct slice *s, uint32_t gpu);
/* The slice's processes and usage on each of its GPUs: 0, or -errno with *ret holding what a
 * slice without a region shows (no processes, nothing used, its own caps). */
int regions_read(struct daemon *d, struct slice *s, struct region_read *ret);
/* Each second: caps still to write or read back. */
void regions_housekeeping(struct daemon *d);
/* The slice's measured share of its GPUs (pct[i] for the daemon's GPU i: 0..100, or -1 for
 * none) over the period of period_ns ending at now, into its region (gs_region_set_util; the
 * region looked at: a file grown past the region's size is cut back). Housekeeping calls it each
 * second with snapshot_recent_share's figures, so this layer needs nothing above it. */
int regions_write_util(struct daemon *d, struct slice *s, const int *pct, uint64_t now,
                       uint64_t period_ns);
