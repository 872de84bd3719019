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

/* Where a GPU's per-process device time comes from (gpus_proc_times): found at the first call. */
enum gpu_samples_source {
  GPU_SAMPLES_UNKNOWN,
  GPU_SAMPLES_PROCESS_UTILIZATION,   /* nvmlDeviceGetProcessUtilization */
  GPU_SAMPLES_PROCESSES_UTILIZATION, /* nvmlDeviceGetProcessesUtilizationInfo (Blackwell's only) */
  GPU_SAMPLES_NONE,                  /* neither has samples here: NOT_SUPPORTED, or no NVML */
};

/* NVML's per-process samples of one GPU as gpus_proc_times reads them. */
struct gpu_samples {
  enum gpu_samples_source source;
  unsigned cap;          /* entries NVML asked room for */
  uint64_t last_seen_us; /* the newest sample's timestamp read (NVML's lastSeenTimeStamp) */
  uint64_t gap_us; /* NVML's sample period, as the gaps between two samples of a process show */
  /* The last read's answer was full (as many samples as there was room for: some left out) and
   * no call gives them all: the charge check then charges what the device's busy time leaves
   * unexplained. */
  bool truncated;
  bool said_truncated; /* that a full answer was read again with the newer call, or could not */
};

/* One process's device time over a period, from NVML's samples. */
struct gpu_proc_time {
  pid_t pid; /* NVML's: the daemon's pid namespace where the daemon runs in the host's */
  uint64_t ns;
};

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
  struct gpu_samples samples;
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
/* The device time of each process NVML has samples of on GPU `gpu` since the last call (the first
 * covers the last `period_us`), into out (at most max; the count in *ret_n): each sample's percent
 * of the time since the one before it (the process's previous sample, or the previous call's
 * newest), no longer than NVML's sample period where it has been seen. 0; -ENOTSUP where NVML has
 * no per-process samples (neither call), -ENODEV without NVML, -EIO when the call failed. */
int gpus_proc_times(struct daemon *d, uint32_t gpu, uint64_t period_us, struct gpu_proc_time *out,
                    unsigned max, unsigned *ret_n);
/* The pids of GPU `gpu`'s compute processes (NVML's running-process list), into out (at most
 * max; the count in *ret_n). 0, -ENODEV without NVML or the call, -EIO when it failed. */
int gpus_running_pids(struct daemon *d, uint32_t gpu, pid_t *out, unsigned max, unsigned *ret_n);
/* The device's busy ratio over NVML's last sample period (nvmlDeviceGetUtilizationRates): 0, or
 * -ENODEV / -EIO. */
int gpus_busy_ratio(struct daemon *d, uint32_t gpu, double *ret);
/* The NVML call a GPU's samples come from, for the log. */
const char *gpus_samples_name(enum gpu_samples_source src);
