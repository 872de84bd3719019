/* SPDX-License-Identifier: Apache-2.0 */
/* NVML's memory queries show the slice: total = cap, used = the slice's, free = what is left. */
#include "hook.h"

#include <string.h>

#include "region.h"

/* The slice's figures for an NVML device; 0 if it has a cap (and they were filled in). */
static int slice_figures(nvmlDevice_t device, unsigned long long real_free,
                         unsigned long long *total, unsigned long long *used,
                         unsigned long long *free_bytes) {
  const struct gs_real *r = gs_real();
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  uint8_t uuid[GS_REGION_UUID_LEN];
  uint64_t limit, slice_used;
  if (!r->nvmlDeviceGetUUID || r->nvmlDeviceGetUUID(device, text, sizeof(text)) != NVML_SUCCESS ||
      gs_uuid_parse(text, uuid) < 0 || gs_memory_slice_view(uuid, &limit, &slice_used) < 0)
    return -1;
  uint64_t left = limit > slice_used ? limit - slice_used : 0;
  if (limit < *total)
    *total = limit;
  *used = slice_used < *total ? slice_used : *total;
  *free_bytes = left < real_free ? left : real_free;
  return 0;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetMemoryInfo)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  nvmlReturn_t rc = r->nvmlDeviceGetMemoryInfo(device, memory);
  if (rc == NVML_SUCCESS && memory)
    slice_figures(device, memory->free, &memory->total, &memory->used, &memory->free);
  return rc;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetMemoryInfo_v2)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  nvmlReturn_t rc = r->nvmlDeviceGetMemoryInfo_v2(device, memory);
  if (rc == NVML_SUCCESS && memory &&
      slice_figures(device, memory->free, &memory->total, &memory->used, &memory->free) == 0)
    memory->reserved = 0; /* the driver's own reservation is no slice's; contexts are in used */
  return rc;
}
