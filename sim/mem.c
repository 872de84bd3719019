/* SPDX-License-Identifier: Apache-2.0 */
/* Plain device memory of this process: cuMemAlloc, pitched and managed allocations,
 * page-locked host memory, cuMemGetInfo, and the sorted table of this process's device
 * address ranges every other memory file records its ranges in. It charges the shared
 * machine only through sim_charge; pools, VMM, IPC and arrays live in their own files
 * and must not be handled here beyond freeing a range. */
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
CUresult sim_alloc_range(struct sim_ctx *ctx, int dev, size_t size, uint64_t charge,
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
  CUresult rc = sim_capture_unsafe("cuMemAlloc");
  if (rc == CUDA_SUCCESS)
    rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!dptr || bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  return sim_alloc_range(c, c->dev, bytesize, bytesize, SIM_R_ALLOC, NULL, dptr);
}

SIM_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = sim_capture_unsafe("cuMemAllocPitch");
  if (rc == CUDA_SUCCESS)
    rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
      (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
    return CUDA_ERROR_INVALID_VALUE;
  size_t pitch = sim_round_up(WidthInBytes, SIM_PITCH_ALIGN);
  if (Height > SIZE_MAX / pitch)
    return CUDA_ERROR_OUT_OF_MEMORY;
  rc = sim_alloc_range(c, c->dev, pitch * Height, pitch * Height, SIM_R_ALLOC, NULL, dptr);
  if (rc == CUDA_SUCCESS)
    *pPitch = pitch;
  return rc;
}

SIM_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = sim_capture_unsafe("cuMemAllocManaged");
  if (rc == CUDA_SUCCESS)
    rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
    return CUDA_ERROR_INVALID_VALUE;
  /* Counted on the device at once: the sim has no migration, it is all resident. The range keeps
   * how it is attached (managed: CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST, both non-zero): the
   * driver's memory type of managed memory may read DEVICE or HOST wherever its pages are, and
   * the sim answers HOST for memory attached to the host (extra.c). */
  rc = sim_alloc_range(c, c->dev, bytesize, bytesize, SIM_R_ALLOC, NULL, dptr);
  if (rc == CUDA_SUCCESS) {
    pthread_mutex_lock(&sim.mu);
    struct sim_range *r = sim_range_find((uintptr_t)*dptr, 1);
    if (r)
      r->managed = (int)flags;
    pthread_mutex_unlock(&sim.mu);
  }
  return rc;
}

/* Frees a pool or plain allocation; sim.mu held by nobody. */
CUresult sim_free_range(CUdeviceptr dptr) {
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
      sim_pool_release_locked(p, r->size);
  }
  pthread_mutex_unlock(&sim.mu);
  munmap((void *)r->base, r->maplen);
  if (r->fd >= 0)
    close(r->fd);
  sim_uncharge(r->dev, r->charged);
  free(r);
  return CUDA_SUCCESS;
}

/* Synchronous allocations and frees are potentially unsafe calls during a capture (capture.c):
 * "some actions, such as a call to cudaMalloc, may be unsafe" (cuThreadExchangeStreamCaptureMode);
 * cuMemFree(0) as well, the usual way to make a context. */
SIM_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  SIM_REQUIRE_INIT();
  CUresult rc = sim_capture_unsafe("cuMemFree");
  if (rc != CUDA_SUCCESS)
    return rc;
  if (dptr == 0)
    return CUDA_SUCCESS;
  return sim_free_range(dptr);
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
  CUresult rc = sim_capture_unsafe("cuMemAllocHost");
  if (rc == CUDA_SUCCESS)
    rc = sim_ctx_current_rc(&c);
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
  CUresult rc = sim_capture_unsafe("cuMemFreeHost");
  if (rc != CUDA_SUCCESS)
    return rc;
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

void sim_ctx_memory_reset(struct sim_ctx *c) {
  host_allocs_reset(c);
  sim_ctx_arrays_reset(c);
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

/* ---- this process's device address ranges (sim.mu held) ---- */

void *sim_backing_map(size_t size, size_t *ret_len) {
  size_t len = sim_round_up(size ? size : 1, 4096);
  /* Lazily backed: a 16 GiB device costs only the pages a program touches. */
  void *p =
      mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  *ret_len = len;
  return p;
}

static size_t range_lower_bound(uintptr_t p) {
  size_t lo = 0, hi = sim.nranges;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (sim.ranges[mid]->base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo; /* first index with base > p */
}

int sim_range_add(struct sim_range *r) {
  if (sim.nranges == sim.cap_ranges) {
    size_t cap = sim.cap_ranges ? sim.cap_ranges * 2 : 64;
    struct sim_range **n = realloc(sim.ranges, cap * sizeof(*n));
    if (!n)
      return -ENOMEM;
    sim.ranges = n;
    sim.cap_ranges = cap;
  }
  size_t i = range_lower_bound(r->base);
  memmove(&sim.ranges[i + 1], &sim.ranges[i], (sim.nranges - i) * sizeof(*sim.ranges));
  sim.ranges[i] = r;
  sim.nranges++;
  return 0;
}

struct sim_range *sim_range_find(uintptr_t p, size_t n) {
  size_t i = range_lower_bound(p);
  if (i == 0)
    return NULL;
  struct sim_range *r = sim.ranges[i - 1];
  if (p < r->base || p - r->base >= r->size || n > r->size - (p - r->base))
    return NULL;
  return r;
}

void sim_range_remove(struct sim_range *r) {
  for (size_t i = range_lower_bound(r->base); i-- > 0;) {
    if (sim.ranges[i] == r) {
      memmove(&sim.ranges[i], &sim.ranges[i + 1], (sim.nranges - i - 1) * sizeof(*sim.ranges));
      sim.nranges--;
      return;
    }
    if (sim.ranges[i]->base < r->base)
      break;
  }
}

CUresult sim_check_dev_range(CUdeviceptr p, size_t n) {
  pthread_mutex_lock(&sim.mu);
  struct sim_range *r = sim_range_find((uintptr_t)p, n ? n : 1);
  pthread_mutex_unlock(&sim.mu);
  return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
