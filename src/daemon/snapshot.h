/* SPDX-License-Identifier: Apache-2.0 */
/* The node snapshot (snapshot.c) that STATUS replies with and /metrics publishes: every GPU's and
 * slice's figures from the schedulers, the registry, the slices' regions and NVML. */
#pragma once
#include <stdint.h>

#include "status.h"

struct daemon;
struct slice;

/* 0 and a snapshot to free with gs_status_free, or -ENOMEM. */
int snapshot_take(struct daemon *d, struct gs_status *ret);
/* The slice's share of GPU `gpu` over about the last second, in percent (0..100, rounded): the
 * device time charged to it (what `gslice status` shows as its share, over the ring's last
 * buckets: 0.9 to 1 s, ending now), with the period's length in *ret_period_ns. -ENOENT when the
 * slice is not on that GPU's scheduler. */
int snapshot_recent_share(struct daemon *d, const struct slice *s, uint32_t gpu, uint64_t now,
                          unsigned *ret_pct, uint64_t *ret_period_ns);
