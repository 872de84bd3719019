/* Memory isolation: every allocation path reserves in the slice's region before the real call,
 * rolls back on failure, and gives back on free; the slice's view of free/total memory. */
#include "hook.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocs.h"
#include "region.h"
#include "size.h"

#define MAX_POOLS 64
#define POOL_GRANULE (2ull << 20)

struct pool {
  CUmemoryPool pool;
  unsigned slot;
  uint64_t charged;   /* what the region holds for this pool */
  int by_reserved;    /* counted by the pool's reservation (else per allocation) */
};

/* The process's side of the slice. Everything after `lock` changes under it; the region has its
 * own (process-shared) lock, always taken inside this one, never around it. */
static struct {
  struct gs_config config;
  struct gs_region *region;
  pthread_mutex_t lock;
  int attached; /* this process (this pid) has its entry */
  unsigned proc;
  int dev_known[GS_CONFIG_MAX_ORDINALS];
  unsigned dev_slot[GS_CONFIG_MAX_ORDINALS];
  struct gs_allocs allocs;
  struct pool pools[MAX_POOLS];
  unsigned npools;
  int primary_refs[GS_CONFIG_MAX_ORDINALS];
  CUcontext primary_ctx[GS_CONFIG_MAX_ORDINALS];
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) {
  pthread_mutex_lock(&S.lock);
}

static void fork_parent(void) {
  pthread_mutex_unlock(&S.lock);
}

/* The child is another process of the slice: it takes its own entry at its first allocation.
 * What the parent holds stays the parent's (CUDA contexts do not cross fork). */
static void fork_child(void) {
  pthread_mutex_init(&S.lock, NULL);
  S.attached = 0;
  gs_allocs_clear(&S.allocs);
  S.npools = 0;
  memset(S.primary_refs, 0, sizeof(S.primary_refs));
  memset(S.primary_ctx, 0, sizeof(S.primary_ctx));
}

static void __attribute__((noreturn)) stop(const char *what) {
  gs_log(GS_LOG_ERROR, "%s; stopping the program so that it never runs outside its slice", what);
  _exit(1);
}

static void setup(void) {
  char err[sizeof(S.config.state_dir) + 512];
  if (gs_config_parse(secure_getenv, &S.config, err, sizeof(err)) < 0)
    stop(err);
  /* The default directory sits in a shared /tmp: someone else's directory there would let them
   * set this user's caps. */
  struct stat st;
  if (S.config.state_dir_default && lstat(S.config.state_dir, &st) == 0 &&
      (!S_ISDIR(st.st_mode) || st.st_uid != getuid())) {
    snprintf(err, sizeof(err),
             "refusing the default slice directory %s: not a directory of this user (set "
             "GSLICE_STATE_DIR)",
             S.config.state_dir);
    stop(err);
  }
  int e = gs_region_open(S.config.state_dir, &S.region);
  if (e < 0) {
    const char *why = e == -EBADMSG           ? "is not a gslice region or is corrupt"
                      : e == -EPROTONOSUPPORT ? "has another gslice region layout version"
                                              : strerror(-e);
    snprintf(err, sizeof(err),
             "refusing the slice's accounting file %s/%s: %s (remove it when no process of the "
             "slice runs, or set GSLICE_STATE_DIR to another directory)",
             S.config.state_dir, GS_REGION_FILE, why);
    stop(err);
  }
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void gs_setup(void) {
  pthread_once(&setup_once, setup);
}

/* Under S.lock. */
static int attach_locked(void) {
  if (S.attached)
    return 0;
  int e = gs_region_attach(S.region, &S.proc);
  if (e < 0) {
    gs_log(GS_LOG_ERROR, "no process entry in %s: %s", gs_region_path(S.region),
           e == -EUSERS ? "the slice has too many processes" : strerror(-e));
    return e;
  }
  S.attached = 1;
  return 0;
}

/* Under S.lock: the region slot of device ordinal `dev`, registering the device (and the cap
 * GSLICE_MEMORY_LIMIT gives it) the first time this process sees it. */
static int slot_locked(CUdevice dev, unsigned *ret_slot) {
  if (dev < 0 || dev >= GS_CONFIG_MAX_ORDINALS)
    return -EINVAL;
  if (S.dev_known[dev]) {
    *ret_slot = S.dev_slot[dev];
    return 0;
  }
  const struct gs_real *r = gs_real();
  CUuuid uuid;
  CUresult rc = r->cuDeviceGetUuid_v2    ? r->cuDeviceGetUuid_v2(&uuid, dev)
                : r->cuDeviceGetUuid     ? r->cuDeviceGetUuid(&uuid, dev)
                                         : CUDA_ERROR_NOT_FOUND;
  if (rc != CUDA_SUCCESS)
    return -ENODEV;
  unsigned slot;
  int e = gs_region_device(S.region, (const uint8_t *)uuid.bytes, 1, &slot);
  if (e < 0) {
    gs_log(GS_LOG_ERROR, "cannot register device %d in %s: %s", dev, gs_region_path(S.region),
           strerror(-e));
    return e;
  }
  uint64_t limit;
  if (gs_config_limit(&S.config, dev, &limit)) {
    e = gs_region_set_limit(S.region, slot, limit, GS_LIMIT_FROM_ENV);
    if (e == -EPERM)
      gs_log(GS_LOG_INFO, "device %d: the daemon's cap stands over GSLICE_MEMORY_LIMIT", dev);
  }
  S.dev_known[dev] = 1;
  S.dev_slot[dev] = slot;
  *ret_slot = slot;
  return 0;
}

static int slot_of(CUdevice dev, unsigned *ret_slot) {
  gs_setup();
  pthread_mutex_lock(&S.lock);
  int e = slot_locked(dev, ret_slot);
  pthread_mutex_unlock(&S.lock);
  return e;
}

static int current_device(CUdevice *ret_dev, CUcontext *ret_ctx) {
  const struct gs_real *r = gs_real();
  CUcontext ctx = NULL;
  CUdevice dev;
  if (!r->cuCtxGetCurrent || !r->cuCtxGetDevice || r->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS ||
      !ctx || r->cuCtxGetDevice(&dev) != CUDA_SUCCESS)
    return -ENODEV;
  *ret_dev = dev;
  if (ret_ctx)
    *ret_ctx = ctx;
  return 0;
}

/* ---- pools (cuMemAllocAsync): counted by their reservation, refreshed lazily ---- */

static int pool_reserved(CUmemoryPool pool, uint64_t *ret) {
  const struct gs_real *r = gs_real();
  cuuint64_t v = 0;
  if (!r->cuMemPoolGetAttribute ||
      r->cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
    return -ENOTSUP;
  *ret = v;
  return 0;
}

/* Under S.lock. */
static struct pool *pool_find_locked(CUmemoryPool pool) {
  for (unsigned i = 0; i < S.npools; i++)
    if (S.pools[i].pool == pool)
      return &S.pools[i];
  return NULL;
}

/* Brings the region in line with the pool's reservation: gives back what a trim released,
 * charges what grew behind the hook's back. Under S.lock. */
static void pool_refresh_locked(struct pool *p) {
  uint64_t now;
  if (!p->by_reserved || !S.attached || pool_reserved(p->pool, &now) < 0)
    return;
  if (now < p->charged)
    gs_region_release(S.region, S.proc, p->slot, p->charged - now);
  else if (now > p->charged)
    gs_region_charge(S.region, S.proc, p->slot, now - p->charged);
  p->charged = now;
}

static void pools_refresh(void) {
  pthread_mutex_lock(&S.lock);
  for (unsigned i = 0; i < S.npools; i++)
    pool_refresh_locked(&S.pools[i]);
  pthread_mutex_unlock(&S.lock);
}

/* ---- reservations ---- */

struct ticket {
  int active;
  CUdevice dev;
  unsigned slot;
  CUcontext ctx;
  uint64_t bytes;
};

static void say_denied(const char *what, CUdevice dev, unsigned slot, uint64_t asked,
                       const struct gs_region_denial *d) {
  char a[32], u[32], c[32], uuid[GS_UUID_STR_LEN] = "?";
  struct gs_region_device_info info;
  if (gs_region_device_info(S.region, slot, &info) == 0)
    gs_uuid_format(info.uuid, uuid);
  gs_size_format(asked, a, sizeof(a));
  gs_size_format(d->used, u, sizeof(u));
  gs_size_format(d->limit, c, sizeof(c));
  gs_log(GS_LOG_WARN,
         "%s: out of memory on device %d (%s): asked %s, the slice uses %s of its %s cap",
         what, (int)dev, uuid, a, u, c);
}

/* Reserves `bytes` on `dev` for the calling process. -ENOMEM (said on stderr) over the cap. */
static int reserve(CUdevice dev, unsigned slot, uint64_t bytes, const char *what) {
  struct gs_region_denial d = {0, 0};
  int e = -ENOMEM;
  for (int attempt = 0; attempt < 3; attempt++) {
    pthread_mutex_lock(&S.lock);
    e = attach_locked();
    if (e == 0)
      e = gs_region_reserve(S.region, S.proc, slot, bytes, &d);
    if (e == -ESTALE) /* our entry was taken from us: take a new one */
      S.attached = 0;
    pthread_mutex_unlock(&S.lock);
    if (e == -ENOMEM && attempt == 0) {
      pools_refresh(); /* a pool may have trimmed since it was last looked at */
      continue;
    }
    if (e != -ESTALE)
      break;
  }
  if (e == -ENOMEM)
    say_denied(what, dev, slot, bytes, &d);
  else if (e < 0)
    gs_log(GS_LOG_ERROR, "%s: accounting failed: %s", what, strerror(-e));
  return e;
}

static void release(unsigned slot, uint64_t bytes) {
  if (!bytes)
    return;
  pthread_mutex_lock(&S.lock);
  if (S.attached)
    gs_region_release(S.region, S.proc, slot, bytes);
  pthread_mutex_unlock(&S.lock);
}

/* Starts an allocation on the current context's device. Returns CUDA_SUCCESS with t->active
 * clear when there is nothing to count against (no context: the real call will say so). */
static CUresult ticket_open(struct ticket *t, uint64_t bytes, const char *what) {
  memset(t, 0, sizeof(*t));
  gs_setup();
  if (current_device(&t->dev, &t->ctx) < 0 || slot_of(t->dev, &t->slot) < 0)
    return CUDA_SUCCESS;
  if (reserve(t->dev, t->slot, bytes, what) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  t->active = 1;
  t->bytes = bytes;
  return CUDA_SUCCESS;
}

/* The same for an explicit device (VMM, context creation). */
static CUresult ticket_open_on(struct ticket *t, CUdevice dev, CUcontext ctx, uint64_t bytes,
                               const char *what) {
  memset(t, 0, sizeof(*t));
  gs_setup();
  t->dev = dev;
  t->ctx = ctx;
  if (slot_of(dev, &t->slot) < 0)
    return CUDA_SUCCESS;
  if (reserve(dev, t->slot, bytes, what) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  t->active = 1;
  t->bytes = bytes;
  return CUDA_SUCCESS;
}

static void ticket_abort(struct ticket *t) {
  if (t->active)
    release(t->slot, t->bytes);
  t->active = 0;
}

/* Re-counts the ticket at the size the driver really took. Growing past the cap: -ENOMEM, and
 * the ticket still holds its old size (the caller frees the allocation and aborts). */
static int ticket_true_up(struct ticket *t, uint64_t real_bytes, const char *what) {
  if (!t->active || real_bytes == t->bytes)
    return 0;
  if (real_bytes < t->bytes) {
    release(t->slot, t->bytes - real_bytes);
  } else {
    int e = reserve(t->dev, t->slot, real_bytes - t->bytes, what);
    if (e < 0)
      return e;
  }
  t->bytes = real_bytes;
  return 0;
}

/* Records the allocation under (kind, key) so its free gives the bytes back. */
static int ticket_commit(struct ticket *t, enum gs_alloc_kind kind, uint64_t key) {
  if (!t->active)
    return 0;
  struct gs_alloc a = {key, kind, t->slot, t->bytes, t->ctx}, stale;
  pthread_mutex_lock(&S.lock);
  int e = gs_allocs_put(&S.allocs, &a);
  if (e == -EEXIST && gs_allocs_take(&S.allocs, kind, key, &stale) == 0) {
    /* Freed behind the hook's back (a path it does not see) and handed out again. */
    if (S.attached)
      gs_region_release(S.region, S.proc, stale.slot, stale.bytes);
    e = gs_allocs_put(&S.allocs, &a);
  }
  pthread_mutex_unlock(&S.lock);
  if (e < 0)
    gs_log(GS_LOG_ERROR, "cannot record an allocation: %s", strerror(-e));
  t->active = 0;
  return e;
}

static int forget(enum gs_alloc_kind kind, uint64_t key, struct gs_alloc *ret) {
  pthread_mutex_lock(&S.lock);
  int e = gs_allocs_take(&S.allocs, kind, key, ret);
  pthread_mutex_unlock(&S.lock);
  return e;
}

static void remember(const struct gs_alloc *a) {
  pthread_mutex_lock(&S.lock);
  gs_allocs_put(&S.allocs, a);
  pthread_mutex_unlock(&S.lock);
}

/* After the real free: gives the bytes back, or keeps them counted if the free failed. */
static void settle_free(int had, const struct gs_alloc *a, CUresult rc) {
  if (!had)
    return;
  if (rc == CUDA_SUCCESS)
    release(a->slot, a->bytes);
  else
    remember(a);
}

/* Everything a context owned goes when it goes. */
static void drop_context(CUcontext ctx) {
  uint64_t bytes[GS_REGION_MAX_DEVICES] = {0};
  pthread_mutex_lock(&S.lock);
  gs_allocs_take_ctx(&S.allocs, ctx, bytes, GS_REGION_MAX_DEVICES);
  for (unsigned i = 0; i < GS_REGION_MAX_DEVICES; i++)
    if (bytes[i] && S.attached)
      gs_region_release(S.region, S.proc, i, bytes[i]);
  pthread_mutex_unlock(&S.lock);
}

/* ---- measuring what the driver takes on its own (contexts, imports) ---- */

struct probe {
  int proc_ok, proc_found, free_ok;
  uint64_t proc_used, dev_free;
};

static void nvml_start(void) {
  gs_real()->nvmlInit_v2();
}

static nvmlDevice_t nvml_device(CUdevice dev) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  const struct gs_real *r = gs_real();
  if (!r->nvmlInit_v2 || !r->nvmlDeviceGetHandleByUUID)
    return NULL;
  pthread_once(&once, nvml_start);
  CUuuid uuid;
  if (!r->cuDeviceGetUuid_v2 || r->cuDeviceGetUuid_v2(&uuid, dev) != CUDA_SUCCESS)
    return NULL;
  char text[GS_UUID_STR_LEN];
  gs_uuid_format((const uint8_t *)uuid.bytes, text);
  nvmlDevice_t d = NULL;
  if (r->nvmlDeviceGetHandleByUUID(text, &d) != NVML_SUCCESS)
    return NULL;
  return d;
}

static void probe(CUdevice dev, struct probe *p) {
  memset(p, 0, sizeof(*p));
  const struct gs_real *r = gs_real();
  nvmlDevice_t d = nvml_device(dev);
  if (!d)
    return;
  nvmlMemory_t m;
  if (r->nvmlDeviceGetMemoryInfo && r->nvmlDeviceGetMemoryInfo(d, &m) == NVML_SUCCESS) {
    p->free_ok = 1;
    p->dev_free = m.free;
  }
  if (!r->nvmlDeviceGetComputeRunningProcesses_v3)
    return;
  unsigned count = 256;
  nvmlProcessInfo_t *infos = calloc(count, sizeof(*infos));
  if (!infos)
    return;
  if (r->nvmlDeviceGetComputeRunningProcesses_v3(d, &count, infos) == NVML_SUCCESS) {
    p->proc_ok = 1;
    unsigned pid = (unsigned)getpid();
    for (unsigned i = 0; i < count && i < 256; i++) {
      if (infos[i].pid == pid &&
          infos[i].usedGpuMemory != (unsigned long long)NVML_VALUE_NOT_AVAILABLE) {
        p->proc_found = 1;
        p->proc_used = infos[i].usedGpuMemory;
      }
    }
  }
  free(infos);
}

/* What the device gave this process between two probes: its own line in NVML's process list
 * when NVML shows it (not inside a container's pid namespace), else the drop in free memory. */
static int probe_delta(const struct probe *before, const struct probe *after, uint64_t *ret) {
  if (before->proc_ok && after->proc_found) {
    uint64_t b = before->proc_found ? before->proc_used : 0;
    *ret = after->proc_used > b ? after->proc_used - b : 0;
    return 0;
  }
  if (before->free_ok && after->free_ok) {
    *ret = before->dev_free > after->dev_free ? before->dev_free - after->dev_free : 0;
    return 0;
  }
  return -ENODATA;
}

/* ---- contexts ---- */

struct ctx_op {
  struct ticket t;
  struct probe before;
  uint64_t estimate;
};

static CUresult ctx_begin(struct ctx_op *op, CUdevice dev, const char *what) {
  memset(op, 0, sizeof(*op));
  gs_setup();
  unsigned slot;
  struct gs_region_device_info info;
  /* Reserve what the last context on this device cost, so racing processes see it at once. */
  if (slot_of(dev, &slot) == 0 && gs_region_device_info(S.region, slot, &info) == 0)
    op->estimate = info.context_cost;
  CUresult rc = ticket_open_on(&op->t, dev, NULL, op->estimate, what);
  if (rc != CUDA_SUCCESS)
    return rc;
  probe(dev, &op->before);
  return CUDA_SUCCESS;
}

/* After the real creation: counts the measured cost; over the cap, `undo` destroys it again. */
static CUresult ctx_end(struct ctx_op *op, CUresult rc, CUcontext ctx, CUdevice dev,
                        CUresult (*undo)(CUcontext, CUdevice), const char *what) {
  if (rc != CUDA_SUCCESS || !op->t.active) {
    ticket_abort(&op->t);
    return rc;
  }
  struct probe after;
  probe(dev, &after);
  uint64_t cost;
  if (probe_delta(&op->before, &after, &cost) < 0) {
    gs_log(GS_LOG_DEBUG, "%s: cannot measure the context's memory (no NVML)", what);
    cost = op->estimate;
  } else {
    gs_region_set_context_cost(S.region, op->t.slot, cost);
  }
  if (ticket_true_up(&op->t, cost, what) < 0) {
    undo(ctx, dev);
    ticket_abort(&op->t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  op->t.ctx = ctx;
  ticket_commit(&op->t, GS_ALLOC_CTX, (uint64_t)(uintptr_t)ctx);
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

#define REAL_OR_NOT_FOUND(name)                                                                    \
  const struct gs_real *r = gs_real();                                                             \
  if (!r->name)                                                                                    \
  return CUDA_ERROR_NOT_FOUND

GS_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                  CUdevice dev) {
  REAL_OR_NOT_FOUND(cuCtxCreate_v4);
  struct ctx_op op;
  CUresult rc = ctx_begin(&op, dev, "cuCtxCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuCtxCreate_v4(pctx, params, flags, dev);
  return ctx_end(&op, rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, undo_ctx_create, "cuCtxCreate");
}

GS_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
                                  unsigned int flags, CUdevice dev) {
  REAL_OR_NOT_FOUND(cuCtxCreate_v3);
  struct ctx_op op;
  CUresult rc = ctx_begin(&op, dev, "cuCtxCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuCtxCreate_v3(pctx, params, n, flags, dev);
  return ctx_end(&op, rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, undo_ctx_create, "cuCtxCreate");
}

GS_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  REAL_OR_NOT_FOUND(cuCtxCreate_v2);
  struct ctx_op op;
  CUresult rc = ctx_begin(&op, dev, "cuCtxCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuCtxCreate_v2(pctx, flags, dev);
  return ctx_end(&op, rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, undo_ctx_create, "cuCtxCreate");
}

GS_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  REAL_OR_NOT_FOUND(cuCtxCreate);
  struct ctx_op op;
  CUresult rc = ctx_begin(&op, dev, "cuCtxCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuCtxCreate(pctx, flags, dev);
  return ctx_end(&op, rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, undo_ctx_create, "cuCtxCreate");
}

GS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  REAL_OR_NOT_FOUND(cuCtxDestroy_v2);
  CUresult rc = r->cuCtxDestroy_v2(ctx);
  if (rc == CUDA_SUCCESS)
    drop_context(ctx);
  return rc;
}

GS_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  REAL_OR_NOT_FOUND(cuCtxDestroy);
  CUresult rc = r->cuCtxDestroy(ctx);
  if (rc == CUDA_SUCCESS)
    drop_context(ctx);
  return rc;
}

GS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  REAL_OR_NOT_FOUND(cuDevicePrimaryCtxRetain);
  gs_setup();
  unsigned flags = 0;
  int active = 0;
  /* Only the retain that brings the primary context to life costs memory. */
  if (dev < 0 || dev >= GS_CONFIG_MAX_ORDINALS || !r->cuDevicePrimaryCtxGetState ||
      r->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || active) {
    CUresult rc = r->cuDevicePrimaryCtxRetain(pctx, dev);
    if (rc == CUDA_SUCCESS && dev >= 0 && dev < GS_CONFIG_MAX_ORDINALS) {
      pthread_mutex_lock(&S.lock);
      S.primary_refs[dev]++;
      S.primary_ctx[dev] = *pctx;
      pthread_mutex_unlock(&S.lock);
    }
    return rc;
  }
  struct ctx_op op;
  CUresult rc = ctx_begin(&op, dev, "cuDevicePrimaryCtxRetain");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuDevicePrimaryCtxRetain(pctx, dev);
  rc = ctx_end(&op, rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, undo_primary,
               "cuDevicePrimaryCtxRetain");
  if (rc == CUDA_SUCCESS) {
    pthread_mutex_lock(&S.lock);
    S.primary_refs[dev]++;
    S.primary_ctx[dev] = *pctx;
    pthread_mutex_unlock(&S.lock);
  }
  return rc;
}

/* After a release or reset: if the primary context is gone, so is everything it held. */
static void primary_settle(CUdevice dev, int reset) {
  const struct gs_real *r = gs_real();
  if (dev < 0 || dev >= GS_CONFIG_MAX_ORDINALS)
    return;
  pthread_mutex_lock(&S.lock);
  if (!reset && S.primary_refs[dev] > 0)
    S.primary_refs[dev]--;
  CUcontext ctx = S.primary_ctx[dev];
  pthread_mutex_unlock(&S.lock);
  unsigned flags = 0;
  int active = 1;
  if (!ctx || !r->cuDevicePrimaryCtxGetState ||
      r->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS)
    return;
  if (!active || reset)
    drop_context(ctx);
  if (reset) {
    pthread_mutex_lock(&S.lock);
    S.primary_refs[dev] = 0;
    pthread_mutex_unlock(&S.lock);
  }
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  REAL_OR_NOT_FOUND(cuDevicePrimaryCtxRelease_v2);
  CUresult rc = r->cuDevicePrimaryCtxRelease_v2(dev);
  if (rc == CUDA_SUCCESS)
    primary_settle(dev, 0);
  return rc;
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  REAL_OR_NOT_FOUND(cuDevicePrimaryCtxRelease);
  CUresult rc = r->cuDevicePrimaryCtxRelease(dev);
  if (rc == CUDA_SUCCESS)
    primary_settle(dev, 0);
  return rc;
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  REAL_OR_NOT_FOUND(cuDevicePrimaryCtxReset_v2);
  CUresult rc = r->cuDevicePrimaryCtxReset_v2(dev);
  if (rc == CUDA_SUCCESS)
    primary_settle(dev, 1);
  return rc;
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  REAL_OR_NOT_FOUND(cuDevicePrimaryCtxReset);
  CUresult rc = r->cuDevicePrimaryCtxReset(dev);
  if (rc == CUDA_SUCCESS)
    primary_settle(dev, 1);
  return rc;
}

/* ---- linear memory ---- */

GS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  REAL_OR_NOT_FOUND(cuMemAlloc_v2);
  struct ticket t;
  CUresult rc = ticket_open(&t, bytesize, "cuMemAlloc");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuMemAlloc_v2(dptr, bytesize);
  if (rc != CUDA_SUCCESS) {
    ticket_abort(&t);
    return rc;
  }
  if (ticket_commit(&t, GS_ALLOC_PTR, *dptr) < 0) {
    r->cuMemFree_v2(*dptr);
    ticket_abort(&t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

GS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  REAL_OR_NOT_FOUND(cuMemAllocManaged);
  struct ticket t;
  CUresult rc = ticket_open(&t, bytesize, "cuMemAllocManaged");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuMemAllocManaged(dptr, bytesize, flags);
  if (rc != CUDA_SUCCESS) {
    ticket_abort(&t);
    return rc;
  }
  if (ticket_commit(&t, GS_ALLOC_PTR, *dptr) < 0) {
    r->cuMemFree_v2(*dptr);
    ticket_abort(&t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

/* The pitch is the driver's choice: reserve with the usual 512-byte alignment, then re-count at
 * the pitch it returned (freeing again if that overshoots the cap). */
GS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t width,
                                      size_t height, unsigned int elementSize) {
  REAL_OR_NOT_FOUND(cuMemAllocPitch_v2);
  uint64_t guess = ((uint64_t)width + 511) / 512 * 512 * (uint64_t)height;
  struct ticket t;
  CUresult rc = ticket_open(&t, guess, "cuMemAllocPitch");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuMemAllocPitch_v2(dptr, pPitch, width, height, elementSize);
  if (rc != CUDA_SUCCESS) {
    ticket_abort(&t);
    return rc;
  }
  if (ticket_true_up(&t, (uint64_t)*pPitch * height, "cuMemAllocPitch") < 0 ||
      ticket_commit(&t, GS_ALLOC_PTR, *dptr) < 0) {
    r->cuMemFree_v2(*dptr);
    ticket_abort(&t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

GS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  REAL_OR_NOT_FOUND(cuMemFree_v2);
  struct gs_alloc a;
  int had = forget(GS_ALLOC_PTR, dptr, &a) == 0;
  CUresult rc = r->cuMemFree_v2(dptr);
  settle_free(had, &a, rc);
  return rc;
}

/* ---- stream-ordered allocation ---- */

struct pool_op {
  struct ticket t;
  CUmemoryPool pool;
  int by_reserved;
};

static CUresult pool_begin(struct pool_op *op, CUmemoryPool pool, size_t bytes, const char *what) {
  memset(op, 0, sizeof(*op));
  gs_setup();
  const struct gs_real *r = gs_real();
  CUdevice dev;
  CUcontext ctx;
  unsigned slot;
  if (current_device(&dev, &ctx) < 0 || slot_of(dev, &slot) < 0)
    return CUDA_SUCCESS;
  if (!pool && (!r->cuDeviceGetMemPool || r->cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS))
    pool = NULL;
  op->pool = pool;
  if (pool) {
    pthread_mutex_lock(&S.lock);
    struct pool *p = pool_find_locked(pool);
    if (!p && S.npools < MAX_POOLS && attach_locked() == 0) {
      uint64_t now = 0;
      p = &S.pools[S.npools++];
      p->pool = pool;
      p->slot = slot;
      p->charged = 0;
      p->by_reserved = pool_reserved(pool, &now) == 0;
      /* What the pool held before the hook first saw it is the slice's too. */
      if (p->by_reserved && now)
        gs_region_charge(S.region, S.proc, slot, now);
      p->charged = now;
    }
    if (p) {
      op->by_reserved = p->by_reserved;
      pool_refresh_locked(p);
    }
    pthread_mutex_unlock(&S.lock);
  }
  /* Reserve the request up front, rounded to the 2 MiB a pool grows by at least, so the device
   * never holds more than the slice before the real growth is settled. */
  uint64_t upfront = op->by_reserved ? (bytes + POOL_GRANULE - 1) / POOL_GRANULE * POOL_GRANULE
                                     : bytes;
  if (reserve(dev, slot, upfront, what) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  op->t = (struct ticket){1, dev, slot, op->by_reserved ? NULL : ctx, upfront};
  return CUDA_SUCCESS;
}

static CUresult pool_end(struct pool_op *op, CUresult rc, CUdeviceptr *dptr, CUstream stream,
                         const char *what) {
  const struct gs_real *r = gs_real();
  if (rc != CUDA_SUCCESS || !op->t.active) {
    ticket_abort(&op->t);
    return rc;
  }
  if (!op->by_reserved) {
    if (ticket_commit(&op->t, GS_ALLOC_PTR, *dptr) < 0) {
      r->cuMemFreeAsync(*dptr, stream);
      ticket_abort(&op->t);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc;
  }
  /* The ticket becomes the pool's growth: the pool's charge absorbs it. */
  uint64_t growth = 0, now = 0;
  pthread_mutex_lock(&S.lock);
  struct pool *p = pool_find_locked(op->pool);
  if (p && pool_reserved(op->pool, &now) == 0 && now > p->charged) {
    growth = now - p->charged;
    p->charged = now;
  }
  pthread_mutex_unlock(&S.lock);
  if (ticket_true_up(&op->t, growth, what) < 0) {
    /* Over the cap by the pool's granularity: hand the memory back and trim. */
    r->cuMemFreeAsync(*dptr, stream);
    if (r->cuStreamSynchronize)
      r->cuStreamSynchronize(stream);
    if (r->cuMemPoolTrimTo)
      r->cuMemPoolTrimTo(op->pool, 0);
    release(op->t.slot, op->t.bytes);
    pthread_mutex_lock(&S.lock);
    if (p) {
      /* The region never held the growth; the refresh charges what the pool still keeps. */
      p->charged = p->charged > growth ? p->charged - growth : 0;
      pool_refresh_locked(p);
    }
    pthread_mutex_unlock(&S.lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

#define ALLOC_ASYNC(name, call, pool)                                                              \
  REAL_OR_NOT_FOUND(name);                                                                         \
  struct pool_op op;                                                                               \
  CUresult rc = pool_begin(&op, pool, bytesize, #name);                                            \
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
  REAL_OR_NOT_FOUND(cuMemFreeAsync);
  struct gs_alloc a;
  int had = forget(GS_ALLOC_PTR, dptr, &a) == 0;
  CUresult rc = r->cuMemFreeAsync(dptr, hStream);
  settle_free(had, &a, rc);
  return rc;
}

GS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  REAL_OR_NOT_FOUND(cuMemFreeAsync_ptsz);
  struct gs_alloc a;
  int had = forget(GS_ALLOC_PTR, dptr, &a) == 0;
  CUresult rc = r->cuMemFreeAsync_ptsz(dptr, hStream);
  settle_free(had, &a, rc);
  return rc;
}

GS_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  REAL_OR_NOT_FOUND(cuMemPoolTrimTo);
  CUresult rc = r->cuMemPoolTrimTo(pool, minBytesToKeep);
  pthread_mutex_lock(&S.lock);
  struct pool *p = pool_find_locked(pool);
  if (p)
    pool_refresh_locked(p);
  pthread_mutex_unlock(&S.lock);
  return rc;
}

GS_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  REAL_OR_NOT_FOUND(cuMemPoolDestroy);
  CUresult rc = r->cuMemPoolDestroy(pool);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&S.lock);
  struct pool *p = pool_find_locked(pool);
  if (p) {
    if (S.attached && p->by_reserved)
      gs_region_release(S.region, S.proc, p->slot, p->charged);
    *p = S.pools[--S.npools];
  }
  pthread_mutex_unlock(&S.lock);
  return rc;
}

/* ---- virtual memory management: physical allocations, not address reservations ---- */

GS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags) {
  REAL_OR_NOT_FOUND(cuMemCreate);
  struct ticket t = {0};
  CUresult rc;
  if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    rc = ticket_open_on(&t, prop->location.id, NULL, size, "cuMemCreate");
    if (rc != CUDA_SUCCESS)
      return rc;
  }
  rc = r->cuMemCreate(handle, size, prop, flags);
  if (rc != CUDA_SUCCESS) {
    ticket_abort(&t);
    return rc;
  }
  if (ticket_commit(&t, GS_ALLOC_VMM, *handle) < 0) {
    r->cuMemRelease(*handle);
    ticket_abort(&t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

GS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  REAL_OR_NOT_FOUND(cuMemRelease);
  struct gs_alloc a;
  int had = forget(GS_ALLOC_VMM, handle, &a) == 0;
  CUresult rc = r->cuMemRelease(handle);
  settle_free(had, &a, rc);
  return rc;
}

/* ---- imports: counted by what the device gives this process for them (measured) ---- */

struct import_op {
  int active;
  CUdevice dev;
  CUcontext ctx;
  struct probe before;
};

static void import_begin(struct import_op *op) {
  memset(op, 0, sizeof(*op));
  gs_setup();
  if (current_device(&op->dev, &op->ctx) == 0) {
    op->active = 1;
    probe(op->dev, &op->before);
  }
}

/* 0, or -ENOMEM when what the import added overshoots the cap (the caller closes it). */
static int import_end(struct import_op *op, CUdevice dev, enum gs_alloc_kind kind, uint64_t key,
                      const void *owner, const char *what) {
  if (!op->active || dev != op->dev)
    return 0;
  struct probe after;
  probe(dev, &after);
  uint64_t added = 0;
  if (probe_delta(&op->before, &after, &added) < 0 || added == 0)
    return 0;
  struct ticket t;
  if (ticket_open_on(&t, dev, NULL, added, what) != CUDA_SUCCESS)
    return -ENOMEM;
  t.ctx = (CUcontext)owner;
  if (ticket_commit(&t, kind, key) < 0) {
    ticket_abort(&t);
    return -ENOMEM;
  }
  return 0;
}

GS_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                         unsigned int Flags) {
  REAL_OR_NOT_FOUND(cuIpcOpenMemHandle_v2);
  struct import_op op;
  import_begin(&op);
  CUresult rc = r->cuIpcOpenMemHandle_v2(pdptr, handle, Flags);
  if (rc == CUDA_SUCCESS &&
      import_end(&op, op.dev, GS_ALLOC_IPC, *pdptr, op.ctx, "cuIpcOpenMemHandle") < 0) {
    r->cuIpcCloseMemHandle(*pdptr);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

GS_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                      unsigned int Flags) {
  REAL_OR_NOT_FOUND(cuIpcOpenMemHandle);
  struct import_op op;
  import_begin(&op);
  CUresult rc = r->cuIpcOpenMemHandle(pdptr, handle, Flags);
  if (rc == CUDA_SUCCESS &&
      import_end(&op, op.dev, GS_ALLOC_IPC, *pdptr, op.ctx, "cuIpcOpenMemHandle") < 0) {
    r->cuIpcCloseMemHandle(*pdptr);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

GS_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  REAL_OR_NOT_FOUND(cuIpcCloseMemHandle);
  struct gs_alloc a;
  int had = forget(GS_ALLOC_IPC, dptr, &a) == 0;
  CUresult rc = r->cuIpcCloseMemHandle(dptr);
  settle_free(had, &a, rc);
  return rc;
}

GS_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                  void *osHandle,
                                                  CUmemAllocationHandleType shHandleType) {
  REAL_OR_NOT_FOUND(cuMemImportFromShareableHandle);
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
  case CU_AD_FORMAT_SIGNED_INT8:
    return 8ull * channels;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF:
    return 16ull * channels;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT:
    return 32ull * channels;
  case CU_AD_FORMAT_UNORM_INT8X1:
  case CU_AD_FORMAT_SNORM_INT8X1:
    return 8;
  case CU_AD_FORMAT_UNORM_INT8X2:
  case CU_AD_FORMAT_SNORM_INT8X2:
  case CU_AD_FORMAT_UNORM_INT16X1:
  case CU_AD_FORMAT_SNORM_INT16X1:
    return 16;
  case CU_AD_FORMAT_UNORM_INT8X4:
  case CU_AD_FORMAT_SNORM_INT8X4:
  case CU_AD_FORMAT_UNORM_INT16X2:
  case CU_AD_FORMAT_SNORM_INT16X2:
  case CU_AD_FORMAT_UNORM_INT_101010_2:
    return 32;
  case CU_AD_FORMAT_UNORM_INT16X4:
  case CU_AD_FORMAT_SNORM_INT16X4:
    return 64;
  case CU_AD_FORMAT_BC1_UNORM:
  case CU_AD_FORMAT_BC1_UNORM_SRGB:
  case CU_AD_FORMAT_BC4_UNORM:
  case CU_AD_FORMAT_BC4_SNORM:
    return 4;
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
  default:
    return 128;
  }
}

/* Rows padded to 512 bytes and the whole to 64 KiB (the GPU's small page): arrays take a little
 * more than their texels, and the hook must not count less than the device gives. */
static uint64_t extent_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f,
                             unsigned channels) {
  uint64_t row = ((w ? w : 1) * texel_bits(f, channels) + 7) / 8;
  row = (row + 511) / 512 * 512;
  uint64_t total = row * (h ? h : 1) * (d ? d : 1);
  return (total + (64 << 10) - 1) / (64 << 10) * (64 << 10);
}

static uint64_t array3d_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels) {
  if (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING))
    return 0; /* backed later by cuMemCreate'd memory, counted there */
  int layered = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  uint64_t total = 0;
  for (unsigned l = 0; l < (levels ? levels : 1); l++) {
    uint64_t w = d->Width >> l, h = d->Height >> l, depth = layered ? d->Depth : d->Depth >> l;
    total += extent_bytes(w ? w : 1, d->Height ? (h ? h : 1) : 0,
                          d->Depth ? (depth ? depth : 1) : 0, d->Format, d->NumChannels);
  }
  return total;
}

GS_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc) {
  REAL_OR_NOT_FOUND(cuArrayCreate_v2);
  uint64_t bytes =
      desc ? extent_bytes(desc->Width, desc->Height, 0, desc->Format, desc->NumChannels) : 0;
  struct ticket t;
  CUresult rc = ticket_open(&t, bytes, "cuArrayCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuArrayCreate_v2(pHandle, desc);
  if (rc != CUDA_SUCCESS) {
    ticket_abort(&t);
    return rc;
  }
  if (ticket_commit(&t, GS_ALLOC_ARRAY, (uint64_t)(uintptr_t)*pHandle) < 0) {
    r->cuArrayDestroy(*pHandle);
    ticket_abort(&t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

GS_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
  REAL_OR_NOT_FOUND(cuArray3DCreate_v2);
  struct ticket t;
  CUresult rc = ticket_open(&t, desc ? array3d_bytes(desc, 1) : 0, "cuArray3DCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuArray3DCreate_v2(pHandle, desc);
  if (rc != CUDA_SUCCESS) {
    ticket_abort(&t);
    return rc;
  }
  if (ticket_commit(&t, GS_ALLOC_ARRAY, (uint64_t)(uintptr_t)*pHandle) < 0) {
    r->cuArrayDestroy(*pHandle);
    ticket_abort(&t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

GS_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  REAL_OR_NOT_FOUND(cuArrayDestroy);
  struct gs_alloc a;
  int had = forget(GS_ALLOC_ARRAY, (uint64_t)(uintptr_t)hArray, &a) == 0;
  CUresult rc = r->cuArrayDestroy(hArray);
  settle_free(had, &a, rc);
  return rc;
}

GS_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                          const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                          unsigned int numMipmapLevels) {
  REAL_OR_NOT_FOUND(cuMipmappedArrayCreate);
  struct ticket t;
  CUresult rc = ticket_open(&t, desc ? array3d_bytes(desc, numMipmapLevels) : 0,
                            "cuMipmappedArrayCreate");
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = r->cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels);
  if (rc != CUDA_SUCCESS) {
    ticket_abort(&t);
    return rc;
  }
  if (ticket_commit(&t, GS_ALLOC_MIPMAP, (uint64_t)(uintptr_t)*pHandle) < 0) {
    r->cuMipmappedArrayDestroy(*pHandle);
    ticket_abort(&t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

GS_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  REAL_OR_NOT_FOUND(cuMipmappedArrayDestroy);
  struct gs_alloc a;
  int had = forget(GS_ALLOC_MIPMAP, (uint64_t)(uintptr_t)hMipmappedArray, &a) == 0;
  CUresult rc = r->cuMipmappedArrayDestroy(hMipmappedArray);
  settle_free(had, &a, rc);
  return rc;
}

/* ---- the slice's view ---- */

static int view_of_slot(unsigned slot, uint64_t *ret_limit, uint64_t *ret_used) {
  struct gs_region_device_info info;
  gs_region_reclaim(S.region);
  if (gs_region_device_info(S.region, slot, &info) < 0 || info.limit == GS_REGION_NO_LIMIT)
    return -ENOENT;
  *ret_limit = info.limit;
  *ret_used = info.used;
  return 0;
}

GS_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  REAL_OR_NOT_FOUND(cuMemGetInfo_v2);
  size_t real_free = 0, real_total = 0;
  CUresult rc = r->cuMemGetInfo_v2(&real_free, &real_total);
  if (rc != CUDA_SUCCESS)
    return rc;
  gs_setup();
  CUdevice dev;
  unsigned slot;
  uint64_t limit, used;
  if (current_device(&dev, NULL) == 0 && slot_of(dev, &slot) == 0) {
    pools_refresh();
    if (view_of_slot(slot, &limit, &used) == 0) {
      uint64_t left = limit > used ? limit - used : 0;
      real_total = limit < real_total ? limit : real_total;
      real_free = left < real_free ? left : real_free;
    }
  }
  if (free_bytes)
    *free_bytes = real_free;
  if (total_bytes)
    *total_bytes = real_total;
  return rc;
}

GS_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  REAL_OR_NOT_FOUND(cuDeviceTotalMem_v2);
  CUresult rc = r->cuDeviceTotalMem_v2(bytes, dev);
  unsigned slot;
  uint64_t limit, used;
  if (rc == CUDA_SUCCESS && slot_of(dev, &slot) == 0 && view_of_slot(slot, &limit, &used) == 0 &&
      limit < *bytes)
    *bytes = limit;
  return rc;
}

/* Devices this process could see through CUDA, registered so that their caps (which
 * GSLICE_MEMORY_LIMIT gives by CUDA ordinal) are known to NVML queries too. */
static void register_cuda_devices_once(void) {
  const struct gs_real *r = gs_real();
  int n = 0;
  if (!r->cuInit || !r->cuDeviceGetCount || !r->cuDeviceGet || r->cuInit(0) != CUDA_SUCCESS ||
      r->cuDeviceGetCount(&n) != CUDA_SUCCESS)
    return;
  for (int i = 0; i < n && i < GS_CONFIG_MAX_ORDINALS; i++) {
    CUdevice dev;
    unsigned slot;
    if (r->cuDeviceGet(&dev, i) == CUDA_SUCCESS)
      slot_of(dev, &slot);
  }
}

static void register_cuda_devices(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_cuda_devices_once);
}

int gs_memory_slice_view(const uint8_t uuid[16], uint64_t *ret_limit, uint64_t *ret_used) {
  gs_setup();
  unsigned slot;
  int e = gs_region_device(S.region, uuid, 0, &slot);
  if (e == -ENOENT && (S.config.has_limit_all || S.config.limit_set)) {
    register_cuda_devices();
    e = gs_region_device(S.region, uuid, 0, &slot);
    if (e == -ENOENT && S.config.has_limit_all && gs_region_device(S.region, uuid, 1, &slot) == 0) {
      /* Not visible to CUDA here (CUDA_VISIBLE_DEVICES): a cap for every device still holds. */
      e = gs_region_set_limit(S.region, slot, S.config.limit_all, GS_LIMIT_FROM_ENV);
      e = e == -EPERM ? 0 : e;
    }
  }
  if (e < 0)
    return e;
  pools_refresh();
  return view_of_slot(slot, ret_limit, ret_used);
}
