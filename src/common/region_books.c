/* SPDX-License-Identifier: Apache-2.0 */
/* What the slice's region records (region_layout.h): each device's cap and context cost, one
 * entry per process with the bytes it holds per device, reservations against the cap, and
 * reclaiming the entries of processes that are gone. Every change is made under the region's
 * lock (region.c) but the daemon's caps, stored whole without it; this file never creates, maps
 * or validates the file. */
#include "region_layout.h"

#include "clock.h"
#include "proc.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

void region_proc_clear(struct region_proc *p) {
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
      region_proc_clear(p);
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
      region_proc_clear(p);
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

int gs_region_device(struct gs_region *region, const uint8_t uuid[GS_REGION_UUID_LEN], int create,
                     unsigned *ret_slot) {
  struct region_layout *l = region->map;
  if (region->nowait) {
    /* Found without the lock; only adding a device takes it (the lock word, by hand). */
    for (unsigned i = 0; i < GS_REGION_MAX_DEVICES; i++)
      if (__atomic_load_n(&l->dev[i].in_use, __ATOMIC_ACQUIRE) &&
          memcmp(l->dev[i].uuid, uuid, GS_REGION_UUID_LEN) == 0) {
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
  __atomic_store_n(&d->cap, GS_REGION_NO_CAP, __ATOMIC_RELAXED);
  __atomic_store_n(&d->source, GS_CAP_NONE, __ATOMIC_RELAXED);
  d->context_cost = 0;
  /* Published last: the daemon looks devices up without the lock. */
  __atomic_store_n(&d->in_use, 1, __ATOMIC_RELEASE);
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
  struct region_device *d = &region->map->dev[slot];
  /* The daemon: no lock (region.c says why). Each word is stored whole; a hook reads the cap at
   * its next reservation. A process writing its GSLICE_MEMORY_LIMIT cap at the same moment
   * (under the lock, having read the source before this) may overwrite both: the daemon reads
   * the cap back at its next look and writes it again. */
  if (region->nowait) {
    if (!__atomic_load_n(&d->in_use, __ATOMIC_ACQUIRE))
      return -ENOENT;
    __atomic_store_n(&d->cap, cap, __ATOMIC_RELEASE);
    __atomic_store_n(&d->source, (uint32_t)source, __ATOMIC_RELEASE);
    return 0;
  }
  int e = region_lock(region);
  if (e < 0)
    return e;
  if (!d->in_use)
    e = -ENOENT;
  else if (source == GS_CAP_FROM_ENV &&
           __atomic_load_n(&d->source, __ATOMIC_ACQUIRE) == GS_CAP_FROM_DAEMON)
    e = -EPERM;
  else {
    __atomic_store_n(&d->cap, cap, __ATOMIC_RELEASE);
    __atomic_store_n(&d->source, (uint32_t)source, __ATOMIC_RELEASE);
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
  info->cap = __atomic_load_n(&l->dev[i].cap, __ATOMIC_ACQUIRE);
  info->used = device_used(l, i);
  info->context_cost = l->dev[i].context_cost;
  uint32_t source = __atomic_load_n(&l->dev[i].source, __ATOMIC_ACQUIRE);
  info->source = source <= GS_CAP_FROM_DAEMON ? (enum gs_cap_source)source : GS_CAP_NONE;
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
  region_proc_clear(p);
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
  uint64_t cap = __atomic_load_n(&l->dev[slot].cap, __ATOMIC_ACQUIRE); /* the daemon's, lock-free */
  uint64_t used = device_used(l, slot);
  int over =
      cap == GS_REGION_NO_CAP ? bytes > UINT64_MAX - used : (used > cap || bytes > cap - used);
  /* Over the cap: what dead processes held is looked for harder first. */
  if (over && cap != GS_REGION_NO_CAP && reclaim_full(region) > 0) {
    used = device_used(l, slot);
    over = used > cap || bytes > cap - used;
  }
  if (over) {
    if (ret_denial) {
      ret_denial->used = used;
      ret_denial->cap = cap;
    }
    e = -ENOMEM;
    goto out;
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

int gs_region_set_util(struct gs_region *region, const uint8_t pct[GS_REGION_MAX_DEVICES],
                       uint64_t end_ns, uint32_t period_ms) {
  struct region_util *u = &region->map->util;
  if (end_ns == 0)
    return -EINVAL;
  for (unsigned i = 0; i < GS_REGION_MAX_DEVICES; i++) {
    if (pct[i] > 100 && pct[i] != GS_REGION_UTIL_NONE)
      return -EINVAL;
    __atomic_store_n(&u->pct[i], pct[i], __ATOMIC_RELAXED);
  }
  __atomic_store_n(&u->period_ms, period_ms, __ATOMIC_RELAXED);
  __atomic_store_n(&u->end_ns, end_ns, __ATOMIC_RELEASE); /* published last */
  return 0;
}

int gs_region_util(struct gs_region *region, unsigned slot, unsigned *ret_pct,
                   uint64_t *ret_end_ns) {
  if (slot >= GS_REGION_MAX_DEVICES)
    return -EINVAL;
  const struct region_util *u = &region->map->util;
  uint64_t end = __atomic_load_n(&u->end_ns, __ATOMIC_ACQUIRE);
  unsigned pct = __atomic_load_n(&u->pct[slot], __ATOMIC_RELAXED);
  if (end == 0 || pct > 100)
    return -ENOENT;
  *ret_pct = pct;
  *ret_end_ns = end;
  return 0;
}
