/* SPDX-License-Identifier: Apache-2.0 */
/* Contexts: each one's own cost is measured when it is created (cuCtxCreate, the first
 * cuDevicePrimaryCtxRetain) and counted; when it goes, so does everything it owned. The compute
 * gate is told of each (a second one on a device changes what a NULL stream names). */
#include "slice.h"

#include "compute.h"

#include <pthread.h>
#include <string.h>

struct ctx_op {
  struct gs_ticket t;
  struct gs_probe before;
  uint64_t estimate;
};

static CUresult ctx_begin(struct ctx_op *op, CUdevice dev, const char *what) {
  memset(op, 0, sizeof(*op));
  gs_setup();
  unsigned slot;
  struct gs_region_device_info info;
  /* Reserve what the last context on this device cost, so racing processes see it at once. */
  if (gs_slot_of(dev, &slot) == 0 && gs_region_device_info(gs_slice_region(), slot, &info) == 0)
    op->estimate = info.context_cost;
  CUresult rc = gs_ticket_open_on(&op->t, dev, NULL, op->estimate, what);
  if (rc != CUDA_SUCCESS)
    return rc;
  gs_probe(dev, &op->before);
  gs_probe_context_begins(dev);
  return CUDA_SUCCESS;
}

/* After the real creation: counts the measured cost; over the cap, `undo` destroys it again. */
static CUresult ctx_end(struct ctx_op *op, CUresult rc, CUcontext ctx, CUdevice dev,
                        CUresult (*undo)(CUcontext, CUdevice), const char *what) {
  if (rc == CUDA_SUCCESS)
    gs_compute_context_seen(ctx, dev);
  if (rc != CUDA_SUCCESS || !op->t.active) {
    gs_ticket_abort(&op->t);
    return rc;
  }
  struct gs_probe after;
  gs_probe(dev, &after);
  uint64_t cost;
  if (gs_probe_delta(&op->before, &after, &cost) < 0) {
    gs_log(GS_LOG_DEBUG, "%s: cannot measure the context's memory (no NVML)", what);
    cost = op->estimate;
  } else {
    gs_region_set_context_cost(gs_slice_region(), op->t.slot, cost);
  }
  if (gs_ticket_true_up(&op->t, cost, what) < 0) {
    undo(ctx, dev);
    gs_ticket_abort(&op->t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  op->t.ctx = ctx;
  gs_ticket_commit(&op->t, GS_ALLOC_CTX, (uint64_t)(uintptr_t)ctx);
  return CUDA_SUCCESS;
}

static CUresult undo_ctx_create(CUcontext ctx, CUdevice dev) {
  (void)dev;
  return gs_real()->cuCtxDestroy_v2 ? gs_real()->cuCtxDestroy_v2(ctx) : CUDA_ERROR_NOT_FOUND;
}

static CUresult undo_primary(CUcontext ctx, CUdevice dev) {
  (void)ctx;
  const struct gs_real *r = gs_real();
  return r->cuDevicePrimaryCtxRelease_v2 ? r->cuDevicePrimaryCtxRelease_v2(dev)
                                         : CUDA_ERROR_NOT_FOUND;
}

/* Every version of cuCtxCreate: the real `call` between ctx_begin and ctx_end (pctx and dev are
 * the wrapper's own arguments). */
#define CTX_CREATE(name, call)                                                                     \
  GS_REAL_OR_NOT_FOUND(name);                                                                      \
  struct ctx_op op;                                                                                \
  CUresult rc = ctx_begin(&op, dev, "cuCtxCreate");                                                \
  if (rc != CUDA_SUCCESS)                                                                          \
    return rc;                                                                                     \
  rc = call;                                                                                       \
  return ctx_end(&op, rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, undo_ctx_create, "cuCtxCreate")

GS_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                  CUdevice dev) {
  CTX_CREATE(cuCtxCreate_v4, r->cuCtxCreate_v4(pctx, params, flags, dev));
}

GS_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
                                  unsigned int flags, CUdevice dev) {
  CTX_CREATE(cuCtxCreate_v3, r->cuCtxCreate_v3(pctx, params, n, flags, dev));
}

GS_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  CTX_CREATE(cuCtxCreate_v2, r->cuCtxCreate_v2(pctx, flags, dev));
}

GS_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  CTX_CREATE(cuCtxCreate, r->cuCtxCreate(pctx, flags, dev));
}

GS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  GS_REAL_OR_NOT_FOUND(cuCtxDestroy_v2);
  CUresult rc = r->cuCtxDestroy_v2(ctx);
  if (rc == CUDA_SUCCESS)
    gs_drop_context(ctx);
  return rc;
}

GS_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  GS_REAL_OR_NOT_FOUND(cuCtxDestroy);
  CUresult rc = r->cuCtxDestroy(ctx);
  if (rc == CUDA_SUCCESS)
    gs_drop_context(ctx);
  return rc;
}

/* The primary context of each device as last retained, so that when it goes (released to zero,
 * reset) everything it owned is given back. */
static struct {
  pthread_mutex_t lock;
  CUcontext ctx[GS_CONFIG_MAX_ORDINALS];
} primary = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void primary_retained(CUdevice dev, CUcontext ctx) {
  gs_compute_context_seen(ctx, dev);
  if (dev < 0 || dev >= GS_CONFIG_MAX_ORDINALS)
    return;
  pthread_mutex_lock(&primary.lock);
  primary.ctx[dev] = ctx;
  pthread_mutex_unlock(&primary.lock);
}

GS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  GS_REAL_OR_NOT_FOUND(cuDevicePrimaryCtxRetain);
  gs_setup();
  unsigned flags = 0;
  int active = 0;
  /* Only the retain that brings the primary context to life costs memory. */
  if (!r->cuDevicePrimaryCtxGetState ||
      r->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || active) {
    CUresult rc = r->cuDevicePrimaryCtxRetain(pctx, dev);
    if (rc == CUDA_SUCCESS)
      primary_retained(dev, *pctx);
    return rc;
  }
  struct ctx_op op;
  CUresult rc = ctx_begin(&op, dev, "cuDevicePrimaryCtxRetain");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuDevicePrimaryCtxRetain(pctx, dev);
  rc = ctx_end(&op, rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, undo_primary,
               "cuDevicePrimaryCtxRetain");
  if (rc == CUDA_SUCCESS)
    primary_retained(dev, *pctx);
  return rc;
}

/* After a release or reset that returned rc: if the primary context is gone, so is everything it
 * held. Returns rc. */
static CUresult primary_settle(CUdevice dev, CUresult rc, int reset) {
  const struct gs_real *r = gs_real();
  if (rc != CUDA_SUCCESS || dev < 0 || dev >= GS_CONFIG_MAX_ORDINALS)
    return rc;
  pthread_mutex_lock(&primary.lock);
  CUcontext ctx = primary.ctx[dev];
  pthread_mutex_unlock(&primary.lock);
  unsigned flags = 0;
  int active = 1;
  if (!ctx || !r->cuDevicePrimaryCtxGetState ||
      r->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS)
    return rc;
  if (!active || reset)
    gs_drop_context(ctx);
  return rc;
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  GS_REAL_OR_NOT_FOUND(cuDevicePrimaryCtxRelease_v2);
  return primary_settle(dev, r->cuDevicePrimaryCtxRelease_v2(dev), 0);
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  GS_REAL_OR_NOT_FOUND(cuDevicePrimaryCtxRelease);
  return primary_settle(dev, r->cuDevicePrimaryCtxRelease(dev), 0);
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  GS_REAL_OR_NOT_FOUND(cuDevicePrimaryCtxReset_v2);
  return primary_settle(dev, r->cuDevicePrimaryCtxReset_v2(dev), 1);
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  GS_REAL_OR_NOT_FOUND(cuDevicePrimaryCtxReset);
  return primary_settle(dev, r->cuDevicePrimaryCtxReset(dev), 1);
}
