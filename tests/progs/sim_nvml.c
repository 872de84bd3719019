/* Prints what NVML says about every device (memory, utilization, compute processes),
 * one key=value line per device, for the sim's tests; works against a real NVML too. */
#include <stdio.h>
#include <stdlib.h>

#include "nvml_min.h"

#define CK(call)                                                                          \
  do {                                                                                    \
    nvmlReturn_t rc_ = (call);                                                            \
    if (rc_ != NVML_SUCCESS) {                                                            \
      fprintf(stderr, "FAIL %s -> %s\n", #call, nvmlErrorString(rc_));                    \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(void) {
  unsigned n;
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
    printf("dev=%u pci=%s cc=%d.%d uuid=%s used=%llu total=%llu free=%llu used_v2=%llu util=%u "
           "procs=%u",
           i, pci.busId, major, minor, uuid,
           mem.used, mem.total, mem.free, mem2.used, u.gpu, count);
    for (unsigned j = 0; j < count; j++)
      printf(" %u:%llu", p[j].pid, p[j].usedGpuMemory);
    /* Per-process SM utilization over the last second (lastSeenTimeStamp 0). */
    nvmlProcessUtilizationSample_t samples[64];
    unsigned ns = 64;
    rc = nvmlDeviceGetProcessUtilization(d, samples, &ns, 0);
    printf(" sm=");
    if (rc == NVML_SUCCESS)
      for (unsigned j = 0; j < ns; j++)
        printf("%s%u:%u", j ? "," : "", samples[j].pid, samples[j].smUtil);
    else if (rc == NVML_ERROR_NOT_FOUND)
      printf("none");
    else
      printf("error:%s", nvmlErrorString(rc));
    printf("\n");
    free(p);
  }
  CK(nvmlShutdown());
  return 0;
}
