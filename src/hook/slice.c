/* The process's side of the slice: setup (configuration, region, fork), its entry in the region,
 * device slots, reservations and the handle table, and the books of stream-ordered pools. */
#include "slice.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "size.h"

#define RECONCILE_NS 200000000ull /* 200 ms */

struct pool {
  CUmemoryPool pool;
  unsigned slot;
  uint64_t charged; /* what the region holds for this pool */
  int by_reserved;  /* counted by the pool's reservation (else per allocation) */
  unsigned pending; /* allocations between gs_pool_track and gs_pool_take_growth */
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
  struct pool *pools; /* grown as needed: a pool left uncounted would keep freed memory */
  unsigned npools, cap_pools;
  /* Per device slot: what the device holds for this process beyond what the hook counted
   * (module code, lazily grown driver memory, paths it does not wrap), as last reconciled. */
  uint64_t overhead[GS_REGION_MAX_DEVICES];
  uint64_t reconciled_ns[GS_REGION_MAX_DEVICES];
  int reconciling;
  int ordinals_checked; /* GSLICE_MEMORY_LIMIT's device indexes checked against the devices */
  uint64_t serials; /* numbers for released-but-alive VMM handles and destroyed-but-held pools */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

/* S.lock with cancellation off while it is held: the locked sections read /proc (open, read:
 * cancellation points), and a thread cancelled there would leave S.lock (and the region's lock)
 * held for good, hanging every later allocation of the process. */
static __thread int lock_cancel_state;

static void lock(void) {
  int old;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  pthread_mutex_lock(&S.lock);
  lock_cancel_state = old;
}

static void unlock(void) {
  int old = lock_cancel_state;
  pthread_mutex_unlock(&S.lock);
  pthread_setcancelstate(old, NULL);
}

static void fork_prepare(void) {
  lock();
}

static void fork_parent(void) {
  unlock();
}

/* The child is another process of the slice: it takes its own entry at its first allocation.
 * What the parent holds stays the parent's (CUDA contexts do not cross fork). */
static void fork_child(void) {
  pthread_mutex_init(&S.lock, NULL);
  pthread_setcancelstate(lock_cancel_state, NULL); /* as unlock() would have */
  S.attached = 0;
  gs_allocs_clear(&S.allocs);
  S.npools = 0;
  memset(S.overhead, 0, sizeof(S.overhead));
  memset(S.reconciled_ns, 0, sizeof(S.reconciled_ns));
  S.reconciling = 0;
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
    if (e == -ETIMEDOUT) {
      snprintf(err, sizeof(err),
               "the slice's accounting file %s/%s is locked by a process that does not let go "
               "(stopped?); try again once it runs or is gone",
               S.config.state_dir, GS_REGION_FILE);
      stop(err);
    }
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

struct gs_region *gs_slice_region(void) {
  gs_setup();
  return S.region;
}

const struct gs_config *gs_slice_config(void) {
  gs_setup();
  return &S.config;
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

/* Under S.lock, once, at the first device the process uses (the driver is initialised by then):
 * a per-device cap for an index this process has no device at caps nothing; said, not silent
 * (a typo, or CUDA_VISIBLE_DEVICES renumbering the devices). A warning, not a stop: the caps
 * of the devices that are there still hold. */
static void check_ordinals_locked(void) {
  const struct gs_real *r = gs_real();
  int n = 0;

  if (S.ordinals_checked || !S.config.cap_set || !r->cuDeviceGetCount ||
      r->cuDeviceGetCount(&n) != CUDA_SUCCESS)
    return;
  S.ordinals_checked = 1;
  for (int i = n < 0 ? 0 : n; i < GS_CONFIG_MAX_ORDINALS; i++)
    if (S.config.cap_set >> i & 1)
      gs_log(GS_LOG_WARN,
             "GSLICE_MEMORY_LIMIT gives device %d a cap, but this process sees %d device%s "
             "(0..%d): that cap holds nothing (CUDA_VISIBLE_DEVICES numbers the devices a "
             "process sees from 0)",
             i, n, n == 1 ? "" : "s", n - 1);
}

/* Under S.lock: the region slot of device ordinal `dev`, registering the device (and the cap
 * GSLICE_MEMORY_LIMIT gives it) the first time this process sees it. */
static int slot_locked(CUdevice dev, unsigned *ret_slot) {
  if (dev < 0 || dev >= GS_CONFIG_MAX_ORDINALS)
    return -EINVAL;
  check_ordinals_locked();
  if (S.dev_known[dev]) {
    *ret_slot = S.dev_slot[dev];
    return 0;
  }
  const struct gs_real *r = gs_real();
  CUuuid uuid;
  CUresult rc = r->cuDeviceGetUuid_v2 ? r->cuDeviceGetUuid_v2(&uuid, dev)
                : r->cuDeviceGetUuid  ? r->cuDeviceGetUuid(&uuid, dev)
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
  uint64_t cap;
  if (gs_config_cap(&S.config, dev, &cap)) {
    e = gs_region_set_cap(S.region, slot, cap, GS_CAP_FROM_ENV);
    if (e == -EPERM)
      gs_log(GS_LOG_INFO, "device %d: the daemon's cap stands over GSLICE_MEMORY_LIMIT", dev);
  }
  S.dev_known[dev] = 1;
  S.dev_slot[dev] = slot;
  *ret_slot = slot;
  return 0;
}

int gs_slot_for_alloc(CUdevice dev, unsigned *ret_slot) {
  int e = gs_slot_of(dev, ret_slot);
  /* No such device: the driver refuses the call itself. Anything else (the region's device table
   * full, its lock not let go) must not let the allocation through uncounted. */
  return e == -ENODEV || e == -EINVAL ? 1 : e;
}

int gs_slot_of(CUdevice dev, unsigned *ret_slot) {
  gs_setup();
  lock();
  int e = slot_locked(dev, ret_slot);
  unlock();
  return e;
}

int gs_current_device(CUdevice *ret_dev, CUcontext *ret_ctx) {
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

void gs_pools_refresh(void) {
  lock();
  for (unsigned i = 0; i < S.npools; i++)
    if (!S.pools[i].pending)
      pool_refresh_locked(&S.pools[i]);
  unlock();
}

int gs_pool_track(CUmemoryPool pool, unsigned slot) {
  lock();
  struct pool *p = pool_find_locked(pool);
  if (!p && S.npools == S.cap_pools && attach_locked() == 0) {
    unsigned cap = S.cap_pools ? 2 * S.cap_pools : 16;
    struct pool *more = realloc(S.pools, cap * sizeof(*more));
    if (more) {
      S.pools = more;
      S.cap_pools = cap;
    }
  }
  if (!p && S.npools < S.cap_pools && attach_locked() == 0) {
    uint64_t now = 0;
    p = &S.pools[S.npools++];
    *p = (struct pool){0}; /* realloc'ed memory: nothing in flight yet */
    p->pool = pool;
    p->slot = slot;
    p->by_reserved = pool_reserved(pool, &now) == 0;
    /* What the pool held before the hook first saw it is the slice's too. */
    if (p->by_reserved && now)
      gs_region_charge(S.region, S.proc, slot, now);
    p->charged = now;
  }
  int by_reserved = p ? p->by_reserved : 0;
  if (p) {
    /* With allocations in flight, the reservation already includes growth their tickets
     * will claim: a refresh now would charge it a second time. */
    if (!p->pending)
      pool_refresh_locked(p);
    if (by_reserved)
      p->pending++;
  }
  unlock();
  return by_reserved;
}

uint64_t gs_pool_take_growth(CUmemoryPool pool, uint64_t reserved, int done) {
  uint64_t take = 0, now = 0;
  lock();
  struct pool *p = pool_find_locked(pool);
  if (p && p->pending)
    p->pending--;
  if (p && done && pool_reserved(pool, &now) == 0 && now > p->charged) {
    /* Growth beyond what this allocation reserved belongs to others still in flight, unless
     * there are none (then the pool grew by more than asked: its granularity). */
    take = now - p->charged;
    if (p->pending && take > reserved)
      take = reserved;
    p->charged += take;
  }
  unlock();
  return take;
}

void gs_pool_undo_growth(CUmemoryPool pool, uint64_t growth) {
  lock();
  struct pool *p = pool_find_locked(pool);
  if (p) {
    p->charged = p->charged > growth ? p->charged - growth : 0;
    if (!p->pending)
      pool_refresh_locked(p);
  }
  unlock();
}

void gs_pool_refresh(CUmemoryPool pool) {
  lock();
  struct pool *p = pool_find_locked(pool);
  if (p && !p->pending)
    pool_refresh_locked(p);
  unlock();
}

/* Under S.lock: re-keys every entry of `kind` whose ref is `ref` as `new_kind` with ref
 * `new_ref`; returns how many, their bytes added into *ret_bytes. */
static uint64_t rekey_locked(uint32_t kind, uint64_t ref, uint32_t new_kind, uint64_t new_ref,
                             uint64_t *ret_bytes) {
  uint64_t n = 0;
  for (size_t i = 0; i < S.allocs.cap;) {
    struct gs_alloc *c = &S.allocs.cell[i];
    if (c->kind == kind && c->ref == ref) {
      struct gs_alloc a;
      gs_allocs_take(&S.allocs, kind, c->key, &a);
      a.kind = new_kind;
      a.ref = new_ref;
      /* Same count of entries, so put cannot fail for room. */
      gs_allocs_put(&S.allocs, &a);
      n++;
      if (ret_bytes)
        *ret_bytes = *ret_bytes + a.bytes < *ret_bytes ? UINT64_MAX : *ret_bytes + a.bytes;
      i = 0; /* take shifted entries, put may have landed anywhere: start over (rare path) */
      continue;
    }
    i++;
  }
  return n;
}

void gs_pool_forget(CUmemoryPool pool) {
  lock();
  struct gs_alloc gone;
  uint64_t key = (uint64_t)(uintptr_t)pool;
  gs_allocs_take(&S.allocs, GS_ALLOC_POOL, key, &gone);
  struct pool *p = pool_find_locked(pool);
  if (p) {
    uint64_t keep = 0;
    if (p->by_reserved) {
      /* cuMemPoolDestroy with allocations outstanding returns at once; the driver frees the
       * pool's memory once they are all freed. What they hold (in whole granules, never more
       * than the pool's charge) stays counted until then, under a serial number: the pool's
       * handle may be handed out again. */
      uint64_t serial = ++S.serials, bytes = 0;
      uint64_t n = rekey_locked(GS_ALLOC_POOL_PTR, key, GS_ALLOC_POOL_GONE_PTR, serial, &bytes);
      if (n) {
        keep = bytes > UINT64_MAX - (GS_POOL_GRANULE - 1)
                   ? UINT64_MAX
                   : (bytes + GS_POOL_GRANULE - 1) / GS_POOL_GRANULE * GS_POOL_GRANULE;
        keep = keep < p->charged ? keep : p->charged;
        struct gs_alloc g = {
            .key = serial, .kind = GS_ALLOC_POOL_GONE, .slot = p->slot, .bytes = keep, .maps = n};
        if (gs_allocs_put(&S.allocs, &g) < 0)
          keep = p->charged; /* no room to remember: keep it all until the process exits */
      }
    }
    if (S.attached && p->by_reserved)
      gs_region_release(S.region, S.proc, p->slot, p->charged - keep);
    *p = S.pools[--S.npools];
  }
  unlock();
}

void gs_pool_ptr_add(CUmemoryPool pool, uint64_t dptr, uint64_t bytes) {
  struct gs_alloc a = {.key = dptr,
                       .kind = GS_ALLOC_POOL_PTR,
                       .bytes = bytes,
                       .ref = (uint64_t)(uintptr_t)pool},
                  stale;
  lock();
  /* A stale entry at this address was freed where the hook did not see it. */
  gs_allocs_take(&S.allocs, GS_ALLOC_POOL_PTR, dptr, &stale);
  gs_allocs_put(&S.allocs, &a);
  unlock();
}

int gs_pool_ptr_take(uint64_t dptr, struct gs_alloc *ret) {
  lock();
  int e = gs_allocs_take(&S.allocs, GS_ALLOC_POOL_PTR, dptr, ret);
  if (e < 0)
    e = gs_allocs_take(&S.allocs, GS_ALLOC_POOL_GONE_PTR, dptr, ret);
  unlock();
  return e;
}

void gs_pool_ptr_settle(const struct gs_alloc *a, CUresult rc) {
  lock();
  struct gs_alloc g;
  if (rc != CUDA_SUCCESS) {
    gs_allocs_put(&S.allocs, a);
  } else if (a->kind == GS_ALLOC_POOL_GONE_PTR &&
             gs_allocs_take(&S.allocs, GS_ALLOC_POOL_GONE, a->ref, &g) == 0) {
    if (--g.maps == 0) {
      if (S.attached)
        gs_region_release(S.region, S.proc, g.slot, g.bytes);
    } else {
      gs_allocs_put(&S.allocs, &g);
    }
  }
  unlock();
}

/* ---- reservations ---- */

static void say_denied(const char *what, CUdevice dev, unsigned slot, uint64_t asked,
                       const struct gs_region_denial *d) {
  char a[32], u[32], c[32], uuid[GS_UUID_STR_LEN] = "?";
  struct gs_region_device_info info;
  if (gs_region_device_info(S.region, slot, &info) == 0)
    gs_uuid_format(info.uuid, uuid);
  gs_size_format(asked, a, sizeof(a));
  if (d->cap == GS_REGION_NO_CAP) {
    gs_log(GS_LOG_WARN, "%s: out of memory on device %d (%s): asked %s, more than any device holds",
           what, (int)dev, uuid, a);
    return;
  }
  gs_size_format(d->used, u, sizeof(u));
  gs_size_format(d->cap, c, sizeof(c));
  gs_log(GS_LOG_WARN,
         "%s: out of memory on device %d (%s): asked %s, the slice uses %s of its %s cap", what,
         (int)dev, uuid, a, u, c);
}

void gs_reconcile(CUdevice dev, unsigned slot, int force) {
  uint64_t now = gs_mono_ns(), held = 0;
  if (slot >= GS_REGION_MAX_DEVICES)
    return;
  lock();
  if (!S.attached || S.reconciling || (!force && now - S.reconciled_ns[slot] < RECONCILE_NS) ||
      gs_region_proc_used(S.region, S.proc, slot, &held) < 0) {
    unlock();
    return;
  }
  S.reconciling = 1;
  S.reconciled_ns[slot] = now;
  /* Counted before the device is asked: an allocation landing in between then shows as
   * overhead until the next look (too much, never too little). */
  uint64_t counted = held > S.overhead[slot] ? held - S.overhead[slot] : 0;
  unlock();
  struct gs_probe p;
  gs_probe(dev, &p);
  lock();
  S.reconciling = 0;
  if (p.proc_found && S.attached) {
    uint64_t want = p.proc_used > counted ? p.proc_used - counted : 0;
    if (want > S.overhead[slot])
      gs_region_charge(S.region, S.proc, slot, want - S.overhead[slot]);
    else if (want < S.overhead[slot])
      gs_region_release(S.region, S.proc, slot, S.overhead[slot] - want);
    S.overhead[slot] = want;
  }
  unlock();
}

/* Reserves `bytes` on `dev` for the calling process. -ENOMEM (said on stderr) over the cap.
 * `before_call`: the driver has not taken the memory yet, so the device's figure for this
 * process can be reconciled with the count; after the fact (a true-up) it would count the
 * memory twice. */
static int reserve(CUdevice dev, unsigned slot, uint64_t bytes, const char *what, int before_call) {
  struct gs_region_denial d = {0, 0};
  int e = -ENOMEM;
  if (before_call)
    gs_reconcile(dev, slot, 0);
  for (int attempt = 0; attempt < 3; attempt++) {
    lock();
    e = attach_locked();
    if (e == 0)
      e = gs_region_reserve(S.region, S.proc, slot, bytes, &d);
    if (e == -ESTALE) /* our entry was taken from us: take a new one */
      S.attached = 0;
    unlock();
    if (e == -ENOMEM && attempt == 0) {
      gs_pools_refresh(); /* a pool may have trimmed since it was last looked at */
      if (before_call)
        gs_reconcile(dev, slot, 1);
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

int gs_reserve(CUdevice dev, unsigned slot, uint64_t bytes, const char *what) {
  return reserve(dev, slot, bytes, what, 1);
}

void gs_release(unsigned slot, uint64_t bytes) {
  if (!bytes)
    return;
  lock();
  if (S.attached)
    gs_region_release(S.region, S.proc, slot, bytes);
  unlock();
}

/* Starts an allocation on the current context's device. Returns CUDA_SUCCESS with t->active
 * clear when there is nothing to count against (no context: the real call will say so). */
CUresult gs_ticket_open(struct gs_ticket *t, uint64_t bytes, const char *what) {
  memset(t, 0, sizeof(*t));
  gs_setup();
  if (gs_current_device(&t->dev, &t->ctx) < 0)
    return CUDA_SUCCESS;
  int e = gs_slot_for_alloc(t->dev, &t->slot);
  if (e != 0)
    return e > 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  if (gs_reserve(t->dev, t->slot, bytes, what) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  t->active = 1;
  t->bytes = bytes;
  return CUDA_SUCCESS;
}

/* The same for an explicit device (VMM, context creation). */
static CUresult ticket_open_on(struct gs_ticket *t, CUdevice dev, CUcontext ctx, uint64_t bytes,
                               const char *what, int before_call) {
  memset(t, 0, sizeof(*t));
  gs_setup();
  t->dev = dev;
  t->ctx = ctx;
  int e = gs_slot_for_alloc(dev, &t->slot);
  if (e != 0)
    return e > 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  if (reserve(dev, t->slot, bytes, what, before_call) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  t->active = 1;
  t->bytes = bytes;
  return CUDA_SUCCESS;
}

CUresult gs_ticket_open_on(struct gs_ticket *t, CUdevice dev, CUcontext ctx, uint64_t bytes,
                           const char *what) {
  return ticket_open_on(t, dev, ctx, bytes, what, 1);
}

CUresult gs_ticket_open_taken(struct gs_ticket *t, CUdevice dev, CUcontext ctx, uint64_t bytes,
                              const char *what) {
  return ticket_open_on(t, dev, ctx, bytes, what, 0);
}

void gs_ticket_abort(struct gs_ticket *t) {
  if (t->active)
    gs_release(t->slot, t->bytes);
  t->active = 0;
}

/* Re-counts the ticket at the size the driver really took. Growing past the cap: -ENOMEM, and
 * the ticket still holds its old size (the caller frees the allocation and aborts). */
int gs_ticket_true_up(struct gs_ticket *t, uint64_t real_bytes, const char *what) {
  if (!t->active || real_bytes == t->bytes)
    return 0;
  if (real_bytes < t->bytes) {
    gs_release(t->slot, t->bytes - real_bytes);
  } else {
    int e = reserve(t->dev, t->slot, real_bytes - t->bytes, what, 0);
    if (e < 0)
      return e;
  }
  t->bytes = real_bytes;
  return 0;
}

/* Records the allocation under (kind, key) so its free gives the bytes back. */
int gs_ticket_commit(struct gs_ticket *t, enum gs_alloc_kind kind, uint64_t key) {
  if (!t->active)
    return 0;
  struct gs_alloc a = {.key = key, .kind = kind, .slot = t->slot, .bytes = t->bytes, .ctx = t->ctx},
                  stale;
  lock();
  int e = gs_allocs_put(&S.allocs, &a);
  if (e == -EEXIST && gs_allocs_take(&S.allocs, kind, key, &stale) == 0) {
    /* Freed behind the hook's back (a path it does not see) and handed out again. */
    if (S.attached)
      gs_region_release(S.region, S.proc, stale.slot, stale.bytes);
    e = gs_allocs_put(&S.allocs, &a);
  }
  unlock();
  if (e < 0)
    gs_log(GS_LOG_ERROR, "cannot record an allocation: %s", strerror(-e));
  t->active = 0;
  return e;
}

int gs_forget(enum gs_alloc_kind kind, uint64_t key, struct gs_alloc *ret) {
  lock();
  int e = gs_allocs_take(&S.allocs, kind, key, ret);
  unlock();
  return e;
}

static void remember(const struct gs_alloc *a) {
  lock();
  gs_allocs_put(&S.allocs, a);
  unlock();
}

/* After the real free: gives the bytes back, or keeps them counted if the free failed. */
void gs_settle_free(int had, const struct gs_alloc *a, CUresult rc) {
  if (!had)
    return;
  if (rc == CUDA_SUCCESS)
    gs_release(a->slot, a->bytes);
  else
    remember(a);
}

/* ---- which device a pool's memory is on ---- */

void gs_pool_device_set(CUmemoryPool pool, CUdevice dev) {
  struct gs_alloc a = {
      .key = (uint64_t)(uintptr_t)pool, .kind = GS_ALLOC_POOL, .ref = (uint64_t)dev};
  lock();
  struct gs_alloc *old = gs_allocs_find(&S.allocs, GS_ALLOC_POOL, a.key);
  if (old)
    old->ref = a.ref;
  else
    gs_allocs_put(&S.allocs, &a);
  unlock();
}

int gs_pool_device(CUmemoryPool pool, CUdevice *ret_dev) {
  lock();
  struct gs_alloc *a = gs_allocs_find(&S.allocs, GS_ALLOC_POOL, (uint64_t)(uintptr_t)pool);
  if (a)
    *ret_dev = (CUdevice)a->ref;
  unlock();
  return a ? 0 : -ENOENT;
}

/* ---- VMM mappings: physical memory lives until released *and* unmapped ---- */

void gs_vmm_mapped(uint64_t handle, uint64_t va, uint64_t size) {
  lock();
  struct gs_alloc *h = gs_allocs_find(&S.allocs, GS_ALLOC_VMM, handle);
  if (h) {
    /* Only counted handles: an uncounted one has nothing to keep counted after its release. */
    struct gs_alloc m = {
        .key = va, .kind = GS_ALLOC_MAP, .slot = h->slot, .bytes = size, .ref = handle};
    h->maps++;
    if (gs_allocs_put(&S.allocs, &m) < 0)
      h->maps--; /* -EEXIST (the driver never maps twice at one address) or no memory */
  }
  unlock();
}

/* Under S.lock: the mappings of `handle` now point at its serial `serial`. */
static void vmm_orphan_maps_locked(uint64_t handle, uint64_t serial) {
  for (size_t i = 0; i < S.allocs.cap;) {
    struct gs_alloc *c = &S.allocs.cell[i];
    if (c->kind == GS_ALLOC_MAP && c->ref == handle) {
      struct gs_alloc m;
      gs_allocs_take(&S.allocs, GS_ALLOC_MAP, c->key, &m);
      m.kind = GS_ALLOC_MAP_GONE;
      m.ref = serial;
      /* Same size as the entry taken, and a kind of its own: put cannot fail for room. */
      gs_allocs_put(&S.allocs, &m);
      i = 0; /* take shifted entries, put may have landed anywhere: start over (rare path) */
      continue;
    }
    i++;
  }
}

void gs_vmm_released(const struct gs_alloc *a) {
  lock();
  if (a->maps == 0) {
    if (S.attached)
      gs_region_release(S.region, S.proc, a->slot, a->bytes);
  } else {
    /* The driver frees the memory at the last unmap: until then it stays counted, under a
     * serial number, since the handle's value may be handed out again. */
    struct gs_alloc gone = *a;
    gone.kind = GS_ALLOC_VMM_GONE;
    gone.key = ++S.serials;
    if (gs_allocs_put(&S.allocs, &gone) == 0)
      vmm_orphan_maps_locked(a->key, gone.key);
    /* Without room to remember it, the bytes stay counted until the process exits. */
  }
  unlock();
}

void gs_vmm_unmapped(uint64_t va, uint64_t size) {
  lock();
  uint64_t at = va, end = va + size < va ? UINT64_MAX : va + size;
  while (at < end) {
    struct gs_alloc m, *h;
    if (gs_allocs_take(&S.allocs, GS_ALLOC_MAP, at, &m) == 0) {
      if ((h = gs_allocs_find(&S.allocs, GS_ALLOC_VMM, m.ref)) && h->maps)
        h->maps--;
    } else if (gs_allocs_take(&S.allocs, GS_ALLOC_MAP_GONE, at, &m) == 0) {
      struct gs_alloc g;
      if (gs_allocs_take(&S.allocs, GS_ALLOC_VMM_GONE, m.ref, &g) == 0) {
        if (--g.maps == 0) {
          if (S.attached)
            gs_region_release(S.region, S.proc, g.slot, g.bytes);
        } else {
          gs_allocs_put(&S.allocs, &g);
        }
      }
    } else {
      break; /* the driver unmaps whole mappings from `va` on; nothing more of ours */
    }
    if (!m.bytes || at + m.bytes < at)
      break;
    at += m.bytes;
  }
  unlock();
}

/* Everything a context owned goes when it goes. */
void gs_drop_context(CUcontext ctx) {
  uint64_t bytes[GS_REGION_MAX_DEVICES] = {0};
  lock();
  gs_allocs_take_ctx(&S.allocs, ctx, bytes, GS_REGION_MAX_DEVICES);
  for (unsigned i = 0; i < GS_REGION_MAX_DEVICES; i++)
    if (bytes[i] && S.attached)
      gs_region_release(S.region, S.proc, i, bytes[i]);
  unlock();
}
