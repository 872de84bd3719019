/* SPDX-License-Identifier: Apache-2.0 */
/* A hand-built node snapshot shared by the renderer and metrics unit tests. */
#pragma once
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* Two GPUs; "train" (capped, forced, on GPU 0), "infer \"q\"" (no cap, on GPU 0 and 1),
 * and "idle" (registered, no GPU yet). */
static inline void ui_snapshot(struct gs_status *st) {
  memset(st, 0, sizeof(*st));
  st->time_ns = 1764496800ULL * 1000000000ULL + 500000000ULL; /* 2025-11-30 10:00:00.5 UTC */
  st->ngpus = 2;
  for (uint32_t i = 0; i < 2; i++) {
    struct gs_gpu_status *g = &st->gpus[i];
    g->index = i;
    snprintf(g->name, sizeof(g->name), "Simulated GPU %u", i);
    snprintf(g->uuid, sizeof(g->uuid), "GPU-0000000%u-sim", i);
    g->memory_total_bytes = 16ULL << 30;
    g->window_seconds = 10;
  }
  st->gpus[0].memory_used_bytes = 3ULL << 29; /* 1.5GiB */
  st->gpus[0].busy_ratio = 0.975;
  st->gpus[0].compute_requested = 70;
  st->gpus[1].memory_used_bytes = 256ULL << 20;
  st->gpus[1].busy_ratio = 0.25;
  st->gpus[1].compute_requested = 40;

  st->nslices = 3;
  st->slices = calloc(3, sizeof(*st->slices));
  struct gs_slice_status *a = &st->slices[0], *b = &st->slices[1], *c = &st->slices[2];
  a->id = 1;
  snprintf(a->name, sizeof(a->name), "train");
  a->compute_request = 30;
  a->compute_limit = 60;
  a->priority = GS_PRIORITY_HIGH;
  a->weight = 2;
  a->memory_force = 1;
  a->nprocs = 2;
  a->pids[0] = 4242;
  a->pids[1] = 4243;
  a->ngpus = 1;
  a->gpus[0].gpu = 0;
  a->gpus[0].memory_used_bytes = 1ULL << 30;
  a->gpus[0].memory_cap_bytes = 512ULL << 20;
  a->gpus[0].share_ratio = 0.3125;
  a->gpus[0].busy_seconds_total = 12.5;
  a->gpus[0].launches_total = 1000;
  a->gpus[0].tokens_total = 50;
  a->gpus[0].wait_seconds_total = 0.42;
  a->gpus[0].wait_count = 50;
  for (int k = 0; k <= GS_WAIT_BUCKETS; k++)
    a->gpus[0].wait_bucket[k] = k < 3 ? 10u * (unsigned)k : 50u;

  b->id = 2;
  snprintf(b->name, sizeof(b->name), "infer \"q\"\n");
  b->compute_request = 40;
  b->compute_limit = 100;
  b->priority = GS_PRIORITY_LOW;
  b->weight = 1;
  b->nprocs = 1;
  b->pids[0] = 5000;
  b->ngpus = 2;
  b->gpus[0].gpu = 0;
  b->gpus[0].memory_used_bytes = 256ULL << 20;
  b->gpus[0].share_ratio = 0.6;
  b->gpus[0].busy_seconds_total = 30;
  b->gpus[0].launches_total = 7;
  b->gpus[1].gpu = 1;
  b->gpus[1].memory_used_bytes = 256ULL << 20;
  b->gpus[1].share_ratio = 0.25;

  c->id = 3;
  snprintf(c->name, sizeof(c->name), "idle");
  c->compute_request = 0;
  c->compute_limit = 100;
  c->priority = GS_PRIORITY_NORMAL;
  c->weight = 1;
}
