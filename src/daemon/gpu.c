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
  __typeof__(nvmlDeviceGetProcessesUtilizationInfo) *proc_util_info; /* NVML 12.4+ */
  __typeof__(nvmlDeviceGetMigMode) *mig_mode;                        /* NULL before MIG (R450) */
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
  n->proc_util_info =
      (__typeof__(n->proc_util_info))dlsym(n->lib, "nvmlDeviceGetProcessesUtilizationInfo");
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

/* One sample as both calls give it. */
struct psample {
  unsigned pid, sm;
  uint64_t ts;
};

/* NVML's most samples on a GPU: an H200 asks room for 72; more is not a sample buffer. */
#define SAMPLES_MAX 65536u

/* nvmlDeviceGetProcessUtilization: the two-call protocol (the size, then the samples newer than
 * `since`), its room kept from one call to the next. The count of samples into *ret_n. */
static nvmlReturn_t read_utilization(struct daemon *d, struct gpu *g, nvmlDevice_t h,
                                     uint64_t since, struct psample **ret, unsigned *ret_n) {
  nvmlProcessUtilizationSample_t *buf = NULL;
  nvmlReturn_t rc = NVML_ERROR_INSUFFICIENT_SIZE;
  unsigned n = 0;

  for (int tries = 0; tries < 3 && rc == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
    if (!g->samples.cap) {
      rc = d->nvml->proc_util(h, NULL, &n, 0);
      if (rc != NVML_ERROR_INSUFFICIENT_SIZE && rc != NVML_SUCCESS)
        return rc;
      g->samples.cap = n ? n : 1;
    }
    if (g->samples.cap > SAMPLES_MAX)
      return NVML_ERROR_UNKNOWN;
    free(buf);
    if (!(buf = calloc(g->samples.cap, sizeof(*buf))))
      return NVML_ERROR_MEMORY;
    n = g->samples.cap;
    rc = d->nvml->proc_util(h, buf, &n, since);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
      g->samples.cap = n > g->samples.cap ? n : 0;
  }
  *ret_n = 0;
  if (rc == NVML_SUCCESS && (*ret = calloc(n ? n : 1, sizeof(**ret)))) {
    for (unsigned i = 0; i < n && i < g->samples.cap; i++)
      (*ret)[(*ret_n)++] = (struct psample){buf[i].pid, buf[i].smUtil, buf[i].timeStamp};
  } else if (rc == NVML_SUCCESS) {
    rc = NVML_ERROR_MEMORY;
  }
  free(buf);
  return rc;
}

/* nvmlDeviceGetProcessesUtilizationInfo: the versioned call, the same samples. */
static nvmlReturn_t read_utilization_info(struct daemon *d, struct gpu *g, nvmlDevice_t h,
                                          uint64_t since, struct psample **ret, unsigned *ret_n) {
  nvmlProcessUtilizationInfo_v1_t *buf = NULL;
  nvmlProcessesUtilizationInfo_t info;
  nvmlReturn_t rc = NVML_ERROR_INSUFFICIENT_SIZE;

  for (int tries = 0; tries < 3 && rc == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
    if (g->samples.cap > SAMPLES_MAX)
      return NVML_ERROR_UNKNOWN;
    free(buf);
    buf = g->samples.cap ? calloc(g->samples.cap, sizeof(*buf)) : NULL;
    if (g->samples.cap && !buf)
      return NVML_ERROR_MEMORY;
    info = (nvmlProcessesUtilizationInfo_t){.version = nvmlProcessesUtilizationInfo_v1,
                                            .processSamplesCount = g->samples.cap,
                                            .lastSeenTimeStamp = since,
                                            .procUtilArray = buf};
    rc = d->nvml->proc_util_info(h, &info);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
      g->samples.cap = info.processSamplesCount > g->samples.cap ? info.processSamplesCount : 0;
  }
  *ret_n = 0;
  unsigned n = rc == NVML_SUCCESS ? info.processSamplesCount : 0;
  if (rc == NVML_SUCCESS && (*ret = calloc(n ? n : 1, sizeof(**ret)))) {
    for (unsigned i = 0; i < n && i < g->samples.cap; i++)
      (*ret)[(*ret_n)++] = (struct psample){buf[i].pid, buf[i].smUtil, buf[i].timeStamp};
  } else if (rc == NVML_SUCCESS) {
    rc = NVML_ERROR_MEMORY;
  }
  free(buf);
  return rc;
}

static int by_pid_then_time(const void *a, const void *b) {
  const struct psample *x = a, *y = b;
  if (x->pid != y->pid)
    return x->pid < y->pid ? -1 : 1;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int by_value(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* NVML's sample period, from the gaps between two samples of one process in this read (sorted by
 * pid, then time): their lower quartile where there are 4 or more, else the last read's. Not the
 * shortest ever seen: one close pair would have cut every span on the GPU from then on. */
static void note_period(struct gpu *g, const struct psample *sm, unsigned n) {
  uint64_t *gaps = n > 1 ? malloc((n - 1) * sizeof(*gaps)) : NULL;
  unsigned k = 0;

  for (unsigned i = 1; gaps && i < n; i++)
    if (sm[i].pid == sm[i - 1].pid && sm[i].ts > sm[i - 1].ts)
      gaps[k++] = sm[i].ts - sm[i - 1].ts;
  if (k >= 4) {
    qsort(gaps, k, sizeof(*gaps), by_value);
    g->samples.gap_us = gaps[k / 4];
  }
  free(gaps);
}

/* Each process's device time of the samples after `since`: a sample's percent of the time since
 * the process's previous one (or `since`). A real GPU samples every ~1/6 s and lists a process
 * only for the periods it ran, so a sample after idle periods covers one period, not the gap:
 * spans are cut to NVML's sample period (note_period). The sim gives one sample a call, of the
 * whole time since `since`: no gap is seen, none is cut. */
static unsigned sample_times(struct gpu *g, struct psample *sm, unsigned n, uint64_t since,
                             struct gpu_proc_time *out, unsigned max) {
  unsigned k = 0;

  qsort(sm, n, sizeof(*sm), by_pid_then_time);
  note_period(g, sm, n);
  for (unsigned i = 0; i < n; i++) {
    uint64_t prev = i && sm[i - 1].pid == sm[i].pid ? sm[i - 1].ts : since;
    if (sm[i].ts <= prev || sm[i].pid == 0)
      continue;
    uint64_t span = sm[i].ts - prev;
    if (g->samples.gap_us && span > g->samples.gap_us)
      span = g->samples.gap_us;
    uint64_t ns = span * 1000 * (sm[i].sm < 100 ? sm[i].sm : 100) / 100;
    if (k && out[k - 1].pid == (pid_t)sm[i].pid)
      out[k - 1].ns += ns;
    else if (k < max)
      out[k++] = (struct gpu_proc_time){.pid = (pid_t)sm[i].pid, .ns = ns};
  }
  return k;
}

const char *gpus_samples_name(enum gpu_samples_source src) {
  switch (src) {
  case GPU_SAMPLES_PROCESS_UTILIZATION: return "nvmlDeviceGetProcessUtilization";
  case GPU_SAMPLES_PROCESSES_UTILIZATION: return "nvmlDeviceGetProcessesUtilizationInfo";
  default: return "none";
  }
}

/* A full answer of the older call leaves samples out: it gives as many as the room its size call
 * asked for (72 on an H200), whoever else ran, and 72 decoy processes hid a forger so (the fifth
 * attack run). Then the newer call, which gives every process's, is read instead; where there is
 * none, the answer is marked truncated for the check. Said once a GPU. */
static nvmlReturn_t read_full(struct daemon *d, struct gpu *g, nvmlDevice_t h, uint64_t since,
                              struct psample **ret, unsigned *ret_n) {
  struct psample *all = NULL;
  unsigned n = 0, cap = g->samples.cap;
  nvmlReturn_t rc = NVML_ERROR_NOT_SUPPORTED;

  if (d->nvml->proc_util_info) {
    g->samples.cap = 0; /* the newer call's own room */
    rc = read_utilization_info(d, g, h, since, &all, &n);
    g->samples.cap = cap;
  }
  if (!g->samples.said_truncated)
    gs_log(GS_LOG_WARNING,
           "gpu %u: nvmlDeviceGetProcessUtilization gave as many samples as it has room for (%u): "
           "some processes' were left out; %s (said once)",
           g->index, cap,
           rc == NVML_SUCCESS ? "reading nvmlDeviceGetProcessesUtilizationInfo (every process's) "
                                "whenever it is full"
                              : "no newer call here: the charge check charges the device time "
                                "they leave unexplained to the slices with processes left out");
  g->samples.said_truncated = true;
  g->samples.truncated = rc != NVML_SUCCESS;
  if (rc != NVML_SUCCESS)
    return NVML_SUCCESS; /* the full answer stands, marked */
  free(*ret);
  *ret = all;
  *ret_n = n;
  return NVML_SUCCESS;
}

/* One read of the samples after `since` from the GPU's source, the first found at the first call:
 * the older call, else the newer where the older has none (NOT_SUPPORTED, as on Blackwell). */
static nvmlReturn_t read_samples(struct daemon *d, struct gpu *g, nvmlDevice_t h, uint64_t since,
                                 struct psample **ret, unsigned *ret_n) {
  nvmlReturn_t rc = NVML_ERROR_NOT_SUPPORTED;

  g->samples.truncated = false;
  if (g->samples.source <= GPU_SAMPLES_PROCESS_UTILIZATION && d->nvml->proc_util) {
    rc = read_utilization(d, g, h, since, ret, ret_n);
    if (rc != NVML_ERROR_NOT_SUPPORTED) {
      g->samples.source = GPU_SAMPLES_PROCESS_UTILIZATION;
      if (rc == NVML_SUCCESS && *ret_n >= g->samples.cap)
        rc = read_full(d, g, h, since, ret, ret_n);
      return rc;
    }
    g->samples.cap = 0;
  }
  if (g->samples.source != GPU_SAMPLES_NONE && d->nvml->proc_util_info) {
    rc = read_utilization_info(d, g, h, since, ret, ret_n);
    if (rc != NVML_ERROR_NOT_SUPPORTED) {
      g->samples.source = GPU_SAMPLES_PROCESSES_UTILIZATION;
      return rc;
    }
  }
  g->samples.source = GPU_SAMPLES_NONE;
  return NVML_ERROR_NOT_SUPPORTED;
}

/* The process's device share over the last second: the mean of its NVML samples. */
static double proc_busy(const struct psample *samples, unsigned n, unsigned pid) {
  double sum = 0;
  unsigned k = 0;

  for (unsigned i = 0; i < n; i++)
    if (samples[i].pid == pid) {
      sum += samples[i].sm;
      k++;
    }
  return k ? sum / k / 100.0 : 0.0;
}

void gpus_device_view(struct daemon *d, uint32_t gpu, bool (*accounted)(void *arg, pid_t pid),
                      void *arg, struct gs_gpu_status *gs) {
  nvmlDevice_t h;
  nvmlUtilization_t u;
  nvmlProcessInfo_t procs[256];
  struct psample *samples = NULL;
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
  /* Samples of the last second, from the call the charge check reads too (read_samples). */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t since = (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000 - 1000000ull;
  rc = read_samples(d, &d->gpus[gpu], h, since, &samples, &nsamples);
  if (rc == NVML_SUCCESS || rc == NVML_ERROR_NOT_FOUND)
    gs->device_known |= GS_DEVICE_PROC_BUSY;
  if (rc != NVML_SUCCESS)
    nsamples = 0;
  for (unsigned i = 0; i < n; i++) {
    pid_t pid = (pid_t)procs[i].pid;
    uint64_t mem = procs[i].usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE
                       ? 0
                       : procs[i].usedGpuMemory;
    double busy = proc_busy(samples, nsamples, procs[i].pid);
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

int gpus_proc_times(struct daemon *d, uint32_t gpu, uint64_t period_us, struct gpu_proc_time *out,
                    unsigned max, unsigned *ret_n) {
  struct gpu *g = &d->gpus[gpu];
  struct psample *sm = NULL;
  struct timespec ts;
  nvmlDevice_t h;
  unsigned n = 0;

  *ret_n = 0;
  if (!d->nvml) {
    g->samples.source = GPU_SAMPLES_NONE;
    return -ENODEV;
  }
  if (g->samples.source == GPU_SAMPLES_NONE)
    return -ENOTSUP;
  if (d->nvml->handle(gpu, &h) != NVML_SUCCESS)
    return -EIO;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t now_us = (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
  uint64_t since = g->samples.last_seen_us;
  if (!since || since >= now_us || now_us - since > 10 * period_us)
    since = now_us > period_us ? now_us - period_us : 1;
  nvmlReturn_t rc = read_samples(d, g, h, since, &sm, &n);
  if (rc == NVML_ERROR_NOT_SUPPORTED)
    return -ENOTSUP;
  if (rc == NVML_ERROR_NOT_FOUND) { /* nothing ran since */
    g->samples.last_seen_us = now_us;
    return 0;
  }
  if (rc != NVML_SUCCESS)
    return -EIO;
  uint64_t newest = since;
  for (unsigned i = 0; i < n; i++)
    if (sm[i].ts > newest)
      newest = sm[i].ts;
  *ret_n = sample_times(g, sm, n, since, out, max);
  g->samples.last_seen_us = newest;
  free(sm);
  return 0;
}

int gpus_running_pids(struct daemon *d, uint32_t gpu, pid_t *out, unsigned max, unsigned *ret_n) {
  nvmlProcessInfo_t procs[256];
  unsigned n = sizeof(procs) / sizeof(procs[0]);
  nvmlDevice_t h;

  *ret_n = 0;
  if (!d->nvml || !d->nvml->procs)
    return -ENODEV;
  if (d->nvml->handle(gpu, &h) != NVML_SUCCESS)
    return -EIO;
  nvmlReturn_t rc = d->nvml->procs(h, &n, procs);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
    return -EIO;
  for (unsigned i = 0; i < n && i < sizeof(procs) / sizeof(procs[0]) && *ret_n < max; i++)
    out[(*ret_n)++] = (pid_t)procs[i].pid;
  return 0;
}

int gpus_busy_ratio(struct daemon *d, uint32_t gpu, double *ret) {
  nvmlUtilization_t u;
  nvmlDevice_t h;

  if (!d->nvml || !d->nvml->utilization)
    return -ENODEV;
  if (d->nvml->handle(gpu, &h) != NVML_SUCCESS || d->nvml->utilization(h, &u) != NVML_SUCCESS)
    return -EIO;
  *ret = u.gpu > 100 ? 1.0 : u.gpu / 100.0;
  return 0;
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
