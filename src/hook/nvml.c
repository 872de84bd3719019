/* SPDX-License-Identifier: Apache-2.0 */
/* NVML's memory and utilization queries show the slice: total = cap, used = the slice's, free =
 * what is left (a GPU the slice does not see has none: INVALID_ARGUMENT); utilization is the
 * slice's own processes' share of the device. */
#include "nvml_slice.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "region.h"
#include "slice.h"

/* The slice's figures for an NVML device; 0 if it has a cap (and they were filled in). Without
 * a cap the device's total and free stay, and used is the slice's alone (1). */
static int slice_figures(nvmlDevice_t device, unsigned long long real_free,
                         unsigned long long *total, unsigned long long *used,
                         unsigned long long *free_bytes) {
  const struct gs_real *r = gs_real();
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  uint8_t uuid[GS_REGION_UUID_LEN];
  uint64_t limit, slice_used;
  if (!r->nvmlDeviceGetUUID || r->nvmlDeviceGetUUID(device, text, sizeof(text)) != NVML_SUCCESS ||
      gs_uuid_parse(text, uuid) < 0)
    return -1;
  int e = gs_memory_slice_view(uuid, &limit, &slice_used);
  if (e == -ENOENT) {
    struct gs_region_device_info info;
    unsigned slot;
    int s = gs_nvml_slot(device, &slot);
    if (s == -ENOENT) { /* the slice never used the device */
      *used = 0;
      return 1;
    }
    gs_reclaim_for_view();
    if (s < 0 || gs_region_device_info(gs_slice_region(), slot, &info) < 0)
      return -1;
    *used = info.used < *total ? info.used : *total;
    return 1;
  }
  if (e < 0)
    return -1;
  uint64_t left = limit > slice_used ? limit - slice_used : 0;
  if (limit < *total)
    *total = limit;
  *used = slice_used < *total ? slice_used : *total;
  *free_bytes = left < real_free ? left : real_free;
  return 0;
}

/* v1's figures by `fn`: the memory queries of nvmlMemory_t. */
static nvmlReturn_t memory_v1(nvmlReturn_t (*fn)(nvmlDevice_t, nvmlMemory_t *), nvmlDevice_t device,
                              nvmlMemory_t *memory) {
  if (!fn)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device)) /* its free memory is the other tenants' doing */
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = fn(device, memory);
  if (rc == NVML_SUCCESS && memory)
    slice_figures(device, memory->free, &memory->total, &memory->used, &memory->free);
  return rc;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
  return memory_v1(gs_real()->nvmlDeviceGetMemoryInfo, device, memory);
}

/* With confidential computing on, the protected memory is where the GPU's allocations live: its
 * used is every tenant's. The slice's figures, as nvmlDeviceGetMemoryInfo gives them. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetConfComputeProtectedMemoryUsage(nvmlDevice_t device,
                                                                    nvmlMemory_t *memory) {
  return memory_v1(gs_real()->nvmlDeviceGetConfComputeProtectedMemoryUsage, device, memory);
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetMemoryInfo_v2)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = r->nvmlDeviceGetMemoryInfo_v2(device, memory);
  if (rc == NVML_SUCCESS && memory &&
      slice_figures(device, memory->free, &memory->total, &memory->used, &memory->free) == 0)
    memory->reserved = 0; /* the driver's own reservation is no slice's; contexts are in used */
  return rc;
}

/* NVML's sample period for utilization: the last second (nvmlUtilization_t). */
#define UTIL_PERIOD_US 1000000ull

static unsigned long long realtime_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
}

/* The newer call into buf, room for *n samples (gs_nvml_list), the device and time in ctx. */
struct samples_call {
  nvmlDevice_t device;
  unsigned long long since;
};

static nvmlReturn_t fill_samples(void *ctx, unsigned *n, void *buf) {
  const struct samples_call *c = ctx;
  nvmlProcessesUtilizationInfo_t info = {.version = nvmlProcessesUtilizationInfo_v1,
                                         .processSamplesCount = *n,
                                         .lastSeenTimeStamp = c->since,
                                         .procUtilArray = buf};
  nvmlReturn_t rc = gs_real()->nvmlDeviceGetProcessesUtilizationInfo(c->device, &info);
  *n = info.processSamplesCount;
  return rc;
}

/* The newer call's samples (Blackwell has only this one: HAMi-core#218) in the old layout. */
static nvmlProcessUtilizationSample_t *newer_samples(nvmlDevice_t device, unsigned long long since,
                                                     unsigned *ret_n, nvmlReturn_t *ret_rc) {
  const struct gs_real *r = gs_real();
  nvmlProcessesUtilizationInfo_t info = {.version = nvmlProcessesUtilizationInfo_v1,
                                         .lastSeenTimeStamp = since};
  *ret_n = 0;
  *ret_rc = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (!r->nvmlDeviceGetProcessesUtilizationInfo)
    return NULL;
  *ret_rc = r->nvmlDeviceGetProcessesUtilizationInfo(device, &info);
  if (*ret_rc != NVML_ERROR_INSUFFICIENT_SIZE || info.processSamplesCount == 0)
    return NULL;
  /* Processes that start between the calls are outrun (gs_nvml_list). */
  unsigned n = 0;
  struct samples_call c = {device, since};
  nvmlProcessUtilizationInfo_v1_t *in =
      gs_nvml_list(fill_samples, &c, sizeof(*in), info.processSamplesCount, &n, ret_rc);
  nvmlProcessUtilizationSample_t *s = in ? calloc(n + 1, sizeof(*s)) : NULL;
  if (in && !s)
    *ret_rc = NVML_ERROR_MEMORY;
  for (unsigned i = 0; s && i < n; i++) {
    s[i].pid = in[i].pid;
    s[i].timeStamp = in[i].timeStamp;
    s[i].smUtil = in[i].smUtil;
    s[i].memUtil = in[i].memUtil;
  }
  free(in);
  *ret_n = s ? n : 0;
  return s;
}

/* NVML's per-process samples for `device` since `since` (CPU time, us): malloc'd, *ret_n of
 * them; NULL with *ret_rc = what NVML said when it gave none (NOT_FOUND: no process ran). */
static nvmlProcessUtilizationSample_t *real_samples(nvmlDevice_t device, unsigned long long since,
                                                    unsigned *ret_n, nvmlReturn_t *ret_rc) {
  const struct gs_real *r = gs_real();
  unsigned need = 0;
  *ret_n = 0;
  *ret_rc = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (r->nvmlDeviceGetProcessUtilization)
    *ret_rc = r->nvmlDeviceGetProcessUtilization(device, NULL, &need, since);
  if (*ret_rc == NVML_ERROR_NOT_SUPPORTED || *ret_rc == NVML_ERROR_FUNCTION_NOT_FOUND)
    return newer_samples(device, since, ret_n, ret_rc);
  if (*ret_rc != NVML_ERROR_INSUFFICIENT_SIZE || need == 0)
    return NULL;
  nvmlProcessUtilizationSample_t *s = calloc(need, sizeof(*s));
  if (!s) {
    *ret_rc = NVML_ERROR_MEMORY;
    return NULL;
  }
  *ret_rc = r->nvmlDeviceGetProcessUtilization(device, s, &need, since);
  if (*ret_rc != NVML_SUCCESS) {
    free(s);
    return NULL;
  }
  *ret_n = need;
  return s;
}

/* The slice's share of the device over the last second: for each of its processes the mean of
 * NVML's samples of it (a process can have several in the period), summed over them. */
static nvmlReturn_t slice_util(nvmlDevice_t device, const struct gs_nvml_proc *procs, unsigned n,
                               nvmlUtilization_t *u) {
  unsigned ns;
  nvmlReturn_t rc;
  nvmlProcessUtilizationSample_t *s =
      real_samples(device, realtime_us() - UTIL_PERIOD_US, &ns, &rc);
  u->gpu = u->memory = 0;
  if (!s)
    return rc == NVML_ERROR_NOT_FOUND ? NVML_SUCCESS : rc; /* none of them ran: 0 */
  for (unsigned i = 0; i < n; i++) {
    unsigned long long sm = 0, mem = 0, k = 0;
    for (unsigned j = 0; j < ns; j++)
      if (s[j].pid == procs[i].pid) {
        sm += s[j].smUtil;
        mem += s[j].memUtil;
        k++;
      }
    if (k) {
      u->gpu += (unsigned)((sm + k / 2) / k);
      u->memory += (unsigned)((mem + k / 2) / k);
    }
  }
  free(s);
  u->gpu = u->gpu > 100 ? 100 : u->gpu;
  u->memory = u->memory > 100 ? 100 : u->memory;
  return NVML_SUCCESS;
}

/* gpu and memory: the slice's processes' share of the last second. A slice with no process on
 * the device used none of it (0). Where NVML's pids are another namespace's (a container), the
 * samples cannot be told apart: NVML_ERROR_NOT_SUPPORTED (nvidia-smi shows N/A), never the
 * whole device's figure. gpu is gsliced's measured share wherever it is fresh, in any pid
 * namespace (memory then the samples' where they are the slice's, else 0: docs/nvml.md). */
GS_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                     nvmlUtilization_t *utilization) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetUtilizationRates)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = r->nvmlDeviceGetUtilizationRates(device, utilization);
  if (rc != NVML_SUCCESS || !utilization)
    return rc;
  struct gs_nvml_proc *procs = calloc(GS_NVML_MAX_PROCS, sizeof(*procs));
  unsigned n = 0;
  if (!procs)
    return NVML_ERROR_MEMORY;
  if (gs_nvml_slice_procs(device, procs, GS_NVML_MAX_PROCS, &n) < 0)
    rc = NVML_ERROR_UNKNOWN;
  else if (n == 0)
    utilization->gpu = utilization->memory = 0;
  else if (gs_nvml_pids_ours(device, procs, n))
    rc = slice_util(device, procs, n, utilization);
  else
    rc = NVML_ERROR_NOT_SUPPORTED;
  if (rc != NVML_SUCCESS)
    utilization->gpu = utilization->memory = 0;
  unsigned measured;
  if (rc != NVML_ERROR_UNKNOWN && gs_nvml_measured_util(device, &measured) == 0) {
    utilization->gpu = measured;
    rc = NVML_SUCCESS;
  }
  free(procs);
  return rc;
}

/* The old per-process call into buf, room for *n samples (gs_nvml_list). */
static nvmlReturn_t fill_old_samples(void *ctx, unsigned *n, void *buf) {
  const struct samples_call *c = ctx;
  return gs_real()->nvmlDeviceGetProcessUtilization(c->device, buf, n, c->since);
}

/* One of the two per-process sample calls: its entries' layout and its fill. */
struct sample_kind {
  size_t size, pid_at;
  gs_nvml_fill_fn fill;
};
static const struct sample_kind OLD_SAMPLES = {sizeof(nvmlProcessUtilizationSample_t),
                                               offsetof(nvmlProcessUtilizationSample_t, pid),
                                               fill_old_samples};
static const struct sample_kind NEWER_SAMPLES = {sizeof(nvmlProcessUtilizationInfo_v1_t),
                                                 offsetof(nvmlProcessUtilizationInfo_v1_t, pid),
                                                 fill_samples};

/* NVML's samples since `since` (`need`: what its size call said) kept to the slice's processes'
 * (none where NVML's pids are another namespace's), answered by the documented protocol over
 * them alone into the caller's buf and *count: none is NVML_ERROR_NOT_FOUND (*count as passed);
 * buf NULL or *count below them NVML_ERROR_INSUFFICIENT_SIZE with *count = their number; else
 * they and their number. Nothing of NVML's answer reaches the caller but the slice's samples:
 * the size call passed through said how many processes of every tenant ran (fourth attack run
 * of 2026-12-02), and NVML wrote the others' samples into the caller's buffer. */
static nvmlReturn_t answer_samples(const struct sample_kind *k, nvmlDevice_t device,
                                   unsigned long long since, unsigned need, void *buf,
                                   unsigned *count) {
  struct samples_call c = {device, since};
  unsigned n = 0, kept = 0, nprocs = 0;
  nvmlReturn_t rc;
  char *all = gs_nvml_list(k->fill, &c, k->size, need, &n, &rc);
  struct gs_nvml_proc *procs = all ? gs_nvml_procs_named(device, &nprocs) : NULL;
  if (all && !procs)
    rc = NVML_ERROR_MEMORY;
  for (unsigned i = 0; procs && i < n; i++) {
    unsigned pid;
    memcpy(&pid, all + i * k->size + k->pid_at, sizeof(pid));
    if (gs_nvml_has_pid(procs, nprocs, pid))
      memmove(all + kept++ * k->size, all + i * k->size, k->size);
  }
  free(procs);
  if (rc == NVML_SUCCESS && kept == 0)
    rc = NVML_ERROR_NOT_FOUND;
  else if (rc == NVML_SUCCESS && (!buf || *count < kept))
    rc = NVML_ERROR_INSUFFICIENT_SIZE;
  else if (rc == NVML_SUCCESS)
    memcpy(buf, all, kept * k->size);
  if (rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE)
    *count = kept;
  free(all);
  return rc;
}

/* The slice's processes' samples only, by NVML's two-call protocol over them (answer_samples).
 * What NVML says of the device and arguments (not supported, as on Blackwell) stands. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                       nvmlProcessUtilizationSample_t *utilization,
                                                       unsigned int *processSamplesCount,
                                                       unsigned long long lastSeenTimeStamp) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetProcessUtilization)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned need = 0;
  nvmlReturn_t rc = r->nvmlDeviceGetProcessUtilization(device, NULL, &need, lastSeenTimeStamp);
  if (rc == NVML_ERROR_NOT_FOUND) /* no process ran: none of the slice's either */
    return processSamplesCount ? rc : NVML_ERROR_INVALID_ARGUMENT;
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
    return rc;
  if (!processSamplesCount)
    return NVML_ERROR_INVALID_ARGUMENT;
  return answer_samples(&OLD_SAMPLES, device, lastSeenTimeStamp, need, utilization,
                        processSamplesCount);
}

/* The newer call, kept to the slice's processes as the old one: its size call (procUtilArray
 * NULL) says how many samples of the slice's there are, never NVML's count. NVML's answer to
 * the version word stands; a version NVML takes but the hook does not know (past v1) is
 * NVML_ERROR_ARGUMENT_VERSION_MISMATCH, not entries of a layout it cannot write. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device,
                                                             nvmlProcessesUtilizationInfo_t *info) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetProcessesUtilizationInfo)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!info)
    return r->nvmlDeviceGetProcessesUtilizationInfo(device, info);
  nvmlProcessesUtilizationInfo_t probe = {.version = info->version,
                                          .lastSeenTimeStamp = info->lastSeenTimeStamp};
  nvmlReturn_t rc = r->nvmlDeviceGetProcessesUtilizationInfo(device, &probe);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE && rc != NVML_ERROR_NOT_FOUND)
    return rc;
  if (info->version != nvmlProcessesUtilizationInfo_v1)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (rc == NVML_ERROR_NOT_FOUND)
    return rc;
  return answer_samples(&NEWER_SAMPLES, device, info->lastSeenTimeStamp, probe.processSamplesCount,
                        info->procUtilArray, &info->processSamplesCount);
}
