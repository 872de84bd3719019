/* SPDX-License-Identifier: Apache-2.0 */
/* The process's side of the slice: setup (configuration, region, fork), its entry in the region,
 * device slots, and the state the other parts of the slice (reserve.c, pools.c, vmm.c) share. */
#include "slice_state.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uuid.h"

struct gs_slice_state gs_slice_state = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

/* S.lock with cancellation off while it is held: the locked sections read /proc (open, read:
 * cancellation points), and a thread cancelled there would leave S.lock (and the region's lock)
 * held for good, hanging every later allocation of the process. */
static __thread int lock_cancel_state;

void gs_slice_lock(void) {
  int old;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  pthread_mutex_lock(&S.lock);
  lock_cancel_state = old;
}

void gs_slice_unlock(void) {
  int old = lock_cancel_state;
  pthread_mutex_unlock(&S.lock);
  pthread_setcancelstate(old, NULL);
}

static void fork_prepare(void) {
  gs_slice_lock();
}

static void fork_parent(void) {
  gs_slice_unlock();
}

/* The child is another process of the slice: it takes its own entry at its first allocation.
 * What the parent holds stays the parent's (CUDA contexts do not cross fork). */
static void fork_child(void) {
  pthread_mutex_init(&S.lock, NULL);
  pthread_setcancelstate(lock_cancel_state, NULL); /* as gs_slice_unlock() would have */
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
  if (gs_config_parse(gs_env, &S.config, err, sizeof(err)) < 0)
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

int gs_slice_held(unsigned slot, uint64_t *ret_bytes) {
  int e = -ENOENT;
  gs_slice_lock();
  if (S.attached)
    e = gs_region_proc_used(S.region, S.proc, slot, ret_bytes);
  gs_slice_unlock();
  return e;
}

const struct gs_config *gs_slice_config(void) {
  gs_setup();
  return &S.config;
}

/* Under S.lock. */
int gs_slice_attach_locked(void) {
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

/* ---- the slice's GPUs ---- */

/* The slice's GPUs as gslice run named them in CUDA_VISIBLE_DEVICES, by UUID in GSLICE_GPUS: the
 * daemon takes CUDA's device k of a slice's process for the slice's k-th GPU (proto.h, "GPU
 * numbering"), its cap and its token. A CUDA_VISIBLE_DEVICES the program changed since (for
 * itself or for the programs it starts) puts CUDA's device k on another GPU, under this GPU's
 * token, where no check of the daemon's looks (fifth attack run of 2026-12-02, G7): device k is
 * this process's only while its UUID is the slice's k-th. No GSLICE_GPUS (not under gslice run,
 * or the daemon knew no UUIDs: the indices): every device passes, as before. */
static struct {
  pthread_once_t once;
  unsigned n; /* 0: no list */
  uint8_t uuid[GS_CONFIG_MAX_ORDINALS][GS_UUID_LEN];
  uint64_t said; /* atomic: bit k, device k's refusal said */
} gpus = {.once = PTHREAD_ONCE_INIT};

static void gpus_parse(void) {
  const char *v = gs_env("GSLICE_GPUS");
  char err[512];
  if (!v || !*v)
    return;
  int e = gs_uuid_parse_list(v, gpus.uuid, GS_CONFIG_MAX_ORDINALS, &gpus.n);
  if (e < 0) {
    snprintf(err, sizeof(err),
             "GSLICE_GPUS=\"%.300s\" is not the list of GPU UUIDs (GPU-...,GPU-...) gslice run "
             "sets: %s; run the program under gslice run, which sets it",
             v, e == -E2BIG ? "too many GPUs" : "malformed");
    stop(err);
  }
}

static int device_uuid(CUdevice dev, CUuuid *ret_uuid) {
  const struct gs_real *r = gs_real();
  CUresult rc = r->cuDeviceGetUuid_v2 ? r->cuDeviceGetUuid_v2(ret_uuid, dev)
                : r->cuDeviceGetUuid  ? r->cuDeviceGetUuid(ret_uuid, dev)
                                      : CUDA_ERROR_NOT_FOUND;
  return rc == CUDA_SUCCESS ? 0 : -ENODEV;
}

/* Says once per device why device `dev` (UUID `u`) is refused. */
static void say_refused(CUdevice dev, const uint8_t *u) {
  if (dev < 0 || dev >= GS_CONFIG_MAX_ORDINALS ||
      (__atomic_fetch_or(&gpus.said, 1ull << dev, __ATOMIC_RELAXED) >> dev & 1))
    return;
  char have[GS_UUID_STR_LEN], want[GS_UUID_STR_LEN], what[128];
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  gs_uuid_format(u, have);
  if ((unsigned)dev < gpus.n) {
    gs_uuid_format(gpus.uuid[dev], want);
    snprintf(what, sizeof(what), "not the slice's GPU %d (%s)", dev, want);
  } else {
    snprintf(what, sizeof(what), "beyond the slice's %u GPU%s", gpus.n, gpus.n == 1 ? "" : "s");
  }
  gs_log(GS_LOG_ERROR,
         "CUDA device %d is %s, %s: CUDA_VISIBLE_DEVICES=\"%.200s\" is not what gslice run set "
         "(GSLICE_GPUS=%.300s), and work there would run under another GPU's cap and token, so "
         "the hook refuses that device and CUDA shows the slice's GPUs only. Leave "
         "CUDA_VISIBLE_DEVICES as gslice run set it (the slice's GPUs, numbered from 0), or "
         "choose the GPUs with gslice run --gpu",
         dev, have, what, cvd ? cvd : "(unset)", gs_env("GSLICE_GPUS"));
}

/* 0 when CUDA device `dev`, whose UUID is `u`, is the slice's (or the slice names no GPUs),
 * -EACCES when it is another GPU. */
static int device_check(CUdevice dev, const uint8_t *u) {
  pthread_once(&gpus.once, gpus_parse);
  if (!gpus.n || (dev >= 0 && (unsigned)dev < gpus.n && !memcmp(gpus.uuid[dev], u, GS_UUID_LEN)))
    return 0;
  say_refused(dev, u);
  return -EACCES;
}

int gs_device_check(CUdevice dev) {
  CUuuid uuid;
  pthread_once(&gpus.once, gpus_parse);
  if (!gpus.n || device_uuid(dev, &uuid) < 0)
    return 0;
  return device_check(dev, (const uint8_t *)uuid.bytes);
}

int gs_devices_shown(int n) {
  const struct gs_real *r = gs_real();
  int k = 0;
  pthread_once(&gpus.once, gpus_parse);
  if (!gpus.n || !r->cuDeviceGet)
    return n;
  for (CUdevice dev; k < n && r->cuDeviceGet(&dev, k) == CUDA_SUCCESS && gs_device_check(dev) == 0;)
    k++;
  return k;
}

/* Under S.lock: the region slot of device ordinal `dev`, registering the device (and the cap
 * GSLICE_MEMORY_LIMIT gives it) the first time this process sees it; -EACCES for a device that
 * is not the slice's (device_check). */
static int slot_locked(CUdevice dev, unsigned *ret_slot) {
  if (dev < 0 || dev >= GS_CONFIG_MAX_ORDINALS)
    return -EINVAL;
  check_ordinals_locked();
  if (S.dev_known[dev]) {
    *ret_slot = S.dev_slot[dev];
    return 0;
  }
  CUuuid uuid;
  if (device_uuid(dev, &uuid) < 0)
    return -ENODEV;
  int e = device_check(dev, (const uint8_t *)uuid.bytes);
  if (e < 0)
    return e;
  unsigned slot;
  e = gs_region_device(S.region, (const uint8_t *)uuid.bytes, 1, &slot);
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

int gs_slot_of(CUdevice dev, unsigned *ret_slot) {
  gs_setup();
  gs_slice_lock();
  int e = slot_locked(dev, ret_slot);
  gs_slice_unlock();
  return e;
}

/* A slot lookup's e for an allocation path. No such device: the driver refuses the call itself.
 * Anything else (the region's device table full, its lock not let go) must not let the
 * allocation through uncounted. */
static int for_alloc(int e) {
  return e == -ENODEV || e == -EINVAL ? 1 : e;
}

int gs_slot_for_alloc_locked(CUdevice dev, unsigned *ret_slot) {
  return for_alloc(slot_locked(dev, ret_slot));
}

int gs_slot_for_alloc(CUdevice dev, unsigned *ret_slot) {
  return for_alloc(gs_slot_of(dev, ret_slot));
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

/* Everything a context owned goes when it goes. */
void gs_drop_context(CUcontext ctx) {
  uint64_t bytes[GS_REGION_MAX_DEVICES] = {0};
  gs_slice_lock();
  gs_allocs_take_ctx(&S.allocs, ctx, bytes, GS_REGION_MAX_DEVICES);
  for (unsigned i = 0; i < GS_REGION_MAX_DEVICES; i++)
    if (bytes[i] && S.attached)
      gs_region_release(S.region, S.proc, i, bytes[i]);
  gs_slice_unlock();
}
