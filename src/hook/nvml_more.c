/* SPDX-License-Identifier: Apache-2.0 */
/* The rest of NVML that would show a slice the whole device (docs/nvml.md, "Samples, accounting
 * and field values"): utilization samples are the slice's figure, accounting lists and stats
 * the slice's processes only, field values that tell the device's load are N/A per field. */
#include "nvml_slice.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long long now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
}

/* The board's own samples: power and clocks (physical). */
static bool board_samples(nvmlSamplingType_t type) {
  return type == NVML_TOTAL_POWER_SAMPLES || type == NVML_PROCESSOR_CLK_SAMPLES ||
         type == NVML_MEMORY_CLK_SAMPLES || type == NVML_MODULE_POWER_SAMPLES;
}

/* Power and clock samples are the board's (physical) and pass through; a type NVML 12.4 does not
 * name is not known to the hook, and is not passed (fail closed, as field values past 199; the
 * third attack run of 2026-12-02 saw it passed through). Utilization samples are
 * the device's load, others' kernels included: GPU and memory utilization are one sample of the
 * slice's own figure (nvmlDeviceGetUtilizationRates as the hook answers it, now); encoder,
 * decoder, JPEG and OFA, of which the hook has no slice's figure, NVML_ERROR_NOT_SUPPORTED.
 * The documented protocol: samples NULL gives the count to allocate (1), else as many as fit
 * and their count; NVML_ERROR_NOT_FOUND when none is newer than lastSeenTimeStamp. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type,
                                            unsigned long long lastSeenTimeStamp,
                                            nvmlValueType_t *sampleValType,
                                            unsigned int *sampleCount, nvmlSample_t *samples) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetSamples)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (board_samples(type))
    return r->nvmlDeviceGetSamples(device, type, lastSeenTimeStamp, sampleValType, sampleCount,
                                   samples);
  /* NVML's size call says whether the device and the type stand. */
  nvmlValueType_t vt;
  unsigned need = 0;
  nvmlReturn_t rc = r->nvmlDeviceGetSamples(device, type, 0, &vt, &need, NULL);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!sampleValType || !sampleCount || (samples && *sampleCount == 0))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (type != NVML_GPU_UTILIZATION_SAMPLES && type != NVML_MEMORY_UTILIZATION_SAMPLES)
    return NVML_ERROR_NOT_SUPPORTED; /* the other engines', and types the hook does not know */
  nvmlUtilization_t u = {0, 0};
  rc = nvmlDeviceGetUtilizationRates(device, &u);
  if (rc != NVML_SUCCESS)
    return rc;
  *sampleValType = NVML_VALUE_TYPE_UNSIGNED_INT;
  if (!samples) {
    *sampleCount = 1;
    return NVML_SUCCESS;
  }
  unsigned long long now = now_us();
  if (lastSeenTimeStamp >= now)
    return NVML_ERROR_NOT_FOUND;
  memset(&samples[0], 0, sizeof(samples[0]));
  samples[0].timeStamp = now;
  samples[0].sampleValue.uiVal = type == NVML_GPU_UTILIZATION_SAMPLES ? u.gpu : u.memory;
  *sampleCount = 1;
  return NVML_SUCCESS;
}

struct gs_nvml_proc *gs_nvml_procs_named(nvmlDevice_t device, unsigned *ret_n) {
  struct gs_nvml_proc *procs = calloc(GS_NVML_MAX_PROCS, sizeof(*procs));
  *ret_n = 0;
  if (procs && gs_nvml_slice_procs(device, procs, GS_NVML_MAX_PROCS, ret_n) < 0)
    *ret_n = 0;
  if (procs && *ret_n && !gs_nvml_pids_ours(device, procs, *ret_n))
    *ret_n = 0;
  return procs;
}

static nvmlReturn_t fill_accounting(void *device, unsigned *n, void *buf) {
  return gs_real()->nvmlDeviceGetAccountingPids(device, n, buf);
}

/* NVML's accounting pids kept to the slice's running processes (finished ones are not in its
 * region: they are left out). What NVML says of the device (accounting off: NOT_SUPPORTED)
 * stands; the count protocol is NVML's: *count below the pids shown is
 * NVML_ERROR_INSUFFICIENT_SIZE with *count = that number. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t device, unsigned int *count,
                                                   unsigned int *pids) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetAccountingPids)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned need = 0, probe[1];
  nvmlReturn_t rc = r->nvmlDeviceGetAccountingPids(device, &need, probe);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
    return rc;
  if (!count || (*count && !pids))
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned room = 0, n = 0, kept = 0;
  struct gs_nvml_proc *procs = gs_nvml_procs_named(device, &n);
  unsigned *all = NULL;
  rc = procs ? NVML_SUCCESS : NVML_ERROR_MEMORY;
  /* Processes other tenants start between the calls are outrun (gs_nvml_list). */
  if (rc == NVML_SUCCESS && n)
    all = gs_nvml_list(fill_accounting, device, sizeof(*all), need, &room, &rc);
  for (unsigned i = 0; rc == NVML_SUCCESS && n && i < room; i++)
    if (gs_nvml_has_pid(procs, n, all[i]))
      all[kept++] = all[i];
  if (rc == NVML_SUCCESS && kept > *count)
    rc = NVML_ERROR_INSUFFICIENT_SIZE;
  else if (rc == NVML_SUCCESS && kept)
    memcpy(pids, all, kept * sizeof(*all));
  if (rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE)
    *count = kept;
  free(all);
  free(procs);
  return rc;
}

/* The stats of one of the slice's running processes; of any other pid NVML_ERROR_NOT_FOUND,
 * as NVML answers for a pid it has no stats of. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t device, unsigned int pid,
                                                    nvmlAccountingStats_t *stats) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetAccountingStats)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlAccountingStats_t got;
  nvmlReturn_t rc = r->nvmlDeviceGetAccountingStats(device, pid, stats ? &got : NULL);
  if (rc != NVML_SUCCESS)
    return rc;
  unsigned n = 0;
  struct gs_nvml_proc *procs = gs_nvml_procs_named(device, &n);
  if (!procs)
    return NVML_ERROR_MEMORY;
  if (!gs_nvml_has_pid(procs, n, pid))
    rc = NVML_ERROR_NOT_FOUND;
  else if (stats)
    *stats = got;
  free(procs);
  return rc;
}

/* Whether a field is the board's own (ECC, temperatures, power, clocks, link states and error
 * counters), which passes through. NVLink and PCIe traffic and throughput counters and the
 * low-utilization policy counter tell the device's load, others' included (the PCIe byte
 * counters, R555's fields 197 and 198, are what nvmlDeviceGetPcieThroughput, refused below,
 * sums: found by the third attack run of 2026-12-02); ids past those NVML 12.4 names are not
 * known to the hook: not passed (fail closed). */
static bool field_physical(unsigned id) {
  if (id < NVML_FI_DEV_ECC_CURRENT || id > NVML_FI_DEV_IS_MIG_MODE_INDEPENDENT_MIG_QUERY_CAPABLE)
    return false;
  if (id >= NVML_FI_DEV_NVLINK_BANDWIDTH_C0_L0 && id <= NVML_FI_DEV_NVLINK_BANDWIDTH_C1_TOTAL)
    return false;
  if (id >= NVML_FI_DEV_NVLINK_BANDWIDTH_C0_L6 && id <= NVML_FI_DEV_NVLINK_BANDWIDTH_C1_L11)
    return false;
  if (id >= NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX && id <= NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX)
    return false;
  if (id == NVML_FI_DEV_PCIE_COUNT_TX_BYTES || id == NVML_FI_DEV_PCIE_COUNT_RX_BYTES)
    return false;
  return id != NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION;
}

/* NVML's values, each field that is not the board's own marked NVML_ERROR_NOT_SUPPORTED in its
 * own nvmlReturn (nvidia-smi prints N/A) with its value cleared. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                                nvmlFieldValue_t *values) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetFieldValues)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = r->nvmlDeviceGetFieldValues(device, valuesCount, values);
  for (int i = 0; values && i < valuesCount; i++)
    if (!field_physical(values[i].fieldId)) {
      memset(&values[i].value, 0, sizeof(values[i].value));
      values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  return rc;
}

/* PCIe throughput is the device's traffic, every tenant's (nvidia-smi dmon -s t prints -). */
GS_NVML_REFUSED(nvmlDeviceGetPcieThroughput,
                (nvmlDevice_t device, nvmlPcieUtilCounter_t counter, unsigned int *value),
                (device, counter, value), value)

/* Why the clocks are where they are is the board's (power and thermal limits, applications
 * clocks, sync boost) and passes, but GpuIdle says that no tenant's kernel runs on the device: the
 * device's utilization, which the hook never shows a slice (an idle slice learnt whether the
 * others were running). It is cleared, as NVML answers for a busy device; the other bits stay. */
#define GS_CLOCK_REASONS(fn)                                                                       \
  GS_EXPORT nvmlReturn_t fn(nvmlDevice_t device, unsigned long long *reasons) {                    \
    const struct gs_real *r = gs_real();                                                           \
    if (!r->fn)                                                                                    \
      return NVML_ERROR_FUNCTION_NOT_FOUND;                                                        \
    if (gs_nvml_hidden(device))                                                                    \
      return NVML_ERROR_INVALID_ARGUMENT;                                                          \
    nvmlReturn_t rc = r->fn(device, reasons);                                                      \
    if (rc == NVML_SUCCESS && reasons)                                                             \
      *reasons &= ~nvmlClocksEventReasonGpuIdle;                                                   \
    return rc;                                                                                     \
  }
GS_CLOCK_REASONS(nvmlDeviceGetCurrentClocksEventReasons)
GS_CLOCK_REASONS(nvmlDeviceGetCurrentClocksThrottleReasons) /* the same call before R535 */

/* An event set gets the events of the devices registered in it: a GPU the slice does not see (a
 * handle guessed from NVML's table) is no device, so nvmlEventSetWait never gives its events.
 * The slice's GPUs' events (ECC and Xid errors, P-state and clock changes) are the board's and
 * carry no process: passed. */
GS_OWN_DEVICES(nvmlDeviceRegisterEvents, gs_nvml_hidden(device),
               (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set),
               (device, eventTypes, set))
