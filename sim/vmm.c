/* SPDX-License-Identifier: Apache-2.0 */
/* Virtual memory management: physical handles (cuMemCreate, memfd-backed), reserved
 * address ranges, map/unmap inside them, and shareable-handle export/import. It never
 * maps over memory it did not reserve. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
  if (!sim_dev_ok(dev))
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
    munmap(SIM_DP(ptr), size);
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
    if (!r || mmap(SIM_DP(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p->fd,
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
  return sim_check_dev_range(ptr, size);
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
