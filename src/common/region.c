/* The slice's shared memory-accounting region: file layout, robust locking, process entries. */
#include "region.h"

#include "clock.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REGION_MAGIC 0x4e4f494745525347ULL /* "GSREGION" read as little-endian bytes */
#define REGION_VERSION 1u
#define SWEEP_NS 10000000ull /* 10 ms */

struct region_device {
  uint8_t uuid[GS_REGION_UUID_LEN];
  uint32_t in_use;
  uint32_t source; /* enum gs_cap_source */
  uint64_t cap;
  uint64_t context_cost;
};

struct region_proc {
  uint32_t in_use;
  int32_t pid;
  uint64_t start_time;
  uint64_t pidns;
  uint64_t used[GS_REGION_MAX_DEVICES];
};

/* The file, as mapped. Everything before `lock` is written once at creation and validated on
 * every open; everything after it changes only under `lock`. */
struct region_layout {
  uint64_t magic;
  uint32_t version;
  uint32_t size;
  uint32_t max_devices;
  uint32_t max_procs;
  uint32_t mutex_size;
  uint32_t check; /* FNV-1a of the fields above */
  pthread_mutex_t lock __attribute__((aligned(64)));
  uint32_t proc_hint;     /* no entry at or past this index is in use */
  uint32_t repairs;       /* times a holder died with the lock */
  uint64_t last_sweep_ns; /* CLOCK_MONOTONIC of the last cheap liveness sweep */
  struct region_device dev[GS_REGION_MAX_DEVICES];
  struct region_proc proc[GS_REGION_MAX_PROCS];
};

struct gs_region {
  struct region_layout *map;
  int nowait; /* gs_region_open_nowait: reads lock-free, writes trylock */
  uint64_t pidns;
  char path[PATH_MAX];
};

static uint32_t header_check(const struct region_layout *l) {
  uint32_t words[] = {(uint32_t)l->magic, (uint32_t)(l->magic >> 32),
                      l->version,         l->size,
                      l->max_devices,     l->max_procs,
                      l->mutex_size};
  const uint8_t *p = (const uint8_t *)words;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < sizeof(words); i++)
    h = (h ^ p[i]) * 16777619u;
  return h;
}

/* The robust lock: a holder that died leaves nothing derived to fix (totals are computed), only
 * the entry hint, which is recomputed.
 *
 * Cancellation is off while it is held: the sections read /proc (cancellation points), and a
 * cancelled thread would leave the lock held by a live process (robustness covers only death).
 * The wait is bounded: a holder stopped (SIGSTOP, a debugger) or a lock word scribbled over in
 * this slice-writable file must not hang the daemon, which reads every slice's region from one
 * loop; the caller gets -ETIMEDOUT and the hook refuses the allocation. */
static __thread int region_cancel_state;

static int region_lock(struct gs_region *r) {
  struct region_layout *l = r->map;
  int old;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  /* Monotonic: a wall clock set back or forward neither lengthens nor cuts the wait. */
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += GS_REGION_LOCK_TIMEOUT_S;
  int e = r->nowait ? pthread_mutex_trylock(&l->lock)
                    : pthread_mutex_clocklock(&l->lock, CLOCK_MONOTONIC, &until);
  if (e != 0 && e != EOWNERDEAD) {
    pthread_setcancelstate(old, NULL);
    return -e;
  }
  region_cancel_state = old;
  if (e == EOWNERDEAD) {
    uint32_t hint = 0;
    for (uint32_t i = 0; i < GS_REGION_MAX_PROCS; i++)
      if (l->proc[i].in_use)
        hint = i + 1;
    l->proc_hint = hint;
    l->repairs++;
    pthread_mutex_consistent(&l->lock);
  }
  return 0;
}

static void region_unlock(struct gs_region *r) {
  int old = region_cancel_state;
  pthread_mutex_unlock(&r->map->lock);
  pthread_setcancelstate(old, NULL);
}

static void proc_clear(struct region_proc *p) {
  p->in_use = 0;
  memset(p->used, 0, sizeof(p->used));
  p->pid = 0;
  p->start_time = 0;
  p->pidns = 0;
}

static int proc_judgeable(const struct gs_region *r, const struct region_proc *p) {
  return p->pidns == 0 || r->pidns == 0 || p->pidns == r->pidns;
}

/* kill(pid, 0): one syscall per entry, catches processes that are gone (not zombies). */
static void reclaim_cheap(struct gs_region *r) {
  struct region_layout *l = r->map;
  l->last_sweep_ns = gs_mono_ns();
  for (uint32_t i = 0; i < l->proc_hint && i < GS_REGION_MAX_PROCS; i++) {
    struct region_proc *p = &l->proc[i];
    if (!p->in_use || !proc_judgeable(r, p))
      continue;
    if (p->pid <= 0 || (kill(p->pid, 0) < 0 && errno == ESRCH))
      proc_clear(p);
  }
}

static int reclaim_full(struct gs_region *r) {
  struct region_layout *l = r->map;
  int n = 0;
  for (uint32_t i = 0; i < l->proc_hint && i < GS_REGION_MAX_PROCS; i++) {
    struct region_proc *p = &l->proc[i];
    if (!p->in_use || !proc_judgeable(r, p))
      continue;
    uint64_t start = 0;
    int exited = 0;
    if (p->pid <= 0 || gs_proc_identity(p->pid, &start, &exited) < 0) {
      exited = 1;
    }
    if (exited || start != p->start_time) {
      proc_clear(p);
      n++;
    }
  }
  return n;
}

/* Saturating: the entries are the slice's to write, and a sum wrapped past 2^64 would show (and
 * grant) room that is not there. */
static uint64_t device_used(const struct region_layout *l, unsigned slot) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < l->proc_hint && i < GS_REGION_MAX_PROCS; i++)
    if (l->proc[i].in_use && __builtin_add_overflow(sum, l->proc[i].used[slot], &sum))
      return UINT64_MAX;
  return sum;
}

static void layout_init(struct region_layout *l) {
  memset(l, 0, sizeof(*l));
  l->magic = REGION_MAGIC;
  l->version = REGION_VERSION;
  l->size = sizeof(*l);
  l->max_devices = GS_REGION_MAX_DEVICES;
  l->max_procs = GS_REGION_MAX_PROCS;
  l->mutex_size = sizeof(pthread_mutex_t);
  l->check = header_check(l);
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&l->lock, &a);
  pthread_mutexattr_destroy(&a);
  for (unsigned i = 0; i < GS_REGION_MAX_DEVICES; i++)
    l->dev[i].cap = GS_REGION_NO_CAP;
}

/* Header first (never trust a lock in a foreign file), then the body under the lock. */
static int layout_validate(struct gs_region *r, size_t file_size) {
  struct region_layout *l = r->map;
  if (file_size < sizeof(uint64_t) + sizeof(uint32_t) || l->magic != REGION_MAGIC)
    return -EBADMSG;
  if (l->version != REGION_VERSION)
    return -EPROTONOSUPPORT;
  if (file_size != sizeof(*l) || l->size != sizeof(*l) || l->max_devices != GS_REGION_MAX_DEVICES ||
      l->max_procs != GS_REGION_MAX_PROCS || l->mutex_size != sizeof(pthread_mutex_t) ||
      l->check != header_check(l))
    return -EBADMSG;
  /* A reader that never waits checks what it reads as it reads it (bounds, clamped hint). */
  if (r->nowait)
    return 0;
  int e = region_lock(r);
  if (e < 0)
    return e;
  int bad = l->proc_hint > GS_REGION_MAX_PROCS;
  for (unsigned i = 0; i < GS_REGION_MAX_DEVICES && !bad; i++)
    bad = l->dev[i].in_use > 1 || l->dev[i].source > GS_CAP_FROM_DAEMON;
  for (unsigned i = 0; i < GS_REGION_MAX_PROCS && !bad; i++)
    bad = l->proc[i].in_use > 1 || (l->proc[i].in_use && i >= l->proc_hint);
  region_unlock(r);
  return bad ? -EBADMSG : 0;
}

static int mkdir_p(const char *dir) {
  char buf[PATH_MAX];
  size_t len = strlen(dir);
  if (len == 0 || len >= sizeof(buf))
    return -ENAMETOOLONG;
  memcpy(buf, dir, len + 1);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(buf, 0700) < 0 && errno != EEXIST)
      return -errno;
    *p = '/';
  }
  if (mkdir(buf, 0700) < 0 && errno != EEXIST)
    return -errno;
  return 0;
}

/* Writes a complete region aside and links it into place; losing the race to another creator
 * is fine (EEXIST), the caller then opens theirs. */
static int region_create(const char *dir, const char *path) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, GS_REGION_FILE) >= (int)sizeof(tmp))
    return -ENAMETOOLONG;
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int e = 0;
  void *m = MAP_FAILED;
  /* Blocks allocated now, not a sparse file: on a full file system the first write through the
   * mapping would be SIGBUS instead of an error. */
  int fe = posix_fallocate(fd, 0, sizeof(struct region_layout));
  if (fe != 0) {
    e = -fe;
    goto out;
  }
  m = mmap(NULL, sizeof(struct region_layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    e = -errno;
    goto out;
  }
  layout_init(m);
  if (link(tmp, path) < 0 && errno != EEXIST)
    e = -errno;
out:
  if (m != MAP_FAILED)
    munmap(m, sizeof(struct region_layout));
  unlink(tmp);
  close(fd);
  return e;
}

/* The open in progress on this thread, from its mmap to its return: a reader that jumps out of
 * it on SIGBUS (the file truncated under the mapping) frees it with gs_region_forget_open. */
static __thread struct {
  struct gs_region *r;
  int fd;
  void *map;
  size_t len;
} opening;

void gs_region_forget_open(void) {
  if (!opening.r)
    return;
  munmap(opening.map, opening.len);
  close(opening.fd);
  free(opening.r);
  opening.r = NULL;
}

static int region_open(const char *dir, int create, uid_t owner, gid_t group, int nowait,
                       struct gs_region **ret_region) {
  if (!dir || dir[0] != '/')
    return -EINVAL;
  struct gs_region *r = calloc(1, sizeof(*r));
  if (!r)
    return -ENOMEM;
  r->nowait = nowait;
  int e = 0, fd = -1;
  if (snprintf(r->path, sizeof(r->path), "%s/%s", dir, GS_REGION_FILE) >= (int)sizeof(r->path)) {
    e = -ENAMETOOLONG;
    goto fail;
  }
  if (create && (e = mkdir_p(dir)) < 0)
    goto fail;
  for (int attempt = 0; attempt < 2; attempt++) {
    fd = open(r->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 || errno != ENOENT || !create)
      break;
    if ((e = region_create(dir, r->path)) < 0)
      goto fail;
  }
  if (fd < 0) {
    e = -errno;
    goto fail;
  }
  struct stat st;
  if (fstat(fd, &st) < 0) {
    e = -errno;
    goto fail;
  }
  if (!S_ISREG(st.st_mode) || st.st_size < (off_t)(sizeof(uint64_t) + sizeof(uint32_t))) {
    e = -EBADMSG;
    goto fail;
  }
  size_t map_size = (size_t)st.st_size < sizeof(struct region_layout)
                        ? (size_t)st.st_size
                        : sizeof(struct region_layout);
  void *m = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    e = -errno;
    goto fail;
  }
  r->map = m;
  opening.r = r;
  opening.fd = fd;
  opening.map = m;
  opening.len = map_size;
  if (map_size != sizeof(struct region_layout)) {
    /* Too short to be ours: look at the magic/version only, never at the lock. */
    const struct region_layout *l = m;
    e = l->magic != REGION_MAGIC       ? -EBADMSG
        : l->version != REGION_VERSION ? -EPROTONOSUPPORT
                                       : -EBADMSG;
    munmap(m, map_size);
    r->map = NULL;
    goto fail;
  }
  if ((e = layout_validate(r, (size_t)st.st_size)) < 0) {
    munmap(m, map_size);
    r->map = NULL;
    goto fail;
  }
  if (owner != (uid_t)-1 && (st.st_uid != owner || st.st_gid != group)) {
    if (st.st_nlink != 1)
      e = -EMLINK;
    else if (fchown(fd, owner, group) < 0)
      e = -errno;
    if (e < 0) {
      munmap(m, map_size);
      r->map = NULL;
      goto fail;
    }
  }
  opening.r = NULL;
  close(fd);
  r->pidns = gs_proc_pidns();
  *ret_region = r;
  return 0;
fail:
  opening.r = NULL;
  if (fd >= 0)
    close(fd);
  free(r);
  return e;
}

int gs_region_open(const char *dir, struct gs_region **ret_region) {
  return region_open(dir, 1, (uid_t)-1, (gid_t)-1, 0, ret_region);
}

int gs_region_open_as(const char *dir, uid_t uid, gid_t gid, struct gs_region **ret_region) {
  return region_open(dir, 1, uid, gid, 0, ret_region);
}

int gs_region_open_existing(const char *dir, struct gs_region **ret_region) {
  return region_open(dir, 0, (uid_t)-1, (gid_t)-1, 0, ret_region);
}

int gs_region_open_nowait(const char *dir, int create, uid_t owner, gid_t group,
                          struct gs_region **ret_region) {
  return region_open(dir, create, owner, group, 1, ret_region);
}

/* The lock for a reader: none for a nowait handle (see gs_region_open_nowait). */
static int region_read_lock(struct gs_region *r) {
  return r->nowait ? 0 : region_lock(r);
}

static void region_read_unlock(struct gs_region *r) {
  if (!r->nowait)
    region_unlock(r);
}

void gs_region_close(struct gs_region *region) {
  if (!region)
    return;
  munmap(region->map, sizeof(struct region_layout));
  free(region);
}

const char *gs_region_path(const struct gs_region *region) {
  return region->path;
}

int gs_region_device(struct gs_region *region, const uint8_t uuid[GS_REGION_UUID_LEN], int create,
                     unsigned *ret_slot) {
  struct region_layout *l = region->map;
  if (region->nowait) {
    /* Found without the lock; only adding a device takes it. */
    for (unsigned i = 0; i < GS_REGION_MAX_DEVICES; i++)
      if (l->dev[i].in_use && memcmp(l->dev[i].uuid, uuid, GS_REGION_UUID_LEN) == 0) {
        *ret_slot = i;
        return 0;
      }
    if (!create)
      return -ENOENT;
  }
  int e = region_lock(region);
  if (e < 0)
    return e;
  int free_slot = -1;
  e = -ENOENT;
  for (unsigned i = 0; i < GS_REGION_MAX_DEVICES; i++) {
    if (!l->dev[i].in_use) {
      if (free_slot < 0)
        free_slot = (int)i;
      continue;
    }
    if (memcmp(l->dev[i].uuid, uuid, GS_REGION_UUID_LEN) == 0) {
      *ret_slot = i;
      e = 0;
      goto out;
    }
  }
  if (!create)
    goto out;
  if (free_slot < 0) {
    e = -ENOSPC;
    goto out;
  }
  struct region_device *d = &l->dev[free_slot];
  memcpy(d->uuid, uuid, GS_REGION_UUID_LEN);
  d->cap = GS_REGION_NO_CAP;
  d->source = GS_CAP_NONE;
  d->context_cost = 0;
  d->in_use = 1;
  *ret_slot = (unsigned)free_slot;
  e = 0;
out:
  region_unlock(region);
  return e;
}

static int slot_ok(const struct gs_region *region, unsigned slot) {
  return slot < GS_REGION_MAX_DEVICES && region->map->dev[slot].in_use;
}

int gs_region_set_cap(struct gs_region *region, unsigned slot, uint64_t cap,
                      enum gs_cap_source source) {
  if (slot >= GS_REGION_MAX_DEVICES || source == GS_CAP_NONE || source > GS_CAP_FROM_DAEMON)
    return -EINVAL;
  int e = region_lock(region);
  if (e < 0)
    return e;
  struct region_device *d = &region->map->dev[slot];
  if (!d->in_use)
    e = -ENOENT;
  else if (source == GS_CAP_FROM_ENV && d->source == GS_CAP_FROM_DAEMON)
    e = -EPERM;
  else {
    d->cap = cap;
    d->source = source;
  }
  region_unlock(region);
  return e;
}

int gs_region_set_context_cost(struct gs_region *region, unsigned slot, uint64_t bytes) {
  int e = region_lock(region);
  if (e < 0)
    return e;
  if (slot_ok(region, slot))
    region->map->dev[slot].context_cost = bytes;
  else
    e = -ENOENT;
  region_unlock(region);
  return e;
}

static void fill_device(const struct region_layout *l, unsigned i,
                        struct gs_region_device_info *info) {
  info->slot = i;
  memcpy(info->uuid, l->dev[i].uuid, GS_REGION_UUID_LEN);
  info->cap = l->dev[i].cap;
  info->used = device_used(l, i);
  info->context_cost = l->dev[i].context_cost;
  info->source =
      l->dev[i].source <= GS_CAP_FROM_DAEMON ? (enum gs_cap_source)l->dev[i].source : GS_CAP_NONE;
}

int gs_region_device_info(struct gs_region *region, unsigned slot,
                          struct gs_region_device_info *ret_info) {
  int e = region_read_lock(region);
  if (e < 0)
    return e;
  if (slot_ok(region, slot))
    fill_device(region->map, slot, ret_info);
  else
    e = -ENOENT;
  region_read_unlock(region);
  return e;
}

int gs_region_devices(struct gs_region *region, struct gs_region_device_info *out, unsigned max,
                      unsigned *ret_n) {
  int e = region_read_lock(region);
  if (e < 0)
    return e;
  unsigned n = 0;
  for (unsigned i = 0; i < GS_REGION_MAX_DEVICES && n < max; i++)
    if (region->map->dev[i].in_use)
      fill_device(region->map, i, &out[n++]);
  region_read_unlock(region);
  *ret_n = n;
  return 0;
}

int gs_region_procs(struct gs_region *region, struct gs_region_proc_info *out, unsigned max,
                    unsigned *ret_n) {
  struct region_layout *l = region->map;
  int e = region_read_lock(region);
  if (e < 0)
    return e;
  unsigned n = 0;
  /* The hint is as the slice's processes left it: never past the table. */
  for (uint32_t i = 0; i < l->proc_hint && i < GS_REGION_MAX_PROCS && n < max; i++) {
    const struct region_proc *p = &l->proc[i];
    if (!p->in_use)
      continue;
    out[n].slot = i;
    out[n].pid = p->pid;
    out[n].start_time = p->start_time;
    out[n].pidns = p->pidns;
    memcpy(out[n].used, p->used, sizeof(p->used));
    n++;
  }
  region_read_unlock(region);
  *ret_n = n;
  return 0;
}

int gs_region_attach(struct gs_region *region, unsigned *ret_proc) {
  struct region_layout *l = region->map;
  uint64_t start = 0;
  int exited = 0;
  int e = gs_proc_identity(0, &start, &exited);
  if (e < 0)
    return e;
  pid_t pid = getpid();
  if ((e = region_lock(region)) < 0)
    return e;
  reclaim_cheap(region);
  int entry = -1;
  for (uint32_t i = 0; i < GS_REGION_MAX_PROCS; i++) {
    struct region_proc *p = &l->proc[i];
    /* Same pid and start time: this process before an exec(); its device memory went with the
     * old image, so the entry starts over. */
    if (p->in_use && p->pid == pid && p->start_time == start && p->pidns == region->pidns) {
      entry = (int)i;
      break;
    }
    if (!p->in_use && entry < 0)
      entry = (int)i;
  }
  if (entry < 0) {
    reclaim_full(region);
    for (uint32_t i = 0; i < GS_REGION_MAX_PROCS && entry < 0; i++)
      if (!l->proc[i].in_use)
        entry = (int)i;
  }
  if (entry < 0) {
    e = -EUSERS;
    goto out;
  }
  struct region_proc *p = &l->proc[entry];
  proc_clear(p);
  p->pid = pid;
  p->start_time = start;
  p->pidns = region->pidns;
  p->in_use = 1;
  if ((uint32_t)entry + 1 > l->proc_hint)
    l->proc_hint = (uint32_t)entry + 1;
  *ret_proc = (unsigned)entry;
out:
  region_unlock(region);
  return e;
}

static int proc_ok(const struct gs_region *region, unsigned proc) {
  return proc < GS_REGION_MAX_PROCS && region->map->proc[proc].in_use &&
         region->map->proc[proc].pid == getpid();
}

int gs_region_reserve(struct gs_region *region, unsigned proc, unsigned slot, uint64_t bytes,
                      struct gs_region_denial *ret_denial) {
  struct region_layout *l = region->map;
  int e = region_lock(region);
  if (e < 0)
    return e;
  if (!slot_ok(region, slot) || !proc_ok(region, proc)) {
    e = -ESTALE;
    goto out;
  }
  /* Dead processes' bytes leave the count at least every SWEEP_NS; a reservation that would
   * fail looks harder (below), so none ever fails for memory a dead process held. Syscalls
   * per entry on every reservation would lengthen the critical section all processes share. */
  if (gs_mono_ns() - l->last_sweep_ns >= SWEEP_NS)
    reclaim_cheap(region);
  /* Without a cap the sum still has to fit: a wrapped count would be given back clamped at 0,
   * losing what the process really holds. */
  uint64_t cap = l->dev[slot].cap;
  uint64_t used = device_used(l, slot);
  if (cap == GS_REGION_NO_CAP && bytes > UINT64_MAX - used) {
    if (ret_denial) {
      ret_denial->used = used;
      ret_denial->cap = cap;
    }
    e = -ENOMEM;
    goto out;
  }
  if (cap != GS_REGION_NO_CAP && (used > cap || bytes > cap - used)) {
    if (reclaim_full(region) > 0)
      used = device_used(l, slot);
    if (used > cap || bytes > cap - used) {
      if (ret_denial) {
        ret_denial->used = used;
        ret_denial->cap = cap;
      }
      e = -ENOMEM;
      goto out;
    }
  }
  l->proc[proc].used[slot] += bytes;
out:
  region_unlock(region);
  return e;
}

int gs_region_charge(struct gs_region *region, unsigned proc, unsigned slot, uint64_t bytes) {
  int e = region_lock(region);
  if (e < 0)
    return e;
  if (!slot_ok(region, slot) || !proc_ok(region, proc))
    e = -ESTALE;
  else if (bytes > UINT64_MAX - device_used(region->map, slot))
    e = -EOVERFLOW; /* never a wrapped sum */
  else
    region->map->proc[proc].used[slot] += bytes;
  region_unlock(region);
  return e;
}

int gs_region_release(struct gs_region *region, unsigned proc, unsigned slot, uint64_t bytes) {
  int e = region_lock(region);
  if (e < 0)
    return e;
  if (slot < GS_REGION_MAX_DEVICES && proc_ok(region, proc)) {
    uint64_t *u = &region->map->proc[proc].used[slot];
    *u = *u > bytes ? *u - bytes : 0;
  } else {
    e = -ESTALE;
  }
  region_unlock(region);
  return e;
}

int gs_region_proc_used(struct gs_region *region, unsigned proc, unsigned slot,
                        uint64_t *ret_bytes) {
  if (proc >= GS_REGION_MAX_PROCS || slot >= GS_REGION_MAX_DEVICES)
    return -EINVAL;
  int e = region_lock(region);
  if (e < 0)
    return e;
  if (region->map->proc[proc].in_use)
    *ret_bytes = region->map->proc[proc].used[slot];
  else
    e = -ESTALE;
  region_unlock(region);
  return e;
}

int gs_region_reclaim(struct gs_region *region) {
  int e = region_lock(region);
  if (e < 0)
    return e;
  int n = reclaim_full(region);
  region_unlock(region);
  return n;
}
