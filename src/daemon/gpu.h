/* SPDX-License-Identifier: Apache-2.0 */
/* The node's GPUs (gpu.c): each one's name, UUID and memory as NVML reports them (NVML loaded
 * with dlopen: without a driver, cfg.gpus unnamed GPUs), its scheduler (sched.h) built from the
 * config, and its token (token_state.h). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"
#include "sched.h"
#include "status.h"
#include "token_state.h"

struct daemon;

struct gpu {
  struct daemon *d;
  uint32_t index;
  char name[GS_NAME_MAX];
  char uuid[GS_UUID_MAX];
  uint8_t uuid_bin[16];
  bool has_uuid;
  uint64_t memory_total;
  uint64_t memory_used;
  struct sched s;   /* the policy's view of the token: holder, generation, validity */
  struct token tok; /* the mechanism's (token.h) */
};

/* GPUs as NVML reports them (or cfg.gpus unnamed ones without it), each with its scheduler. */
int gpus_discover(struct daemon *d);
/* Applies the config's scheduler settings to every GPU (SIGHUP). */
void gpus_apply_sched_cfg(struct daemon *d);
void gpus_refresh_memory(struct daemon *d);
void gpus_close(struct daemon *d);
/* What the device itself (NVML) says of GPU `gpu` beside the slices' accounting: its busy
 * ratio, and the processes on it `accounted` does not claim (pid: a slice's hooked process),
 * into gs's device_busy_ratio and unaccounted_* fields (their slice_id left 0: the caller's),
 * device_known saying which NVML gave. */
void gpus_device_view(struct daemon *d, uint32_t gpu, bool (*accounted)(void *arg, pid_t pid),
                      void *arg, struct gs_gpu_status *gs);
