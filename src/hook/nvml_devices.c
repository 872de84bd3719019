/* SPDX-License-Identifier: Apache-2.0 */
/* NVML's device list as the slice sees it: the GPUs CUDA shows this process (CUDA_VISIBLE_DEVICES:
 * `gslice run --gpu` sets it to the slice's GPUs), in NVML's order, numbered from 0 as CUDA
 * numbers them. Without CUDA_VISIBLE_DEVICES every GPU is the slice's to see, as for CUDA; where
 * CUDA cannot say which, a slice's process sees none (slice_filter). */
#include "nvml_slice.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slice.h"
#include "uuid.h"

#define MAX_SHOWN 64

static struct {
  pthread_mutex_t mu;
  bool built;
  bool filter;                  /* false: NVML's list as it is */
  unsigned n;                   /* devices shown */
  unsigned real_idx[MAX_SHOWN]; /* shown device i is NVML's device real_idx[i] */
} V = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The UUIDs of the devices CUDA shows this process: 0 and *ret_n; 1 without
 * CUDA_VISIBLE_DEVICES (every GPU is the process's, as for CUDA); -1 when CUDA cannot say (no
 * driver, cuInit's error: why says which). CUDA_VISIBLE_DEVICES naming no device (empty, -1)
 * shows none. */
static int cuda_uuids(uint8_t (*out)[GS_UUID_LEN], unsigned max, unsigned *ret_n, char *why,
                      size_t len) {
  const struct gs_real *r = gs_real();
  int count = 0;
  *ret_n = 0;
  if (!gs_env("CUDA_VISIBLE_DEVICES"))
    return 1;
  if (gs_devices_changed(NULL, 0))
    return 0; /* the driver is not to be initialized on another GPU (k8s.c): none */
  snprintf(why, len, "no CUDA driver entry points (libcuda.so.1)");
  if (!r->cuInit || !r->cuDeviceGetCount || !r->cuDeviceGet || !r->cuDeviceGetUuid_v2)
    return -1;
  CUresult rc = r->cuInit(0);
  if (rc == CUDA_ERROR_NO_DEVICE)
    return 0;
  snprintf(why, len, "cuInit failed with CUDA error %d", (int)rc);
  if (rc != CUDA_SUCCESS)
    return -1;
  snprintf(why, len, "cuDeviceGetCount failed");
  if (r->cuDeviceGetCount(&count) != CUDA_SUCCESS)
    return -1;
  /* CUDA's devices as the program is shown them: none past the first that is not the slice's
   * (GSLICE_GPUS, slice.c), so NVML shows no GPU CUDA hides. */
  count = gs_devices_shown(count);
  for (int i = 0; i < count && *ret_n < max; i++) {
    CUdevice dev;
    CUuuid uuid;
    snprintf(why, len, "CUDA gave no UUID for its device %d", i);
    if (r->cuDeviceGet(&dev, i) != CUDA_SUCCESS ||
        r->cuDeviceGetUuid_v2(&uuid, dev) != CUDA_SUCCESS)
      return -1;
    memcpy(out[(*ret_n)++], uuid.bytes, GS_UUID_LEN);
  }
  return 0;
}

/* CUDA_VISIBLE_DEVICES read without CUDA, where it is GPU UUIDs only ("GPU-...", as slice.env
 * writes it): 0 and the UUIDs, or -1 when an item is anything else (an index, a MIG device, a
 * UUID's prefix: only CUDA knows which GPU those name). */
static int listed_uuids(const char *cvd, uint8_t (*out)[GS_UUID_LEN], unsigned max,
                        unsigned *ret_n) {
  char item[GS_UUID_STR_LEN + 8];
  *ret_n = 0;
  for (const char *p = cvd; *p;) {
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof(item) || *ret_n == max)
      return -1;
    memcpy(item, p, n);
    item[n] = 0;
    if (strncmp(item, "GPU-", 4) != 0 || gs_uuid_parse(item, out[*ret_n]) < 0)
      return -1;
    (*ret_n)++;
    p += n + (p[n] == ',');
  }
  return 0;
}

/* Whether the NVML list is to be kept to uuids[0..*ret_n) (true), or NVML's as it is. Where CUDA
 * cannot say which GPUs are the process's, a process of a slice (GSLICE_SLICE or
 * GSLICE_MEMORY_LIMIT set) sees none, never every GPU of the node (fourth attack run of
 * 2026-12-02: its cuInit failed, and the filter was off): its UUIDs in CUDA_VISIBLE_DEVICES
 * answer instead where that is all it holds. A process with no slice keeps NVML's list. */
static bool slice_filter(uint8_t (*uuids)[GS_UUID_LEN], unsigned max, unsigned *ret_n) {
  char why[96];
  int e = cuda_uuids(uuids, max, ret_n, why, sizeof(why));
  if (e >= 0)
    return e == 0;
  if (!gs_env("GSLICE_SLICE") && !gs_env("GSLICE_MEMORY_LIMIT"))
    return false;
  if (listed_uuids(gs_env("CUDA_VISIBLE_DEVICES"), uuids, max, ret_n) == 0)
    return true;
  *ret_n = 0;
  gs_log(GS_LOG_WARN,
         "NVML shows this process no GPU: its slice's GPUs (CUDA_VISIBLE_DEVICES=%.200s) are "
         "CUDA's to name, and CUDA cannot answer here (%s); every GPU of the node would show "
         "other tenants'. Fix what keeps CUDA from starting in this process (the driver's error; "
         "a process forked after CUDA started), or set CUDA_VISIBLE_DEVICES to GPU UUIDs "
         "(GPU-...), which the hook matches without CUDA",
         gs_env("CUDA_VISIBLE_DEVICES"), why);
  return true;
}

static bool listed(uint8_t (*uuids)[GS_UUID_LEN], unsigned n, const uint8_t *uuid) {
  for (unsigned i = 0; i < n; i++)
    if (memcmp(uuids[i], uuid, GS_UUID_LEN) == 0)
      return true;
  return false;
}

/* Builds the list once NVML answers (after the program's nvmlInit); NVML's error until then. */
static nvmlReturn_t build_locked(void) {
  const struct gs_real *r = gs_real();
  uint8_t uuids[MAX_SHOWN][GS_UUID_LEN];
  unsigned count = 0, nu = 0;
  if (!r->nvmlDeviceGetCount_v2 || !r->nvmlDeviceGetHandleByIndex_v2)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlReturn_t rc = r->nvmlDeviceGetCount_v2(&count);
  if (rc != NVML_SUCCESS)
    return rc;
  V.filter = slice_filter(uuids, MAX_SHOWN, &nu);
  V.n = 0;
  for (unsigned i = 0; V.filter && i < count && V.n < MAX_SHOWN; i++) {
    nvmlDevice_t d;
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    uint8_t uuid[GS_UUID_LEN];
    if (r->nvmlDeviceGetHandleByIndex_v2(i, &d) == NVML_SUCCESS &&
        r->nvmlDeviceGetUUID(d, text, sizeof(text)) == NVML_SUCCESS &&
        gs_uuid_parse(text, uuid) == 0 && listed(uuids, nu, uuid))
      V.real_idx[V.n++] = i;
  }
  V.built = true;
  return NVML_SUCCESS;
}

static nvmlReturn_t shown(void) {
  nvmlReturn_t rc = NVML_SUCCESS;
  gs_setup();
  pthread_mutex_lock(&V.mu);
  if (!V.built)
    rc = build_locked();
  pthread_mutex_unlock(&V.mu);
  return rc;
}

/* The position of NVML's device `real` in the list shown; -1 when hidden. */
static int shown_index(unsigned real) {
  for (unsigned i = 0; i < V.n; i++)
    if (V.real_idx[i] == real)
      return (int)i;
  return -1;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
  const struct gs_real *r = gs_real();
  nvmlReturn_t rc = shown();
  if (rc != NVML_SUCCESS || !V.filter)
    return r->nvmlDeviceGetCount_v2 ? r->nvmlDeviceGetCount_v2(deviceCount) : rc;
  if (!deviceCount)
    return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = V.n;
  return NVML_SUCCESS;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) {
  return nvmlDeviceGetCount_v2(deviceCount);
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetHandleByIndex_v2)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlReturn_t rc = shown();
  if (rc != NVML_SUCCESS || !V.filter)
    return r->nvmlDeviceGetHandleByIndex_v2(index, device);
  if (index >= V.n)
    return NVML_ERROR_INVALID_ARGUMENT; /* as NVML answers an index past its count */
  return r->nvmlDeviceGetHandleByIndex_v2(V.real_idx[index], device);
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* A MIG device handle: a compute instance of a GPU in MIG mode, which may be any tenant's (a
 * slice is a share of a whole GPU, never a MIG device). Its nvmlDeviceGetIndex is its index
 * under its GPU, which would pass for one of the slice's GPUs' numbers. */
static bool is_mig(nvmlDevice_t d) {
  const struct gs_real *r = gs_real();
  unsigned mig = 0;
  return r->nvmlDeviceIsMigDeviceHandle &&
         r->nvmlDeviceIsMigDeviceHandle(d, &mig) == NVML_SUCCESS && mig;
}

/* The device's number in the list shown (as CUDA numbers it), not NVML's own. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetIndex)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  unsigned real = 0;
  nvmlReturn_t rc = r->nvmlDeviceGetIndex(device, &real);
  if (rc == NVML_SUCCESS && shown() == NVML_SUCCESS && is_mig(device))
    return NVML_ERROR_INVALID_ARGUMENT; /* its index under its GPU: a MIG device is no slice's */
  if (rc != NVML_SUCCESS)
    return rc;
  int i = shown() == NVML_SUCCESS && V.filter ? shown_index(real) : (int)real;
  if (i < 0)
    return NVML_ERROR_INVALID_ARGUMENT; /* a device the slice does not see is no device */
  if (!index)
    return NVML_ERROR_INVALID_ARGUMENT; /* as NVML answers a NULL index, filter on or off */
  *index = (unsigned)i;
  return NVML_SUCCESS;
}

bool gs_nvml_hidden(nvmlDevice_t d) {
  const struct gs_real *r = gs_real();
  unsigned real;
  if (shown() != NVML_SUCCESS)
    return false;
  if (is_mig(d))
    return true;
  return V.filter && (!r->nvmlDeviceGetIndex || r->nvmlDeviceGetIndex(d, &real) != NVML_SUCCESS ||
                      shown_index(real) < 0);
}

/* A lookup's answer kept to the slice (UUID, serial, bus id): a GPU it does not see is
 * NVML_ERROR_NOT_FOUND, as NVML answers for a GPU that is not there. */
static nvmlReturn_t kept(nvmlReturn_t rc, nvmlDevice_t d, nvmlDevice_t *device) {
  if (rc == NVML_SUCCESS && gs_nvml_hidden(d))
    return NVML_ERROR_NOT_FOUND;
  if (rc == NVML_SUCCESS && device)
    *device = d;
  return rc == NVML_SUCCESS && !device ? NVML_ERROR_INVALID_ARGUMENT : rc;
}

/* Each lookup of a device by name: NVML's answer (its checks of the key: a version word, a
 * type), kept to the slice. A MIG device's UUID finds none: a MIG device is no slice's. */
#define GS_LOOKUP(fn, key_type)                                                                    \
  GS_EXPORT nvmlReturn_t fn(key_type key, nvmlDevice_t *device) {                                  \
    const struct gs_real *r = gs_real();                                                           \
    nvmlDevice_t d = NULL;                                                                         \
    if (!r->fn)                                                                                    \
      return NVML_ERROR_FUNCTION_NOT_FOUND;                                                        \
    nvmlReturn_t rc = r->fn(key, &d); /* before d is read: argument order is unspecified */        \
    return kept(rc, d, device);                                                                    \
  }
GS_LOOKUP(nvmlDeviceGetHandleByUUID, const char *)
GS_LOOKUP(nvmlDeviceGetHandleByUUIDV, const nvmlUUID_t *) /* R560: ASCII or binary, versioned */
GS_LOOKUP(nvmlDeviceGetHandleBySerial, const char *)
GS_LOOKUP(nvmlDeviceGetHandleByPciBusId_v2, const char *)
GS_LOOKUP(nvmlDeviceGetHandleByPciBusId, const char *) /* v1: as v2 (which parses more forms) */
