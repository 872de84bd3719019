/* Simulated device memory: allocations (plain, pitched, managed, stream-ordered from
 * pools), copies and memsets on real bytes, VMM physical handles and address ranges,
 * arrays, and IPC handles; every byte counted on the shared machine. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Maps fresh backing and records a range; charged bytes go to the device first. ctx:
 * the context that owns it (plain, pitched, managed), NULL for pool memory. */
static CUresult alloc_range(struct sim_ctx *ctx, int dev, size_t size, uint64_t charge,
                            enum sim_range_kind kind, struct sim_pool *pool, CUdeviceptr *ret) {
  CUresult rc = sim_charge(dev, charge);
  if (rc != CUDA_SUCCESS)
    return rc;
  struct sim_range *r = calloc(1, sizeof(*r));
  void *p = r ? sim_backing_map(size, &r->maplen) : NULL;
  if (!p) {
    free(r);
    sim_uncharge(dev, charge);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r->base = (uintptr_t)p;
  r->size = size;
  r->kind = kind;
  r->dev = dev;
  r->charged = charge;
  r->fd = -1;
  r->pool = pool;
  r->ctx = ctx;
  pthread_mutex_lock(&sim.mu);
  int e = sim_range_add(r);
  pthread_mutex_unlock(&sim.mu);
  if (e < 0) {
    munmap(p, r->maplen);
    free(r);
    sim_uncharge(dev, charge);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ret = (CUdeviceptr)r->base;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!dptr || bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  return alloc_range(c, c->dev, bytesize, bytesize, SIM_R_ALLOC, NULL, dptr);
}

SIM_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
      (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
    return CUDA_ERROR_INVALID_VALUE;
  size_t pitch = sim_round_up(WidthInBytes, SIM_PITCH_ALIGN);
  if (Height > SIZE_MAX / pitch)
    return CUDA_ERROR_OUT_OF_MEMORY;
  rc = alloc_range(c, c->dev, pitch * Height, pitch * Height, SIM_R_ALLOC, NULL, dptr);
  if (rc == CUDA_SUCCESS)
    *pPitch = pitch;
  return rc;
}

SIM_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
    return CUDA_ERROR_INVALID_VALUE;
  /* Counted on the device at once: the sim has no migration, it is all resident. */
  rc = alloc_range(c, c->dev, bytesize, bytesize, SIM_R_ALLOC, NULL, dptr);
  if (rc == CUDA_SUCCESS) {
    pthread_mutex_lock(&sim.mu);
    struct sim_range *r = sim_range_find((uintptr_t)*dptr, 1);
    if (r)
      r->managed = 1;
    pthread_mutex_unlock(&sim.mu);
  }
  return rc;
}

static void pool_release_locked(struct sim_pool *p, uint64_t bytes);

/* Frees a pool or plain allocation; sim.mu held by nobody. */
static CUresult free_range(CUdeviceptr dptr) {
  pthread_mutex_lock(&sim.mu);
  struct sim_range *r = sim_range_find((uintptr_t)dptr, 1);
  if (!r || r->base != (uintptr_t)dptr || (r->kind != SIM_R_ALLOC && r->kind != SIM_R_POOL)) {
    pthread_mutex_unlock(&sim.mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  sim_range_remove(r);
  if (r->kind == SIM_R_POOL) {
    struct sim_pool *p = r->pool;
    p->used -= r->size;
    if (p->destroyed)
      pool_release_locked(p, r->size);
  }
  pthread_mutex_unlock(&sim.mu);
  munmap((void *)r->base, r->maplen);
  if (r->fd >= 0)
    close(r->fd);
  sim_uncharge(r->dev, r->charged);
  free(r);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  SIM_REQUIRE_INIT();
  if (dptr == 0)
    return CUDA_SUCCESS;
  return free_range(dptr);
}

SIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  int dev = c->dev;
  if (!free_bytes || !total)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_machine *m = sim.st.m;
  sim_lock(m);
  sim_reap(m, 1);
  uint64_t used = sim_dev_used(m, sim_pdev(dev));
  sim_unlock(m);
  /* As on a GPU, cuMemGetInfo's total leaves out what the driver reserved for itself
   * (NVML's and cuDeviceTotalMem's include it). */
  uint64_t room = m->memory - m->reserved;
  *total = room;
  *free_bytes = used >= room ? 0 : room - used;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  SIM_REQUIRE_INIT();
  pthread_mutex_lock(&sim.mu);
  struct sim_range *r = sim_range_find((uintptr_t)dptr, 1);
  if (r) {
    if (pbase)
      *pbase = (CUdeviceptr)r->base;
    if (psize)
      *psize = r->size;
  }
  pthread_mutex_unlock(&sim.mu);
  return r ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* Page-locked host memory (plain host memory here, not device memory): made in the
 * current context and destroyed with it, as cuda.h says of cuMemAllocHost. */
struct host_alloc {
  void *p;
  struct sim_ctx *ctx;
  struct host_alloc *next;
};
static struct host_alloc *host_allocs; /* sim.mu */

SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!pp || bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct host_alloc *h = malloc(sizeof(*h));
  void *p = h ? malloc(bytesize) : NULL;
  if (!p) {
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&sim.mu);
  *h = (struct host_alloc){p, c, host_allocs};
  host_allocs = h;
  pthread_mutex_unlock(&sim.mu);
  *pp = p;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemFreeHost(void *p) {
  SIM_REQUIRE_INIT();
  pthread_mutex_lock(&sim.mu);
  struct host_alloc **hp = &host_allocs;
  while (*hp && (*hp)->p != p)
    hp = &(*hp)->next;
  struct host_alloc *h = *hp;
  if (h)
    *hp = h->next;
  pthread_mutex_unlock(&sim.mu);
  if (!h)
    return CUDA_ERROR_INVALID_VALUE; /* not from cuMemAllocHost, or freed already */
  free(h->p);
  free(h);
  return CUDA_SUCCESS;
}

/* sim.mu held. */
static void host_allocs_reset(struct sim_ctx *c) {
  for (struct host_alloc **hp = &host_allocs; *hp;) {
    struct host_alloc *h = *hp;
    if (h->ctx != c) {
      hp = &h->next;
      continue;
    }
    *hp = h->next;
    free(h->p);
    free(h);
  }
}

SIM_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  return cuMemAllocHost_v2(pp, bytesize);
}

SIM_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags) {
  SIM_REQUIRE_INIT();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostUnregister(void *p) {
  SIM_REQUIRE_INIT();
  return CUDA_SUCCESS;
}

/* ---- copies and memsets ---- */

static CUresult check_dev_range(CUdeviceptr p, size_t n) {
  pthread_mutex_lock(&sim.mu);
  struct sim_range *r = sim_range_find((uintptr_t)p, n ? n : 1);
  pthread_mutex_unlock(&sim.mu);
  return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

enum copy_kind { HTOD, DTOH, DTOD, ANY };

static CUresult do_copy(void *dst, const void *src, size_t n, enum copy_kind k) {
  if (n == 0)
    return CUDA_SUCCESS;
  if (!dst || !src)
    return CUDA_ERROR_INVALID_VALUE;
  if ((k == HTOD || k == DTOD) && check_dev_range((CUdeviceptr)(uintptr_t)dst, n))
    return CUDA_ERROR_INVALID_VALUE;
  if ((k == DTOH || k == DTOD) && check_dev_range((CUdeviceptr)(uintptr_t)src, n))
    return CUDA_ERROR_INVALID_VALUE;
  memmove(dst, src, n);
  return CUDA_SUCCESS;
}

/* A synchronous copy waits for the (legacy or per-thread) default stream, as the real
 * one does, then moves the bytes. */
static CUresult copy_sync(void *dst, const void *src, size_t n, enum copy_kind k, int ptds) {
  SIM_REQUIRE_INIT();
  CUresult rc = sim_stream_wait(NULL, ptds);
  if (rc != CUDA_SUCCESS)
    return rc;
  return do_copy(dst, src, n, k);
}

/* Copies take no device time: the bytes move when the call is made, which a program
 * cannot tell apart because kernels in the sim never touch memory. */
static CUresult copy_async(void *dst, const void *src, size_t n, enum copy_kind k, CUstream h,
                           int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (s->capture) {
    struct sim_node node = {.type = SIM_NODE_COPY, .dst = dst, .src = src, .n = n, .kind = k};
    pthread_mutex_lock(&sim.mu);
    int e = s->capture ? sim_capture_add(s, &node) : 0;
    pthread_mutex_unlock(&sim.mu);
    return e < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
  }
  return do_copy(dst, src, n, k);
}

CUresult sim_do_copy(void *dst, const void *src, size_t n, int kind) {
  return do_copy(dst, src, n, (enum copy_kind)kind);
}

#define DP(x) ((void *)(uintptr_t)(x))

SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
  return copy_sync(DP(dstDevice), srcHost, ByteCount, HTOD, 0);
}
SIM_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
                                      size_t ByteCount) {
  return copy_sync(DP(dstDevice), srcHost, ByteCount, HTOD, 1);
}
SIM_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy_sync(dstHost, DP(srcDevice), ByteCount, DTOH, 0);
}
SIM_API CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy_sync(dstHost, DP(srcDevice), ByteCount, DTOH, 1);
}
SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy_sync(DP(dstDevice), DP(srcDevice), ByteCount, DTOD, 0);
}
SIM_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount) {
  return copy_sync(DP(dstDevice), DP(srcDevice), ByteCount, DTOD, 1);
}
SIM_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return copy_sync(DP(dst), DP(src), ByteCount, ANY, 0);
}
SIM_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return copy_sync(DP(dst), DP(src), ByteCount, ANY, 1);
}
SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                      CUstream hStream) {
  return copy_async(DP(dstDevice), srcHost, ByteCount, HTOD, hStream, 0);
}
SIM_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
                                           size_t ByteCount, CUstream hStream) {
  return copy_async(DP(dstDevice), srcHost, ByteCount, HTOD, hStream, 1);
}
SIM_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream) {
  return copy_async(dstHost, DP(srcDevice), ByteCount, DTOH, hStream, 0);
}
SIM_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                           CUstream hStream) {
  return copy_async(dstHost, DP(srcDevice), ByteCount, DTOH, hStream, 1);
}
SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream) {
  return copy_async(DP(dstDevice), DP(srcDevice), ByteCount, DTOD, hStream, 0);
}
SIM_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                           size_t ByteCount, CUstream hStream) {
  return copy_async(DP(dstDevice), DP(srcDevice), ByteCount, DTOD, hStream, 1);
}
SIM_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                               CUstream hStream) {
  return copy_async(DP(dst), DP(src), ByteCount, ANY, hStream, 0);
}
SIM_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                    CUstream hStream) {
  return copy_async(DP(dst), DP(src), ByteCount, ANY, hStream, 1);
}

static CUresult do_memset(CUdeviceptr dst, unsigned value, size_t elem, size_t n) {
  if (n == 0)
    return CUDA_SUCCESS;
  if (n > SIZE_MAX / elem || check_dev_range(dst, n * elem))
    return CUDA_ERROR_INVALID_VALUE;
  if (elem == 1) {
    memset(DP(dst), (int)(value & 0xff), n);
  } else if (elem == 2) {
    uint16_t v = (uint16_t)value, *p = DP(dst);
    for (size_t i = 0; i < n; i++)
      p[i] = v;
  } else {
    uint32_t v = value, *p = DP(dst);
    for (size_t i = 0; i < n; i++)
      p[i] = v;
  }
  return CUDA_SUCCESS;
}

static CUresult memset_sync(CUdeviceptr dst, unsigned value, size_t elem, size_t n, int ptds) {
  SIM_REQUIRE_INIT();
  CUresult rc = sim_stream_wait(NULL, ptds);
  return rc != CUDA_SUCCESS ? rc : do_memset(dst, value, elem, n);
}

static CUresult memset_async(CUdeviceptr dst, unsigned value, size_t elem, size_t n, CUstream h,
                             int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (s->capture) {
    struct sim_node node = {
        .type = SIM_NODE_MEMSET, .dst = DP(dst), .n = n, .value = value, .elem = (unsigned)elem};
    pthread_mutex_lock(&sim.mu);
    int e = s->capture ? sim_capture_add(s, &node) : 0;
    pthread_mutex_unlock(&sim.mu);
    return e < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
  }
  return do_memset(dst, value, elem, n);
}

CUresult sim_do_memset(CUdeviceptr dst, unsigned value, size_t elem, size_t n) {
  return do_memset(dst, value, elem, n);
}

SIM_API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char uc, size_t N) {
  return memset_sync(d, uc, 1, N, 0);
}
SIM_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char uc, size_t N) {
  return memset_sync(d, uc, 1, N, 1);
}
SIM_API CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short us, size_t N) {
  return memset_sync(d, us, 2, N, 0);
}
SIM_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short us, size_t N) {
  return memset_sync(d, us, 2, N, 1);
}
SIM_API CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int ui, size_t N) {
  return memset_sync(d, ui, 4, N, 0);
}
SIM_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int ui, size_t N) {
  return memset_sync(d, ui, 4, N, 1);
}
SIM_API CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char uc, size_t N, CUstream h) {
  return memset_async(d, uc, 1, N, h, 0);
}
SIM_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char uc, size_t N, CUstream h) {
  return memset_async(d, uc, 1, N, h, 1);
}
SIM_API CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short us, size_t N, CUstream h) {
  return memset_async(d, us, 2, N, h, 0);
}
SIM_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short us, size_t N, CUstream h) {
  return memset_async(d, us, 2, N, h, 1);
}
SIM_API CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int ui, size_t N, CUstream h) {
  return memset_async(d, ui, 4, N, h, 0);
}
SIM_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int ui, size_t N, CUstream h) {
  return memset_async(d, ui, 4, N, h, 1);
}

/* ---- stream-ordered allocation and memory pools ---- */

void sim_pools_init(void) {
  for (unsigned d = 0; d < sim.ndev; d++) {
    struct sim_pool *p = &sim.default_pool[d];
    p->magic = SIM_POOL_MAGIC;
    p->dev = (int)d;
    sim.cur_pool[d] = p;
  }
}

/* sim.mu held: gives bytes of p's reservation back to the device. */
static void pool_release_locked(struct sim_pool *p, uint64_t bytes) {
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
    pool_release_locked(p, p->reserved - target);
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
  CUresult rc = alloc_range(NULL, p->dev, size, 0, SIM_R_POOL, p, dptr);
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
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  return pool_alloc(sim.cur_pool[s->ctx->dev], bytesize, dptr);
}

SIM_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  return alloc_async(dptr, bytesize, hStream, 0);
}
SIM_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  return alloc_async(dptr, bytesize, hStream, 1);
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream h,
                                int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  struct sim_pool *p;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc == CUDA_SUCCESS)
    rc = pool_arg(pool, &p);
  return rc != CUDA_SUCCESS ? rc : pool_alloc(p, bytesize, dptr);
}

SIM_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream) {
  return alloc_from_pool(dptr, bytesize, pool, hStream, 0);
}
SIM_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream) {
  return alloc_from_pool(dptr, bytesize, pool, hStream, 1);
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  return rc != CUDA_SUCCESS ? rc : free_range(dptr);
}

SIM_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return free_async(dptr, hStream, 0);
}
SIM_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return free_async(dptr, hStream, 1);
}

SIM_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pool_out)
    return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || (unsigned)dev >= sim.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  *pool_out = (CUmemoryPool)&sim.default_pool[dev];
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pool)
    return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || (unsigned)dev >= sim.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  *pool = (CUmemoryPool)sim.cur_pool[dev];
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  SIM_REQUIRE_INIT();
  struct sim_pool *p;
  CUresult rc = pool_arg(pool, &p);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (dev < 0 || (unsigned)dev >= sim.ndev || p->dev != dev)
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
  if (dev < 0 || (unsigned)dev >= sim.ndev)
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
  pool_release_locked(p, p->reserved - p->used);
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

SIM_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  SIM_REQUIRE_INIT();
  struct sim_pool *p;
  CUresult rc = pool_arg(pool, &p);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.mu);
  switch (attr) {
  case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
    p->threshold = *(cuuint64_t *)value;
    break;
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
  case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
    break;
  default:
    rc = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  SIM_REQUIRE_INIT();
  struct sim_pool *p;
  CUresult rc = pool_arg(pool, &p);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.mu);
  switch (attr) {
  case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
    *(cuuint64_t *)value = p->threshold;
    break;
  case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    *(cuuint64_t *)value = p->reserved;
    break;
  case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    *(cuuint64_t *)value = p->reserved_high;
    break;
  case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    *(cuuint64_t *)value = p->used;
    break;
  case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    *(cuuint64_t *)value = p->used_high;
    break;
  case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
  case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
  case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
    *(int *)value = 1;
    break;
  default:
    rc = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

/* ---- virtual memory management ---- */

SIM_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option) {
  SIM_REQUIRE_INIT();
  if (!granularity || !prop)
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = SIM_GRANULARITY;
  return CUDA_SUCCESS;
}

static CUresult phys_arg(CUmemGenericAllocationHandle h, struct sim_phys **ret) {
  struct sim_phys *p = (struct sim_phys *)(uintptr_t)h;
  if (!p || p->magic != SIM_PHYS_MAGIC || p->released)
    return CUDA_ERROR_INVALID_VALUE;
  *ret = p;
  return CUDA_SUCCESS;
}

/* Gone handles are recycled, never freed: releasing one twice reads a cleared magic
 * (CUDA_ERROR_INVALID_VALUE), not freed memory. sim.mu guards the list. */
static struct sim_phys *phys_free_list;

static void phys_put_locked(struct sim_phys *p) {
  /* Physical memory lives while it has a handle or a mapping, as on a GPU. */
  if (!p->released || p->maps > 0)
    return;
  sim_uncharge(p->dev, p->charged);
  close(p->fd);
  memset(p, 0, sizeof(*p));
  p->next_free = phys_free_list;
  phys_free_list = p;
}

static CUresult phys_new(int dev, int fd, uint64_t size, uint64_t charge,
                         CUmemGenericAllocationHandle *handle) {
  pthread_mutex_lock(&sim.mu);
  struct sim_phys *p = phys_free_list;
  if (p)
    phys_free_list = p->next_free;
  pthread_mutex_unlock(&sim.mu);
  if (!p && !(p = malloc(sizeof(*p))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  memset(p, 0, sizeof(*p));
  p->magic = SIM_PHYS_MAGIC;
  p->dev = dev;
  p->fd = fd;
  p->size = size;
  p->charged = charge;
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags) {
  SIM_REQUIRE_INIT();
  if (!handle || !prop || size == 0 || size % SIM_GRANULARITY ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  int dev = prop->location.id;
  if (dev < 0 || (unsigned)dev >= sim.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  CUresult rc = sim_charge(dev, size);
  if (rc != CUDA_SUCCESS)
    return rc;
  int fd = memfd_create("gslice-sim-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
    if (fd >= 0)
      close(fd);
    sim_uncharge(dev, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  rc = phys_new(dev, fd, size, size, handle);
  if (rc != CUDA_SUCCESS) {
    close(fd);
    sim_uncharge(dev, size);
  }
  return rc;
}

SIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  SIM_REQUIRE_INIT();
  struct sim_phys *p;
  pthread_mutex_lock(&sim.mu);
  CUresult rc = phys_arg(handle, &p);
  if (rc == CUDA_SUCCESS) {
    p->released = 1;
    phys_put_locked(p);
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

/* Reserved address ranges (sim.mu): cuMemMap only maps inside one, cuMemAddressFree
 * only frees one exactly as reserved — anything else is CUDA_ERROR_INVALID_VALUE, never
 * a MAP_FIXED or munmap over the program's own memory. */
static struct resv {
  uintptr_t base;
  size_t size;
} * resv;
static size_t nresv, cap_resv;

/* sim.mu held: index of the reservation holding [p, p + n), or -1. */
static long resv_find(uintptr_t p, size_t n) {
  for (size_t i = 0; i < nresv; i++)
    if (p >= resv[i].base && p - resv[i].base <= resv[i].size &&
        n <= resv[i].size - (p - resv[i].base))
      return (long)i;
  return -1;
}

SIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags) {
  SIM_REQUIRE_INIT();
  if (!ptr || size == 0 || size % SIM_GRANULARITY)
    return CUDA_ERROR_INVALID_VALUE;
  size_t align = alignment > SIM_GRANULARITY ? alignment : SIM_GRANULARITY;
  /* Address space only: nothing is counted on the device until memory is mapped. */
  size_t len = size + align;
  char *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t base = sim_round_up((uintptr_t)p, align);
  if (base > (uintptr_t)p)
    munmap(p, base - (uintptr_t)p);
  uintptr_t end = (uintptr_t)p + len;
  if (end > base + size)
    munmap((void *)(base + size), end - (base + size));
  pthread_mutex_lock(&sim.mu);
  if (nresv == cap_resv) {
    size_t cap = cap_resv ? cap_resv * 2 : 16;
    struct resv *n = realloc(resv, cap * sizeof(*n));
    if (!n) {
      pthread_mutex_unlock(&sim.mu);
      munmap((void *)base, size);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    resv = n;
    cap_resv = cap;
  }
  resv[nresv++] = (struct resv){base, size};
  pthread_mutex_unlock(&sim.mu);
  *ptr = (CUdeviceptr)base;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  SIM_REQUIRE_INIT();
  if (!ptr || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.mu);
  long i = resv_find((uintptr_t)ptr, size);
  if (i < 0 || resv[i].base != (uintptr_t)ptr || resv[i].size != size) {
    pthread_mutex_unlock(&sim.mu);
    return CUDA_ERROR_INVALID_VALUE; /* not a range cuMemAddressReserve returned */
  }
  /* Memory still mapped in the range must be unmapped first. */
  int mapped = 0;
  for (size_t k = 0; k < sim.nranges && !mapped; k++) {
    const struct sim_range *r = sim.ranges[k];
    mapped = r->kind == SIM_R_MAPPING && r->base < (uintptr_t)ptr + size &&
             (uintptr_t)ptr < r->base + r->size;
  }
  if (!mapped) {
    munmap(DP(ptr), size);
    resv[i] = resv[--nresv];
  }
  pthread_mutex_unlock(&sim.mu);
  return mapped ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags) {
  SIM_REQUIRE_INIT();
  struct sim_phys *p;
  pthread_mutex_lock(&sim.mu);
  CUresult rc = phys_arg(handle, &p);
  if (rc == CUDA_SUCCESS && (size == 0 || size % SIM_GRANULARITY || offset % SIM_GRANULARITY ||
                             offset > p->size || size > p->size - offset || ptr % SIM_GRANULARITY))
    rc = CUDA_ERROR_INVALID_VALUE;
  /* Only inside a reserved range, and never over memory already mapped there. */
  if (rc == CUDA_SUCCESS && resv_find((uintptr_t)ptr, size) < 0)
    rc = CUDA_ERROR_INVALID_VALUE;
  for (size_t k = 0; rc == CUDA_SUCCESS && k < sim.nranges; k++) {
    const struct sim_range *o = sim.ranges[k];
    if (o->base < (uintptr_t)ptr + size && (uintptr_t)ptr < o->base + o->size)
      rc = CUDA_ERROR_INVALID_VALUE;
  }
  struct sim_range *r = NULL;
  if (rc == CUDA_SUCCESS) {
    r = calloc(1, sizeof(*r));
    if (!r || mmap(DP(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p->fd,
                   (off_t)offset) == MAP_FAILED)
      rc = CUDA_ERROR_INVALID_VALUE;
  }
  if (rc == CUDA_SUCCESS) {
    r->base = (uintptr_t)ptr;
    r->size = size;
    r->maplen = size;
    r->kind = SIM_R_MAPPING;
    r->dev = p->dev;
    r->fd = -1;
    r->phys = p;
    if (sim_range_add(r) < 0)
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    else
      p->maps++;
  }
  if (rc != CUDA_SUCCESS)
    free(r);
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  SIM_REQUIRE_INIT();
  pthread_mutex_lock(&sim.mu);
  uintptr_t at = (uintptr_t)ptr, end = at + size;
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  while (at < end) {
    struct sim_range *r = sim_range_find(at, 1);
    if (!r || r->kind != SIM_R_MAPPING || r->base != at)
      break;
    /* Back to reserved address space: PROT_NONE, no pages. */
    mmap((void *)r->base, r->size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    sim_range_remove(r);
    at = r->base + r->size;
    r->phys->maps--;
    phys_put_locked(r->phys);
    free(r);
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                size_t count) {
  SIM_REQUIRE_INIT();
  if (!desc || count == 0)
    return CUDA_ERROR_INVALID_VALUE;
  return check_dev_range(ptr, size);
}

SIM_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle handle) {
  SIM_REQUIRE_INIT();
  struct sim_phys *p;
  CUresult rc = phys_arg(handle, &p);
  if (rc != CUDA_SUCCESS || !prop)
    return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_INVALID_VALUE;
  memset(prop, 0, sizeof(*prop));
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = p->dev;
  prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemExportToShareableHandle(void *shareableHandle,
                                              CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType,
                                              unsigned long long flags) {
  SIM_REQUIRE_INIT();
  struct sim_phys *p;
  CUresult rc = phys_arg(handle, &p);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!shareableHandle || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_INVALID_VALUE;
  int fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *(int *)shareableHandle = fd;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                void *osHandle,
                                                CUmemAllocationHandleType shHandleType) {
  SIM_REQUIRE_INIT();
  struct stat sb;
  if (!handle || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_INVALID_VALUE;
  int fd = fcntl((int)(intptr_t)osHandle, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (fstat(fd, &sb) < 0 || sb.st_size <= 0) {
    close(fd);
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct sim_ctx *c = sim_ctx_current();
  /* The same physical memory, already counted where it was created: adds nothing. */
  CUresult rc = phys_new(c ? c->dev : 0, fd, (uint64_t)sb.st_size, 0, handle);
  if (rc != CUDA_SUCCESS)
    close(fd);
  return rc;
}

/* ---- IPC handles: the exporting process's memfd, opened through /proc ---- */

struct ipc_handle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t pad;
  uint64_t size;
  uint64_t starttime;
};
_Static_assert(sizeof(struct ipc_handle) <= sizeof(CUipcMemHandle), "IPC handle fits");
#define IPC_MAGIC 0x49504331u

/* sim.mu held: moves a private allocation onto a memfd so other processes can map
 * it; only resident pages are copied, so untouched memory stays free. */
static int share_range_locked(struct sim_range *r) {
  if (r->fd >= 0)
    return 0;
  int fd = memfd_create("gslice-sim-ipc", MFD_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (ftruncate(fd, (off_t)r->maplen) < 0)
    goto fail;
  void *tmp = mmap(NULL, r->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (tmp == MAP_FAILED)
    goto fail;
  size_t pages = r->maplen / 4096;
  unsigned char *vec = malloc(pages);
  if (vec && mincore((void *)r->base, r->maplen, vec) == 0) {
    for (size_t i = 0; i < pages; i++)
      if (vec[i] & 1)
        memcpy((char *)tmp + i * 4096, (char *)r->base + i * 4096, 4096);
  } else {
    memcpy(tmp, (void *)r->base, r->maplen);
  }
  free(vec);
  munmap(tmp, r->maplen);
  if (mmap((void *)r->base, r->maplen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
      MAP_FAILED)
    goto fail;
  r->fd = fd;
  return 0;
fail:
  close(fd);
  return -ENOMEM;
}

SIM_API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
  SIM_REQUIRE_INIT();
  if (!pHandle)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.mu);
  struct sim_range *r = sim_range_find((uintptr_t)dptr, 1);
  CUresult rc = CUDA_SUCCESS;
  if (!r || r->base != (uintptr_t)dptr || r->kind != SIM_R_ALLOC)
    rc = CUDA_ERROR_INVALID_VALUE;
  else if (share_range_locked(r) < 0)
    rc = CUDA_ERROR_OUT_OF_MEMORY;
  if (rc == CUDA_SUCCESS) {
    struct ipc_handle h = {IPC_MAGIC, (int32_t)getpid(), r->fd,
                           0,         r->size,           sim.st.m->proc[sim.slot].starttime};
    memset(pHandle, 0, sizeof(*pHandle));
    memcpy(pHandle->reserved, &h, sizeof(h));
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                       unsigned int Flags) {
  SIM_REQUIRE_INIT();
  struct ipc_handle h;
  memcpy(&h, handle.reserved, sizeof(h));
  if (!pdptr || h.magic != IPC_MAGIC || h.size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (h.pid == (int32_t)getpid())
    return CUDA_ERROR_INVALID_CONTEXT; /* the real driver refuses opening one's own */
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", h.pid, h.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *c = sim_ctx_current();
  struct sim_range *r = calloc(1, sizeof(*r));
  size_t len = sim_round_up(h.size, 4096);
  void *p = r ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (p == MAP_FAILED) {
    free(r);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r->base = (uintptr_t)p;
  r->size = h.size;
  r->maplen = len;
  r->kind = SIM_R_IPC;
  r->dev = c ? c->dev : 0;
  r->fd = -1;
  pthread_mutex_lock(&sim.mu);
  int e = sim_range_add(r);
  pthread_mutex_unlock(&sim.mu);
  if (e < 0) {
    munmap(p, len);
    free(r);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  /* Same bytes as the exporter's allocation, counted there only: adds no memory. */
  *pdptr = (CUdeviceptr)r->base;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
  return cuIpcOpenMemHandle_v2(pdptr, handle, Flags);
}

SIM_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  SIM_REQUIRE_INIT();
  pthread_mutex_lock(&sim.mu);
  struct sim_range *r = sim_range_find((uintptr_t)dptr, 1);
  if (!r || r->base != (uintptr_t)dptr || r->kind != SIM_R_IPC) {
    pthread_mutex_unlock(&sim.mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  sim_range_remove(r);
  pthread_mutex_unlock(&sim.mu);
  munmap((void *)r->base, r->maplen);
  free(r);
  return CUDA_SUCCESS;
}

/* ---- arrays: counted on the device, no backing bytes (no array copies modelled) ---- */

struct sim_array {
  uint32_t magic;
  int dev;
  int mipmapped;
  uint64_t charged;
  struct sim_ctx *ctx;
  struct sim_array *prev, *next; /* in ctx->arrays, or the free list */
};

/* Destroyed arrays are recycled, never freed: a stale handle reads a cleared magic. */
static struct sim_array *array_free_list;

static uint64_t format_bytes(CUarray_format f) {
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF:
    return 2;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT:
    return 4;
  default:
    return 1;
  }
}

/* Rows are pitch-aligned and the whole rounded to 64 KiB, the way real arrays take a
 * little more than their elements. */
static uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Saturating: dimensions whose size does not fit in 64 bits are more than any device holds
 * (CUDA_ERROR_OUT_OF_MEMORY), never the small number a wrapped product would charge. */
static uint64_t array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch) {
  uint64_t row = sat_mul(sat_mul(w, format_bytes(f)), ch ? ch : 1);
  if (row > UINT64_MAX - SIM_PITCH_ALIGN)
    return UINT64_MAX;
  row = sim_round_up(row, SIM_PITCH_ALIGN);
  uint64_t total = sat_mul(sat_mul(row, h ? h : 1), d ? d : 1);
  return total > UINT64_MAX - (64 << 10) ? UINT64_MAX : sim_round_up(total, 64 << 10);
}

static CUresult array_new(uint64_t bytes, int mip, struct sim_array **ret) {
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = sim_charge(c->dev, bytes);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&sim.mu);
  struct sim_array *a = array_free_list;
  if (a)
    array_free_list = a->next;
  else
    a = malloc(sizeof(*a));
  if (a) {
    memset(a, 0, sizeof(*a));
    a->magic = SIM_ARRAY_MAGIC;
    a->dev = c->dev;
    a->mipmapped = mip;
    a->charged = bytes;
    a->ctx = c;
    a->next = c->arrays;
    if (c->arrays)
      c->arrays->prev = a;
    c->arrays = a;
  }
  pthread_mutex_unlock(&sim.mu);
  if (!a) {
    sim_uncharge(c->dev, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ret = a;
  return CUDA_SUCCESS;
}

/* sim.mu held: gives the array's bytes back and recycles it. */
static void array_release_locked(struct sim_array *a) {
  if (a->prev)
    a->prev->next = a->next;
  else if (a->ctx->arrays == a)
    a->ctx->arrays = a->next;
  if (a->next)
    a->next->prev = a->prev;
  sim_uncharge(a->dev, a->charged);
  memset(a, 0, sizeof(*a));
  a->next = array_free_list;
  array_free_list = a;
}

static CUresult array_free(void *h, int mip) {
  struct sim_array *a = h;
  pthread_mutex_lock(&sim.mu);
  int ok = a && a->magic == SIM_ARRAY_MAGIC && a->mipmapped == mip;
  if (ok)
    array_release_locked(a);
  pthread_mutex_unlock(&sim.mu);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void sim_ctx_memory_reset(struct sim_ctx *c) {
  host_allocs_reset(c);
  while (c->arrays)
    array_release_locked(c->arrays);
  /* The context's own allocations; pool, VMM and IPC ranges have no ctx and stay. */
  size_t keep = 0;
  for (size_t i = 0; i < sim.nranges; i++) {
    struct sim_range *r = sim.ranges[i];
    if (r->kind != SIM_R_ALLOC || r->ctx != c) {
      sim.ranges[keep++] = r;
      continue;
    }
    munmap((void *)r->base, r->maplen);
    if (r->fd >= 0)
      close(r->fd);
    sim_uncharge(r->dev, r->charged);
    free(r);
  }
  sim.nranges = keep;
}

SIM_API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d) {
  SIM_REQUIRE_INIT();
  if (!pHandle || !d || d->Width == 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_array *a;
  CUresult rc = array_new(array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels), 0, &a);
  if (rc == CUDA_SUCCESS)
    *pHandle = (CUarray)a;
  return rc;
}

SIM_API CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  SIM_REQUIRE_INIT();
  if (!pHandle || !d || d->Width == 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_array *a;
  CUresult rc =
      array_new(array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels), 0, &a);
  if (rc == CUDA_SUCCESS)
    *pHandle = (CUarray)a;
  return rc;
}

SIM_API CUresult cuArrayDestroy(CUarray hArray) {
  SIM_REQUIRE_INIT();
  return array_free(hArray, 0);
}

SIM_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                        unsigned int numMipmapLevels) {
  SIM_REQUIRE_INIT();
  if (!pHandle || !d || d->Width == 0 || numMipmapLevels == 0)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t total = 0;
  size_t w = d->Width, h = d->Height, dd = d->Depth;
  for (unsigned l = 0; l < numMipmapLevels; l++) {
    uint64_t level = array_bytes(w, h, dd, d->Format, d->NumChannels);
    total = level > UINT64_MAX - total ? UINT64_MAX : total + level;
    w = w > 1 ? w / 2 : 1;
    h = h > 1 ? h / 2 : h;
    dd = dd > 1 ? dd / 2 : dd;
  }
  struct sim_array *a;
  CUresult rc = array_new(total, 1, &a);
  if (rc == CUDA_SUCCESS)
    *pHandle = (CUmipmappedArray)a;
  return rc;
}

SIM_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  SIM_REQUIRE_INIT();
  return array_free(hMipmappedArray, 1);
}
