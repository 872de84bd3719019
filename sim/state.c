/* SPDX-License-Identifier: Apache-2.0 */
/* The shared simulated machine: creating/joining the state file, the robust lock,
 * process slots and their reaping, memory charges and the device engine timelines. */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Byte 0 of the file serializes creation; byte 1 carries a shared lock for as long as
 * a process has the machine open, so "nobody lives on it" is one non-blocking try. OFD
 * locks belong to the open file, so threads exiting never drop them. */
#define LOCK_INIT 0
#define LOCK_PRESENCE 1

static int ofd_lock(int fd, short type, off_t at, int wait) {
  struct flock fl;
  memset(&fl, 0, sizeof(fl));
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 1;
  while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) < 0) {
    if (errno != EINTR)
      return -errno;
  }
  return 0;
}

uint64_t sim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t fnv1a(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 0x100000001b3ull;
  }
  return h;
}

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static int machine_valid(const struct sim_machine *m) {
  return m->magic == SIM_MAGIC && m->version == SIM_VERSION &&
         m->size == sizeof(struct sim_machine) && m->devices >= 1 && m->devices <= SIM_MAX_DEVICES;
}

static int config_matches(const struct sim_machine *m, const struct sim_config *cfg) {
  return m->devices == cfg->devices && m->memory == cfg->memory &&
         m->context_memory == cfg->context_memory && m->sms == cfg->sms &&
         m->reserved == cfg->reserved && m->timeslice_ns == cfg->timeslice_ns;
}

static int machine_init(struct sim_machine *m, const struct sim_config *cfg) {
  pthread_mutexattr_t a;
  /* The file was just truncated to its size: zero already, and untouched pages (devices
   * and kernel slots never used) cost nothing until written. */
  m->version = SIM_VERSION;
  m->size = sizeof(*m);
  m->devices = cfg->devices;
  m->sms = cfg->sms;
  m->memory = cfg->memory;
  m->context_memory = cfg->context_memory;
  m->reserved = cfg->reserved;
  m->timeslice_ns = cfg->timeslice_ns;
  for (unsigned d = 0; d < SIM_MAX_DEVICES; d++)
    m->dev[d].cur = -1;
  m->created_realtime_ns = realtime_ns();
  m->path_hash = fnv1a(cfg->state_path);
  if (pthread_mutexattr_init(&a) || pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) ||
      pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) || pthread_mutex_init(&m->lock, &a))
    return -EIO;
  pthread_mutexattr_destroy(&a);
  /* Written last: a half-initialized file never looks valid. */
  __atomic_store_n(&m->magic, SIM_MAGIC, __ATOMIC_RELEASE);
  return 0;
}

static int map_fd(int fd, struct sim_machine **ret) {
  void *p = mmap(NULL, sizeof(struct sim_machine), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return -errno;
  *ret = p;
  return 0;
}

int sim_state_open(const struct sim_config *cfg, struct sim_state *ret, char *note,
                   size_t notelen) {
  struct sim_machine *m = NULL;
  struct stat sb;
  int r;
  if (note && notelen)
    note[0] = 0;
  int fd = open(cfg->state_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return -errno;
  r = ofd_lock(fd, F_WRLCK, LOCK_INIT, 1);
  if (r < 0)
    goto fail;
  int alone = ofd_lock(fd, F_WRLCK, LOCK_PRESENCE, 0) == 0;
  if (fstat(fd, &sb) < 0) {
    r = -errno;
    goto fail;
  }
  int valid = 0;
  if ((size_t)sb.st_size == sizeof(struct sim_machine)) {
    r = map_fd(fd, &m);
    if (r < 0)
      goto fail;
    valid = machine_valid(m);
  }
  if (alone && (!valid || !config_matches(m, cfg))) {
    /* Nobody has the file open: it is ours to (re)build with this config. */
    if (m)
      munmap(m, sizeof(*m));
    m = NULL;
    if (ftruncate(fd, 0) < 0 || ftruncate(fd, sizeof(struct sim_machine)) < 0) {
      r = -errno;
      goto fail;
    }
    r = map_fd(fd, &m);
    if (r < 0)
      goto fail;
    r = machine_init(m, cfg);
    if (r < 0)
      goto fail;
  } else if (!valid) {
    if (note)
      snprintf(note, notelen,
               "gslice-sim: %s is in use by another process but is not a machine of this "
               "version; remove it once they exit (gslice-sim reset)",
               cfg->state_path);
    r = -EPROTO;
    goto fail;
  } else if (!config_matches(m, cfg) && note) {
    unsigned ex = cfg->explicit_mask;
    if ((ex & SIM_EXPLICIT_DEVICES && m->devices != cfg->devices) ||
        (ex & SIM_EXPLICIT_MEMORY && m->memory != cfg->memory) ||
        (ex & SIM_EXPLICIT_CONTEXT_MEMORY && m->context_memory != cfg->context_memory) ||
        (ex & SIM_EXPLICIT_SMS && m->sms != cfg->sms) ||
        (ex & SIM_EXPLICIT_RESERVED && m->reserved != cfg->reserved) ||
        (ex & SIM_EXPLICIT_TIMESLICE && m->timeslice_ns != cfg->timeslice_ns))
      snprintf(note, notelen,
               "gslice-sim: note: %s is in use with %u device(s) of %llu bytes (context %llu, "
               "%u SMs, reserved %llu, timeslice %llu us); joining it, this process's GSLICE_SIM_* "
               "settings are "
               "ignored",
               cfg->state_path, m->devices, (unsigned long long)m->memory,
               (unsigned long long)m->context_memory, m->sms, (unsigned long long)m->reserved,
               (unsigned long long)(m->timeslice_ns / 1000));
  }
  r = ofd_lock(fd, F_RDLCK, LOCK_PRESENCE, 1);
  if (r < 0)
    goto fail;
  ofd_lock(fd, F_UNLCK, LOCK_INIT, 0);
  ret->m = m;
  ret->fd = fd;
  return 0;
fail:
  if (m)
    munmap(m, sizeof(*m));
  close(fd);
  return r;
}

int sim_state_open_existing(const char *path, struct sim_state *ret) {
  struct stat sb;
  struct sim_machine *m = NULL;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int r = ofd_lock(fd, F_RDLCK, LOCK_INIT, 1);
  if (r == 0 && fstat(fd, &sb) < 0)
    r = -errno;
  if (r == 0 && (size_t)sb.st_size != sizeof(struct sim_machine))
    r = -EPROTO;
  if (r == 0)
    r = map_fd(fd, &m);
  if (r == 0 && !machine_valid(m)) {
    munmap(m, sizeof(*m));
    r = -EPROTO;
  }
  if (r == 0)
    r = ofd_lock(fd, F_RDLCK, LOCK_PRESENCE, 1);
  ofd_lock(fd, F_UNLCK, LOCK_INIT, 0);
  if (r < 0) {
    close(fd);
    return r;
  }
  ret->m = m;
  ret->fd = fd;
  return 0;
}

void sim_state_close(struct sim_state *st) {
  if (st->m)
    munmap(st->m, sizeof(*st->m));
  if (st->fd >= 0)
    close(st->fd);
  st->m = NULL;
  st->fd = -1;
}

void sim_lock(struct sim_machine *m) {
  int r = pthread_mutex_lock(&m->lock);
  if (r == EOWNERDEAD) {
    /* Memory totals are derived from the per-process entries on every read, and the
     * dead holder's slot is reaped below, so nothing needs rebuilding here. */
    pthread_mutex_consistent(&m->lock);
    sim_reap(m, 1);
  }
}

void sim_unlock(struct sim_machine *m) {
  pthread_mutex_unlock(&m->lock);
}

/* The start of /proc/<pid>/<name>, NUL-terminated in buf: 0, or -1 if none could be read. */
static int read_proc_file(pid_t pid, const char *name, char *buf, size_t size) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = 0;
  return 0;
}

/* A zombie leader can still have live threads (the main thread called pthread_exit):
 * that process is alive. A killed, unreaped one has only its leader left. */
static int zombie_leader_of_live_threads(pid_t pid) {
  char buf[2048];
  if (read_proc_file(pid, "status", buf, sizeof(buf)) < 0)
    return 0;
  const char *t = strstr(buf, "\nThreads:");
  return t && strtoul(t + 9, NULL, 10) > 1;
}

uint64_t sim_proc_starttime(pid_t pid, char *comm, size_t commlen) {
  char buf[1024];
  if (read_proc_file(pid, "stat", buf, sizeof(buf)) < 0)
    return 0;
  char *open_paren = strchr(buf, '(');
  char *close_paren = strrchr(buf, ')');
  if (!open_paren || !close_paren || close_paren[1] != ' ')
    return 0;
  if (comm && commlen) {
    size_t len = (size_t)(close_paren - open_paren - 1);
    if (len >= commlen)
      len = commlen - 1;
    memcpy(comm, open_paren + 1, len);
    comm[len] = 0;
  }
  char *p = close_paren + 2;
  char state = *p;
  if (state == 'X' || state == 'x' || (state == 'Z' && !zombie_leader_of_live_threads(pid)))
    return 0;
  /* Field 3 is the state; the start time is field 22. */
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p)
      return 0;
    p++;
  }
  return strtoull(p, NULL, 10);
}

void sim_reap(struct sim_machine *m, int force) {
  uint64_t now = sim_now_ns();
  if (!force && now - m->last_reap_ns < 50000000ull)
    return;
  m->last_reap_ns = now;
  for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
    struct sim_proc *p = &m->proc[i];
    if (!p->pid)
      continue;
    uint64_t st = sim_proc_starttime(p->pid, NULL, 0);
    if (st != 0 && st == p->starttime)
      continue;
    for (unsigned d = 0; d < m->devices; d++)
      sim_drop_proc(m, d, i, p->gen);
    uint32_t gen = p->gen;
    memset(p, 0, sizeof(*p));
    p->gen = gen;
  }
}

int sim_proc_attach(struct sim_machine *m, pid_t pid) {
  char comm[16];
  uint64_t st = sim_proc_starttime(pid, comm, sizeof(comm));
  sim_reap(m, 1);
  for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
    struct sim_proc *p = &m->proc[i];
    if (p->pid == (int32_t)pid && p->starttime == st) {
      /* Our own pid and start time: this image replaced (exec) one that had attached;
       * what it held died with it, as a real driver's context does. */
      for (unsigned d = 0; d < m->devices; d++)
        sim_drop_proc(m, d, i, p->gen);
      p->pid = 0;
    }
  }
  for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
    struct sim_proc *p = &m->proc[i];
    if (p->pid)
      continue;
    uint32_t gen = p->gen + 1;
    memset(p, 0, sizeof(*p));
    p->gen = gen;
    p->pid = (int32_t)pid;
    p->starttime = st;
    memcpy(p->comm, comm, sizeof(p->comm));
    return (int)i;
  }
  return -ENOSPC;
}

uint64_t sim_dev_used(const struct sim_machine *m, unsigned dev) {
  uint64_t used = 0;
  for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
    if (m->proc[i].pid)
      used += m->proc[i].mem[dev];
  return used;
}

int sim_mem_charge(struct sim_machine *m, int slot, unsigned dev, uint64_t bytes) {
  for (int attempt = 0; attempt < 2; attempt++) {
    uint64_t used = sim_dev_used(m, dev), room = m->memory - m->reserved;
    if (used <= room && bytes <= room - used) {
      m->proc[slot].mem[dev] += bytes;
      return 0;
    }
    /* Before saying no, make sure the figure is not inflated by the dead. */
    sim_reap(m, 1);
  }
  return -ENOMEM;
}

void sim_mem_uncharge(struct sim_machine *m, int slot, unsigned dev, uint64_t bytes) {
  uint64_t *mem = &m->proc[slot].mem[dev];
  *mem = *mem >= bytes ? *mem - bytes : 0;
}

void sim_uuid(const struct sim_machine *m, unsigned dev, unsigned char out[16]) {
  uint64_t a = mix64(m->path_hash ^ (0x1000ull + dev));
  uint64_t b = mix64(a ^ m->path_hash);
  memcpy(out, &a, 8);
  memcpy(out + 8, &b, 8);
  out[6] = (unsigned char)((out[6] & 0x0f) | 0x40); /* looks like a v4 UUID, as NVIDIA's */
  out[8] = (unsigned char)((out[8] & 0x3f) | 0x80);
}

void sim_uuid_text(const struct sim_machine *m, unsigned dev, char *buf, size_t len) {
  unsigned char u[16];
  sim_uuid(m, dev, u);
  snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
           u[14], u[15]);
}
