/* SPDX-License-Identifier: Apache-2.0 */
/* The slice's region as a file (region_layout.h): creating it whole, opening and validating it,
 * the robust lock over it, closing it. What the file records (devices, caps, process entries,
 * reservations) is region_books.c's; this file never reads or writes an entry except to repair
 * the entry hint after a holder died. */
#include "region_layout.h"

#include "clock.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
 * this slice-writable file must not hang a process of the slice; the caller gets -ETIMEDOUT and
 * the hook refuses the allocation.
 *
 * The daemon (a nowait handle) never hands this mutex to glibc. The file is the slice's to write,
 * and glibc keeps a robust mutex it holds on the thread's robust list: pthread_mutex_lock writes
 * list pointers into the mutex's __list, and unlock follows whatever __list holds then. A slice
 * process that rewrites them while root gsliced holds the lock makes gsliced write pointers of
 * its choosing and die. So the daemon writes caps without the lock
 * (region_books.c), reads without it, repairs nothing, and for the one thing that needs the
 * hooks held off, adding a device entry, takes the lock word itself: one compare-and-swap of the
 * futex word from 0 to an owner no thread can be (DAEMON_OWNER), released with an exchange and a
 * FUTEX_WAKE if a hook waits. That is the robust-futex word protocol glibc's own robust mutexes
 * follow (a hook waiting in pthread_mutex_timedlock gets it next), without the robust list: the
 * daemon reads and writes the futex word and nothing else of the mutex, all within its own
 * mapping of a fixed size. What it gives up: a daemon killed inside that section (a handful of
 * stores) leaves the word set with no kernel cleanup; the next daemon open of the region (each
 * second) lets go of a word it finds with DAEMON_OWNER (one daemon serves a slice, and its calls
 * never nest). */
static __thread int region_cancel_state;

/* pid_max is at most 2^22 (PID_MAX_LIMIT): no thread has this tid. */
#define DAEMON_OWNER ((int)FUTEX_TID_MASK)

static int *lock_word(struct region_layout *l) {
  return &l->lock.__data.__lock;
}

static void word_release(int *w) {
  int old = __atomic_exchange_n(w, 0, __ATOMIC_RELEASE);
  if (old & (int)FUTEX_WAITERS)
    syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* A word holding DAEMON_OWNER when no daemon call is inside its section was left by a daemon that
 * died there: let go at each daemon open and before each take, or the hooks would wait for it
 * forever. */
static void word_release_stale(struct region_layout *l) {
  int *w = lock_word(l);
  int cur = __atomic_load_n(w, __ATOMIC_RELAXED);
  if ((cur & (int)FUTEX_TID_MASK) == DAEMON_OWNER && !(cur & (int)FUTEX_OWNER_DIED))
    word_release(w);
}

static int word_trylock(struct region_layout *l) {
  int *w = lock_word(l);
  word_release_stale(l);
  int expected = 0;
  return __atomic_compare_exchange_n(w, &expected, DAEMON_OWNER, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)
             ? 0
             : -EBUSY;
}

/* Waits for the lock until a CLOCK_MONOTONIC deadline. pthread_mutex_clocklock would wait on that
 * clock, but it is glibc 2.30's and the hook loads into older images (src/hook/glibc_compat.h):
 * pthread_mutex_timedlock waits until a CLOCK_REALTIME deadline, taken here from the wall clock
 * and the monotonic time left, again after each timeout until the monotonic deadline passes. A
 * wall clock set forward cannot cut the wait short; one set back during a wait lengthens it by as
 * much. EOWNERDEAD comes back as from any lock of a robust mutex. */
static int lock_until(pthread_mutex_t *m, uint64_t deadline_ns) {
  for (;;) {
    uint64_t now = gs_mono_ns();
    if (now >= deadline_ns)
      return ETIMEDOUT;
    uint64_t left = deadline_ns - now;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    uint64_t nsec = (uint64_t)until.tv_nsec + left % 1000000000ull;
    until.tv_sec += (time_t)(left / 1000000000ull + nsec / 1000000000ull);
    until.tv_nsec = (long)(nsec % 1000000000ull);
    int e = pthread_mutex_timedlock(m, &until);
    if (e != ETIMEDOUT)
      return e;
  }
}

int region_lock(struct gs_region *r) {
  struct region_layout *l = r->map;
  if (r->nowait)
    return word_trylock(l);
  int old;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  int e = lock_until(&l->lock, gs_mono_ns() + GS_REGION_LOCK_TIMEOUT_S * 1000000000ull);
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

void region_unlock(struct gs_region *r) {
  if (r->nowait) {
    word_release(lock_word(r->map));
    return;
  }
  int old = region_cancel_state;
  pthread_mutex_unlock(&r->map->lock);
  pthread_setcancelstate(old, NULL);
}

void region_layout_init(struct region_layout *l) {
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
  region_layout_init(m);
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

/* Opens the region file of dir (made first with create), through no symbolic link. */
static int region_open_file(struct gs_region *r, const char *dir, int create, int *ret_fd) {
  int fd = -1, e;

  if (snprintf(r->path, sizeof(r->path), "%s/%s", dir, GS_REGION_FILE) >= (int)sizeof(r->path))
    return -ENAMETOOLONG;
  if (create && (e = mkdir_p(dir)) < 0)
    return e;
  for (int attempt = 0; attempt < 2; attempt++) {
    /* A nowait handle (the daemon's) never waits on the file either: open(2) of a file that
     * another process holds a lease on waits for the lease's break (45 s by default) unless
     * O_NONBLOCK, and a slice's process owns its region file. */
    fd = open(r->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (r->nowait ? O_NONBLOCK : 0));
    if (fd >= 0 || errno != ENOENT || !create)
      break;
    if ((e = region_create(dir, r->path)) < 0)
      return e;
  }
  if (fd < 0)
    return -errno;
  *ret_fd = fd;
  return 0;
}

/* A regular file at least as long as the magic and version; the daemon's open cuts back what
 * lies past the layout. */
static int region_check_file(struct gs_region *r, int fd, struct stat *st) {
  if (fstat(fd, st) < 0)
    return -errno;
  if (!S_ISREG(st->st_mode) || st->st_size < (off_t)(sizeof(uint64_t) + sizeof(uint32_t)))
    return -EBADMSG;
  /* The layout's size is fixed, and nothing past it is read: a file grown beyond it (a container
   * writes its region through a read-write file mount, and ephemeral-storage limits do not count
   * it) is cut back by the daemon at each look, so it grows by at most what one writes between
   * two looks. Through this descriptor and only with one link: never another file. */
  if (r->nowait && st->st_size > (off_t)sizeof(struct region_layout) && st->st_nlink == 1) {
    if (ftruncate(fd, (off_t)sizeof(struct region_layout)) < 0)
      return -errno;
    r->cut = (uint64_t)st->st_size - sizeof(struct region_layout);
    st->st_size = (off_t)sizeof(struct region_layout);
  }
  return 0;
}

/* Maps the layout and checks it; r->map is set only when it is ours. */
static int region_map(struct gs_region *r, int fd, const struct stat *st) {
  size_t map_size = (size_t)st->st_size < sizeof(struct region_layout)
                        ? (size_t)st->st_size
                        : sizeof(struct region_layout);
  void *m = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e;

  if (m == MAP_FAILED)
    return -errno;
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
  } else {
    e = layout_validate(r, (size_t)st->st_size);
  }
  if (e < 0) {
    munmap(m, map_size);
    r->map = NULL;
  }
  return e;
}

/* Gives the file to owner:group (the slice's user), through the descriptor; a file with other
 * hard links is refused: giving it away would give them too. */
static int region_give(int fd, const struct stat *st, uid_t owner, gid_t group) {
  if (owner == (uid_t)-1 || (st->st_uid == owner && st->st_gid == group))
    return 0;
  if (st->st_nlink != 1)
    return -EMLINK;
  return fchown(fd, owner, group) < 0 ? -errno : 0;
}

static int region_open(const char *dir, int create, uid_t owner, gid_t group, int nowait,
                       struct gs_region **ret_region) {
  if (!dir || dir[0] != '/')
    return -EINVAL;
  struct gs_region *r = calloc(1, sizeof(*r));
  if (!r)
    return -ENOMEM;
  r->nowait = nowait;
  struct stat st;
  int fd = -1;
  int e = region_open_file(r, dir, create, &fd);
  if (e == 0)
    e = region_check_file(r, fd, &st);
  if (e == 0)
    e = region_map(r, fd, &st);
  if (e == 0 && nowait)
    word_release_stale(r->map);
  if (e == 0 && (e = region_give(fd, &st, owner, group)) < 0) {
    munmap(r->map, sizeof(struct region_layout));
    r->map = NULL;
  }
  opening.r = NULL;
  if (fd >= 0)
    close(fd);
  if (e < 0) {
    free(r);
    return e;
  }
  r->pidns = gs_proc_pidns();
  *ret_region = r;
  return 0;
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
int region_read_lock(struct gs_region *r) {
  return r->nowait ? 0 : region_lock(r);
}

void region_read_unlock(struct gs_region *r) {
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

uint64_t gs_region_cut(const struct gs_region *region) {
  return region->cut;
}
