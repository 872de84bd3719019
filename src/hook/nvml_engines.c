/* SPDX-License-Identifier: Apache-2.0 */
/* NVML's video engines and GPM as a slice sees them (docs/nvml.md, "Video engines, GPM and
 * topology"): encoder and NvFBC sessions of the slice's own processes only, their stats from
 * those sessions; the engines' utilization and the encoder's capacity left, which are the
 * device's load, and GPM's metrics, all the device's counters, NVML_ERROR_NOT_SUPPORTED. */
#include "nvml_slice.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum session_kind { SESSIONS_ENCODER, SESSIONS_FBC };

_Static_assert(offsetof(nvmlEncoderSessionInfo_t, pid) == offsetof(nvmlFBCSessionInfo_t, pid),
               "one pid offset for both session lists");

static size_t session_size(enum session_kind kind) {
  return kind == SESSIONS_ENCODER ? sizeof(nvmlEncoderSessionInfo_t) : sizeof(nvmlFBCSessionInfo_t);
}

static nvmlReturn_t real_sessions(enum session_kind kind, nvmlDevice_t device, unsigned *count,
                                  void *infos) {
  const struct gs_real *r = gs_real();
  if (kind == SESSIONS_ENCODER)
    return r->nvmlDeviceGetEncoderSessions ? r->nvmlDeviceGetEncoderSessions(device, count, infos)
                                           : NVML_ERROR_FUNCTION_NOT_FOUND;
  return r->nvmlDeviceGetFBCSessions ? r->nvmlDeviceGetFBCSessions(device, count, infos)
                                     : NVML_ERROR_FUNCTION_NOT_FOUND;
}

struct session_call {
  enum session_kind kind;
  nvmlDevice_t device;
};

static nvmlReturn_t fill_sessions(void *ctx, unsigned *n, void *buf) {
  const struct session_call *c = ctx;
  return real_sessions(c->kind, c->device, n, buf);
}

static unsigned session_pid(enum session_kind kind, const void *infos, unsigned i) {
  unsigned pid;
  memcpy(&pid, (const char *)infos + i * session_size(kind) + offsetof(nvmlFBCSessionInfo_t, pid),
         sizeof(pid));
  return pid;
}

/* NVML's sessions on `device` kept to the slice's processes' (none where NVML's pids are another
 * namespace's): malloc'd, *ret_n of them, or NULL with NVML's error in *ret_rc (what it says of
 * the device stands). */
static void *slice_sessions(enum session_kind kind, nvmlDevice_t device, unsigned *ret_n,
                            nvmlReturn_t *ret_rc) {
  unsigned n = 0, kept = 0, nprocs = 0;
  *ret_n = 0;
  *ret_rc = real_sessions(kind, device, &n, NULL);
  if (*ret_rc != NVML_SUCCESS)
    return NULL;
  /* Other tenants' sessions that start between the calls must not make the slice's answer
   * INSUFFICIENT_SIZE: only its own count may (gs_nvml_list outruns them). */
  struct session_call c = {kind, device};
  void *all = gs_nvml_list(fill_sessions, &c, session_size(kind), n, &n, ret_rc);
  struct gs_nvml_proc *procs =
      *ret_rc == NVML_SUCCESS ? gs_nvml_procs_named(device, &nprocs) : NULL;
  if (*ret_rc == NVML_SUCCESS && !procs)
    *ret_rc = NVML_ERROR_MEMORY;
  for (unsigned i = 0; procs && i < n; i++)
    if (gs_nvml_has_pid(procs, nprocs, session_pid(kind, all, i)))
      memmove((char *)all + kept++ * session_size(kind), (char *)all + i * session_size(kind),
              session_size(kind));
  free(procs);
  if (*ret_rc != NVML_SUCCESS) {
    free(all);
    return NULL;
  }
  *ret_n = kept;
  return all;
}

/* The documented count protocol over the slice's sessions: *count 0 asks for the count
 * (SUCCESS); too small a count is NVML_ERROR_INSUFFICIENT_SIZE with the count needed. */
static nvmlReturn_t answer_sessions(enum session_kind kind, nvmlDevice_t device, unsigned *count,
                                    void *infos) {
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned probe = 0, n;
  nvmlReturn_t rc = real_sessions(kind, device, &probe, NULL);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!count || (*count && !infos))
    return NVML_ERROR_INVALID_ARGUMENT;
  void *kept = slice_sessions(kind, device, &n, &rc);
  if (!kept)
    return rc;
  if (*count == 0 || n > *count)
    rc = *count == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
  else if (n)
    memcpy(infos, kept, n * session_size(kind));
  *count = n;
  free(kept);
  return rc;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetEncoderSessions(nvmlDevice_t device, unsigned int *sessionCount,
                                                    nvmlEncoderSessionInfo_t *sessionInfos) {
  return answer_sessions(SESSIONS_ENCODER, device, sessionCount, sessionInfos);
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetFBCSessions(nvmlDevice_t device, unsigned int *sessionCount,
                                                nvmlFBCSessionInfo_t *sessionInfo) {
  return answer_sessions(SESSIONS_FBC, device, sessionCount, sessionInfo);
}

/* The slice's sessions' number and their mean fps and latency (0 when there is none). */
static nvmlReturn_t session_stats(enum session_kind kind, nvmlDevice_t device, unsigned *ret_n,
                                  unsigned *ret_fps, unsigned *ret_latency) {
  unsigned n;
  nvmlReturn_t rc;
  void *s = slice_sessions(kind, device, &n, &rc);
  if (!s)
    return rc;
  unsigned long long fps = 0, latency = 0;
  for (unsigned i = 0; i < n; i++) {
    if (kind == SESSIONS_ENCODER) {
      fps += ((nvmlEncoderSessionInfo_t *)s)[i].averageFps;
      latency += ((nvmlEncoderSessionInfo_t *)s)[i].averageLatency;
    } else {
      fps += ((nvmlFBCSessionInfo_t *)s)[i].averageFPS;
      latency += ((nvmlFBCSessionInfo_t *)s)[i].averageLatency;
    }
  }
  free(s);
  *ret_n = n;
  *ret_fps = n ? (unsigned)(fps / n) : 0;
  *ret_latency = n ? (unsigned)(latency / n) : 0;
  return NVML_SUCCESS;
}

/* The device's figures are every session's: the slice's sessions' instead. NVML's own answer
 * (the device, the arguments) stands when it is an error. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t device, unsigned int *sessionCount,
                                                 unsigned int *averageFps,
                                                 unsigned int *averageLatency) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetEncoderStats)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = r->nvmlDeviceGetEncoderStats(device, sessionCount, averageFps, averageLatency);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!sessionCount || !averageFps || !averageLatency)
    return NVML_ERROR_INVALID_ARGUMENT;
  rc = session_stats(SESSIONS_ENCODER, device, sessionCount, averageFps, averageLatency);
  if (rc != NVML_SUCCESS)
    *sessionCount = *averageFps = *averageLatency = 0;
  return rc;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetFBCStats(nvmlDevice_t device, nvmlFBCStats_t *fbcStats) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetFBCStats)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = r->nvmlDeviceGetFBCStats(device, fbcStats);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!fbcStats)
    return NVML_ERROR_INVALID_ARGUMENT;
  rc = session_stats(SESSIONS_FBC, device, &fbcStats->sessionsCount, &fbcStats->averageFPS,
                     &fbcStats->averageLatency);
  if (rc != NVML_SUCCESS)
    memset(fbcStats, 0, sizeof(*fbcStats));
  return rc;
}

/* An engine's utilization over its sampling period is every tenant's work on it, and gsliced
 * measures no slice's share of the video engines (the sampling period stays as NVML wrote it);
 * the encoder's capacity left is 100 less every tenant's sessions' load. */
#define GS_ENGINE_UTIL(fn, encoder)                                                                \
  GS_NVML_REFUSED(                                                                                 \
      fn, (nvmlDevice_t device, unsigned int *utilization, unsigned int *samplingPeriodUs),        \
      (device, utilization, samplingPeriodUs), utilization)
NVML_ENGINE_UTILIZATIONS(GS_ENGINE_UTIL)
GS_NVML_REFUSED(nvmlDeviceGetEncoderCapacity,
                (nvmlDevice_t device, nvmlEncoderType_t encoderQueryType,
                 unsigned int *encoderCapacity),
                (device, encoderQueryType, encoderCapacity), encoderCapacity)

/* GPM's counters (SM activity and occupancy, tensor and FP pipes, DRAM, PCIe, NVLink, the video
 * engines) are the device's, every tenant's kernels in them, and the hook has no slice's
 * figure for any. The device is reported as without GPM, the documented way (DCGM and
 * `nvidia-smi dmon --gpm-metrics` ask first): isSupportedDevice 0, once NVML has answered for
 * the device and version word; a sample or metrics asked anyway NVML_ERROR_NOT_SUPPORTED. */
GS_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device,
                                                 nvmlGpmSupport_t *gpmSupport) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlGpmQueryDeviceSupport)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = r->nvmlGpmQueryDeviceSupport(device, gpmSupport);
  if (rc == NVML_SUCCESS && gpmSupport)
    gpmSupport->isSupportedDevice = 0;
  return rc;
}

GS_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample) {
  (void)device;
  (void)gpmSample;
  return NVML_ERROR_NOT_SUPPORTED;
}

GS_EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                           nvmlGpmSample_t gpmSample) {
  (void)device;
  (void)gpuInstanceId;
  (void)gpmSample;
  return NVML_ERROR_NOT_SUPPORTED;
}

/* Never NVML's: its samples could only be the device's. Each metric asked is marked
 * NVML_ERROR_NOT_SUPPORTED in its own nvmlReturn, its value 0. */
GS_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet) {
  if (!metricsGet)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (metricsGet->numMetrics > NVML_GPM_METRIC_MAX)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < metricsGet->numMetrics; i++) {
    nvmlGpmMetric_t *m = &metricsGet->metrics[i];
    m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    m->value = 0;
    memset(&m->metricInfo, 0, sizeof(m->metricInfo));
  }
  return NVML_ERROR_NOT_SUPPORTED;
}
