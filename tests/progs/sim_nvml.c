/* SPDX-License-Identifier: Apache-2.0 */
/* Prints what NVML says about every device (memory, utilization, compute processes),
 * one key=value line per device, for the sim's tests; works against a real NVML too.
 * `sim_nvml protocol` prints device 0's raw answers to nvmlDeviceGetProcessUtilization's
 * size call, a call one entry short, a full one, and one for samples after now. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml_min.h"

#define CK(call)                                                                                   \
  do {                                                                                             \
    nvmlReturn_t rc_ = (call);                                                                     \
    if (rc_ != NVML_SUCCESS) {                                                                     \
      fprintf(stderr, "FAIL %s -> %s\n", #call, nvmlErrorString(rc_));                             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static int protocol(void) {
  nvmlDevice_t d;
  CK(nvmlInit_v2());
  CK(nvmlDeviceGetHandleByIndex_v2(0, &d));
  unsigned need = 12345;
  nvmlReturn_t rc = nvmlDeviceGetProcessUtilization(d, NULL, &need, 0);
  printf("size rc=%d n=%u", (int)rc, need);
  nvmlProcessUtilizationSample_t *s = calloc(need + 1, sizeof(*s));
  if (!s)
    return 1;
  unsigned n = need ? need - 1 : 0;
  rc = nvmlDeviceGetProcessUtilization(d, s, &n, 0);
  printf(" short rc=%d n=%u", (int)rc, n);
  n = need;
  rc = nvmlDeviceGetProcessUtilization(d, s, &n, 0);
  printf(" full rc=%d n=%u", (int)rc, n);
  for (unsigned j = 0; rc == NVML_SUCCESS && j < n; j++)
    printf(" %u:%u", s[j].pid, s[j].smUtil);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  unsigned long long later = (unsigned long long)ts.tv_sec * 1000000ull + 1000000ull;
  n = need;
  rc = nvmlDeviceGetProcessUtilization(d, s, &n, later);
  printf(" future rc=%d n=%u\n", (int)rc, n);
  free(s);
  CK(nvmlShutdown());
  return 0;
}

int main(int argc, char **argv) {
  unsigned n;
  if (argc == 2 && strcmp(argv[1], "protocol") == 0)
    return protocol();
  CK(nvmlInit_v2());
  CK(nvmlDeviceGetCount_v2(&n));
  printf("devices=%u\n", n);
  for (unsigned i = 0; i < n; i++) {
    nvmlDevice_t d;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    nvmlMemory_t mem;
    nvmlMemory_v2_t mem2 = {.version = nvmlMemory_v2};
    nvmlUtilization_t u;
    CK(nvmlDeviceGetHandleByIndex_v2(i, &d));
    CK(nvmlDeviceGetName(d, name, sizeof(name)));
    CK(nvmlDeviceGetUUID(d, uuid, sizeof(uuid)));
    CK(nvmlDeviceGetMemoryInfo(d, &mem));
    CK(nvmlDeviceGetMemoryInfo_v2(d, &mem2));
    CK(nvmlDeviceGetUtilizationRates(d, &u));
    nvmlPciInfo_t pci;
    int major = 0, minor = 0;
    unsigned idx = 99;
    nvmlDevice_t again;
    CK(nvmlDeviceGetPciInfo_v3(d, &pci));
    CK(nvmlDeviceGetCudaComputeCapability(d, &major, &minor));
    CK(nvmlDeviceGetIndex(d, &idx));
    CK(nvmlDeviceGetHandleByUUID(uuid, &again));
    if (idx != i || again != d) {
      fprintf(stderr, "FAIL index/uuid lookup of device %u\n", i);
      return 1;
    }
    unsigned count = 0;
    nvmlReturn_t rc = nvmlDeviceGetComputeRunningProcesses_v3(d, &count, NULL);
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) {
      fprintf(stderr, "FAIL processes: %s\n", nvmlErrorString(rc));
      return 1;
    }
    nvmlProcessInfo_t *p = calloc(count + 1, sizeof(*p));
    count += 1;
    CK(nvmlDeviceGetComputeRunningProcesses_v3(d, &count, p));
    /* v1's used includes the driver's reservation; v2 gives it apart (used = allocations). */
    printf("dev=%u pci=%s cc=%d.%d uuid=%s used=%llu total=%llu free=%llu used_v2=%llu "
           "reserved_v2=%llu util=%u procs=%u",
           i, pci.busId, major, minor, uuid, mem.used, mem.total, mem.free, mem2.used,
           mem2.reserved, u.gpu, count);
    for (unsigned j = 0; j < count; j++)
      printf(" %u:%llu", p[j].pid, p[j].usedGpuMemory);
    /* Per-process SM utilization (lastSeenTimeStamp 0: all NVML keeps), by the documented
     * protocol: a size call with no buffer (NVML_ERROR_INSUFFICIENT_SIZE and the count to
     * allocate: NVML's sample buffer, not the number of processes), then the real call;
     * NVML_ERROR_NOT_FOUND means no process ran. */
    unsigned ns = 0;
    nvmlProcessUtilizationSample_t *samples = NULL;
    rc = nvmlDeviceGetProcessUtilization(d, NULL, &ns, 0);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      samples = calloc(ns ? ns : 1, sizeof(*samples));
      rc = samples ? nvmlDeviceGetProcessUtilization(d, samples, &ns, 0) : NVML_ERROR_MEMORY;
    } else if (rc == NVML_SUCCESS) {
      ns = 0; /* a size call cannot succeed: nothing was written */
    }
    printf(" sm=");
    if (rc == NVML_SUCCESS)
      for (unsigned j = 0; j < ns; j++)
        printf("%s%u:%u", j ? "," : "", samples[j].pid, samples[j].smUtil);
    else if (rc == NVML_ERROR_NOT_FOUND)
      printf("none");
    else
      printf("error:%s", nvmlErrorString(rc));
    free(samples);
    printf("\n");
    free(p);
  }
  CK(nvmlShutdown());
  return 0;
}
