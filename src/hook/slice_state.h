/* SPDX-License-Identifier: Apache-2.0 */
/* The process's side of the slice, as state: the one instance (slice.c) that slice.c (setup,
 * slots), reserve.c, pools.c and vmm.c share, and its lock. Only those four files include this
 * header; every other file goes through slice.h. Nothing here is taken without S.lock, and the
 * region's own lock is only ever taken inside it. */
#pragma once
#include <pthread.h>

#include "slice.h"

struct pool {
  CUmemoryPool pool;
  unsigned slot;
  uint64_t charged; /* what the region holds for this pool */
  int by_reserved;  /* counted by the pool's reservation (else per allocation) */
  unsigned pending; /* allocations between gs_pool_track and gs_pool_take_growth */
};

/* The process's side of the slice. Everything after `lock` changes under it; the region has its
 * own (process-shared) lock, always taken inside this one, never around it. */
struct gs_slice_state {
  struct gs_config config;
  struct gs_region *region;
  pthread_mutex_t lock;
  int attached; /* this process (this pid) has its entry */
  unsigned proc;
  int dev_known[GS_CONFIG_MAX_ORDINALS];
  unsigned dev_slot[GS_CONFIG_MAX_ORDINALS];
  struct gs_allocs allocs;
  struct pool *pools; /* grown as needed: a pool left uncounted would keep freed memory */
  unsigned npools, cap_pools;
  /* Per device slot: what the device holds for this process beyond what the hook counted
   * (module code, lazily grown driver memory, paths it does not wrap), as last reconciled. */
  uint64_t overhead[GS_REGION_MAX_DEVICES];
  uint64_t reconciled_ns[GS_REGION_MAX_DEVICES]; /* atomic: read without the lock (reserve.c) */
  int reconciling;
  uint64_t view_swept_ns; /* atomic: the last gs_reclaim_for_view that ran (reserve.c) */
  int ordinals_checked;   /* GSLICE_MEMORY_LIMIT's device indexes checked against the devices */
  uint64_t serials; /* numbers for released-but-alive VMM handles and destroyed-but-held pools */
};

extern struct gs_slice_state gs_slice_state;
/* Short for the one instance in the four files of the slice. */
#define S gs_slice_state

/* S.lock with cancellation off while it is held (slice.c says why). */
void gs_slice_lock(void);
void gs_slice_unlock(void);
/* Under S.lock: takes this process's entry in the region if it has none yet. */
int gs_slice_attach_locked(void);
/* Under S.lock: gs_slot_for_alloc (slice.h). */
int gs_slot_for_alloc_locked(CUdevice dev, unsigned *ret_slot);
