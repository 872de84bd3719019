/* SPDX-License-Identifier: Apache-2.0 */
/* IPC memory handles: an exported allocation moves onto a memfd another process opens
 * through /proc/<pid>/fd; an opened mapping adds no device memory. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
