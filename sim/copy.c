/* SPDX-License-Identifier: Apache-2.0 */
/* Copies and memsets on real bytes, moved at the call (or captured into a graph). Memsets and
 * device-to-device copies take device time on their stream, in order with kernels, at
 * GSLICE_SIM_MEMORY_BANDWIDTH; copies to or from the host take none, and their synchronous forms
 * wait for the default stream first. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum copy_kind { HTOD, DTOH, DTOD, ANY };

static CUresult do_copy(void *dst, const void *src, size_t n, enum copy_kind k) {
  if (n == 0)
    return CUDA_SUCCESS;
  if (!dst || !src)
    return CUDA_ERROR_INVALID_VALUE;
  if ((k == HTOD || k == DTOD) && sim_check_dev_range((CUdeviceptr)(uintptr_t)dst, n))
    return CUDA_ERROR_INVALID_VALUE;
  if ((k == DTOH || k == DTOD) && sim_check_dev_range((CUdeviceptr)(uintptr_t)src, n))
    return CUDA_ERROR_INVALID_VALUE;
  memmove(dst, src, n);
  return CUDA_SUCCESS;
}

/* A synchronous copy waits for the (legacy or per-thread) default stream, as the real
 * one does, then moves the bytes. */
static CUresult copy_sync(void *dst, const void *src, size_t n, enum copy_kind k, int ptds) {
  SIM_REQUIRE_INIT();
  CUresult rc = sim_stream_wait(NULL, ptds, 1); /* a potentially unsafe call in a capture */
  if (rc != CUDA_SUCCESS)
    return rc;
  return do_copy(dst, src, n, k);
}

/* Device time of work touching `bytes` bytes of device memory `passes` times (a memset writes
 * each byte once, a device-to-device copy reads and writes it): GSLICE_SIM_MEMORY_BANDWIDTH is
 * in GB/s, i.e. bytes per ns. */
static uint64_t work_ns(size_t bytes, unsigned passes) {
  uint64_t gbps = sim.cfg.memory_gbps;
  if (!gbps || !bytes)
    return 0;
  uint64_t b = (uint64_t)bytes > UINT64_MAX / passes ? UINT64_MAX : (uint64_t)bytes * passes;
  return b / gbps + (b % gbps != 0);
}

/* Whether [p, p + n) is device memory of this process (*managed: managed memory). */
static int is_device(const void *p, size_t n, int *managed) {
  pthread_mutex_lock(&sim.mu);
  struct sim_range *r = sim_range_find((uintptr_t)p, n ? n : 1);
  int dev = r != NULL;
  if (managed)
    *managed = r && r->managed;
  pthread_mutex_unlock(&sim.mu);
  return dev;
}

/* Queues dur ns of device time on stream h (ptsz: NULL is the per-thread stream), in launch
 * order with the context's kernels; wait: and sleeps until it has run. */
static CUresult queue_work(CUstream h, int ptsz, uint64_t dur, int wait) {
  struct sim_stream *s;
  if (!dur && !wait)
    return CUDA_SUCCESS;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  sim_enqueue_locked(s, dur);
  struct sim_mark mk = s->tail;
  int dev = s->ctx->dev;
  pthread_mutex_unlock(&sim.mu);
  if (wait)
    sim_mark_wait(dev, &mk);
  return CUDA_SUCCESS;
}

/* The capture rules a synchronous memset or device-to-device copy meets (it is work on the
 * default stream, and a potentially unsafe call): the legacy stream's, then a default stream
 * that captures (the per-thread one, relaxed) refuses it, then the calling thread's mode. */
static CUresult sync_allowed(int ptds) {
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(NULL, ptds, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if ((rc = sim_capture_use_locked(s)) == CUDA_SUCCESS && s->cap) {
    sim_capture_invalidate_locked(s->cap, "a synchronous copy or memset");
    rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  pthread_mutex_unlock(&sim.mu);
  if (rc == CUDA_SUCCESS && sim_capturing_any())
    rc = sim_capture_unsafe("a synchronous copy or memset");
  return rc;
}

/* A synchronous device-to-device copy: "no host-side synchronization is performed" (the driver
 * API's "API synchronization behavior"): queued on the default stream, and the call returns;
 * fully synchronous when managed memory is involved. */
static CUresult dtod_sync(void *dst, const void *src, size_t n, int ptds) {
  SIM_REQUIRE_INIT();
  CUresult rc = sync_allowed(ptds);
  if (rc != CUDA_SUCCESS || (rc = do_copy(dst, src, n, DTOD)) != CUDA_SUCCESS)
    return rc;
  int m1 = 0, m2 = 0;
  is_device(dst, n, &m1);
  is_device(src, n, &m2);
  return queue_work(NULL, ptds, work_ns(n, 2), m1 || m2);
}

/* cuMemcpy: unified addressing says what each side is; device to device is the copy above, the
 * rest waits for the default stream first (HtoD, DtoH, host to host take no device time). */
static CUresult copy_any_sync(void *dst, const void *src, size_t n, enum copy_kind k, int ptds) {
  SIM_REQUIRE_INIT();
  if (n && is_device(dst, n, NULL) && is_device(src, n, NULL))
    return dtod_sync(dst, src, n, ptds);
  return copy_sync(dst, src, n, k, ptds);
}

/* An async copy or memset on stream h: into its capture when it is capturing (*captured set),
 * else the caller moves the bytes now. */
static CUresult async_on(CUstream h, int ptsz, const struct sim_node *node, int *captured) {
  struct sim_stream *s;
  *captured = 0;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if ((rc = sim_capture_use_locked(s)) == CUDA_SUCCESS && s->cap) {
    rc = sim_capture_add_locked(s, node);
    *captured = 1;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

/* The bytes move when the call is made, which a program cannot tell apart because kernels in the
 * sim never touch memory; a device-to-device copy then holds the stream for its device time (in
 * order with kernels), host copies take none (copy engines are not modelled). */
static CUresult copy_async(void *dst, const void *src, size_t n, enum copy_kind k, CUstream h,
                           int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_node node = {.type = SIM_NODE_COPY, .dst = dst, .src = src, .n = n, .kind = k};
  int captured;
  CUresult rc = async_on(h, ptsz, &node, &captured);
  if (rc != CUDA_SUCCESS || captured || (rc = do_copy(dst, src, n, k)) != CUDA_SUCCESS)
    return rc;
  int dtod = k == DTOD || (k == ANY && n && is_device(dst, n, NULL) && is_device(src, n, NULL));
  return dtod ? queue_work(h, ptsz, work_ns(n, 2), 0) : CUDA_SUCCESS;
}

CUresult sim_do_copy(void *dst, const void *src, size_t n, int kind) {
  return do_copy(dst, src, n, (enum copy_kind)kind);
}

SIM_TWINS(cuMemcpyHtoD_v2, _ptds, copy_sync,
          (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), SIM_DP(dstDevice),
          srcHost, ByteCount, HTOD)
SIM_TWINS(cuMemcpyDtoH_v2, _ptds, copy_sync,
          (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), dstHost, SIM_DP(srcDevice),
          ByteCount, DTOH)
SIM_TWINS(cuMemcpyDtoD_v2, _ptds, dtod_sync,
          (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount), SIM_DP(dstDevice),
          SIM_DP(srcDevice), ByteCount)
SIM_TWINS(cuMemcpy, _ptds, copy_any_sync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
          SIM_DP(dst), SIM_DP(src), ByteCount, ANY)
SIM_TWINS(cuMemcpyHtoDAsync_v2, _ptsz, copy_async,
          (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
          SIM_DP(dstDevice), srcHost, ByteCount, HTOD, hStream)
SIM_TWINS(cuMemcpyDtoHAsync_v2, _ptsz, copy_async,
          (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), dstHost,
          SIM_DP(srcDevice), ByteCount, DTOH, hStream)
SIM_TWINS(cuMemcpyDtoDAsync_v2, _ptsz, copy_async,
          (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
          SIM_DP(dstDevice), SIM_DP(srcDevice), ByteCount, DTOD, hStream)
SIM_TWINS(cuMemcpyAsync, _ptsz, copy_async,
          (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream), SIM_DP(dst),
          SIM_DP(src), ByteCount, ANY, hStream)

/* One side of a 2D copy: the address its memory type names, and whether it is device memory
 * (CU_MEMORYTYPE_UNIFIED: as unified addressing says). CUDA arrays are not modelled here. */
static CUresult side_2d(CUmemorytype type, const void *host, CUdeviceptr dev, size_t span,
                        char **ret, int *ret_device) {
  switch (type) {
  case CU_MEMORYTYPE_HOST: *ret = (char *)host, *ret_device = 0; break;
  case CU_MEMORYTYPE_DEVICE: *ret = SIM_DP(dev), *ret_device = 1; break;
  case CU_MEMORYTYPE_UNIFIED: *ret = SIM_DP(dev), *ret_device = is_device(*ret, span, NULL); break;
  case CU_MEMORYTYPE_ARRAY: return CUDA_ERROR_NOT_SUPPORTED;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return *ret ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuMemcpy2D: row by row, each side as its memory type names it; device to device as a
 * synchronous device-to-device copy (queued on the default stream, W x H bytes read and
 * written), the rest waits for the default stream first. The descriptor is read once. */
static CUresult copy_2d_sync(const CUDA_MEMCPY2D *p, int ptds) {
  SIM_REQUIRE_INIT();
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY2D d = *p;
  size_t w = d.WidthInBytes, h = d.Height;
  if (h > 1 && (d.srcPitch < w || d.dstPitch < w))
    return CUDA_ERROR_INVALID_VALUE;
  if (!w || !h)
    return CUDA_SUCCESS;
  char *src, *dst;
  int sdev, ddev, m1 = 0, m2 = 0;
  CUresult rc = side_2d(d.srcMemoryType, d.srcHost, d.srcDevice, w, &src, &sdev);
  if (rc == CUDA_SUCCESS)
    rc = side_2d(d.dstMemoryType, d.dstHost, d.dstDevice, w, &dst, &ddev);
  if (rc != CUDA_SUCCESS)
    return rc;
  enum copy_kind k = sdev && ddev ? DTOD : ddev ? HTOD : sdev ? DTOH : ANY;
  rc = k == DTOD ? sync_allowed(ptds) : sim_stream_wait(NULL, ptds, 1);
  src += d.srcY * d.srcPitch + d.srcXInBytes;
  dst += d.dstY * d.dstPitch + d.dstXInBytes;
  for (size_t y = 0; rc == CUDA_SUCCESS && y < h; y++)
    rc = do_copy(dst + y * d.dstPitch, src + y * d.srcPitch, w, k);
  if (rc != CUDA_SUCCESS || k != DTOD)
    return rc;
  is_device(dst, w, &m1);
  is_device(src, w, &m2);
  return queue_work(NULL, ptds, work_ns(w * h, 2), m1 || m2);
}

SIM_TWINS(cuMemcpy2D_v2, _ptds, copy_2d_sync, (const CUDA_MEMCPY2D *pCopy), pCopy)
SIM_TWINS(cuMemcpy2DUnaligned_v2, _ptds, copy_2d_sync, (const CUDA_MEMCPY2D *pCopy), pCopy)

static CUresult do_memset(CUdeviceptr dst, unsigned value, size_t elem, size_t n) {
  if (n == 0)
    return CUDA_SUCCESS;
  if (n > SIZE_MAX / elem || sim_check_dev_range(dst, n * elem))
    return CUDA_ERROR_INVALID_VALUE;
  if (elem == 1) {
    memset(SIM_DP(dst), (int)(value & 0xff), n);
  } else if (elem == 2) {
    uint16_t v = (uint16_t)value, *p = SIM_DP(dst);
    for (size_t i = 0; i < n; i++)
      p[i] = v;
  } else {
    uint32_t v = value, *p = SIM_DP(dst);
    for (size_t i = 0; i < n; i++)
      p[i] = v;
  }
  return CUDA_SUCCESS;
}

/* A synchronous memset is "asynchronous with respect to the host except when the target is pinned
 * host memory or a Unified Memory region" (the driver API's "API synchronization behavior"):
 * queued on the default stream, and the call returns; for managed memory it waits. */
static CUresult memset_sync(CUdeviceptr dst, unsigned value, size_t elem, size_t n, int ptds) {
  SIM_REQUIRE_INIT();
  CUresult rc = sync_allowed(ptds);
  if (rc != CUDA_SUCCESS || (rc = do_memset(dst, value, elem, n)) != CUDA_SUCCESS)
    return rc;
  int managed = 0;
  is_device(SIM_DP(dst), n * elem, &managed);
  return queue_work(NULL, ptds, work_ns(n * elem, 1), managed);
}

/* Async: the bytes now, the device time on the stream. */
static CUresult memset_async(CUdeviceptr dst, unsigned value, size_t elem, size_t n, CUstream h,
                             int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_node node = {
      .type = SIM_NODE_MEMSET, .dst = SIM_DP(dst), .n = n, .value = value, .elem = (unsigned)elem};
  int captured;
  CUresult rc = async_on(h, ptsz, &node, &captured);
  if (rc != CUDA_SUCCESS || captured || (rc = do_memset(dst, value, elem, n)) != CUDA_SUCCESS)
    return rc;
  return queue_work(h, ptsz, work_ns(n * elem, 1), 0);
}

/* 2D: height rows of width elements, pitch bytes apart; the range is checked whole first. */
static CUresult check_2d(CUdeviceptr dst, size_t pitch, size_t elem, size_t width, size_t height) {
  if (!width || !height)
    return CUDA_SUCCESS;
  if (width > SIZE_MAX / elem || pitch < width * elem ||
      height - 1 > (SIZE_MAX - width * elem) / pitch)
    return CUDA_ERROR_INVALID_VALUE;
  return sim_check_dev_range(dst, pitch * (height - 1) + width * elem);
}

static CUresult do_memset_2d(CUdeviceptr dst, size_t pitch, unsigned value, size_t elem,
                             size_t width, size_t height) {
  CUresult rc = check_2d(dst, pitch, elem, width, height);
  for (size_t y = 0; rc == CUDA_SUCCESS && width && y < height; y++)
    rc = do_memset(dst + y * pitch, value, elem, width);
  return rc;
}

static CUresult memset_2d_sync(CUdeviceptr dst, size_t pitch, unsigned value, size_t elem,
                               size_t width, size_t height, int ptds) {
  SIM_REQUIRE_INIT();
  CUresult rc = sync_allowed(ptds);
  if (rc != CUDA_SUCCESS ||
      (rc = do_memset_2d(dst, pitch, value, elem, width, height)) != CUDA_SUCCESS)
    return rc;
  int managed = 0;
  is_device(SIM_DP(dst), 1, &managed);
  return queue_work(NULL, ptds, work_ns(width * elem * height, 1), managed);
}

/* Into a capture: one memset node per row (a node has no pitch). */
static CUresult memset_2d_async(CUdeviceptr dst, size_t pitch, unsigned value, size_t elem,
                                size_t width, size_t height, CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  CUresult rc = check_2d(dst, pitch, elem, width, height);
  int captured = 0;
  for (size_t y = 0; rc == CUDA_SUCCESS && width && y < height && (y == 0 || captured); y++) {
    struct sim_node node = {.type = SIM_NODE_MEMSET,
                            .dst = SIM_DP(dst + y * pitch),
                            .n = width,
                            .value = value,
                            .elem = (unsigned)elem};
    rc = async_on(h, ptsz, &node, &captured);
  }
  if (rc != CUDA_SUCCESS || captured ||
      (rc = do_memset_2d(dst, pitch, value, elem, width, height)) != CUDA_SUCCESS)
    return rc;
  return queue_work(h, ptsz, work_ns(width * elem * height, 1), 0);
}

CUresult sim_do_memset(CUdeviceptr dst, unsigned value, size_t elem, size_t n) {
  return do_memset(dst, value, elem, n);
}

SIM_TWINS(cuMemsetD8_v2, _ptds, memset_sync, (CUdeviceptr d, unsigned char uc, size_t N), d, uc, 1,
          N)
SIM_TWINS(cuMemsetD16_v2, _ptds, memset_sync, (CUdeviceptr d, unsigned short us, size_t N), d, us,
          2, N)
SIM_TWINS(cuMemsetD32_v2, _ptds, memset_sync, (CUdeviceptr d, unsigned int ui, size_t N), d, ui, 4,
          N)
SIM_TWINS(cuMemsetD8Async, _ptsz, memset_async,
          (CUdeviceptr d, unsigned char uc, size_t N, CUstream h), d, uc, 1, N, h)
SIM_TWINS(cuMemsetD16Async, _ptsz, memset_async,
          (CUdeviceptr d, unsigned short us, size_t N, CUstream h), d, us, 2, N, h)
SIM_TWINS(cuMemsetD32Async, _ptsz, memset_async,
          (CUdeviceptr d, unsigned int ui, size_t N, CUstream h), d, ui, 4, N, h)
SIM_TWINS(cuMemsetD2D8_v2, _ptds, memset_2d_sync,
          (CUdeviceptr d, size_t pitch, unsigned char uc, size_t w, size_t ht), d, pitch, uc, 1, w,
          ht)
SIM_TWINS(cuMemsetD2D16_v2, _ptds, memset_2d_sync,
          (CUdeviceptr d, size_t pitch, unsigned short us, size_t w, size_t ht), d, pitch, us, 2, w,
          ht)
SIM_TWINS(cuMemsetD2D32_v2, _ptds, memset_2d_sync,
          (CUdeviceptr d, size_t pitch, unsigned int ui, size_t w, size_t ht), d, pitch, ui, 4, w,
          ht)
SIM_TWINS(cuMemsetD2D8Async, _ptsz, memset_2d_async,
          (CUdeviceptr d, size_t pitch, unsigned char uc, size_t w, size_t ht, CUstream h), d,
          pitch, uc, 1, w, ht, h)
SIM_TWINS(cuMemsetD2D16Async, _ptsz, memset_2d_async,
          (CUdeviceptr d, size_t pitch, unsigned short us, size_t w, size_t ht, CUstream h), d,
          pitch, us, 2, w, ht, h)
SIM_TWINS(cuMemsetD2D32Async, _ptsz, memset_2d_async,
          (CUdeviceptr d, size_t pitch, unsigned int ui, size_t w, size_t ht, CUstream h), d, pitch,
          ui, 4, w, ht, h)
