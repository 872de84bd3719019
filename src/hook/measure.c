/* SPDX-License-Identifier: Apache-2.0 */
/* Measuring what the driver takes on its own for this process (contexts, imports), through the
 * real NVML: the process's own line in the per-process list, else the device's free memory. */
#include "slice.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void nvml_start(void) {
  gs_real()->nvmlInit_v2();
}

static nvmlDevice_t nvml_device(CUdevice dev) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  const struct gs_real *r = gs_real();
  if (!r->nvmlInit_v2 || !r->nvmlDeviceGetHandleByUUID)
    return NULL;
  pthread_once(&once, nvml_start);
  CUuuid uuid;
  if (!r->cuDeviceGetUuid_v2 || r->cuDeviceGetUuid_v2(&uuid, dev) != CUDA_SUCCESS)
    return NULL;
  char text[GS_UUID_STR_LEN];
  gs_uuid_format((const uint8_t *)uuid.bytes, text);
  nvmlDevice_t d = NULL;
  if (r->nvmlDeviceGetHandleByUUID(text, &d) != NVML_SUCCESS)
    return NULL;
  return d;
}

/* Whether NVML's pids are this process's namespace's. Inside a container NVML may list the
 * host's pids (or none at all): a line under our pid can then be another process's, whose
 * memory would be taken for ours — a context measured as costing nothing, overhead charged for
 * a stranger. A line under our pid on a device where this process has not yet begun to make a
 * context cannot be ours, so from then on the process trusts only the device's free memory. */
#define PROBE_DEVICES 64
static atomic_bool begun[PROBE_DEVICES];
static atomic_bool pids_foreign;

void gs_probe_context_begins(CUdevice dev) {
  if (dev >= 0 && dev < PROBE_DEVICES)
    atomic_store(&begun[dev], true);
}

static bool may_hold_memory(CUdevice dev) {
  return dev < 0 || dev >= PROBE_DEVICES || atomic_load(&begun[dev]);
}

void gs_probe(CUdevice dev, struct gs_probe *p) {
  memset(p, 0, sizeof(*p));
  const struct gs_real *r = gs_real();
  nvmlDevice_t d = nvml_device(dev);
  if (!d)
    return;
  nvmlMemory_t m;
  if (r->nvmlDeviceGetMemoryInfo && r->nvmlDeviceGetMemoryInfo(d, &m) == NVML_SUCCESS) {
    p->free_ok = 1;
    p->dev_free = m.free;
  }
  if (!r->nvmlDeviceGetComputeRunningProcesses_v3)
    return;
  unsigned count = 256;
  nvmlProcessInfo_t *infos = calloc(count, sizeof(*infos));
  if (!infos)
    return;
  if (r->nvmlDeviceGetComputeRunningProcesses_v3(d, &count, infos) == NVML_SUCCESS) {
    p->proc_ok = 1;
    unsigned pid = (unsigned)getpid();
    for (unsigned i = 0; i < count && i < 256; i++) {
      if (infos[i].pid == pid &&
          infos[i].usedGpuMemory != (unsigned long long)NVML_VALUE_NOT_AVAILABLE) {
        p->proc_found = 1;
        p->proc_used = infos[i].usedGpuMemory;
      }
    }
    if (p->proc_found && !may_hold_memory(dev))
      atomic_store(&pids_foreign, true);
    if (atomic_load(&pids_foreign))
      p->proc_found = 0; /* the line is not ours: no reconciliation, contexts by free memory */
  }
  free(infos);
}

/* What the device gave this process between two probes: its own line in NVML's process list
 * when NVML shows it (not inside a container's pid namespace), else the drop in free memory. */
int gs_probe_delta(const struct gs_probe *before, const struct gs_probe *after, uint64_t *ret) {
  if (before->proc_ok && after->proc_found) {
    uint64_t b = before->proc_found ? before->proc_used : 0;
    *ret = after->proc_used > b ? after->proc_used - b : 0;
    return 0;
  }
  if (before->free_ok && after->free_ok) {
    *ret = before->dev_free > after->dev_free ? before->dev_free - after->dev_free : 0;
    return 0;
  }
  return -ENODATA;
}
