/* SPDX-License-Identifier: Apache-2.0 */
/* The allocation paths: linear (plain, pitched, managed), stream-ordered (pools), VMM physical
 * memory, imports (IPC, shareable handles) and arrays; each reserves before the real call. */
#include "slice.h"

#include <errno.h>
#include <string.h>

/* Size arithmetic saturates: a request whose size does not fit in 64 bits counts as UINT64_MAX
 * (refused), never as the small number a wrapped product would give. */
static uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_round_up(uint64_t v, uint64_t to) {
  return sat_mul(sat_add(v, to - 1) / to, to);
}

/* The last step of a create under ticket t, given the real call's result rc: a failed create
 * gives the reservation back; a made handle is recorded as (kind, key), or, when the record
 * cannot be made, destroyed again with `destroy` and the create fails as out of memory. */
static CUresult ticket_keep(struct gs_ticket *t, CUresult rc, enum gs_alloc_kind kind, uint64_t key,
                            CUresult (*destroy)(uint64_t key)) {
  if (rc != CUDA_SUCCESS) {
    gs_ticket_abort(t);
    return rc;
  }
  if (gs_ticket_commit(t, kind, key) < 0) {
    destroy(key);
    gs_ticket_abort(t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

/* The real destroy of each kind, by key, for ticket_keep. */
static CUresult free_ptr(uint64_t key) {
  return gs_real()->cuMemFree_v2(key);
}
static CUresult release_vmm(uint64_t key) {
  return gs_real()->cuMemRelease(key);
}
static CUresult destroy_array(uint64_t key) {
  return gs_real()->cuArrayDestroy((CUarray)(uintptr_t)key);
}
static CUresult destroy_mipmap(uint64_t key) {
  return gs_real()->cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)key);
}

/* ---- linear memory ---- */

GS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  GS_REAL_OR_NOT_FOUND(cuMemAlloc_v2);
  struct gs_ticket t;
  CUresult rc = gs_ticket_open(&t, bytesize, "cuMemAlloc");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuMemAlloc_v2(dptr, bytesize);
  return ticket_keep(&t, rc, GS_ALLOC_PTR, rc == CUDA_SUCCESS ? *dptr : 0, free_ptr);
}

GS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  GS_REAL_OR_NOT_FOUND(cuMemAllocManaged);
  struct gs_ticket t;
  CUresult rc = gs_ticket_open(&t, bytesize, "cuMemAllocManaged");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuMemAllocManaged(dptr, bytesize, flags);
  return ticket_keep(&t, rc, GS_ALLOC_PTR, rc == CUDA_SUCCESS ? *dptr : 0, free_ptr);
}

/* The pitch is the driver's choice: reserve with the usual 512-byte alignment, then re-count at
 * the pitch it returned (freeing again if that overshoots the cap). */
GS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t width,
                                      size_t height, unsigned int elementSize) {
  GS_REAL_OR_NOT_FOUND(cuMemAllocPitch_v2);
  uint64_t guess = sat_mul(sat_round_up(width, 512), height);
  struct gs_ticket t;
  CUresult rc = gs_ticket_open(&t, guess, "cuMemAllocPitch");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuMemAllocPitch_v2(dptr, pPitch, width, height, elementSize);
  if (rc != CUDA_SUCCESS) {
    gs_ticket_abort(&t);
    return rc;
  }
  if (gs_ticket_true_up(&t, sat_mul(*pPitch, height), "cuMemAllocPitch") < 0 ||
      gs_ticket_commit(&t, GS_ALLOC_PTR, *dptr) < 0) {
    r->cuMemFree_v2(*dptr);
    gs_ticket_abort(&t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

/* A free of a pool allocation (cuMemFree takes those too): nothing to give back while its pool
 * lives (the pool keeps the memory), its share once the pool is destroyed and this was the
 * last. */
#define FREE_PTR(call)                                                                             \
  struct gs_alloc a;                                                                               \
  int had = gs_forget(GS_ALLOC_PTR, dptr, &a) == 0;                                                \
  int pooled = !had && gs_pool_ptr_take(dptr, &a) == 0;                                            \
  CUresult rc = call;                                                                              \
  if (pooled)                                                                                      \
    gs_pool_ptr_settle(&a, rc);                                                                    \
  else                                                                                             \
    gs_settle_free(had, &a, rc);                                                                   \
  return rc

GS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  GS_REAL_OR_NOT_FOUND(cuMemFree_v2);
  FREE_PTR(r->cuMemFree_v2(dptr));
}

/* ---- stream-ordered allocation ---- */

struct pool_op {
  struct gs_ticket t;
  uint64_t asked;
  CUmemoryPool pool;
  int by_reserved;
};

/* The device of `stream`: a stream of another context allocates from *its* device's pool
 * (cuMemAllocAsync: "the memory pool current to the stream's device"), whatever is current. */
static void stream_device(CUstream stream, CUcontext current, CUdevice *dev) {
  const struct gs_real *r = gs_real();
  if (stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
    return; /* the current context's */
  if (r->cuStreamGetDevice) {
    CUdevice d;
    if (r->cuStreamGetDevice(stream, &d) == CUDA_SUCCESS)
      *dev = d;
    return;
  }
  CUcontext c = NULL;
  CUdevice d;
  if (!r->cuStreamGetCtx || r->cuStreamGetCtx(stream, &c) != CUDA_SUCCESS || !c || c == current ||
      !r->cuCtxPushCurrent_v2 || r->cuCtxPushCurrent_v2(c) != CUDA_SUCCESS)
    return;
  if (r->cuCtxGetDevice(&d) == CUDA_SUCCESS)
    *dev = d;
  CUcontext popped;
  r->cuCtxPopCurrent_v2(&popped);
}

static CUresult pool_begin(struct pool_op *op, CUmemoryPool pool, CUstream stream, size_t bytes,
                           const char *what) {
  memset(op, 0, sizeof(*op));
  op->asked = bytes;
  gs_setup();
  const struct gs_real *r = gs_real();
  CUdevice dev;
  CUcontext ctx;
  unsigned slot;
  if (gs_current_device(&dev, &ctx) < 0)
    return CUDA_SUCCESS;
  /* The memory is on the pool's device, which need not be the stream's; without a pool, on the
   * stream's device, which need not be the current context's. */
  CUdevice pool_dev;
  if (pool && gs_pool_device(pool, &pool_dev) == 0)
    dev = pool_dev;
  else if (!pool)
    stream_device(stream, ctx, &dev);
  int e = gs_slot_for_alloc(dev, &slot);
  if (e != 0)
    return gs_slot_refusal(e);
  if (!pool && (!r->cuDeviceGetMemPool || r->cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS))
    pool = NULL;
  op->pool = pool;
  op->by_reserved = pool ? gs_pool_track(pool, slot) : 0;
  /* Reserve the request up front, rounded to the 2 MiB a pool grows by at least, so the device
   * never holds more than the slice before the real growth is settled. */
  uint64_t upfront = op->by_reserved ? sat_round_up(bytes, GS_POOL_GRANULE) : bytes;
  if (gs_reserve(dev, slot, upfront, what) < 0) {
    if (op->by_reserved)
      gs_pool_take_growth(pool, 0, 0);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  op->t = (struct gs_ticket){1, dev, slot, op->by_reserved ? NULL : ctx, upfront};
  return CUDA_SUCCESS;
}

static CUresult pool_end(struct pool_op *op, CUresult rc, CUdeviceptr *dptr, CUstream stream,
                         const char *what) {
  const struct gs_real *r = gs_real();
  if (rc != CUDA_SUCCESS || !op->t.active) {
    if (op->t.active && op->by_reserved)
      gs_pool_take_growth(op->pool, 0, 0);
    gs_ticket_abort(&op->t);
    return rc;
  }
  if (!op->by_reserved) {
    if (gs_ticket_commit(&op->t, GS_ALLOC_PTR, *dptr) < 0) {
      r->cuMemFreeAsync(*dptr, stream);
      gs_ticket_abort(&op->t);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc;
  }
  /* The ticket becomes the pool's growth: the pool's charge absorbs it. */
  uint64_t growth = gs_pool_take_growth(op->pool, op->t.bytes, 1);
  if (gs_ticket_true_up(&op->t, growth, what) < 0) {
    /* Over the cap by the pool's granularity: hand the memory back and trim. */
    r->cuMemFreeAsync(*dptr, stream);
    if (r->cuStreamSynchronize)
      r->cuStreamSynchronize(stream);
    if (r->cuMemPoolTrimTo)
      r->cuMemPoolTrimTo(op->pool, 0);
    gs_release(op->t.slot, op->t.bytes);
    /* The region never held the growth; the refresh charges what the pool still keeps. */
    gs_pool_undo_growth(op->pool, growth);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  gs_pool_ptr_add(op->pool, *dptr, op->asked);
  return rc;
}

#define ALLOC_ASYNC(name, call, pool)                                                              \
  GS_REAL_OR_NOT_FOUND(name);                                                                      \
  struct pool_op op;                                                                               \
  CUresult rc = pool_begin(&op, pool, hStream, bytesize, #name);                                   \
  if (rc != CUDA_SUCCESS)                                                                          \
    return rc;                                                                                     \
  rc = call;                                                                                       \
  return pool_end(&op, rc, dptr, hStream, #name)

GS_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  ALLOC_ASYNC(cuMemAllocAsync, r->cuMemAllocAsync(dptr, bytesize, hStream), NULL);
}

GS_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  ALLOC_ASYNC(cuMemAllocAsync_ptsz, r->cuMemAllocAsync_ptsz(dptr, bytesize, hStream), NULL);
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream hStream) {
  ALLOC_ASYNC(cuMemAllocFromPoolAsync, r->cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream),
              pool);
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream) {
  ALLOC_ASYNC(cuMemAllocFromPoolAsync_ptsz,
              r->cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream), pool);
}

/* A pool keeps freed memory until it trims (at synchronization, or cuMemPoolTrimTo); the
 * reservation is looked at again at the next allocation, trim, or memory query. */
GS_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  GS_REAL_OR_NOT_FOUND(cuMemFreeAsync);
  FREE_PTR(r->cuMemFreeAsync(dptr, hStream));
}

GS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  GS_REAL_OR_NOT_FOUND(cuMemFreeAsync_ptsz);
  FREE_PTR(r->cuMemFreeAsync_ptsz(dptr, hStream));
}

GS_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  GS_REAL_OR_NOT_FOUND(cuMemPoolTrimTo);
  CUresult rc = r->cuMemPoolTrimTo(pool, minBytesToKeep);
  gs_pool_refresh(pool);
  return rc;
}

GS_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  GS_REAL_OR_NOT_FOUND(cuMemPoolCreate);
  CUresult rc = r->cuMemPoolCreate(pool, poolProps);
  if (rc == CUDA_SUCCESS && poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
    gs_pool_device_set(*pool, poolProps->location.id);
  return rc;
}

GS_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
  GS_REAL_OR_NOT_FOUND(cuDeviceGetDefaultMemPool);
  CUresult rc = r->cuDeviceGetDefaultMemPool(pool_out, dev);
  if (rc == CUDA_SUCCESS)
    gs_pool_device_set(*pool_out, dev);
  return rc;
}

GS_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  GS_REAL_OR_NOT_FOUND(cuDeviceGetMemPool);
  CUresult rc = r->cuDeviceGetMemPool(pool, dev);
  if (rc == CUDA_SUCCESS)
    gs_pool_device_set(*pool, dev);
  return rc;
}

GS_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  GS_REAL_OR_NOT_FOUND(cuMemPoolDestroy);
  CUresult rc = r->cuMemPoolDestroy(pool);
  if (rc != CUDA_SUCCESS)
    return rc;
  gs_pool_forget(pool);
  return rc;
}

/* ---- virtual memory management: physical allocations, not address reservations ---- */

GS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags) {
  GS_REAL_OR_NOT_FOUND(cuMemCreate);
  struct gs_ticket t = {0};
  CUresult rc;
  if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    rc = gs_ticket_open_on(&t, prop->location.id, NULL, size, "cuMemCreate");
    if (rc != CUDA_SUCCESS)
      return rc;
  }
  rc = r->cuMemCreate(handle, size, prop, flags);
  return ticket_keep(&t, rc, GS_ALLOC_VMM, rc == CUDA_SUCCESS ? *handle : 0, release_vmm);
}

/* A released handle's memory lives on while mapped (cuda.h: freed once released and unmapped):
 * it stays counted until its last cuMemUnmap, or a loop of create, map, release would take the
 * whole device. */
GS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  GS_REAL_OR_NOT_FOUND(cuMemRelease);
  struct gs_alloc a;
  int had = gs_forget(GS_ALLOC_VMM, handle, &a) == 0;
  CUresult rc = r->cuMemRelease(handle);
  if (had && rc == CUDA_SUCCESS)
    gs_vmm_released(&a);
  else
    gs_settle_free(had, &a, rc);
  return rc;
}

GS_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags) {
  GS_REAL_OR_NOT_FOUND(cuMemMap);
  CUresult rc = r->cuMemMap(ptr, size, offset, handle, flags);
  if (rc == CUDA_SUCCESS)
    gs_vmm_mapped(handle, ptr, size);
  return rc;
}

GS_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  GS_REAL_OR_NOT_FOUND(cuMemUnmap);
  CUresult rc = r->cuMemUnmap(ptr, size);
  if (rc == CUDA_SUCCESS)
    gs_vmm_unmapped(ptr, size);
  return rc;
}

/* ---- imports: counted by what the device gives this process for them (measured) ---- */

struct import_op {
  int active;
  CUdevice dev;
  CUcontext ctx;
  struct gs_probe before;
};

static void import_begin(struct import_op *op) {
  memset(op, 0, sizeof(*op));
  gs_setup();
  if (gs_current_device(&op->dev, &op->ctx) == 0) {
    op->active = 1;
    gs_probe(op->dev, &op->before);
  }
}

/* 0, or -ENOMEM when what the import added overshoots the cap (the caller closes it). */
static int import_end(struct import_op *op, CUdevice dev, enum gs_alloc_kind kind, uint64_t key,
                      const void *owner, const char *what) {
  if (!op->active || dev != op->dev)
    return 0;
  struct gs_probe after;
  gs_probe(dev, &after);
  uint64_t added = 0;
  if (gs_probe_delta(&op->before, &after, &added) < 0 || added == 0)
    return 0;
  struct gs_ticket t;
  if (gs_ticket_open_taken(&t, dev, NULL, added, what) != CUDA_SUCCESS)
    return -ENOMEM;
  t.ctx = (CUcontext)owner;
  if (gs_ticket_commit(&t, kind, key) < 0) {
    gs_ticket_abort(&t);
    return -ENOMEM;
  }
  return 0;
}

/* Both versions of cuIpcOpenMemHandle: `real_open` is the driver's own of the one called. */
static CUresult ipc_open(CUresult (*real_open)(CUdeviceptr *, CUipcMemHandle, unsigned int),
                         CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
  struct import_op op;
  import_begin(&op);
  CUresult rc = real_open(pdptr, handle, Flags);
  if (rc == CUDA_SUCCESS &&
      import_end(&op, op.dev, GS_ALLOC_IPC, *pdptr, op.ctx, "cuIpcOpenMemHandle") < 0) {
    gs_real()->cuIpcCloseMemHandle(*pdptr);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

GS_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                         unsigned int Flags) {
  GS_REAL_OR_NOT_FOUND(cuIpcOpenMemHandle_v2);
  return ipc_open(r->cuIpcOpenMemHandle_v2, pdptr, handle, Flags);
}

GS_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                      unsigned int Flags) {
  GS_REAL_OR_NOT_FOUND(cuIpcOpenMemHandle);
  return ipc_open(r->cuIpcOpenMemHandle, pdptr, handle, Flags);
}

GS_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  GS_REAL_OR_NOT_FOUND(cuIpcCloseMemHandle);
  struct gs_alloc a;
  int had = gs_forget(GS_ALLOC_IPC, dptr, &a) == 0;
  CUresult rc = r->cuIpcCloseMemHandle(dptr);
  gs_settle_free(had, &a, rc);
  return rc;
}

GS_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                  void *osHandle,
                                                  CUmemAllocationHandleType shHandleType) {
  GS_REAL_OR_NOT_FOUND(cuMemImportFromShareableHandle);
  struct import_op op;
  import_begin(&op);
  CUresult rc = r->cuMemImportFromShareableHandle(handle, osHandle, shHandleType);
  if (rc != CUDA_SUCCESS)
    return rc;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  if (!r->cuMemGetAllocationPropertiesFromHandle ||
      r->cuMemGetAllocationPropertiesFromHandle(&prop, *handle) != CUDA_SUCCESS ||
      prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return rc;
  if (import_end(&op, prop.location.id, GS_ALLOC_VMM, *handle, NULL,
                 "cuMemImportFromShareableHandle") < 0) {
    r->cuMemRelease(*handle);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

/* ---- arrays: counted by their texel storage ---- */

/* Bits per texel of a format with `channels` channels; unknown formats count 128 bits (the
 * largest), so an unknown format is never under-counted. */
static uint64_t texel_bits(CUarray_format f, unsigned channels) {
  switch ((int)f) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
  case CU_AD_FORMAT_SIGNED_INT8: return 8ull * channels;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF: return 16ull * channels;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT: return 32ull * channels;
  case CU_AD_FORMAT_UNORM_INT8X1:
  case CU_AD_FORMAT_SNORM_INT8X1: return 8;
  case CU_AD_FORMAT_UNORM_INT8X2:
  case CU_AD_FORMAT_SNORM_INT8X2:
  case CU_AD_FORMAT_UNORM_INT16X1:
  case CU_AD_FORMAT_SNORM_INT16X1: return 16;
  case CU_AD_FORMAT_UNORM_INT8X4:
  case CU_AD_FORMAT_SNORM_INT8X4:
  case CU_AD_FORMAT_UNORM_INT16X2:
  case CU_AD_FORMAT_SNORM_INT16X2:
  case CU_AD_FORMAT_UNORM_INT_101010_2: return 32;
  case CU_AD_FORMAT_UNORM_INT16X4:
  case CU_AD_FORMAT_SNORM_INT16X4: return 64;
  case CU_AD_FORMAT_BC1_UNORM:
  case CU_AD_FORMAT_BC1_UNORM_SRGB:
  case CU_AD_FORMAT_BC4_UNORM:
  case CU_AD_FORMAT_BC4_SNORM: return 4;
  case CU_AD_FORMAT_BC2_UNORM:
  case CU_AD_FORMAT_BC2_UNORM_SRGB:
  case CU_AD_FORMAT_BC3_UNORM:
  case CU_AD_FORMAT_BC3_UNORM_SRGB:
  case CU_AD_FORMAT_BC5_UNORM:
  case CU_AD_FORMAT_BC5_SNORM:
  case CU_AD_FORMAT_BC6H_UF16:
  case CU_AD_FORMAT_BC6H_SF16:
  case CU_AD_FORMAT_BC7_UNORM:
  case CU_AD_FORMAT_BC7_UNORM_SRGB:
  case CU_AD_FORMAT_NV12:
    return 8 * (f == CU_AD_FORMAT_NV12 ? 2 : 1); /* NV12 is 12 bits: round up */
  default: return 128;
  }
}

/* Rows padded to 512 bytes and the whole to 64 KiB (the GPU's small page): arrays take a little
 * more than their texels, and the hook must not count less than the device gives. */
static uint64_t extent_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f,
                             unsigned channels) {
  uint64_t row = sat_add(sat_mul(w ? w : 1, texel_bits(f, channels)), 7) / 8;
  row = sat_round_up(row, 512);
  uint64_t total = sat_mul(sat_mul(row, h ? h : 1), d ? d : 1);
  return sat_round_up(total, 64 << 10);
}

static uint64_t array3d_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels) {
  if (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING))
    return 0; /* backed later by cuMemCreate'd memory, counted there */
  int layered = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  uint64_t total = 0;
  for (unsigned l = 0; l < (levels ? levels : 1); l++) {
    uint64_t w = d->Width >> l, h = d->Height >> l, depth = layered ? d->Depth : d->Depth >> l;
    total =
        sat_add(total, extent_bytes(w ? w : 1, d->Height ? (h ? h : 1) : 0,
                                    d->Depth ? (depth ? depth : 1) : 0, d->Format, d->NumChannels));
  }
  return total;
}

GS_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc) {
  GS_REAL_OR_NOT_FOUND(cuArrayCreate_v2);
  uint64_t bytes =
      desc ? extent_bytes(desc->Width, desc->Height, 0, desc->Format, desc->NumChannels) : 0;
  struct gs_ticket t;
  CUresult rc = gs_ticket_open(&t, bytes, "cuArrayCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuArrayCreate_v2(pHandle, desc);
  return ticket_keep(&t, rc, GS_ALLOC_ARRAY, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0,
                     destroy_array);
}

GS_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
  GS_REAL_OR_NOT_FOUND(cuArray3DCreate_v2);
  struct gs_ticket t;
  CUresult rc = gs_ticket_open(&t, desc ? array3d_bytes(desc, 1) : 0, "cuArray3DCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuArray3DCreate_v2(pHandle, desc);
  return ticket_keep(&t, rc, GS_ALLOC_ARRAY, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0,
                     destroy_array);
}

GS_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  GS_REAL_OR_NOT_FOUND(cuArrayDestroy);
  struct gs_alloc a;
  int had = gs_forget(GS_ALLOC_ARRAY, (uint64_t)(uintptr_t)hArray, &a) == 0;
  CUresult rc = r->cuArrayDestroy(hArray);
  gs_settle_free(had, &a, rc);
  return rc;
}

GS_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                          const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                          unsigned int numMipmapLevels) {
  GS_REAL_OR_NOT_FOUND(cuMipmappedArrayCreate);
  struct gs_ticket t;
  CUresult rc =
      gs_ticket_open(&t, desc ? array3d_bytes(desc, numMipmapLevels) : 0, "cuMipmappedArrayCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels);
  return ticket_keep(&t, rc, GS_ALLOC_MIPMAP,
                     rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0, destroy_mipmap);
}

GS_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  GS_REAL_OR_NOT_FOUND(cuMipmappedArrayDestroy);
  struct gs_alloc a;
  int had = gs_forget(GS_ALLOC_MIPMAP, (uint64_t)(uintptr_t)hMipmappedArray, &a) == 0;
  CUresult rc = r->cuMipmappedArrayDestroy(hMipmappedArray);
  gs_settle_free(had, &a, rc);
  return rc;
}
