/* SPDX-License-Identifier: Apache-2.0 */
/* The node snapshot: what the daemon knows of every GPU and slice, as the CLI
 * (status, top), the metrics endpoint and the demo read it. One definition, so the
 * daemon fills it and every reader agrees on units: bytes, ratios 0..1, seconds.
 * GPUs here are by index (NVML's, physical), never by a process's CUDA ordinal: proto.h,
 * "GPU numbering", says both and where the daemon converts. */
#pragma once
#include <stdint.h>

#define GS_MAX_GPUS 16
#define GS_NAME_MAX 64
#define GS_UUID_MAX 48
#define GS_SLICE_MAX_PIDS 32
/* Token wait histogram: upper bounds in seconds (Prometheus "le"); one more bucket is +Inf. */
#define GS_WAIT_BUCKETS 10
#define GS_WAIT_BUCKET_BOUNDS                                                                      \
  { 0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5 }
/* Processes outside every slice's accounting listed per GPU (all are counted). */
#define GS_UNACCOUNTED_MAX 8

enum gs_priority { GS_PRIORITY_LOW = -1, GS_PRIORITY_NORMAL = 0, GS_PRIORITY_HIGH = 1 };

/* A process the device (NVML) shows on a GPU that no slice's hook accounts for: it runs without
 * the hook (LD_PRELOAD unset, or never set), so its memory and device time are nobody's. */
struct gs_unaccounted_proc {
  int32_t pid;
  uint32_t slice_id;     /* the slice whose runner it descends from; 0: none */
  uint64_t memory_bytes; /* as NVML reports it */
  double busy_ratio;     /* its share of the device over the last second (NVML) */
};

/* What the device (NVML) could tell, in gs_gpu_status.device_known: a zeroed status (no NVML,
 * a hand-built snapshot) says "unknown", never "idle" or "no such process". */
enum gs_device_known {
  GS_DEVICE_BUSY = 1u << 0,      /* device_busy_ratio */
  GS_DEVICE_PROCS = 1u << 1,     /* the unaccounted_* counts and list */
  GS_DEVICE_PROC_BUSY = 1u << 2, /* unaccounted_busy_ratio and each process's busy_ratio */
};

struct gs_gpu_status {
  uint32_t index; /* the GPU's index */
  char name[GS_NAME_MAX];
  char uuid[GS_UUID_MAX];
  uint32_t device_known;      /* enum gs_device_known bits */
  uint64_t memory_used_bytes; /* whole device, all processes */
  uint64_t memory_total_bytes;
  double busy_ratio;          /* fraction of the last window the slices' tokens ran kernels */
  double window_seconds;      /* the window busy_ratio and shares are over */
  uint32_t compute_requested; /* sum of slice requests on this GPU, percent */
  uint32_t unaccounted_count; /* processes on the GPU outside every slice's accounting */
  double device_busy_ratio;   /* the device's own utilization (NVML, last second) */
  uint64_t unaccounted_memory_bytes;                          /* their memory in all */
  double unaccounted_busy_ratio;                              /* their share of the device in all */
  struct gs_unaccounted_proc unaccounted[GS_UNACCOUNTED_MAX]; /* the first of them */
  /* Device time lost to token switches while a slice waited (a token held beyond its charge,
   * the gap to the next grant): fraction of the window busy_ratio is over, and in all. */
  double switch_lost_ratio;
  double switch_lost_seconds_total;
};

/* One slice on one of its GPUs. */
struct gs_slice_gpu_status {
  uint32_t gpu;             /* the GPU's index, as gs_gpu_status.index */
  uint32_t compute_request; /* percent of this GPU the slice requests (per GPU: proto.h) */
  uint64_t memory_used_bytes;
  uint64_t memory_cap_bytes;                 /* 0: no cap */
  double share_ratio;                        /* achieved share of device time, last window */
  double busy_seconds_total;                 /* device time charged to the slice since it started */
  uint64_t launches_total;                   /* launches that went through the gate */
  uint64_t tokens_total;                     /* tokens granted */
  double wait_seconds_total;                 /* time spent waiting for a token */
  uint64_t wait_count;                       /* waits observed (histogram _count) */
  uint64_t wait_bucket[GS_WAIT_BUCKETS + 1]; /* cumulative counts, last is +Inf */
};

struct gs_slice_status {
  uint32_t id;
  char name[GS_NAME_MAX];
  uint32_t compute_request; /* percent of one GPU */
  uint32_t compute_limit;   /* percent of one GPU */
  int32_t priority;         /* enum gs_priority */
  uint32_t weight;
  uint32_t memory_force; /* cap lowered below usage with --force: allocations stopped */
  uint32_t nprocs;
  int32_t pids[GS_SLICE_MAX_PIDS];
  uint32_t ngpus;
  struct gs_slice_gpu_status gpus[GS_MAX_GPUS];
};

struct gs_status {
  uint64_t time_ns; /* CLOCK_REALTIME of the snapshot */
  uint32_t ngpus;
  struct gs_gpu_status gpus[GS_MAX_GPUS];
  uint32_t nslices;
  struct gs_slice_status *slices; /* nslices entries, owned by the snapshot */
};

void gs_status_free(struct gs_status *st);
