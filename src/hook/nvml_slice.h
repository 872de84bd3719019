/* SPDX-License-Identifier: Apache-2.0 */
/* What the hook's NVML wrappers share (nvml.c: memory and utilization; nvml_procs.c: process
 * lists; nvml_devices.c: the device list): the slice's processes on an NVML device, as the
 * slice's region lists them. docs/nvml.md says which call answers what. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "hook.h"

/* One process of the slice on a device: its pid in this process's pid namespace (what `ps` in
 * the container shows) and the bytes the slice counts for it there. */
struct gs_nvml_proc {
  unsigned pid;
  uint64_t used;
};
#define GS_NVML_MAX_PROCS 256 /* GS_REGION_MAX_PROCS: a region lists no more */

/* The region slot of an NVML device: 0, -ENOENT (the slice never met the device), -ENODEV (NVML
 * gives no UUID for the handle). */
int gs_nvml_slot(nvmlDevice_t device, unsigned *ret_slot);
/* The slice's processes holding memory on `device` (entries of other pid namespaces are left
 * out: their pids mean nothing here). 0 and *ret_n (0 on a device the slice never used), or
 * -errno. */
int gs_nvml_slice_procs(nvmlDevice_t device, struct gs_nvml_proc *out, unsigned max,
                        unsigned *ret_n);
/* Whether the pids NVML gives for `device` are this namespace's: every process of the slice
 * there is listed by NVML under its own pid, with about the memory the slice counts for it.
 * Inside a container NVML gives the host's pids (NVIDIA/nvidia-docker#1483) or none: false. */
bool gs_nvml_pids_ours(nvmlDevice_t device, const struct gs_nvml_proc *procs, unsigned n);
/* The slice's processes on `device` whose pids NVML's lists are in (malloc'd, *ret_n): none
 * where NVML's pids are another namespace's (they cannot be told apart), NULL on no memory. */
struct gs_nvml_proc *gs_nvml_procs_named(nvmlDevice_t device, unsigned *ret_n);
/* Whether `d` is a GPU the slice does not see (nvml_devices.c: not among CUDA's devices for this
 * process), a MIG device (never a slice's: docs/nvml.md, "MIG"), or a handle NVML does not know.
 * Every per-device call the hook wraps answers such a handle NVML_ERROR_INVALID_ARGUMENT, as NVML
 * answers a handle that is no device. */
bool gs_nvml_hidden(nvmlDevice_t d);
/* One of NVML's two-call lists (a count, then a call with room), filled against entries that
 * appear between the calls (other tenants' processes, sessions, samples): fill(ctx, &n, buf) is
 * NVML's call with room for n entries of `size` bytes (out: the entries written, or with
 * NVML_ERROR_INSUFFICIENT_SIZE those needed). From `need` (what the count call said), each try
 * has room for twice what NVML last said it needed, up to 16 tries, so only NVML's errors, never
 * the churn, fail it. The entries (malloc'd, *ret_n; never NULL on success), or NULL with NVML's
 * error in *ret_rc (NVML_ERROR_UNKNOWN: the list never settled; NVML_ERROR_MEMORY). */
typedef nvmlReturn_t (*gs_nvml_fill_fn)(void *ctx, unsigned *n, void *buf);
#define GS_NVML_LIST_MAX (1u << 20) /* room asked of NVML at most, entries */
void *gs_nvml_list(gs_nvml_fill_fn fill, void *ctx, size_t size, unsigned need, unsigned *ret_n,
                   nvmlReturn_t *ret_rc);
/* procs[] holds pid. */
bool gs_nvml_has_pid(const struct gs_nvml_proc *procs, unsigned n, unsigned pid);
/* gsliced's measured share of `device` for the slice (percent of the last second its kernels
 * ran: docs/nvml.md), from the slice's region, in any pid namespace: 0 and *ret_pct when the
 * daemon wrote it within GS_NVML_UTIL_FRESH_NS, -ENOENT when absent or stale (no daemon, a
 * device the slice never met or the daemon does not schedule it on). */
#define GS_NVML_UTIL_FRESH_NS (3ull * 1000000000ull)
int gs_nvml_measured_util(nvmlDevice_t device, unsigned *ret_pct);

/* A wrapper for a call whose answer is the whole device's load (every tenant's) and of which the
 * hook has no slice's figure: a GPU the slice does not see is INVALID_ARGUMENT, and what NVML
 * says of the device and arguments stands; its answer is NVML_ERROR_NOT_SUPPORTED (tools print
 * N/A), the value *out cleared. The call's device parameter is named `device`. */
#define GS_NVML_REFUSED(fn, params, args, out)                                                     \
  GS_EXPORT nvmlReturn_t fn params {                                                               \
    const struct gs_real *r = gs_real();                                                           \
    if (!r->fn)                                                                                    \
      return NVML_ERROR_FUNCTION_NOT_FOUND;                                                        \
    gs_setup();                                                                                    \
    if (gs_nvml_hidden(device))                                                                    \
      return NVML_ERROR_INVALID_ARGUMENT;                                                          \
    nvmlReturn_t rc = r->fn args;                                                                  \
    if (rc != NVML_SUCCESS)                                                                        \
      return rc;                                                                                   \
    if (out)                                                                                       \
      *(out) = 0;                                                                                  \
    return NVML_ERROR_NOT_SUPPORTED;                                                               \
  }

/* A call on the slice's GPUs is NVML's; naming any other GPU (`hidden`), it has no answer:
 * NVML_ERROR_INVALID_ARGUMENT, as NVML answers a handle that is no device. */
#define GS_OWN_DEVICES(fn, hidden, params, args)                                                   \
  GS_EXPORT nvmlReturn_t fn params {                                                               \
    const struct gs_real *r = gs_real();                                                           \
    if (!r->fn)                                                                                    \
      return NVML_ERROR_FUNCTION_NOT_FOUND;                                                        \
    if (hidden)                                                                                    \
      return NVML_ERROR_INVALID_ARGUMENT;                                                          \
    return r->fn args;                                                                             \
  }
