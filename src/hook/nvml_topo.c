/* SPDX-License-Identifier: Apache-2.0 */
/* NVML's topology and MIG queries as a slice sees them: only among its own GPUs
 * (nvml_devices.c). The lists of GPUs near a GPU or a CPU leave the others out, so no handle of
 * a GPU the slice does not see comes from them; a topology or MIG call naming such a handle (one
 * guessed or kept from elsewhere) is NVML_ERROR_INVALID_ARGUMENT, as NVML answers for a handle
 * that is no device. */
#include "nvml_slice.h"

#include <stdlib.h>

GS_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1,
                                                           nvmlDevice_t device2,
                                                           nvmlGpuTopologyLevel_t *pathInfo) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetTopologyCommonAncestor)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  if (gs_nvml_hidden(device1) || gs_nvml_hidden(device2))
    return NVML_ERROR_INVALID_ARGUMENT;
  return r->nvmlDeviceGetTopologyCommonAncestor(device1, device2, pathInfo);
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                              nvmlGpuP2PCapsIndex_t p2pIndex,
                                              nvmlGpuP2PStatus_t *p2pStatus) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetP2PStatus)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  if (gs_nvml_hidden(device1) || gs_nvml_hidden(device2))
    return NVML_ERROR_INVALID_ARGUMENT;
  return r->nvmlDeviceGetP2PStatus(device1, device2, p2pIndex, p2pStatus);
}

GS_EXPORT nvmlReturn_t nvmlDeviceOnSameBoard(nvmlDevice_t device1, nvmlDevice_t device2,
                                             int *onSameBoard) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceOnSameBoard)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  if (gs_nvml_hidden(device1) || gs_nvml_hidden(device2))
    return NVML_ERROR_INVALID_ARGUMENT;
  return r->nvmlDeviceOnSameBoard(device1, device2, onSameBoard);
}

/* all[0..n) kept to the slice's GPUs, answered by the lists' documented count protocol:
 * *count 0 is set to the GPUs there are; else up to *count handles written, *count their
 * number. */
static nvmlReturn_t answer_shown(const nvmlDevice_t *all, unsigned n, unsigned *count,
                                 nvmlDevice_t *out) {
  unsigned kept = 0;
  for (unsigned i = 0; i < n; i++) {
    if (gs_nvml_hidden(all[i]))
      continue;
    if (*count && kept == *count)
      break;
    if (*count)
      out[kept] = all[i];
    kept++;
  }
  *count = kept;
  return NVML_SUCCESS;
}

/* The GPUs the slice sees near `device` at `level` (NVML's own list, filtered). */
GS_EXPORT nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device,
                                                        nvmlGpuTopologyLevel_t level,
                                                        unsigned int *count,
                                                        nvmlDevice_t *deviceArray) {
  const struct gs_real *r = gs_real();
  unsigned n = 0;
  if (!r->nvmlDeviceGetTopologyNearestGpus)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = r->nvmlDeviceGetTopologyNearestGpus(device, level, &n, NULL);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!count || (*count && !deviceArray))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlDevice_t *all = calloc(n + 1, sizeof(*all));
  if (!all)
    return NVML_ERROR_MEMORY;
  rc = n ? r->nvmlDeviceGetTopologyNearestGpus(device, level, &n, all) : NVML_SUCCESS;
  if (rc == NVML_SUCCESS)
    rc = answer_shown(all, n, count, deviceArray);
  free(all);
  return rc;
}

/* The GPUs the slice sees near CPU cpuNumber. */
GS_EXPORT nvmlReturn_t nvmlSystemGetTopologyGpuSet(unsigned int cpuNumber, unsigned int *count,
                                                   nvmlDevice_t *deviceArray) {
  const struct gs_real *r = gs_real();
  unsigned n = 0;
  if (!r->nvmlSystemGetTopologyGpuSet)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  nvmlReturn_t rc = r->nvmlSystemGetTopologyGpuSet(cpuNumber, &n, NULL);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!count || (*count && !deviceArray))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlDevice_t *all = calloc(n + 1, sizeof(*all));
  if (!all)
    return NVML_ERROR_MEMORY;
  rc = n ? r->nvmlSystemGetTopologyGpuSet(cpuNumber, &n, all) : NVML_SUCCESS;
  if (rc == NVML_SUCCESS)
    rc = answer_shown(all, n, count, deviceArray);
  free(all);
  return rc;
}

/* MIG queries of one of the slice's GPUs are NVML's (its mode and what it can hold are the
 * board's settings; slices run on whole GPUs); of any other GPU, no answer. */
#define GS_OWN_DEVICE(fn, params, args)                                                            \
  GS_EXPORT nvmlReturn_t fn params {                                                               \
    const struct gs_real *r = gs_real();                                                           \
    if (!r->fn)                                                                                    \
      return NVML_ERROR_FUNCTION_NOT_FOUND;                                                        \
    if (gs_nvml_hidden(device))                                                                    \
      return NVML_ERROR_INVALID_ARGUMENT;                                                          \
    return r->fn args;                                                                             \
  }
GS_OWN_DEVICE(nvmlDeviceGetMigMode,
              (nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode),
              (device, currentMode, pendingMode))
GS_OWN_DEVICE(nvmlDeviceGetMaxMigDeviceCount, (nvmlDevice_t device, unsigned int *count),
              (device, count))
GS_OWN_DEVICE(nvmlDeviceGetMigDeviceHandleByIndex,
              (nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice),
              (device, index, migDevice))
GS_OWN_DEVICE(nvmlDeviceGetGpuInstances,
              (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gpuInstances,
               unsigned int *count),
              (device, profileId, gpuInstances, count))
GS_OWN_DEVICE(nvmlDeviceGetGpuInstanceById,
              (nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance),
              (device, id, gpuInstance))
