/* SPDX-License-Identifier: Apache-2.0 */
/* Contexts: primary (retain, release, reset, flags) and created ones, each thread's
 * current-context stack, context queries and synchronize, and what goes with a context
 * when it is destroyed. Devices and the machine's memory charges are core.c's. */
#include "driver.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Each thread's current-context stack, as the driver keeps. */
#define SIM_CTX_STACK 32
static __thread struct sim_ctx *ctx_stack[SIM_CTX_STACK];
static __thread int ctx_depth;

/* ---- contexts ---- */

int sim_ctx_alive(const struct sim_ctx *c) {
  return c && c->magic == SIM_CTX_MAGIC && (!c->primary || c->active);
}

struct sim_ctx *sim_ctx_current(void) {
  if (ctx_depth == 0)
    return NULL;
  struct sim_ctx *c = ctx_stack[ctx_depth - 1];
  return sim_ctx_alive(c) ? c : NULL;
}

CUresult sim_ctx_current_rc(struct sim_ctx **ret) {
  if (ctx_depth == 0 || !ctx_stack[ctx_depth - 1])
    return CUDA_ERROR_INVALID_CONTEXT;
  struct sim_ctx *c = ctx_stack[ctx_depth - 1];
  /* Destroyed in another thread, or a primary context released to zero (which
   * cuDevicePrimaryCtxRelease does not pop): the driver says so by name. */
  if (!sim_ctx_alive(c))
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *ret = c;
  return CUDA_SUCCESS;
}

static CUresult ctx_arg(CUcontext h, struct sim_ctx **ret) {
  struct sim_ctx *c = (struct sim_ctx *)h;
  if (!c) {
    CUresult rc = sim_ctx_current_rc(&c);
    if (rc != CUDA_SUCCESS)
      return rc;
  }
  if (!sim_ctx_alive(c))
    return CUDA_ERROR_INVALID_CONTEXT;
  *ret = c;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&sim.mu);
  struct sim_ctx *c = &sim.primary[dev];
  if (!c->active) {
    rc = sim_charge(dev, sim.st.m->context_memory);
    if (rc == CUDA_SUCCESS) {
      sim_count_context(dev, 1);
      c->active = 1;
    }
  }
  if (rc == CUDA_SUCCESS) {
    c->refs++;
    *pctx = (CUcontext)c;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

/* When everything the context queued is done (0 if nothing). sim.mu held. */
static struct sim_mark ctx_tail_locked(const struct sim_ctx *c) {
  struct sim_mark mk = c->legacy.tail, last = {c->last_seq, 0, 0};
  for (const struct sim_stream *s = c->streams; s; s = s->next)
    sim_mark_merge(&mk, &s->tail);
  sim_mark_merge(&mk, &last);
  return mk;
}

/* sim.mu held: what the driver destroys with a context (cuda.h, cuCtxDestroy) — streams,
 * events, modules (and their functions), arrays, and the memory of cuMemAlloc / Pitch /
 * Managed / AllocHost made in it. Not VMM (cuMemCreate) or stream-ordered (pool) memory:
 * those belong to no context, so they stay until freed. IPC mappings stay too (cuda.h
 * does not say; see docs/sim.md). */
static void ctx_teardown_locked(struct sim_ctx *c) {
  sim_ctx_streams_reset(c);
  sim_ctx_events_reset(c);
  sim_ctx_modules_reset(c);
  sim_ctx_memory_reset(c);
}

/* sim.mu held: the primary context is destroyed; its retain count is the caller's. */
static void primary_drop(struct sim_ctx *c) {
  ctx_teardown_locked(c);
  c->active = 0;
  c->generation++;
  sim_uncharge(c->dev, sim.st.m->context_memory);
  sim_count_context(c->dev, -1);
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&sim.mu);
  struct sim_ctx *c = &sim.primary[dev];
  if (c->refs == 0) {
    rc = CUDA_ERROR_INVALID_CONTEXT;
  } else if (c->refs == 1 && c->active) {
    /* The context is destroyed: its queued work finishes first, as at cuCtxDestroy. */
    struct sim_mark mk = ctx_tail_locked(c);
    pthread_mutex_unlock(&sim.mu);
    sim_mark_wait(c->dev, &mk);
    pthread_mutex_lock(&sim.mu);
    if (c->refs == 0) {
      rc = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--c->refs == 0 && c->active) {
      primary_drop(c);
    }
  } else {
    /* After a reset the count is still the retainers' to give back (cuda.h: resetting
     * does not release), with nothing left to destroy. */
    c->refs--;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&sim.mu);
  struct sim_ctx *c = &sim.primary[dev];
  struct sim_mark mk = ctx_tail_locked(c);
  pthread_mutex_unlock(&sim.mu);
  sim_mark_wait(c->dev, &mk);
  pthread_mutex_lock(&sim.mu);
  if (c->active)
    primary_drop(c); /* the retain count stays: each retainer still releases */
  c->flags = 0;
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return cuDevicePrimaryCtxReset_v2(dev);
}

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  SIM_REQUIRE_INIT();
  if (!flags || !active)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&sim.mu);
  *flags = sim.primary[dev].flags;
  *active = sim.primary[dev].active;
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  SIM_REQUIRE_INIT();
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  sim.primary[dev].flags = flags;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  struct sim_ctx *c = calloc(1, sizeof(*c));
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = sim_charge(dev, sim.st.m->context_memory);
  if (rc != CUDA_SUCCESS) {
    free(c);
    return rc;
  }
  sim_count_context(dev, 1);
  c->magic = SIM_CTX_MAGIC;
  c->dev = dev;
  c->flags = flags;
  c->legacy.magic = SIM_STREAM_MAGIC;
  c->legacy.kind = SIM_STREAM_LEGACY;
  c->legacy.ctx = c;
  pthread_mutex_lock(&sim.mu);
  c->next = sim.contexts;
  sim.contexts = c;
  pthread_mutex_unlock(&sim.mu);
  /* A created context becomes current: pushed on this thread's stack. */
  if (ctx_depth < SIM_CTX_STACK)
    ctx_stack[ctx_depth++] = c;
  else
    ctx_stack[ctx_depth - 1] = c;
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  return ctx_create(pctx, flags, dev);
}

SIM_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                unsigned int flags, CUdevice dev) {
  return ctx_create(pctx, flags, dev);
}

SIM_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev) {
  return ctx_create(pctx, flags, dev);
}

SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c = (struct sim_ctx *)ctx;
  if (!c || c->magic != SIM_CTX_MAGIC || c->primary)
    return CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&sim.mu);
  struct sim_mark mk = ctx_tail_locked(c);
  pthread_mutex_unlock(&sim.mu);
  sim_mark_wait(c->dev, &mk); /* the context's queued work completes first */
  pthread_mutex_lock(&sim.mu);
  if (c->magic != SIM_CTX_MAGIC) { /* another thread destroyed it meanwhile */
    pthread_mutex_unlock(&sim.mu);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  ctx_teardown_locked(c);
  /* Kept allocated (magic cleared) so a stale handle is an error, not a crash. */
  c->magic = 0;
  pthread_mutex_unlock(&sim.mu);
  sim_uncharge(c->dev, sim.st.m->context_memory);
  sim_count_context(c->dev, -1);
  /* Popped if it is this thread's current context; anywhere else (deeper in this stack,
   * or current to other threads) it stays, and using it there says
   * CUDA_ERROR_CONTEXT_IS_DESTROYED, as the driver does. */
  if (ctx_depth > 0 && ctx_stack[ctx_depth - 1] == c)
    ctx_depth--;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c = (struct sim_ctx *)ctx;
  if (!sim_ctx_alive(c))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_depth >= SIM_CTX_STACK)
    return CUDA_ERROR_INVALID_VALUE;
  ctx_stack[ctx_depth++] = c;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  SIM_REQUIRE_INIT();
  if (ctx_depth == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  struct sim_ctx *c = ctx_stack[--ctx_depth];
  if (pctx)
    *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c = (struct sim_ctx *)ctx;
  if (!c) {
    if (ctx_depth > 0)
      ctx_depth--;
    return CUDA_SUCCESS;
  }
  if (!sim_ctx_alive(c))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_depth == 0)
    ctx_depth = 1;
  ctx_stack[ctx_depth - 1] = c;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetCurrent(CUcontext *pctx) {
  SIM_REQUIRE_INIT();
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  *pctx = (CUcontext)sim_ctx_current();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetDevice(CUdevice *device) {
  SIM_REQUIRE_INIT();
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  *device = c->dev;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = ctx_arg(ctx, &c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  *device = c->dev;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetFlags(unsigned int *flags) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!flags)
    return CUDA_ERROR_INVALID_VALUE;
  *flags = c->flags;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = ctx_arg(ctx, &c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = 12010; /* what current drivers report for a context */
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = ctx_arg(ctx, &c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!ctxId)
    return CUDA_ERROR_INVALID_VALUE;
  *ctxId = (unsigned long long)(uintptr_t)c;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit) {
  SIM_REQUIRE_INIT();
  if (!pvalue)
    return CUDA_ERROR_INVALID_VALUE;
  switch (limit) {
  case CU_LIMIT_STACK_SIZE: *pvalue = 1024; break;
  case CU_LIMIT_PRINTF_FIFO_SIZE: *pvalue = 1 << 20; break;
  case CU_LIMIT_MALLOC_HEAP_SIZE: *pvalue = 8 << 20; break;
  default: return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  SIM_REQUIRE_INIT();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
  SIM_REQUIRE_INIT();
  if (leastPriority)
    *leastPriority = 0;
  if (greatestPriority)
    *greatestPriority = -5;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig) {
  SIM_REQUIRE_INIT();
  if (pconfig)
    *pconfig = CU_FUNC_CACHE_PREFER_NONE;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetCacheConfig(CUfunc_cache config) {
  SIM_REQUIRE_INIT();
  return CUDA_SUCCESS;
}

/* A context with a stream in capture cannot be synchronized, in any mode: "It is also invalid
 * to query the execution status of or synchronize a broader handle which encompasses an active
 * stream capture, such as a device or context handle" (Programming Guide); the capture is
 * invalidated. Otherwise it is a potentially unsafe call (capture.c). */
CUresult sim_ctx_sync(struct sim_ctx *c) {
  pthread_mutex_lock(&sim.mu);
  int conflict = sim_capturing_any() && sim_capture_ctx_conflict_locked(c);
  struct sim_mark mk = ctx_tail_locked(c);
  pthread_mutex_unlock(&sim.mu);
  if (conflict)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  CUresult rc = sim_capture_unsafe("cuCtxSynchronize");
  if (rc != CUDA_SUCCESS)
    return rc;
  sim_mark_wait(c->dev, &mk);
  sim_pools_trim(c->dev);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSynchronize(void) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  return rc != CUDA_SUCCESS ? rc : sim_ctx_sync(c);
}

SIM_API CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  SIM_REQUIRE_INIT();
  struct sim_ctx *c;
  CUresult rc = ctx_arg(ctx, &c);
  return rc != CUDA_SUCCESS ? rc : sim_ctx_sync(c);
}
