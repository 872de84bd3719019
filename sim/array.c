/* SPDX-License-Identifier: Apache-2.0 */
/* CUDA arrays and mipmapped arrays: counted on the device as a GPU lays them out,
 * with no backing bytes (array copies are not modelled). */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
  case CU_AD_FORMAT_HALF: return 2;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT: return 4;
  default: return 1;
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

void sim_ctx_arrays_reset(struct sim_ctx *c) {
  while (c->arrays)
    array_release_locked(c->arrays);
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
