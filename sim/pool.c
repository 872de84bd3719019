/* SPDX-License-Identifier: Apache-2.0 */
/* Stream-ordered allocation and memory pools: each device's default pool, created
 * pools, their reservations on the device (in 2 MiB granules), trimming and attributes.
 * Ranges and device charges go through mem.c and core.c, never around them. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void sim_pools_init(void) {
  for (unsigned d = 0; d < sim.ndev; d++) {
    struct sim_pool *p = &sim.default_pool[d];
    p->magic = SIM_POOL_MAGIC;
    p->dev = (int)d;
    sim.cur_pool[d] = p;
  }
}

/* sim.mu held: gives bytes of p's reservation back to the device. */
void sim_pool_release_locked(struct sim_pool *p, uint64_t bytes) {
  if (bytes > p->reserved)
    bytes = p->reserved;
  p->reserved -= bytes;
  sim_uncharge(p->dev, bytes);
}

/* sim.mu held: the pool keeps at least keep bytes (and everything in use). */
static void pool_trim_locked(struct sim_pool *p, uint64_t keep) {
  uint64_t target = sim_round_up(p->used, SIM_GRANULARITY);
  if (keep > target)
    target = keep;
  if (p->reserved > target)
    sim_pool_release_locked(p, p->reserved - target);
}

void sim_pools_trim(int dev) {
  pthread_mutex_lock(&sim.mu);
  /* At synchronize the driver returns what a pool holds past its release threshold. */
  pool_trim_locked(&sim.default_pool[dev], sim.default_pool[dev].threshold);
  for (struct sim_pool *p = sim.pools; p; p = p->next)
    if (p->dev == dev && !p->destroyed)
      pool_trim_locked(p, p->threshold);
  pthread_mutex_unlock(&sim.mu);
}

static CUresult pool_arg(CUmemoryPool h, struct sim_pool **ret) {
  struct sim_pool *p = (struct sim_pool *)h;
  if (!p || p->magic != SIM_POOL_MAGIC || p->destroyed)
    return CUDA_ERROR_INVALID_VALUE;
  *ret = p;
  return CUDA_SUCCESS;
}

static CUresult pool_alloc(struct sim_pool *p, size_t size, CUdeviceptr *dptr) {
  if (!dptr || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.mu);
  uint64_t spare = p->reserved - p->used;
  uint64_t grow = 0;
  if (spare < size) {
    /* The pool reserves device memory in whole granules, and keeps it when freed. */
    grow = sim_round_up(size - spare, SIM_GRANULARITY);
    if (sim_charge(p->dev, grow) != CUDA_SUCCESS) {
      /* Trim what is idle and try once more, as the real allocator does. */
      pool_trim_locked(p, 0);
      spare = p->reserved - p->used;
      grow = spare < size ? sim_round_up(size - spare, SIM_GRANULARITY) : 0;
      if (grow && sim_charge(p->dev, grow) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&sim.mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
    }
    p->reserved += grow;
    if (p->reserved > p->reserved_high)
      p->reserved_high = p->reserved;
  }
  p->used += size;
  if (p->used > p->used_high)
    p->used_high = p->used;
  pthread_mutex_unlock(&sim.mu);
  CUresult rc = sim_alloc_range(NULL, p->dev, size, 0, SIM_R_POOL, p, dptr);
  if (rc != CUDA_SUCCESS) {
    pthread_mutex_lock(&sim.mu);
    p->used -= size;
    pthread_mutex_unlock(&sim.mu);
  }
  return rc;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  int dev = s->ctx->dev;
  pthread_mutex_unlock(&sim.mu);
  return pool_alloc(sim.cur_pool[dev], bytesize, dptr);
}

SIM_TWINS(cuMemAllocAsync, _ptsz, alloc_async,
          (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), dptr, bytesize, hStream)

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream h,
                                int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  struct sim_pool *p;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc == CUDA_SUCCESS) {
    pthread_mutex_unlock(&sim.mu);
    rc = pool_arg(pool, &p);
  }
  return rc != CUDA_SUCCESS ? rc : pool_alloc(p, bytesize, dptr);
}

SIM_TWINS(cuMemAllocFromPoolAsync, _ptsz, alloc_from_pool,
          (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream), dptr,
          bytesize, pool, hStream)

static CUresult free_async(CUdeviceptr dptr, CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_unlock(&sim.mu);
  return sim_free_range(dptr);
}

SIM_TWINS(cuMemFreeAsync, _ptsz, free_async, (CUdeviceptr dptr, CUstream hStream), dptr, hStream)

/* The arguments of a query of a device's pool: where the answer goes, and the device. */
static CUresult device_pool_args(const CUmemoryPool *out, CUdevice dev) {
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  return sim_dev_ok(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

SIM_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
  SIM_REQUIRE_INIT();
  CUresult rc = device_pool_args(pool_out, dev);
  if (rc == CUDA_SUCCESS)
    *pool_out = (CUmemoryPool)&sim.default_pool[dev];
  return rc;
}

SIM_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  SIM_REQUIRE_INIT();
  CUresult rc = device_pool_args(pool, dev);
  if (rc == CUDA_SUCCESS)
    *pool = (CUmemoryPool)sim.cur_pool[dev];
  return rc;
}

SIM_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  SIM_REQUIRE_INIT();
  struct sim_pool *p;
  CUresult rc = pool_arg(pool, &p);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!sim_dev_ok(dev) || p->dev != dev)
    return CUDA_ERROR_INVALID_DEVICE;
  sim.cur_pool[dev] = p;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  SIM_REQUIRE_INIT();
  if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  int dev = poolProps->location.id;
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  struct sim_pool *p = calloc(1, sizeof(*p));
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  p->magic = SIM_POOL_MAGIC;
  p->dev = dev;
  pthread_mutex_lock(&sim.mu);
  p->next = sim.pools;
  sim.pools = p;
  pthread_mutex_unlock(&sim.mu);
  *pool = (CUmemoryPool)p;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  SIM_REQUIRE_INIT();
  struct sim_pool *p;
  CUresult rc = pool_arg(pool, &p);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (p == &sim.default_pool[p->dev])
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.mu);
  /* Idle memory goes back now; what is still allocated goes back as it is freed. */
  sim_pool_release_locked(p, p->reserved - p->used);
  p->destroyed = 1;
  if (sim.cur_pool[p->dev] == p)
    sim.cur_pool[p->dev] = &sim.default_pool[p->dev];
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  SIM_REQUIRE_INIT();
  struct sim_pool *p;
  CUresult rc = pool_arg(pool, &p);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&sim.mu);
  pool_trim_locked(p, minBytesToKeep);
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

/* The pool an attribute call names, its value pointer checked. */
static CUresult pool_attr_arg(CUmemoryPool pool, const void *value, struct sim_pool **ret) {
  CUresult rc = pool_arg(pool, ret);
  return rc == CUDA_SUCCESS && !value ? CUDA_ERROR_INVALID_VALUE : rc;
}

SIM_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  SIM_REQUIRE_INIT();
  struct sim_pool *p;
  CUresult rc = pool_attr_arg(pool, value, &p);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&sim.mu);
  switch (attr) {
  case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = *(cuuint64_t *)value; break;
  case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    /* Only a reset (to 0) is allowed; the mark restarts from the current value. */
    if (*(cuuint64_t *)value != 0)
      rc = CUDA_ERROR_INVALID_VALUE;
    else
      p->reserved_high = p->reserved;
    break;
  case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    if (*(cuuint64_t *)value != 0)
      rc = CUDA_ERROR_INVALID_VALUE;
    else
      p->used_high = p->used;
    break;
  case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
  case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
  case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: break;
  default: rc = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  SIM_REQUIRE_INIT();
  struct sim_pool *p;
  CUresult rc = pool_attr_arg(pool, value, &p);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&sim.mu);
  switch (attr) {
  case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->threshold; break;
  case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
  case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
  case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
  case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
  case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
  case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
  case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)value = 1; break;
  default: rc = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}
