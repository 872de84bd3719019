/* SPDX-License-Identifier: Apache-2.0 */
/* Device work that is not a kernel launch: memsets and device-to-device copies run on the device
 * (its memory's bandwidth, its time) on their stream, in order with kernels, so the compute gate
 * takes them as launches (launch.h), each on the stream its form names: the Async forms' stream
 * (_ptsz: NULL is the calling thread's stream), the synchronous forms' default stream (the
 * legacy one; _ptds: the thread's). Copies to or from host memory are not device compute (a copy
 * engine's transfer over the bus): they pass through ungated. A copy whose sides are named by
 * address (cuMemcpy, cuMemcpyAsync, a 2D/3D copy's CU_MEMORYTYPE_UNIFIED side) is device to
 * device when the driver says both addresses are device memory (cuPointerGetAttribute: a lookup
 * in the driver's address table, no stream operation, allowed while a stream captures) or managed
 * memory; memory it does not know (pageable host memory) is the host's. A 2D/3D copy's descriptor
 * is copied once: what the gate decides on is what the driver is given. Into a capturing stream
 * the gate passes the work through as it does kernels: it becomes a node, gated when its graph is
 * launched. */
#include "launch.h"

/* Whether the driver has ptr as device memory, managed memory included: a copy of it runs on the
 * device too, and its memory type may read HOST wherever its pages are (the runtime's
 * cudaPointerAttributes: "managed memory can return either cudaMemoryTypeDevice or
 * cudaMemoryTypeHost regardless of its physical location"), so a HOST answer is asked
 * CU_POINTER_ATTRIBUTE_IS_MANAGED too. A driver without the query: yes, so that nothing is left
 * ungated. */
static bool on_device(CUdeviceptr ptr) {
  const struct gs_real *r = gs_real();
  unsigned int type = 0, managed = 0;
  if (!r->cuPointerGetAttribute)
    return true;
  if (r->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) != CUDA_SUCCESS)
    return false; /* not the driver's: pageable host memory */
  if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY)
    return true;
  return r->cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr) == CUDA_SUCCESS &&
         managed;
}

/* One side of a 2D/3D copy, by the memory type it is given. */
static bool side_on_device(CUmemorytype type, CUdeviceptr ptr) {
  if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY)
    return true;
  return type == CU_MEMORYTYPE_UNIFIED && on_device(ptr);
}

/* A 2D, 3D or 3D peer copy descriptor (any of their versions: the fields are named alike). A NULL
 * one is refused by the driver, ungated. */
#define DESC_ON_DEVICE(p)                                                                          \
  ((p) && side_on_device((p)->dstMemoryType, (CUdeviceptr)(p)->dstDevice) &&                       \
   side_on_device((p)->srcMemoryType, (CUdeviceptr)(p)->srcDevice))

/* The wrapper's body when the work is device work only if `ondev` (evaluated with r set). */
#define GATED_IF(name, ondev, stream, call)                                                        \
  REAL_OR_NOT_FOUND(name);                                                                         \
  if (!(ondev))                                                                                    \
    return call;                                                                                   \
  GATE_AND_CALL(stream, call)

/* ---- memsets: always device work (a memset of pinned host memory is rare; charged too) ---- */

#define MEMSET(name, stream, ptr_t, val_t, n_t)                                                    \
  GS_EXPORT CUresult name(ptr_t d, val_t v, n_t n) {                                               \
    GATED_LAUNCH(name, stream, r->name(d, v, n));                                                  \
  }
#define MEMSET_ASYNC(name, ptsz, val_t)                                                            \
  GS_EXPORT CUresult name(CUdeviceptr d, val_t v, size_t n, CUstream s) {                          \
    GATED_LAUNCH(name, ptsz ? PTSZ(s) : s, r->name(d, v, n, s));                                   \
  }
#define MEMSET_2D(name, stream, ptr_t, val_t, n_t)                                                 \
  GS_EXPORT CUresult name(ptr_t d, n_t pitch, val_t v, n_t w, n_t h) {                             \
    GATED_LAUNCH(name, stream, r->name(d, pitch, v, w, h));                                        \
  }
#define MEMSET_2D_ASYNC(name, ptsz, val_t)                                                         \
  GS_EXPORT CUresult name(CUdeviceptr d, size_t pitch, val_t v, size_t w, size_t h, CUstream s) {  \
    GATED_LAUNCH(name, ptsz ? PTSZ(s) : s, r->name(d, pitch, v, w, h, s));                         \
  }

MEMSET(cuMemsetD8, NULL, CUdeviceptr_v1, unsigned char, unsigned int)
MEMSET(cuMemsetD8_v2, NULL, CUdeviceptr, unsigned char, size_t)
MEMSET(cuMemsetD8_v2_ptds, CU_STREAM_PER_THREAD, CUdeviceptr, unsigned char, size_t)
MEMSET(cuMemsetD16, NULL, CUdeviceptr_v1, unsigned short, unsigned int)
MEMSET(cuMemsetD16_v2, NULL, CUdeviceptr, unsigned short, size_t)
MEMSET(cuMemsetD16_v2_ptds, CU_STREAM_PER_THREAD, CUdeviceptr, unsigned short, size_t)
MEMSET(cuMemsetD32, NULL, CUdeviceptr_v1, unsigned int, unsigned int)
MEMSET(cuMemsetD32_v2, NULL, CUdeviceptr, unsigned int, size_t)
MEMSET(cuMemsetD32_v2_ptds, CU_STREAM_PER_THREAD, CUdeviceptr, unsigned int, size_t)
MEMSET_ASYNC(cuMemsetD8Async, 0, unsigned char)
MEMSET_ASYNC(cuMemsetD8Async_ptsz, 1, unsigned char)
MEMSET_ASYNC(cuMemsetD16Async, 0, unsigned short)
MEMSET_ASYNC(cuMemsetD16Async_ptsz, 1, unsigned short)
MEMSET_ASYNC(cuMemsetD32Async, 0, unsigned int)
MEMSET_ASYNC(cuMemsetD32Async_ptsz, 1, unsigned int)
MEMSET_2D(cuMemsetD2D8, NULL, CUdeviceptr_v1, unsigned char, unsigned int)
MEMSET_2D(cuMemsetD2D8_v2, NULL, CUdeviceptr, unsigned char, size_t)
MEMSET_2D(cuMemsetD2D8_v2_ptds, CU_STREAM_PER_THREAD, CUdeviceptr, unsigned char, size_t)
MEMSET_2D(cuMemsetD2D16, NULL, CUdeviceptr_v1, unsigned short, unsigned int)
MEMSET_2D(cuMemsetD2D16_v2, NULL, CUdeviceptr, unsigned short, size_t)
MEMSET_2D(cuMemsetD2D16_v2_ptds, CU_STREAM_PER_THREAD, CUdeviceptr, unsigned short, size_t)
MEMSET_2D(cuMemsetD2D32, NULL, CUdeviceptr_v1, unsigned int, unsigned int)
MEMSET_2D(cuMemsetD2D32_v2, NULL, CUdeviceptr, unsigned int, size_t)
MEMSET_2D(cuMemsetD2D32_v2_ptds, CU_STREAM_PER_THREAD, CUdeviceptr, unsigned int, size_t)
MEMSET_2D_ASYNC(cuMemsetD2D8Async, 0, unsigned char)
MEMSET_2D_ASYNC(cuMemsetD2D8Async_ptsz, 1, unsigned char)
MEMSET_2D_ASYNC(cuMemsetD2D16Async, 0, unsigned short)
MEMSET_2D_ASYNC(cuMemsetD2D16Async_ptsz, 1, unsigned short)
MEMSET_2D_ASYNC(cuMemsetD2D32Async, 0, unsigned int)
MEMSET_2D_ASYNC(cuMemsetD2D32Async_ptsz, 1, unsigned int)

/* ---- device-to-device copies by name: always device work ---- */

#define DTOD(name, stream, ptr_t, n_t)                                                             \
  GS_EXPORT CUresult name(ptr_t dst, ptr_t src, n_t n) {                                           \
    GATED_LAUNCH(name, stream, r->name(dst, src, n));                                              \
  }
#define DTOD_ASYNC(name, ptsz, ptr_t, n_t)                                                         \
  GS_EXPORT CUresult name(ptr_t dst, ptr_t src, n_t n, CUstream s) {                               \
    GATED_LAUNCH(name, ptsz ? PTSZ(s) : s, r->name(dst, src, n, s));                               \
  }

DTOD(cuMemcpyDtoD, NULL, CUdeviceptr_v1, unsigned int)
DTOD(cuMemcpyDtoD_v2, NULL, CUdeviceptr, size_t)
DTOD(cuMemcpyDtoD_v2_ptds, CU_STREAM_PER_THREAD, CUdeviceptr, size_t)
DTOD_ASYNC(cuMemcpyDtoDAsync, 0, CUdeviceptr_v1, unsigned int)
DTOD_ASYNC(cuMemcpyDtoDAsync_v2, 0, CUdeviceptr, size_t)
DTOD_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, 1, CUdeviceptr, size_t)

/* Peer copies: device memory of two contexts, device work by definition. */
GS_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                                size_t n) {
  GATED_LAUNCH(cuMemcpyPeer, NULL, r->cuMemcpyPeer(dst, dctx, src, sctx, n));
}

GS_EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                     CUcontext sctx, size_t n) {
  GATED_LAUNCH(cuMemcpyPeer_ptds, CU_STREAM_PER_THREAD,
               r->cuMemcpyPeer_ptds(dst, dctx, src, sctx, n));
}

GS_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                     CUcontext sctx, size_t n, CUstream s) {
  GATED_LAUNCH(cuMemcpyPeerAsync, s, r->cuMemcpyPeerAsync(dst, dctx, src, sctx, n, s));
}

GS_EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                          CUcontext sctx, size_t n, CUstream s) {
  GATED_LAUNCH(cuMemcpyPeerAsync_ptsz, PTSZ(s),
               r->cuMemcpyPeerAsync_ptsz(dst, dctx, src, sctx, n, s));
}

/* ---- copies by address: device work when both sides are device memory ---- */

#define BOTH_ON_DEVICE(dst, src) (on_device(dst) && on_device(src))

GS_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  GATED_IF(cuMemcpy, BOTH_ON_DEVICE(dst, src), NULL, r->cuMemcpy(dst, src, n));
}

GS_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  GATED_IF(cuMemcpy_ptds, BOTH_ON_DEVICE(dst, src), CU_STREAM_PER_THREAD,
           r->cuMemcpy_ptds(dst, src, n));
}

GS_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  GATED_IF(cuMemcpyAsync, BOTH_ON_DEVICE(dst, src), s, r->cuMemcpyAsync(dst, src, n, s));
}

GS_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  GATED_IF(cuMemcpyAsync_ptsz, BOTH_ON_DEVICE(dst, src), PTSZ(s),
           r->cuMemcpyAsync_ptsz(dst, src, n, s));
}

/* ---- 2D and 3D copies: their descriptor names each side's memory type ---- */

/* The descriptor lives in the program's memory, where another thread may change it between the
 * gate's look and the driver's read (a device-to-device copy that read as a host one passed
 * ungated): it is read once, into the wrapper's own copy `d`, which the gate looks at and the
 * driver is given (the driver reads it during the call, Async forms included). A NULL one stays
 * NULL: the driver refuses it. */
#define DESC_SNAPSHOT(desc_t, p)                                                                   \
  desc_t d;                                                                                        \
  const desc_t *q = (p) ? (d = *(p), &d) : NULL

#define COPY_DESC(name, stream, desc_t)                                                            \
  GS_EXPORT CUresult name(const desc_t *p) {                                                       \
    DESC_SNAPSHOT(desc_t, p);                                                                      \
    GATED_IF(name, DESC_ON_DEVICE(q), stream, r->name(q));                                         \
  }
#define COPY_DESC_ASYNC(name, ptsz, desc_t)                                                        \
  GS_EXPORT CUresult name(const desc_t *p, CUstream s) {                                           \
    DESC_SNAPSHOT(desc_t, p);                                                                      \
    GATED_IF(name, DESC_ON_DEVICE(q), ptsz ? PTSZ(s) : s, r->name(q, s));                          \
  }

COPY_DESC(cuMemcpy2D, NULL, CUDA_MEMCPY2D_v1)
COPY_DESC(cuMemcpy2D_v2, NULL, CUDA_MEMCPY2D)
COPY_DESC(cuMemcpy2D_v2_ptds, CU_STREAM_PER_THREAD, CUDA_MEMCPY2D)
COPY_DESC(cuMemcpy2DUnaligned, NULL, CUDA_MEMCPY2D_v1)
COPY_DESC(cuMemcpy2DUnaligned_v2, NULL, CUDA_MEMCPY2D)
COPY_DESC(cuMemcpy2DUnaligned_v2_ptds, CU_STREAM_PER_THREAD, CUDA_MEMCPY2D)
COPY_DESC_ASYNC(cuMemcpy2DAsync, 0, CUDA_MEMCPY2D_v1)
COPY_DESC_ASYNC(cuMemcpy2DAsync_v2, 0, CUDA_MEMCPY2D)
COPY_DESC_ASYNC(cuMemcpy2DAsync_v2_ptsz, 1, CUDA_MEMCPY2D)
COPY_DESC(cuMemcpy3D, NULL, CUDA_MEMCPY3D_v1)
COPY_DESC(cuMemcpy3D_v2, NULL, CUDA_MEMCPY3D)
COPY_DESC(cuMemcpy3D_v2_ptds, CU_STREAM_PER_THREAD, CUDA_MEMCPY3D)
COPY_DESC_ASYNC(cuMemcpy3DAsync, 0, CUDA_MEMCPY3D_v1)
COPY_DESC_ASYNC(cuMemcpy3DAsync_v2, 0, CUDA_MEMCPY3D)
COPY_DESC_ASYNC(cuMemcpy3DAsync_v2_ptsz, 1, CUDA_MEMCPY3D)
COPY_DESC(cuMemcpy3DPeer, NULL, CUDA_MEMCPY3D_PEER)
COPY_DESC(cuMemcpy3DPeer_ptds, CU_STREAM_PER_THREAD, CUDA_MEMCPY3D_PEER)
COPY_DESC_ASYNC(cuMemcpy3DPeerAsync, 0, CUDA_MEMCPY3D_PEER)
COPY_DESC_ASYNC(cuMemcpy3DPeerAsync_ptsz, 1, CUDA_MEMCPY3D_PEER)

/* ---- copies with CUDA arrays (device memory) on the device's side: always device work ---- */

GS_EXPORT CUresult cuMemcpyDtoA(CUarray dst, unsigned int off, CUdeviceptr_v1 src, unsigned int n) {
  GATED_LAUNCH(cuMemcpyDtoA, NULL, r->cuMemcpyDtoA(dst, off, src, n));
}

GS_EXPORT CUresult cuMemcpyDtoA_v2(CUarray dst, size_t off, CUdeviceptr src, size_t n) {
  GATED_LAUNCH(cuMemcpyDtoA_v2, NULL, r->cuMemcpyDtoA_v2(dst, off, src, n));
}

GS_EXPORT CUresult cuMemcpyDtoA_v2_ptds(CUarray dst, size_t off, CUdeviceptr src, size_t n) {
  GATED_LAUNCH(cuMemcpyDtoA_v2_ptds, CU_STREAM_PER_THREAD,
               r->cuMemcpyDtoA_v2_ptds(dst, off, src, n));
}

GS_EXPORT CUresult cuMemcpyAtoD(CUdeviceptr_v1 dst, CUarray src, unsigned int off, unsigned int n) {
  GATED_LAUNCH(cuMemcpyAtoD, NULL, r->cuMemcpyAtoD(dst, src, off, n));
}

GS_EXPORT CUresult cuMemcpyAtoD_v2(CUdeviceptr dst, CUarray src, size_t off, size_t n) {
  GATED_LAUNCH(cuMemcpyAtoD_v2, NULL, r->cuMemcpyAtoD_v2(dst, src, off, n));
}

GS_EXPORT CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr dst, CUarray src, size_t off, size_t n) {
  GATED_LAUNCH(cuMemcpyAtoD_v2_ptds, CU_STREAM_PER_THREAD,
               r->cuMemcpyAtoD_v2_ptds(dst, src, off, n));
}

GS_EXPORT CUresult cuMemcpyAtoA(CUarray dst, unsigned int doff, CUarray src, unsigned int soff,
                                unsigned int n) {
  GATED_LAUNCH(cuMemcpyAtoA, NULL, r->cuMemcpyAtoA(dst, doff, src, soff, n));
}

GS_EXPORT CUresult cuMemcpyAtoA_v2(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n) {
  GATED_LAUNCH(cuMemcpyAtoA_v2, NULL, r->cuMemcpyAtoA_v2(dst, doff, src, soff, n));
}

GS_EXPORT CUresult cuMemcpyAtoA_v2_ptds(CUarray dst, size_t doff, CUarray src, size_t soff,
                                        size_t n) {
  GATED_LAUNCH(cuMemcpyAtoA_v2_ptds, CU_STREAM_PER_THREAD,
               r->cuMemcpyAtoA_v2_ptds(dst, doff, src, soff, n));
}

/* ---- batches (CUDA 12.8): gated whole. Telling a batch of host copies apart would take a
 * lookup per entry (3D operands name arrays or pointers); charging one is charging the time its
 * copies held the stream, never a way around the gate. ---- */

GS_EXPORT CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                      size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                      size_t numAttrs, size_t *failIdx, CUstream s) {
  GATED_LAUNCH(
      cuMemcpyBatchAsync, s,
      r->cuMemcpyBatchAsync(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, s));
}

GS_EXPORT CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                           size_t count, CUmemcpyAttributes *attrs,
                                           size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                           CUstream s) {
  GATED_LAUNCH(
      cuMemcpyBatchAsync_ptsz, PTSZ(s),
      r->cuMemcpyBatchAsync_ptsz(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, s));
}

GS_EXPORT CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                         size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                         size_t numAttrs, CUstream s) {
  GATED_LAUNCH(cuMemcpyBatchAsync_v2, s,
               r->cuMemcpyBatchAsync_v2(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, s));
}

GS_EXPORT CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                              size_t count, CUmemcpyAttributes *attrs,
                                              size_t *attrsIdxs, size_t numAttrs, CUstream s) {
  GATED_LAUNCH(
      cuMemcpyBatchAsync_v2_ptsz, PTSZ(s),
      r->cuMemcpyBatchAsync_v2_ptsz(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, s));
}

GS_EXPORT CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                        size_t *failIdx, unsigned long long flags, CUstream s) {
  GATED_LAUNCH(cuMemcpy3DBatchAsync, s, r->cuMemcpy3DBatchAsync(numOps, opList, failIdx, flags, s));
}

GS_EXPORT CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                             size_t *failIdx, unsigned long long flags,
                                             CUstream s) {
  GATED_LAUNCH(cuMemcpy3DBatchAsync_ptsz, PTSZ(s),
               r->cuMemcpy3DBatchAsync_ptsz(numOps, opList, failIdx, flags, s));
}

GS_EXPORT CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                           unsigned long long flags, CUstream s) {
  GATED_LAUNCH(cuMemcpy3DBatchAsync_v2, s, r->cuMemcpy3DBatchAsync_v2(numOps, opList, flags, s));
}

GS_EXPORT CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                                unsigned long long flags, CUstream s) {
  GATED_LAUNCH(cuMemcpy3DBatchAsync_v2_ptsz, PTSZ(s),
               r->cuMemcpy3DBatchAsync_v2_ptsz(numOps, opList, flags, s));
}
