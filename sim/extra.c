/* SPDX-License-Identifier: Apache-2.0 */
/* Small driver queries programs and runtimes expect to find (pointer attributes,
 * occupancy, names, peer access, host functions), answered from the sim's tables. */
#include "driver.h"

#include <stdio.h>
#include <string.h>

static CUresult pointer_attr(struct sim_range *r, CUpointer_attribute a, void *data) {
  if (!data)
    return CUDA_ERROR_INVALID_VALUE;
  switch (a) {
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    /* Managed memory attached to the host reads HOST (mem.c: cuMemAllocManaged). */
    *(unsigned int *)data = !r                                 ? 0
                            : r->managed == CU_MEM_ATTACH_HOST ? CU_MEMORYTYPE_HOST
                                                               : CU_MEMORYTYPE_DEVICE;
    break;
  case CU_POINTER_ATTRIBUTE_CONTEXT:
    /* The context it was allocated in; pool, VMM and IPC memory: the device's primary. */
    *(CUcontext *)data = !r ? NULL : r->ctx ? (CUcontext)r->ctx : (CUcontext)&sim.primary[r->dev];
    break;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    *(CUdeviceptr *)data = r ? (CUdeviceptr)r->base : 0;
    break;
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    *(void **)data = r && r->managed ? (void *)r->base : NULL;
    break;
  case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    *(unsigned long long *)data = r ? (unsigned long long)r->base : 0;
    break;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)data = r && r->managed; break;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = r ? r->dev : -2; break;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    *(CUdeviceptr *)data = r ? (CUdeviceptr)r->base : 0;
    break;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = r ? r->size : 0; break;
  case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned int *)data = r != NULL; break;
  case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    *(CUmemoryPool *)data = r && r->kind == SIM_R_POOL ? (CUmemoryPool)r->pool : NULL;
    break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

SIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  SIM_REQUIRE_INIT();
  pthread_mutex_lock(&sim.mu);
  struct sim_range *r = sim_range_find((uintptr_t)ptr, 1);
  CUresult rc = r ? pointer_attr(r, attribute, data) : CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr) {
  SIM_REQUIRE_INIT();
  if (!attributes || !data)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.mu);
  /* Unknown (host) pointers are not an error here: they read as unregistered. */
  struct sim_range *r = sim_range_find((uintptr_t)ptr, 1);
  for (unsigned i = 0; i < numAttributes; i++)
    pointer_attr(r, attributes[i], data[i]);
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags) {
  SIM_REQUIRE_INIT();
  if (!pdptr || !p)
    return CUDA_ERROR_INVALID_VALUE;
  *pdptr = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
  SIM_REQUIRE_INIT();
  if (!canAccessPeer)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(dev) || !sim_dev_ok(peerDev))
    return CUDA_ERROR_INVALID_DEVICE;
  *canAccessPeer = 0; /* peer access is not modelled */
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId) {
  SIM_REQUIRE_INIT();
  unsigned dom, bus, d, f;
  if (!dev || !pciBusId || sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &d, &f) != 4)
    return CUDA_ERROR_INVALID_VALUE;
  if (dom != 0 || d != 0 || f != 0 || bus == 0)
    return CUDA_ERROR_INVALID_DEVICE;
  /* Bus ids are physical; a device CUDA_VISIBLE_DEVICES hides has no ordinal. */
  for (unsigned i = 0; i < sim.ndev; i++)
    if (sim.pdev[i] + 1 == bus) {
      *dev = (CUdevice)i;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_DEVICE;
}

SIM_API CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode) {
  SIM_REQUIRE_INIT();
  if (!mode)
    return CUDA_ERROR_INVALID_VALUE;
  *mode = CU_MODULE_EAGER_LOADING;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncGetName(const char **name, CUfunction hfunc) {
  SIM_REQUIRE_INIT();
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  const char *n = sim_func_name(hfunc);
  if (!n)
    return CUDA_ERROR_INVALID_HANDLE;
  *name = n;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuKernelGetName(const char **name, CUkernel hfunc) {
  return cuFuncGetName(name, (CUfunction)hfunc);
}

SIM_API CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                      CUdevice dev) {
  return cuFuncGetAttribute(pi, attrib, (CUfunction)kernel);
}

SIM_API CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                      CUdevice dev) {
  return cuFuncSetAttribute((CUfunction)kernel, attrib, val);
}

SIM_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  SIM_REQUIRE_INIT();
  if (!numBlocks || blockSize <= 0 || blockSize > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  int n = 2048 / blockSize;
  *numBlocks = n > 32 ? 32 : n;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                             int blockSize,
                                                             size_t dynamicSMemSize) {
  return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                              dynamicSMemSize, 0);
}

SIM_API CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                  CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                  size_t dynamicSMemSize, int blockSizeLimit) {
  SIM_REQUIRE_INIT();
  if (!minGridSize || !blockSize)
    return CUDA_ERROR_INVALID_VALUE;
  int b = blockSizeLimit > 0 && blockSizeLimit < 1024 ? blockSizeLimit : 1024;
  *blockSize = b;
  *minGridSize = (int)sim.st.m->sms * (2048 / b);
  return CUDA_SUCCESS;
}

static CUresult stream_get_device(CUstream h, CUdevice *device, int ptsz) {
  SIM_REQUIRE_INIT();
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc == CUDA_SUCCESS) {
    *device = s->ctx->dev;
    pthread_mutex_unlock(&sim.mu);
  }
  return rc;
}

SIM_TWINS(cuStreamGetDevice, _ptsz, stream_get_device, (CUstream h, CUdevice *device), h, device)

/* Host functions run on the calling thread once the stream's earlier work is done;
 * later work on the stream starts after they return. Blocking the caller is the
 * price of not running a thread per stream. */
static void call_host_fn(CUstream h, void *fn, void *data) {
  ((CUhostFn)fn)(data);
}
static void call_callback(CUstream h, void *fn, void *data) {
  ((CUstreamCallback)fn)(h, CUDA_SUCCESS, data);
}

static CUresult host_func(CUstream h, int ptsz, void (*call)(CUstream, void *, void *), void *fn,
                          void *userData) {
  SIM_REQUIRE_INIT();
  if (!fn)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if ((rc = sim_capture_use_locked(s)) == CUDA_SUCCESS && s->cap) {
    /* Captured, a host function is a host node; a stream callback cannot be captured. */
    if (call == call_host_fn) {
      struct sim_node node = {.type = SIM_NODE_HOST, .fn = (CUhostFn)fn, .data = userData};
      rc = sim_capture_add_locked(s, &node);
    } else {
      sim_capture_invalidate_locked(s->cap, "cuStreamAddCallback");
      rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&sim.mu);
    return rc;
  }
  struct sim_mark mk = sim_stream_ready(s);
  int dev = s->ctx->dev;
  unsigned long long id = s->id;
  pthread_mutex_unlock(&sim.mu);
  if (rc != CUDA_SUCCESS)
    return rc;
  sim_mark_wait(dev, &mk);
  call(h, fn, userData);
  /* Queued before any destroy, it ran; a stream destroyed meanwhile has no later work to order. */
  struct sim_mark now = {0, 0, sim_now_ns()};
  if (sim_stream_relock(s, id) == CUDA_SUCCESS) {
    sim_mark_merge(&s->tail, &now);
    pthread_mutex_unlock(&sim.mu);
  }
  return CUDA_SUCCESS;
}

static CUresult launch_host_func(CUstream h, CUhostFn fn, void *userData, int ptsz) {
  return host_func(h, ptsz, call_host_fn, (void *)fn, userData);
}
static CUresult add_callback(CUstream h, CUstreamCallback callback, void *userData, int ptsz) {
  return host_func(h, ptsz, call_callback, (void *)callback, userData);
}

SIM_TWINS(cuLaunchHostFunc, _ptsz, launch_host_func, (CUstream h, CUhostFn fn, void *userData), h,
          fn, userData)
SIM_TWINS(cuStreamAddCallback, _ptsz, add_callback,
          (CUstream h, CUstreamCallback callback, void *userData, unsigned int flags), h, callback,
          userData)
