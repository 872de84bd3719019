/* SPDX-License-Identifier: Apache-2.0 */
/* Copies and memsets on real bytes: synchronous ones wait for the default stream,
 * async ones move the bytes at the call (or are captured into a graph). They take no
 * device time and must not touch the engine timeline. */
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

/* Copies take no device time: the bytes move when the call is made, which a program
 * cannot tell apart because kernels in the sim never touch memory. */
static CUresult copy_async(void *dst, const void *src, size_t n, enum copy_kind k, CUstream h,
                           int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_node node = {.type = SIM_NODE_COPY, .dst = dst, .src = src, .n = n, .kind = k};
  int captured;
  CUresult rc = async_on(h, ptsz, &node, &captured);
  if (rc != CUDA_SUCCESS || captured)
    return rc;
  return do_copy(dst, src, n, k);
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
SIM_TWINS(cuMemcpyDtoD_v2, _ptds, copy_sync,
          (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount), SIM_DP(dstDevice),
          SIM_DP(srcDevice), ByteCount, DTOD)
SIM_TWINS(cuMemcpy, _ptds, copy_sync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
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

static CUresult memset_sync(CUdeviceptr dst, unsigned value, size_t elem, size_t n, int ptds) {
  SIM_REQUIRE_INIT();
  CUresult rc = sim_stream_wait(NULL, ptds, 1);
  return rc != CUDA_SUCCESS ? rc : do_memset(dst, value, elem, n);
}

static CUresult memset_async(CUdeviceptr dst, unsigned value, size_t elem, size_t n, CUstream h,
                             int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_node node = {
      .type = SIM_NODE_MEMSET, .dst = SIM_DP(dst), .n = n, .value = value, .elem = (unsigned)elem};
  int captured;
  CUresult rc = async_on(h, ptsz, &node, &captured);
  if (rc != CUDA_SUCCESS || captured)
    return rc;
  return do_memset(dst, value, elem, n);
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
