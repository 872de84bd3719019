/* SPDX-License-Identifier: Apache-2.0 */
/* An NVML client the way nvidia-smi is one (dlopen + dlsym): prints device 0's memory, v1 and v2.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "nvml_min.h"

int main(void) {
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "hook_nvml: no libnvidia-ml.so.1\n");
    return 2;
  }
  __typeof__(&nvmlInit_v2) init = (__typeof__(init))dlsym(h, "nvmlInit_v2");
  __typeof__(&nvmlDeviceGetHandleByIndex_v2) get =
      (__typeof__(get))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  __typeof__(&nvmlDeviceGetMemoryInfo) info = (__typeof__(info))dlsym(h, "nvmlDeviceGetMemoryInfo");
  __typeof__(&nvmlDeviceGetMemoryInfo_v2) info2 =
      (__typeof__(info2))dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
  nvmlDevice_t dev;
  nvmlMemory_t m;
  nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
  if (!init || !get || !info || !info2 || init() != NVML_SUCCESS || get(0, &dev) != NVML_SUCCESS ||
      info(dev, &m) != NVML_SUCCESS || info2(dev, &m2) != NVML_SUCCESS) {
    fprintf(stderr, "hook_nvml: NVML query failed\n");
    return 1;
  }
  printf("nvml total=%llu used=%llu free=%llu\n", m.total, m.used, m.free);
  printf("nvml2 total=%llu used=%llu free=%llu reserved=%llu\n", m2.total, m2.used, m2.free,
         m2.reserved);
  return 0;
}
