/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's memory machinery shared by its wrappers (context.c, alloc.c, view.c): the process's
 * entry in the slice's region, device slots, reservations ("tickets"), the handle table, the
 * books of stream-ordered pools, and before/after measurements (measure.c). */
#pragma once
#include <errno.h>

#include "hook.h"

#include "allocs.h"
#include "region.h"

/* Returns CUDA_ERROR_NOT_FOUND from the wrapper when the real driver lacks `name`; declares r. */
#define GS_REAL_OR_NOT_FOUND(name)                                                                 \
  const struct gs_real *r = gs_real();                                                             \
  if (!r->name)                                                                                    \
  return CUDA_ERROR_NOT_FOUND

/* The slice's region and this process's configuration (after gs_setup). */
struct gs_region *gs_slice_region(void);
const struct gs_config *gs_slice_config(void);
/* What this process's entry holds on device `slot`; -ENOENT while it has no entry. */
int gs_slice_held(unsigned slot, uint64_t *ret_bytes);

/* The region slot of CUDA device ordinal `dev`, registering the device (and the cap
 * GSLICE_MEMORY_LIMIT gives it) the first time this process meets it. -EACCES for a device that
 * is not the slice's (gs_device_check). */
int gs_slot_of(CUdevice dev, unsigned *ret_slot);
/* The same for an allocation path: 0 and the slot; 1 when `dev` is no device (let the driver
 * refuse the call); -EACCES when it is not the slice's; -errno when the device cannot be counted
 * (the region's device table is full, its lock is not let go: said on stderr) — refuse the
 * allocation. */
int gs_slot_for_alloc(CUdevice dev, unsigned *ret_slot);
/* What an allocation path returns for gs_slot_for_alloc's e != 0: no device goes on to the real
 * call (which refuses it), another GPU than the slice's is an invalid device, a device that
 * cannot be counted is out of memory. */
static inline CUresult gs_slot_refusal(int e) {
  return e > 0 ? CUDA_SUCCESS : e == -EACCES ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_OUT_OF_MEMORY;
}
/* The slice's GPUs (slice.c): under gslice run, GSLICE_GPUS names them by UUID, and CUDA device k
 * of the process must be the k-th (the daemon holds that GPU's cap and token for it).
 * gs_device_check: 0 when `dev` is (or no GPUs are named, or CUDA gives no UUID: the driver
 * answers for it), -EACCES when it is another GPU (said once per device, with what to do).
 * gs_devices_shown: of the `n` devices CUDA has, how many the program is shown: those before the
 * first that is not the slice's. */
int gs_device_check(CUdevice dev);
int gs_devices_shown(int n);
/* The calling thread's current context and its device; -ENODEV without one. */
int gs_current_device(CUdevice *ret_dev, CUcontext *ret_ctx);

/* Charges (or gives back) what the device holds for this process on `dev` beyond what the hook
 * counted — module code, driver memory grown after the context was measured, paths the hook
 * does not wrap — as NVML's per-process figure shows it (nothing when NVML does not list this
 * process, e.g. in a pid namespace). At most every 200 ms unless `force`. */
void gs_reconcile(CUdevice dev, unsigned slot, int force);
/* For a view (cuMemGetInfo, NVML) whose figure holds other processes' bytes: drops the entries
 * of the slice's dead processes (the full check, a /proc read per entry), at most once every
 * 10 ms in this process. 1 when it ran (the figure is worth reading again), else 0. */
int gs_reclaim_for_view(void);

/* Reserves `bytes` on device slot `slot` for this process, before the real call; over the cap
 * (after reclaiming dead processes, pool trims and reconciling) says so on stderr and returns
 * -ENOMEM. */
int gs_reserve(CUdevice dev, unsigned slot, uint64_t bytes, const char *what);
void gs_release(unsigned slot, uint64_t bytes);

/* One allocation in flight: reserved before the real call, committed or aborted after. */
struct gs_ticket {
  int active; /* something is reserved (no context, no device: nothing to count) */
  CUdevice dev;
  unsigned slot;
  CUcontext ctx; /* owner: the allocation goes when this context goes; NULL for none */
  uint64_t bytes;
};
/* On the current context's device; CUDA_SUCCESS with an inactive ticket when there is none. */
CUresult gs_ticket_open(struct gs_ticket *t, uint64_t bytes, const char *what);
CUresult gs_ticket_open_on(struct gs_ticket *t, CUdevice dev, CUcontext ctx, uint64_t bytes,
                           const char *what);
/* For memory the driver has already given (measured imports): no reconciling, which would
 * count it twice. */
CUresult gs_ticket_open_taken(struct gs_ticket *t, CUdevice dev, CUcontext ctx, uint64_t bytes,
                              const char *what);
void gs_ticket_abort(struct gs_ticket *t);
/* Re-counts at the size the driver really took; -ENOMEM if growing overshoots the cap (the
 * ticket keeps its old size: free the allocation, then abort). */
int gs_ticket_true_up(struct gs_ticket *t, uint64_t real_bytes, const char *what);
/* Records the allocation as (kind, key) so its free gives the bytes back. */
int gs_ticket_commit(struct gs_ticket *t, enum gs_alloc_kind kind, uint64_t key);

/* Takes (kind, key) out of the table before the real free; -ENOENT if it was never counted. */
int gs_forget(enum gs_alloc_kind kind, uint64_t key, struct gs_alloc *ret);
/* After the real free: gives the bytes back, or puts the entry back if the free failed. */
void gs_settle_free(int had, const struct gs_alloc *a, CUresult rc);
/* VMM: physical memory is freed by the driver only once released and unmapped everywhere.
 * gs_vmm_mapped after a successful cuMemMap of `handle`; gs_vmm_released after a successful
 * cuMemRelease of the entry gs_forget took (its bytes go back now, or at the last unmap);
 * gs_vmm_unmapped after a successful cuMemUnmap of [va, va + size). */
void gs_vmm_mapped(uint64_t handle, uint64_t va, uint64_t size);
void gs_vmm_released(const struct gs_alloc *a);
void gs_vmm_unmapped(uint64_t va, uint64_t size);
/* Everything recorded as owned by `ctx` is given back (the context is gone). */
void gs_drop_context(CUcontext ctx);

/* The least a stream-ordered pool grows by. */
#define GS_POOL_GRANULE (2ull << 20)
/* Stream-ordered pools, counted by their reservation (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT).
 * gs_pool_track: before an allocation from `pool` (on device slot `slot`): starts or refreshes
 * its books; 1 when it is counted by reservation (then the allocation is in flight until
 * gs_pool_take_growth), 0 when its allocations must be counted one by one. */
int gs_pool_track(CUmemoryPool pool, unsigned slot);
/* Ends an in-flight allocation that reserved `reserved`; when `done` (the driver allocated)
 * returns the pool's growth it accounts for, now charged to the pool: at most `reserved`
 * while other allocations are in flight (the rest is theirs), all of it otherwise. */
uint64_t gs_pool_take_growth(CUmemoryPool pool, uint64_t reserved, int done);
/* Forgets a growth the region never held (the allocation was handed back), then refreshes. */
void gs_pool_undo_growth(CUmemoryPool pool, uint64_t growth);
/* Brings the region in line with the pool's reservation (a trim gives memory back). */
void gs_pool_refresh(CUmemoryPool pool);
void gs_pools_refresh(void);
/* The device a pool's memory is on, as cuMemPoolCreate, cuDeviceGetDefaultMemPool or
 * cuDeviceGetMemPool said: a pool may be on another device than the stream allocating from it.
 * -ENOENT for a pool the hook never saw made. */
void gs_pool_device_set(CUmemoryPool pool, CUdevice dev);
int gs_pool_device(CUmemoryPool pool, CUdevice *ret_dev);
/* Allocations from pools counted by reservation, by pointer: what a destroyed pool still holds.
 * gs_pool_ptr_add after the allocation; gs_pool_ptr_take before a free (-ENOENT: not one),
 * gs_pool_ptr_settle after it (puts it back if the free failed). */
void gs_pool_ptr_add(CUmemoryPool pool, uint64_t dptr, uint64_t bytes);
int gs_pool_ptr_take(uint64_t dptr, struct gs_alloc *ret);
void gs_pool_ptr_settle(const struct gs_alloc *a, CUresult rc);
/* The pool was destroyed: its charge is given back (and its device forgotten), except what
 * allocations still outstanding hold: that goes back when the last of them is freed. */
void gs_pool_forget(CUmemoryPool pool);

/* measure.c: what the device gives this process, for costs the driver decides (contexts,
 * imports): NVML's per-process used memory, or the device's free memory as a fallback. */
struct gs_probe {
  int proc_ok, proc_found, free_ok;
  uint64_t proc_used, dev_free;
};
void gs_probe(CUdevice dev, struct gs_probe *p);
/* Before the real call that makes this process's first context on `dev` (after the "before"
 * probe): from now on NVML may list this process there. NVML listing our pid on a device before
 * that is another namespace's pid: its per-process figures are then never used. */
void gs_probe_context_begins(CUdevice dev);
/* What the device gave this process between two probes; -ENODATA if it cannot tell. */
int gs_probe_delta(const struct gs_probe *before, const struct gs_probe *after, uint64_t *ret);
