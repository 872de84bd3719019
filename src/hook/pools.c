/* SPDX-License-Identifier: Apache-2.0 */
/* The books of stream-ordered pools (slice_state.h): each pool counted by its reservation and
 * refreshed lazily, pointers allocated from it, and which device its memory is on. */
#include "slice_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int pool_reserved(CUmemoryPool pool, uint64_t *ret) {
  const struct gs_real *r = gs_real();
  cuuint64_t v = 0;
  if (!r->cuMemPoolGetAttribute ||
      r->cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
    return -ENOTSUP;
  *ret = v;
  return 0;
}

/* Under S.lock. */
static struct pool *pool_find_locked(CUmemoryPool pool) {
  for (unsigned i = 0; i < S.npools; i++)
    if (S.pools[i].pool == pool)
      return &S.pools[i];
  return NULL;
}

/* Brings the region in line with the pool's reservation: gives back what a trim released,
 * charges what grew behind the hook's back. Under S.lock. */
static void pool_refresh_locked(struct pool *p) {
  uint64_t now;
  if (!p->by_reserved || !S.attached || pool_reserved(p->pool, &now) < 0)
    return;
  if (now < p->charged)
    gs_region_release(S.region, S.proc, p->slot, p->charged - now);
  else if (now > p->charged)
    gs_region_charge(S.region, S.proc, p->slot, now - p->charged);
  p->charged = now;
}

void gs_pools_refresh(void) {
  gs_slice_lock();
  for (unsigned i = 0; i < S.npools; i++)
    if (!S.pools[i].pending)
      pool_refresh_locked(&S.pools[i]);
  gs_slice_unlock();
}

int gs_pool_track(CUmemoryPool pool, unsigned slot) {
  gs_slice_lock();
  struct pool *p = pool_find_locked(pool);
  if (!p && S.npools == S.cap_pools && gs_slice_attach_locked() == 0) {
    unsigned cap = S.cap_pools ? 2 * S.cap_pools : 16;
    struct pool *more = realloc(S.pools, cap * sizeof(*more));
    if (more) {
      S.pools = more;
      S.cap_pools = cap;
    }
  }
  if (!p && S.npools < S.cap_pools && gs_slice_attach_locked() == 0) {
    uint64_t now = 0;
    p = &S.pools[S.npools++];
    *p = (struct pool){0}; /* realloc'ed memory: nothing in flight yet */
    p->pool = pool;
    p->slot = slot;
    p->by_reserved = pool_reserved(pool, &now) == 0;
    /* What the pool held before the hook first saw it is the slice's too. */
    if (p->by_reserved && now)
      gs_region_charge(S.region, S.proc, slot, now);
    p->charged = now;
  }
  int by_reserved = p ? p->by_reserved : 0;
  if (p) {
    /* With allocations in flight, the reservation already includes growth their tickets
     * will claim: a refresh now would charge it a second time. */
    if (!p->pending)
      pool_refresh_locked(p);
    if (by_reserved)
      p->pending++;
  }
  gs_slice_unlock();
  return by_reserved;
}

uint64_t gs_pool_take_growth(CUmemoryPool pool, uint64_t reserved, int done) {
  uint64_t take = 0, now = 0;
  gs_slice_lock();
  struct pool *p = pool_find_locked(pool);
  if (p && p->pending)
    p->pending--;
  if (p && done && pool_reserved(pool, &now) == 0 && now > p->charged) {
    /* Growth beyond what this allocation reserved belongs to others still in flight, unless
     * there are none (then the pool grew by more than asked: its granularity). */
    take = now - p->charged;
    if (p->pending && take > reserved)
      take = reserved;
    p->charged += take;
  }
  gs_slice_unlock();
  return take;
}

void gs_pool_undo_growth(CUmemoryPool pool, uint64_t growth) {
  gs_slice_lock();
  struct pool *p = pool_find_locked(pool);
  if (p) {
    p->charged = p->charged > growth ? p->charged - growth : 0;
    if (!p->pending)
      pool_refresh_locked(p);
  }
  gs_slice_unlock();
}

void gs_pool_refresh(CUmemoryPool pool) {
  gs_slice_lock();
  struct pool *p = pool_find_locked(pool);
  if (p && !p->pending)
    pool_refresh_locked(p);
  gs_slice_unlock();
}

void gs_pool_forget(CUmemoryPool pool) {
  gs_slice_lock();
  struct gs_alloc gone;
  uint64_t key = (uint64_t)(uintptr_t)pool;
  gs_allocs_take(&S.allocs, GS_ALLOC_POOL, key, &gone);
  struct pool *p = pool_find_locked(pool);
  if (p) {
    uint64_t keep = 0;
    if (p->by_reserved) {
      /* cuMemPoolDestroy with allocations outstanding returns at once; the driver frees the
       * pool's memory once they are all freed. What they hold (in whole granules, never more
       * than the pool's charge) stays counted until then, under a serial number: the pool's
       * handle may be handed out again. */
      uint64_t serial = ++S.serials, bytes = 0;
      uint64_t n = gs_allocs_rekey(&S.allocs, GS_ALLOC_POOL_PTR, key, GS_ALLOC_POOL_GONE_PTR,
                                   serial, &bytes);
      if (n) {
        keep = bytes > UINT64_MAX - (GS_POOL_GRANULE - 1)
                   ? UINT64_MAX
                   : (bytes + GS_POOL_GRANULE - 1) / GS_POOL_GRANULE * GS_POOL_GRANULE;
        keep = keep < p->charged ? keep : p->charged;
        struct gs_alloc g = {
            .key = serial, .kind = GS_ALLOC_POOL_GONE, .slot = p->slot, .bytes = keep, .maps = n};
        if (gs_allocs_put(&S.allocs, &g) < 0)
          keep = p->charged; /* no room to remember: keep it all until the process exits */
      }
    }
    if (S.attached && p->by_reserved)
      gs_region_release(S.region, S.proc, p->slot, p->charged - keep);
    *p = S.pools[--S.npools];
  }
  gs_slice_unlock();
}

void gs_pool_ptr_add(CUmemoryPool pool, uint64_t dptr, uint64_t bytes) {
  struct gs_alloc a = {.key = dptr,
                       .kind = GS_ALLOC_POOL_PTR,
                       .bytes = bytes,
                       .ref = (uint64_t)(uintptr_t)pool},
                  stale;
  gs_slice_lock();
  /* A stale entry at this address was freed where the hook did not see it. */
  gs_allocs_take(&S.allocs, GS_ALLOC_POOL_PTR, dptr, &stale);
  gs_allocs_put(&S.allocs, &a);
  gs_slice_unlock();
}

int gs_pool_ptr_take(uint64_t dptr, struct gs_alloc *ret) {
  gs_slice_lock();
  int e = gs_allocs_take(&S.allocs, GS_ALLOC_POOL_PTR, dptr, ret);
  if (e < 0)
    e = gs_allocs_take(&S.allocs, GS_ALLOC_POOL_GONE_PTR, dptr, ret);
  gs_slice_unlock();
  return e;
}

void gs_pool_ptr_settle(const struct gs_alloc *a, CUresult rc) {
  gs_slice_lock();
  struct gs_alloc g;
  if (rc != CUDA_SUCCESS) {
    gs_allocs_put(&S.allocs, a);
  } else if (a->kind == GS_ALLOC_POOL_GONE_PTR &&
             gs_allocs_take(&S.allocs, GS_ALLOC_POOL_GONE, a->ref, &g) == 0) {
    if (--g.maps == 0) {
      if (S.attached)
        gs_region_release(S.region, S.proc, g.slot, g.bytes);
    } else {
      gs_allocs_put(&S.allocs, &g);
    }
  }
  gs_slice_unlock();
}

void gs_pool_device_set(CUmemoryPool pool, CUdevice dev) {
  struct gs_alloc a = {
      .key = (uint64_t)(uintptr_t)pool, .kind = GS_ALLOC_POOL, .ref = (uint64_t)dev};
  gs_slice_lock();
  struct gs_alloc *old = gs_allocs_find(&S.allocs, GS_ALLOC_POOL, a.key);
  if (old)
    old->ref = a.ref;
  else
    gs_allocs_put(&S.allocs, &a);
  gs_slice_unlock();
}

int gs_pool_device(CUmemoryPool pool, CUdevice *ret_dev) {
  gs_slice_lock();
  struct gs_alloc *a = gs_allocs_find(&S.allocs, GS_ALLOC_POOL, (uint64_t)(uintptr_t)pool);
  if (a)
    *ret_dev = (CUdevice)a->ref;
  gs_slice_unlock();
  return a ? 0 : -ENOENT;
}
