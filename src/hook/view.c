/* SPDX-License-Identifier: Apache-2.0 */
/* The slice's view of the GPU: cuMemGetInfo and cuDeviceTotalMem (and, for nvml.c, by UUID)
 * report the cap as the total and what the slice leaves as free; cuDeviceGetCount and
 * cuDeviceGet show the slice's GPUs only (slice.h: gs_device_check). */
#include "slice.h"

#include <errno.h>
#include <pthread.h>

/* The full liveness check (gs_reclaim_for_view: /proc read for every entry of the slice) can
 * change the view only when the device's figure holds bytes beyond this process's own, some of
 * which a dead process may have left: only then is it run, and at most every 10 ms, not per
 * call. Other live processes' allocations and frees show at once (the figure is read under the
 * region's lock at every call); a dead process's bytes within 10 ms. */
static int view_of_slot(unsigned slot, uint64_t *ret_cap, uint64_t *ret_used) {
  struct gs_region_device_info info;
  uint64_t mine = 0;
  if (gs_region_device_info(gs_slice_region(), slot, &info) < 0)
    return -ENOENT;
  if ((gs_slice_held(slot, &mine) < 0 || info.used > mine) && gs_reclaim_for_view() &&
      gs_region_device_info(gs_slice_region(), slot, &info) < 0)
    return -ENOENT;
  if (info.cap == GS_REGION_NO_CAP)
    return -ENOENT;
  *ret_cap = info.cap;
  *ret_used = info.used;
  return 0;
}

GS_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  GS_REAL_OR_NOT_FOUND(cuMemGetInfo_v2);
  size_t real_free = 0, real_total = 0;
  CUresult rc = r->cuMemGetInfo_v2(&real_free, &real_total);
  if (rc != CUDA_SUCCESS)
    return rc;
  gs_setup();
  CUdevice dev;
  unsigned slot;
  uint64_t cap, used;
  if (gs_current_device(&dev, NULL) == 0 && gs_slot_of(dev, &slot) == 0) {
    gs_pools_refresh();
    gs_reconcile(dev, slot, 1);
    if (view_of_slot(slot, &cap, &used) == 0) {
      uint64_t left = cap > used ? cap - used : 0;
      real_total = cap < real_total ? cap : real_total;
      real_free = left < real_free ? left : real_free;
    }
  }
  if (free_bytes)
    *free_bytes = real_free;
  if (total_bytes)
    *total_bytes = real_total;
  return rc;
}

GS_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  GS_REAL_OR_NOT_FOUND(cuDeviceTotalMem_v2);
  CUresult rc = r->cuDeviceTotalMem_v2(bytes, dev);
  unsigned slot;
  uint64_t cap, used;
  if (rc == CUDA_SUCCESS && gs_slot_of(dev, &slot) == 0 && view_of_slot(slot, &cap, &used) == 0 &&
      cap < *bytes)
    *bytes = cap;
  return rc;
}

/* A CUDA_VISIBLE_DEVICES changed from gslice run's can show devices that are not the slice's:
 * they are left out of the count (from the first of them: CUDA numbers devices without gaps), and
 * cuDeviceGet of one is an invalid device. Contexts and allocations on one are refused in
 * slot_locked (slice.c), whichever way the program came by its number. */
GS_EXPORT CUresult cuDeviceGetCount(int *count) {
  GS_REAL_OR_NOT_FOUND(cuDeviceGetCount);
  CUresult rc = r->cuDeviceGetCount(count);
  if (rc == CUDA_SUCCESS && count)
    *count = gs_devices_shown(*count);
  return rc;
}

GS_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  GS_REAL_OR_NOT_FOUND(cuDeviceGet);
  CUresult rc = r->cuDeviceGet(device, ordinal);
  if (rc == CUDA_SUCCESS && gs_device_check(*device) < 0)
    return CUDA_ERROR_INVALID_DEVICE;
  return rc;
}

/* Devices this process could see through CUDA, registered so that their caps (which
 * GSLICE_MEMORY_LIMIT gives by CUDA ordinal) are known to NVML queries too. */
static void register_cuda_devices_once(void) {
  const struct gs_real *r = gs_real();
  int n = 0;
  if (!r->cuInit || !r->cuDeviceGetCount || !r->cuDeviceGet || r->cuInit(0) != CUDA_SUCCESS ||
      r->cuDeviceGetCount(&n) != CUDA_SUCCESS)
    return;
  for (int i = 0; i < n && i < GS_CONFIG_MAX_ORDINALS; i++) {
    CUdevice dev;
    unsigned slot;
    if (r->cuDeviceGet(&dev, i) == CUDA_SUCCESS)
      gs_slot_of(dev, &slot);
  }
}

static void register_cuda_devices(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_cuda_devices_once);
}

int gs_memory_slice_view(const uint8_t uuid[16], uint64_t *ret_cap, uint64_t *ret_used) {
  const struct gs_config *cfg = gs_slice_config();
  unsigned slot;
  int e = gs_region_device(gs_slice_region(), uuid, 0, &slot);
  if (e == -ENOENT && (cfg->has_cap_all || cfg->cap_set)) {
    register_cuda_devices();
    e = gs_region_device(gs_slice_region(), uuid, 0, &slot);
    if (e == -ENOENT && cfg->has_cap_all &&
        gs_region_device(gs_slice_region(), uuid, 1, &slot) == 0) {
      /* Not visible to CUDA here (CUDA_VISIBLE_DEVICES): a cap for every device still holds. */
      e = gs_region_set_cap(gs_slice_region(), slot, cfg->cap_all, GS_CAP_FROM_ENV);
      e = e == -EPERM ? 0 : e;
    }
  }
  if (e < 0)
    return e;
  gs_pools_refresh();
  return view_of_slot(slot, ret_cap, ret_used);
}
