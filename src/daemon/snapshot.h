/* SPDX-License-Identifier: Apache-2.0 */
/* The node snapshot (snapshot.c) that STATUS replies with and /metrics publishes: every GPU's and
 * slice's figures from the schedulers, the registry, the slices' regions and NVML. */
#pragma once
#include "status.h"

struct daemon;

/* 0 and a snapshot to free with gs_status_free, or -ENOMEM. */
int snapshot_take(struct daemon *d, struct gs_status *ret);
