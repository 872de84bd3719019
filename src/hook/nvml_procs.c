/* SPDX-License-Identifier: Apache-2.0 */
/* NVML's process lists as the slice sees them: its own processes only, by the pids of its pid
 * namespace, each with the memory the slice counts for it (the region's entries, which add up
 * to the slice's used memory that nvmlDeviceGetMemoryInfo shows); and the daemon's measured
 * utilization of the slice, from the region too. */
#include "nvml_slice.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "slice.h"

int gs_nvml_slot(nvmlDevice_t device, unsigned *ret_slot) {
  const struct gs_real *r = gs_real();
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  uint8_t uuid[GS_REGION_UUID_LEN];
  if (!r->nvmlDeviceGetUUID || r->nvmlDeviceGetUUID(device, text, sizeof(text)) != NVML_SUCCESS ||
      gs_uuid_parse(text, uuid) < 0)
    return -ENODEV;
  return gs_region_device(gs_slice_region(), uuid, 0, ret_slot);
}

int gs_nvml_slice_procs(nvmlDevice_t device, struct gs_nvml_proc *out, unsigned max,
                        unsigned *ret_n) {
  unsigned slot, all = 0, n = 0;
  *ret_n = 0;
  gs_setup();
  int e = gs_nvml_slot(device, &slot);
  if (e == -ENOENT)
    return 0;
  if (e < 0)
    return e;
  gs_reclaim_for_view(); /* a process that is gone is listed no more */
  struct gs_region_proc_info *info = calloc(GS_REGION_MAX_PROCS, sizeof(*info));
  if (!info)
    return -ENOMEM;
  e = gs_region_procs(gs_slice_region(), info, GS_REGION_MAX_PROCS, &all);
  uint64_t ns = gs_proc_pidns();
  for (unsigned i = 0; e == 0 && i < all && n < max; i++) {
    const struct gs_region_proc_info *p = &info[i];
    if (p->pid <= 0 || p->used[slot] == 0 || (p->pidns && ns && p->pidns != ns))
      continue;
    out[n].pid = (unsigned)p->pid;
    out[n].used = p->used[slot];
    n++;
  }
  free(info);
  if (e == 0)
    *ret_n = n;
  return e;
}

int gs_nvml_measured_util(nvmlDevice_t device, unsigned *ret_pct) {
  unsigned slot, pct;
  uint64_t end;
  gs_setup();
  if (!gs_slice_region() || gs_nvml_slot(device, &slot) < 0 ||
      gs_region_util(gs_slice_region(), slot, &pct, &end) < 0)
    return -ENOENT;
  /* The daemon's clock is this one (CLOCK_MONOTONIC: one per boot, unless a time namespace
   * shifts it); an end ahead of now was not written by it. */
  uint64_t now = gs_mono_ns();
  if (end > now || now - end > GS_NVML_UTIL_FRESH_NS)
    return -ENOENT;
  *ret_pct = pct;
  return 0;
}

bool gs_nvml_has_pid(const struct gs_nvml_proc *procs, unsigned n, unsigned pid) {
  for (unsigned i = 0; i < n; i++)
    if (procs[i].pid == pid)
      return true;
  return false;
}

void *gs_nvml_list(gs_nvml_fill_fn fill, void *ctx, size_t size, unsigned need, unsigned *ret_n,
                   nvmlReturn_t *ret_rc) {
  void *buf = NULL;
  *ret_n = 0;
  *ret_rc = NVML_ERROR_UNKNOWN; /* the list never settled */
  for (unsigned attempt = 0, room = need + 8; attempt < 16 && room <= GS_NVML_LIST_MAX; attempt++) {
    unsigned n = room;
    free(buf);
    if (!(buf = calloc(room, size))) {
      *ret_rc = NVML_ERROR_MEMORY;
      return NULL;
    }
    nvmlReturn_t rc = fill(ctx, &n, buf);
    if (rc == NVML_SUCCESS) {
      *ret_rc = rc;
      *ret_n = n < room ? n : room;
      return buf;
    }
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) {
      *ret_rc = rc;
      break;
    }
    room = (n > room ? n : room) * 2;
  }
  free(buf);
  return NULL;
}

static nvmlReturn_t fill_compute(void *device, unsigned *n, void *buf) {
  return gs_real()->nvmlDeviceGetComputeRunningProcesses_v3(device, n, buf);
}

/* NVML's own compute list for `device` (malloc'd, *ret_n entries), NULL when it gives none. */
static nvmlProcessInfo_t *real_compute(nvmlDevice_t device, unsigned *ret_n) {
  const struct gs_real *r = gs_real();
  unsigned need = 0;
  nvmlReturn_t rc;
  *ret_n = 0;
  if (!r->nvmlDeviceGetComputeRunningProcesses_v3 ||
      r->nvmlDeviceGetComputeRunningProcesses_v3(device, &need, NULL) !=
          NVML_ERROR_INSUFFICIENT_SIZE)
    return NULL; /* SUCCESS: none */
  return gs_nvml_list(fill_compute, device, sizeof(nvmlProcessInfo_t), need, ret_n, &rc);
}

/* The slice counts a process's context as measured and its allocations as asked, NVML shows
 * what the driver holds: they agree within this (or a quarter of the figure) where the pids are
 * the same processes' (the hook reconciles the two in that case, measure.c). */
#define PID_MATCH_SLACK (64ull << 20)

bool gs_nvml_pids_ours(nvmlDevice_t device, const struct gs_nvml_proc *procs, unsigned n) {
  unsigned nr;
  nvmlProcessInfo_t *real = real_compute(device, &nr);
  bool ours = n > 0 && real;
  for (unsigned i = 0; ours && i < n; i++) {
    bool found = false;
    for (unsigned j = 0; j < nr && !found; j++) {
      if (real[j].pid != procs[i].pid)
        continue;
      uint64_t shown = real[j].usedGpuMemory, mine = procs[i].used;
      uint64_t slack = mine / 4 > PID_MATCH_SLACK ? mine / 4 : PID_MATCH_SLACK;
      found = shown == (unsigned long long)NVML_VALUE_NOT_AVAILABLE ||
              (shown + slack >= mine && shown <= mine + slack);
    }
    ours = found;
  }
  free(real);
  return ours;
}

/* The documented answer (NVML reference, nvmlDeviceGetComputeRunningProcesses): *count = 0 and
 * infos NULL asks for the count (SUCCESS when none, else INSUFFICIENT_SIZE); too small a count
 * is INSUFFICIENT_SIZE with *count = the entries needed; else the entries and their count. */
static nvmlReturn_t answer(const struct gs_nvml_proc *procs, unsigned n, unsigned *count,
                           void *infos, int v1) {
  if (n > *count) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; i++) {
    if (v1) {
      nvmlProcessInfo_v1_t *o = (nvmlProcessInfo_v1_t *)infos + i;
      memset(o, 0, sizeof(*o));
      o->pid = procs[i].pid;
      o->usedGpuMemory = procs[i].used;
    } else {
      nvmlProcessInfo_t *o = (nvmlProcessInfo_t *)infos + i;
      memset(o, 0, sizeof(*o));
      o->pid = procs[i].pid;
      o->usedGpuMemory = procs[i].used;
      o->gpuInstanceId = NVML_NO_INSTANCE;
      o->computeInstanceId = NVML_NO_INSTANCE;
    }
  }
  *count = n;
  return NVML_SUCCESS;
}

/* The real list's call (the caller's ABI version of it) with a count of 0: what NVML says of
 * the device and arguments (not initialized, not a device, not supported) stands; SUCCESS or
 * INSUFFICIENT_SIZE go on. */
static nvmlReturn_t real_probe(nvmlProcessMode_t kind, int abi, nvmlDevice_t device) {
  const struct gs_real *r = gs_real();
  unsigned zero = 0;
  nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
#define GS_PROBE(fn, mode, version, type)                                                          \
  if (kind == (mode) && abi == (version) && r->fn)                                                 \
    rc = r->fn(device, &zero, NULL);
  NVML_PROCESS_LISTS(GS_PROBE)
#undef GS_PROBE
  return rc == NVML_ERROR_INSUFFICIENT_SIZE ? NVML_SUCCESS : rc;
}

/* NVML's graphics or MPS list kept to the slice's processes (into out[], GS_NVML_MAX_PROCS),
 * only where NVML's pids are ours: else nothing of it can be told apart, and none is shown. */
static unsigned real_kept(nvmlProcessMode_t kind, nvmlDevice_t device,
                          const struct gs_nvml_proc *procs, unsigned n, struct gs_nvml_proc *out) {
  const struct gs_real *r = gs_real();
  if (n == 0 || !gs_nvml_pids_ours(device, procs, n))
    return 0;
  unsigned got = GS_NVML_MAX_PROCS, kept = 0;
  nvmlProcessInfo_t *infos = calloc(got, sizeof(*infos));
  nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (infos && kind == NVML_PROCESS_MODE_GRAPHICS && r->nvmlDeviceGetGraphicsRunningProcesses_v3)
    rc = r->nvmlDeviceGetGraphicsRunningProcesses_v3(device, &got, infos);
  else if (infos && kind == NVML_PROCESS_MODE_MPS && r->nvmlDeviceGetMPSComputeRunningProcesses_v3)
    rc = r->nvmlDeviceGetMPSComputeRunningProcesses_v3(device, &got, infos);
  for (unsigned i = 0; rc == NVML_SUCCESS && i < got && i < GS_NVML_MAX_PROCS; i++)
    for (unsigned j = 0; j < n; j++)
      if (procs[j].pid == infos[i].pid)
        out[kept++] = procs[j]; /* with the slice's figure for it, as in the compute list */
  free(infos);
  return kept;
}

/* The processes shown in `kind`'s list of `device`: in buf (2 * GS_NVML_MAX_PROCS entries),
 * *ret_n of them at the pointer returned. */
static const struct gs_nvml_proc *shown_list(nvmlProcessMode_t kind, nvmlDevice_t device,
                                             struct gs_nvml_proc *buf, unsigned *ret_n) {
  unsigned n = 0;
  if (gs_nvml_slice_procs(device, buf, GS_NVML_MAX_PROCS, &n) < 0)
    n = 0;
  if (kind == NVML_PROCESS_MODE_COMPUTE) {
    *ret_n = n;
    return buf;
  }
  *ret_n = real_kept(kind, device, buf, n, buf + GS_NVML_MAX_PROCS);
  return buf + GS_NVML_MAX_PROCS;
}

static nvmlReturn_t slice_list(nvmlProcessMode_t kind, int abi, nvmlDevice_t device,
                               unsigned *count, void *infos) {
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = real_probe(kind, abi, device);
  if (rc != NVML_SUCCESS)
    return rc;
  if (!count || (*count && !infos))
    return NVML_ERROR_INVALID_ARGUMENT;
  struct gs_nvml_proc *buf = calloc(2 * GS_NVML_MAX_PROCS, sizeof(*buf));
  unsigned n = 0;
  if (!buf)
    return NVML_ERROR_MEMORY;
  const struct gs_nvml_proc *shown = shown_list(kind, device, buf, &n);
  rc = answer(shown, n, count, infos, abi == 1);
  free(buf);
  return rc;
}

/* NVML 12.4's list call, one mode at a time: the same lists. NVML's answer to a count call
 * (version word, mode, device) stands when it is an error. */
GS_EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                             nvmlProcessDetailList_t *plist) {
  const struct gs_real *r = gs_real();
  if (!r->nvmlDeviceGetRunningProcessDetailList)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  gs_setup();
  if (gs_nvml_hidden(device))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!plist)
    return r->nvmlDeviceGetRunningProcessDetailList(device, plist);
  nvmlProcessDetailList_t probe = *plist;
  probe.numProcArrayEntries = 0;
  probe.procArray = NULL;
  nvmlReturn_t rc = r->nvmlDeviceGetRunningProcessDetailList(device, &probe);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
    return rc;
  struct gs_nvml_proc *buf = calloc(2 * GS_NVML_MAX_PROCS, sizeof(*buf));
  unsigned n = 0;
  if (!buf)
    return NVML_ERROR_MEMORY;
  nvmlProcessMode_t kind =
      plist->mode == NVML_PROCESS_MODE_GRAPHICS || plist->mode == NVML_PROCESS_MODE_MPS
          ? (nvmlProcessMode_t)plist->mode
          : NVML_PROCESS_MODE_COMPUTE;
  const struct gs_nvml_proc *shown = shown_list(kind, device, buf, &n);
  rc = NVML_SUCCESS;
  if (!plist->procArray || plist->numProcArrayEntries < n) {
    rc = n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
  } else {
    for (unsigned i = 0; i < n; i++) {
      nvmlProcessDetail_v1_t *o = &plist->procArray[i];
      memset(o, 0, sizeof(*o));
      o->pid = shown[i].pid;
      o->usedGpuMemory = shown[i].used;
      o->gpuInstanceId = NVML_NO_INSTANCE;
      o->computeInstanceId = NVML_NO_INSTANCE;
    }
  }
  plist->numProcArrayEntries = n;
  free(buf);
  return rc;
}

/* Each ABI version of the three lists, one exported entry point each (NVML_PROCESS_LISTS). */
#define GS_PROCESS_LIST(fn, mode, abi, type)                                                       \
  GS_EXPORT nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos) {           \
    return slice_list(mode, abi, device, infoCount, infos);                                        \
  }
NVML_PROCESS_LISTS(GS_PROCESS_LIST)
#undef GS_PROCESS_LIST
