/* SPDX-License-Identifier: Apache-2.0 */
/* The node's GPUs as NVML reports them (loaded with dlopen: a node without a driver still runs the
 * daemon). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "gpu.h"
#include "log.h"
#include "nvml_min.h"
#include "region.h"

struct nvml {
  void *lib;
  __typeof__(nvmlInit_v2) *init;
  __typeof__(nvmlShutdown) *shutdown;
  __typeof__(nvmlDeviceGetCount_v2) *count;
  __typeof__(nvmlDeviceGetHandleByIndex_v2) *handle;
  __typeof__(nvmlDeviceGetName) *name;
  __typeof__(nvmlDeviceGetUUID) *uuid;
  __typeof__(nvmlDeviceGetMemoryInfo) *memory;
  /* What the device itself says, to see what escapes the hook (optional: NULL when missing). */
  __typeof__(nvmlDeviceGetUtilizationRates) *utilization;
  __typeof__(nvmlDeviceGetComputeRunningProcesses_v3) *procs;
  __typeof__(nvmlDeviceGetProcessUtilization) *proc_util;
  __typeof__(nvmlDeviceGetMigMode) *mig_mode; /* NULL before MIG (R450) */
};

static struct nvml *nvml_open(void) {
  struct nvml *n = calloc(1, sizeof(*n));

  if (!n)
    return NULL;
  n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n->lib)
    goto fail;
  n->init = (__typeof__(n->init))dlsym(n->lib, "nvmlInit_v2");
  n->shutdown = (__typeof__(n->shutdown))dlsym(n->lib, "nvmlShutdown");
  n->count = (__typeof__(n->count))dlsym(n->lib, "nvmlDeviceGetCount_v2");
  n->handle = (__typeof__(n->handle))dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
  n->name = (__typeof__(n->name))dlsym(n->lib, "nvmlDeviceGetName");
  n->uuid = (__typeof__(n->uuid))dlsym(n->lib, "nvmlDeviceGetUUID");
  n->memory = (__typeof__(n->memory))dlsym(n->lib, "nvmlDeviceGetMemoryInfo");
  n->utilization = (__typeof__(n->utilization))dlsym(n->lib, "nvmlDeviceGetUtilizationRates");
  n->procs = (__typeof__(n->procs))dlsym(n->lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!n->procs) /* the same layout (nvmlProcessInfo_t) */
    n->procs = (__typeof__(n->procs))dlsym(n->lib, "nvmlDeviceGetComputeRunningProcesses_v2");
  n->proc_util = (__typeof__(n->proc_util))dlsym(n->lib, "nvmlDeviceGetProcessUtilization");
  n->mig_mode = (__typeof__(n->mig_mode))dlsym(n->lib, "nvmlDeviceGetMigMode");
  if (!n->init || !n->shutdown || !n->count || !n->handle || !n->name || !n->uuid || !n->memory ||
      n->init() != NVML_SUCCESS)
    goto fail;
  return n;
fail:
  if (n->lib)
    dlclose(n->lib);
  free(n);
  return NULL;
}

static struct sched_cfg sched_cfg_of(const struct config *c) {
  return (struct sched_cfg){.window_ns = c->window_ms * 1000000ull,
                            .quantum_min_ns = c->quantum_min_us * 1000ull,
                            .quantum_max_ns = c->quantum_max_us * 1000ull,
                            .quantum_init_ns = c->quantum_init_us * 1000ull,
                            .quantum_kernels = (uint32_t)c->quantum_kernels,
                            .lone_quantum = c->lone_quantum};
}

void gpus_apply_sched_cfg(struct daemon *d) {
  struct sched_cfg sc = sched_cfg_of(&d->cfg);

  for (uint32_t i = 0; i < d->ngpus; i++)
    d->gpus[i].s.cfg = sc;
}

/* A GPU in MIG mode is not gslice's to share: its SMs and memory are split among its MIG
 * instances, each its own device (often another tenant's, through the NVIDIA device plugin), and
 * a slice is a share of the whole GPU (docs/nvml.md, "MIG"). 0, or -ENOTSUP with the reason
 * logged: gsliced does not start. A mode pending (on at the GPU's next reset) is warned of. */
static int mig_check(const struct daemon *d, const struct gpu *g, nvmlDevice_t h) {
  unsigned cur = NVML_DEVICE_MIG_DISABLE, pending = NVML_DEVICE_MIG_DISABLE;
  if (!d->nvml->mig_mode || d->nvml->mig_mode(h, &cur, &pending) != NVML_SUCCESS)
    return 0; /* NOT_SUPPORTED: a GPU without MIG */
  if (cur == NVML_DEVICE_MIG_ENABLE) {
    char fewer[96] = "";
    if (g->index)
      snprintf(fewer, sizeof(fewer),
               ", or schedule only the GPUs before it (gpus=%u in the config)", g->index);
    gs_log(GS_LOG_ERROR,
           "GPU %u (%s %s) has MIG mode on: gslice shares whole GPUs, and this one's SMs and "
           "memory belong to its MIG instances; refusing to schedule it. Turn MIG off "
           "(nvidia-smi -i %u -mig 0, then reset the GPU)%s",
           g->index, g->name, g->uuid, g->index, fewer);
    return -ENOTSUP;
  }
  if (pending == NVML_DEVICE_MIG_ENABLE)
    gs_log(GS_LOG_WARNING,
           "GPU %u (%s %s) has MIG mode pending: at its next reset it turns MIG on, and gsliced "
           "will then refuse to start over it",
           g->index, g->name, g->uuid);
  return 0;
}

int gpus_discover(struct daemon *d) {
  int refused = 0;
  unsigned count = 0;

  d->nvml = nvml_open();
  if (d->nvml && d->nvml->count(&count) != NVML_SUCCESS)
    count = 0;
  if (!d->nvml)
    gs_log(GS_LOG_WARNING,
           "NVML (libnvidia-ml.so.1) not available: scheduling %u unnamed GPU(s); "
           "memory caps come from the slices' environment only",
           d->cfg.gpus ? (unsigned)d->cfg.gpus : 1u);
  if (d->cfg.gpus && (!d->nvml || d->cfg.gpus < count))
    count = (unsigned)d->cfg.gpus;
  if (!d->nvml && !count)
    count = 1;
  if (count > GS_MAX_GPUS)
    count = GS_MAX_GPUS;
  d->ngpus = count;
  for (unsigned i = 0; i < count; i++) {
    struct gpu *g = &d->gpus[i];
    struct sched_cfg sc = sched_cfg_of(&d->cfg);
    nvmlDevice_t h;
    g->d = d;
    g->index = i;
    sched_init(&g->s, &sc, loop_now());
    snprintf(g->name, sizeof(g->name), "GPU %u", i);
    if (d->nvml && d->nvml->handle(i, &h) == NVML_SUCCESS) {
      char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
      d->nvml->name(h, g->name, sizeof(g->name));
      if (d->nvml->uuid(h, uuid, sizeof(uuid)) == NVML_SUCCESS) {
        snprintf(g->uuid, sizeof(g->uuid), "%.47s", uuid);
        g->has_uuid = gs_uuid_parse(uuid, g->uuid_bin) == 0;
      }
      if (mig_check(d, g, h) < 0)
        refused = -ENOTSUP;
    }
  }
  gpus_refresh_memory(d);
  return refused;
}

void gpus_refresh_memory(struct daemon *d) {
  for (uint32_t i = 0; d->nvml && i < d->ngpus; i++) {
    nvmlDevice_t h;
    nvmlMemory_t m;
    if (d->nvml->handle(i, &h) == NVML_SUCCESS && d->nvml->memory(h, &m) == NVML_SUCCESS) {
      d->gpus[i].memory_total = m.total;
      d->gpus[i].memory_used = m.used;
    }
  }
}

/* The process's device share over the last second: the mean of its NVML samples; -1 unknown. */
static double proc_busy(const nvmlProcessUtilizationSample_t *samples, unsigned n, unsigned pid) {
  double sum = 0;
  unsigned k = 0;

  for (unsigned i = 0; i < n; i++)
    if (samples[i].pid == pid) {
      sum += samples[i].smUtil;
      k++;
    }
  return k ? sum / k / 100.0 : 0.0;
}

void gpus_device_view(struct daemon *d, uint32_t gpu, bool (*accounted)(void *arg, pid_t pid),
                      void *arg, struct gs_gpu_status *gs) {
  nvmlDevice_t h;
  nvmlUtilization_t u;
  nvmlProcessInfo_t procs[256];
  nvmlProcessUtilizationSample_t *samples = NULL;
  unsigned n = sizeof(procs) / sizeof(procs[0]), nsamples = 0;

  if (!d->nvml || d->nvml->handle(gpu, &h) != NVML_SUCCESS)
    return;
  if (d->nvml->utilization && d->nvml->utilization(h, &u) == NVML_SUCCESS) {
    gs->device_busy_ratio = u.gpu > 100 ? 1.0 : u.gpu / 100.0;
    gs->device_known |= GS_DEVICE_BUSY;
  }
  if (!d->nvml->procs)
    return;
  nvmlReturn_t rc = d->nvml->procs(h, &n, procs);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
    return;
  gs->device_known |= GS_DEVICE_PROCS;
  if (n > sizeof(procs) / sizeof(procs[0]))
    n = sizeof(procs) / sizeof(procs[0]);
  /* Samples of the last second (the two-call protocol: size, then fill). */
  if (d->nvml->proc_util &&
      d->nvml->proc_util(h, NULL, &nsamples, 0) == NVML_ERROR_INSUFFICIENT_SIZE && nsamples &&
      nsamples < 65536 && (samples = calloc(nsamples, sizeof(*samples)))) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long since = (unsigned long long)ts.tv_sec * 1000000ull +
                               (unsigned long long)ts.tv_nsec / 1000 - 1000000ull;
    rc = d->nvml->proc_util(h, samples, &nsamples, since);
    if (rc == NVML_ERROR_NOT_FOUND)
      nsamples = 0;
    else if (rc != NVML_SUCCESS) {
      free(samples);
      samples = NULL;
    }
  }
  if (samples)
    gs->device_known |= GS_DEVICE_PROC_BUSY;
  for (unsigned i = 0; i < n; i++) {
    pid_t pid = (pid_t)procs[i].pid;
    uint64_t mem = procs[i].usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE
                       ? 0
                       : procs[i].usedGpuMemory;
    double busy = samples ? proc_busy(samples, nsamples, procs[i].pid) : 0;
    if (accounted(arg, pid))
      continue;
    if (gs->unaccounted_count < GS_UNACCOUNTED_MAX)
      gs->unaccounted[gs->unaccounted_count] =
          (struct gs_unaccounted_proc){.pid = pid, .memory_bytes = mem, .busy_ratio = busy};
    gs->unaccounted_count++;
    gs->unaccounted_memory_bytes += mem;
    gs->unaccounted_busy_ratio += busy;
  }
  if (gs->unaccounted_busy_ratio > 1)
    gs->unaccounted_busy_ratio = 1;
  free(samples);
}

void gpus_close(struct daemon *d) {
  for (uint32_t i = 0; i < d->ngpus; i++)
    sched_fini(&d->gpus[i].s);
  if (d->nvml) {
    d->nvml->shutdown();
    dlclose(d->nvml->lib);
    free(d->nvml);
    d->nvml = NULL;
  }
}
