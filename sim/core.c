/* The simulated driver's core: cuInit, devices, contexts (primary and created, with
 * each thread's current-context stack) and the process's device address ranges. */
#include "driver.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct sim_driver sim = {.mu = PTHREAD_MUTEX_INITIALIZER, .slot = -1};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

#define SIM_CTX_STACK 32
static __thread struct sim_ctx *ctx_stack[SIM_CTX_STACK];
static __thread int ctx_depth;

static void init_primary(int d) {
  struct sim_ctx *c = &sim.primary[d];
  c->magic = SIM_CTX_MAGIC;
  c->dev = d;
  c->primary = 1;
  c->legacy.magic = SIM_STREAM_MAGIC;
  c->legacy.kind = SIM_STREAM_LEGACY;
  c->legacy.ctx = c;
}

static void do_init(void) {
  char err[512], note[512];
  int r = sim_config_parse(secure_getenv, &sim.cfg, err, sizeof(err));
  if (r < 0) {
    fprintf(stderr, "%s\n", err);
    sim.init_rc = CUDA_ERROR_INVALID_VALUE;
    return;
  }
  r = sim_state_open(&sim.cfg, &sim.st, note, sizeof(note));
  if (note[0])
    fprintf(stderr, "%s\n", note);
  if (r < 0) {
    fprintf(stderr, "gslice-sim: cannot open the simulated machine %s: %s\n",
            sim.cfg.state_path, strerror(-r));
    sim.init_rc = CUDA_ERROR_OPERATING_SYSTEM;
    return;
  }
  /* The driver applies CUDA_VISIBLE_DEVICES once, here; NVML never does. */
  char uuids[SIM_MAX_DEVICES][48];
  const char *uuid_text[SIM_MAX_DEVICES];
  unsigned ndev = sim.st.m->devices;
  for (unsigned d = 0; d < ndev && d < SIM_MAX_DEVICES; d++) {
    sim_uuid_text(sim.st.m, d, uuids[d], sizeof(uuids[d]));
    uuid_text[d] = uuids[d];
  }
  sim.ndev = sim_visible_parse(secure_getenv("CUDA_VISIBLE_DEVICES"), ndev, uuid_text, sim.pdev);
  if (sim.ndev == 0) {
    sim_state_close(&sim.st);
    sim.init_rc = CUDA_ERROR_NO_DEVICE;
    return;
  }
  sim_lock(sim.st.m);
  r = sim_proc_attach(sim.st.m, getpid());
  sim_unlock(sim.st.m);
  if (r < 0) {
    fprintf(stderr, "gslice-sim: %s has no free process slot (%d in use)\n",
            sim.cfg.state_path, SIM_MAX_PROCS);
    sim.init_rc = CUDA_ERROR_OPERATING_SYSTEM;
    return;
  }
  sim.slot = r;
  for (unsigned d = 0; d < sim.ndev; d++)
    init_primary((int)d);
  sim_pools_init();
  sim.init_rc = CUDA_SUCCESS;
  __atomic_store_n(&sim.ready, 1, __ATOMIC_RELEASE);
}

SIM_API CUresult cuInit(unsigned int flags) {
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_once(&init_once, do_init);
  return sim.init_rc;
}

SIM_API CUresult cuDriverGetVersion(int *driverVersion) {
  if (!driverVersion)
    return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = 13000;
  return CUDA_SUCCESS;
}

static int dev_ok(CUdevice d) { return d >= 0 && (unsigned)d < sim.ndev; }

SIM_API CUresult cuDeviceGetCount(int *count) {
  SIM_REQUIRE_INIT();
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = (int)sim.ndev;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  SIM_REQUIRE_INIT();
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(ordinal))
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "gslice simulated GPU");
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!uuid)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  sim_uuid(sim.st.m, sim_pdev(dev), (unsigned char *)uuid->bytes);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = sim.st.m->memory;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pciBusId || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  snprintf(pciBusId, (size_t)len, "00000000:%02X:00.0", sim_pdev(dev) + 1);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pi)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  int v;
  /* An H100-like device; numbers a program sizes its launches or buffers by. */
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = (int)sim.st.m->sms; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 50 << 20; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 49152; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = 232448; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = 233472; break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = 65536; break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = 65536; break;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: v = 512; break;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH: v = 2147483647; break;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 2; break;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = (int)sim_pdev(dev) + 1; break;
  case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = CU_COMPUTEMODE_DEFAULT; break;
  case CU_DEVICE_ATTRIBUTE_INTEGRATED: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: v = 1; break;
  case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: v = 0; break;
  case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: v = 0; break;
  default:
    /* Any other valid attribute reads 0 (unsupported feature), as a real driver
     * answers every attribute it knows. */
    if (attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
      return CUDA_ERROR_INVALID_VALUE;
    v = 0;
  }
  *pi = v;
  return CUDA_SUCCESS;
}

/* ---- memory charged on the shared machine ---- */

CUresult sim_charge(int dev, uint64_t bytes) {
  struct sim_machine *m = sim.st.m;
  if (bytes == 0)
    return CUDA_SUCCESS;
  sim_lock(m);
  sim_reap(m, 0);
  int r = sim_mem_charge(m, sim.slot, sim_pdev(dev), bytes);
  sim_unlock(m);
  return r < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

void sim_uncharge(int dev, uint64_t bytes) {
  struct sim_machine *m = sim.st.m;
  if (bytes == 0)
    return;
  sim_lock(m);
  sim_mem_uncharge(m, sim.slot, sim_pdev(dev), bytes);
  sim_unlock(m);
}

static void count_context(int dev, int delta) {
  struct sim_machine *m = sim.st.m;
  sim_lock(m);
  m->proc[sim.slot].contexts[sim_pdev(dev)] += (uint32_t)delta;
  sim_unlock(m);
}

/* Sleeps most of the way (timer slack makes a sleep overshoot by ~50-70 us), then
 * yields the last stretch, so a synchronize returns within a few us of the device
 * time, as on a GPU, at the price of at most SPIN_NS of polling. */
#define SPIN_NS 80000ull
void sim_wait_until(uint64_t t) {
  uint64_t now = sim_now_ns();
  if (now + SPIN_NS < t) {
    uint64_t wake = t - SPIN_NS;
    struct timespec ts = {(time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
      ;
  }
  while (sim_now_ns() < t)
    sched_yield();
}

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
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&sim.mu);
  struct sim_ctx *c = &sim.primary[dev];
  if (!c->active) {
    rc = sim_charge(dev, sim.st.m->context_memory);
    if (rc == CUDA_SUCCESS) {
      count_context(dev, 1);
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
static uint64_t ctx_tail_locked(const struct sim_ctx *c) {
  uint64_t t = c->legacy.tail;
  for (const struct sim_stream *s = c->streams; s; s = s->next)
    if (s->tail > t)
      t = s->tail;
  return t;
}

/* sim.mu held: what the driver destroys with a context (cuda.h, cuCtxDestroy) — streams,
 * events, modules (and their functions), arrays, and the memory of cuMemAlloc / Pitch /
 * Managed / AllocHost made in it. Not VMM (cuMemCreate) or stream-ordered (pool) memory:
 * those belong to no context, so they stay until freed. IPC mappings stay too (cuda.h
 * does not say; see docs/sim.md). */
static void ctx_teardown_locked(struct sim_ctx *c) {
  sim_ctx_streams_reset(c);
  sim_ctx_exec_reset(c);
  sim_ctx_memory_reset(c);
}

/* sim.mu held: the primary context is destroyed; its retain count is the caller's. */
static void primary_drop(struct sim_ctx *c) {
  ctx_teardown_locked(c);
  c->active = 0;
  c->generation++;
  sim_uncharge(c->dev, sim.st.m->context_memory);
  count_context(c->dev, -1);
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&sim.mu);
  struct sim_ctx *c = &sim.primary[dev];
  if (c->refs == 0) {
    rc = CUDA_ERROR_INVALID_CONTEXT;
  } else if (c->refs == 1 && c->active) {
    /* The context is destroyed: its queued work finishes first, as at cuCtxDestroy. */
    uint64_t t = ctx_tail_locked(c);
    pthread_mutex_unlock(&sim.mu);
    sim_wait_until(t);
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

SIM_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&sim.mu);
  struct sim_ctx *c = &sim.primary[dev];
  uint64_t t = ctx_tail_locked(c);
  pthread_mutex_unlock(&sim.mu);
  sim_wait_until(t);
  pthread_mutex_lock(&sim.mu);
  if (c->active)
    primary_drop(c); /* the retain count stays: each retainer still releases */
  c->flags = 0;
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  SIM_REQUIRE_INIT();
  if (!flags || !active)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&sim.mu);
  *flags = sim.primary[dev].flags;
  *active = sim.primary[dev].active;
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  SIM_REQUIRE_INIT();
  if (!dev_ok(dev))
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
  if (!dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  struct sim_ctx *c = calloc(1, sizeof(*c));
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = sim_charge(dev, sim.st.m->context_memory);
  if (rc != CUDA_SUCCESS) {
    free(c);
    return rc;
  }
  count_context(dev, 1);
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
  uint64_t t = ctx_tail_locked(c);
  pthread_mutex_unlock(&sim.mu);
  sim_wait_until(t); /* the context's queued work completes first */
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
  count_context(c->dev, -1);
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

CUresult sim_ctx_sync(struct sim_ctx *c) {
  pthread_mutex_lock(&sim.mu);
  uint64_t t = ctx_tail_locked(c);
  pthread_mutex_unlock(&sim.mu);
  sim_wait_until(t);
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

/* ---- this process's device address ranges (sim.mu held) ---- */

void *sim_backing_map(size_t size, size_t *ret_len) {
  size_t len = sim_round_up(size ? size : 1, 4096);
  /* Lazily backed: a 16 GiB device costs only the pages a program touches. */
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  *ret_len = len;
  return p;
}

static size_t range_lower_bound(uintptr_t p) {
  size_t lo = 0, hi = sim.nranges;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (sim.ranges[mid]->base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo; /* first index with base > p */
}

int sim_range_add(struct sim_range *r) {
  if (sim.nranges == sim.cap_ranges) {
    size_t cap = sim.cap_ranges ? sim.cap_ranges * 2 : 64;
    struct sim_range **n = realloc(sim.ranges, cap * sizeof(*n));
    if (!n)
      return -ENOMEM;
    sim.ranges = n;
    sim.cap_ranges = cap;
  }
  size_t i = range_lower_bound(r->base);
  memmove(&sim.ranges[i + 1], &sim.ranges[i], (sim.nranges - i) * sizeof(*sim.ranges));
  sim.ranges[i] = r;
  sim.nranges++;
  return 0;
}

struct sim_range *sim_range_find(uintptr_t p, size_t n) {
  size_t i = range_lower_bound(p);
  if (i == 0)
    return NULL;
  struct sim_range *r = sim.ranges[i - 1];
  if (p < r->base || p - r->base >= r->size || n > r->size - (p - r->base))
    return NULL;
  return r;
}

void sim_range_remove(struct sim_range *r) {
  for (size_t i = range_lower_bound(r->base); i-- > 0;) {
    if (sim.ranges[i] == r) {
      memmove(&sim.ranges[i], &sim.ranges[i + 1], (sim.nranges - i - 1) * sizeof(*sim.ranges));
      sim.nranges--;
      return;
    }
    if (sim.ranges[i]->base < r->base)
      break;
  }
}
