/* SPDX-License-Identifier: Apache-2.0 */
/* Reservations (slice_state.h): reserve before the real call, tickets committed into the handle
 * table or rolled back, frees settled, and reconciliation with what the driver holds. */
#include "slice_state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "size.h"

#define RECONCILE_NS 200000000ull /* 200 ms */
/* The region's own bound on dead processes' bytes staying in the count (its cheap sweep at
 * reservations): a view keeps the same one. */
#define VIEW_SWEEP_NS 10000000ull /* 10 ms */

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
  /* Not due, as at almost every allocation: known without taking S.lock (asked again under it).
   * An allocation took the lock four times, this one for nothing. */
  if (!force && now - __atomic_load_n(&S.reconciled_ns[slot], __ATOMIC_RELAXED) < RECONCILE_NS)
    return;
  gs_slice_lock();
  if (!S.attached || S.reconciling ||
      (!force && now - __atomic_load_n(&S.reconciled_ns[slot], __ATOMIC_RELAXED) < RECONCILE_NS) ||
      gs_region_proc_used(S.region, S.proc, slot, &held) < 0) {
    gs_slice_unlock();
    return;
  }
  S.reconciling = 1;
  __atomic_store_n(&S.reconciled_ns[slot], now, __ATOMIC_RELAXED);
  /* Counted before the device is asked: an allocation landing in between then shows as
   * overhead until the next look (too much, never too little). */
  uint64_t counted = held > S.overhead[slot] ? held - S.overhead[slot] : 0;
  gs_slice_unlock();
  struct gs_probe p;
  gs_probe(dev, &p);
  gs_slice_lock();
  S.reconciling = 0;
  if (p.proc_found && S.attached) {
    uint64_t want = p.proc_used > counted ? p.proc_used - counted : 0;
    if (want > S.overhead[slot])
      gs_region_charge(S.region, S.proc, slot, want - S.overhead[slot]);
    else if (want < S.overhead[slot])
      gs_region_release(S.region, S.proc, slot, S.overhead[slot] - want);
    S.overhead[slot] = want;
  }
  gs_slice_unlock();
}

/* A view asked on every call (a framework polling cuMemGetInfo, nvidia-smi in a loop) read
 * /proc for every entry of the slice each time. The calling process's own bytes are exact in
 * the region whatever this does (reserve and release are synchronous, reconciliation runs at
 * the view); only a dead process's bytes wait, at most VIEW_SWEEP_NS after the last check, and
 * an allocation that would be refused still does the full check first (gs_region_reserve). One
 * thread sweeps; one that loses the race reads the figure as it is. */
int gs_reclaim_for_view(void) {
  uint64_t now = gs_mono_ns();
  uint64_t last = __atomic_load_n(&S.view_swept_ns, __ATOMIC_RELAXED);
  if (now - last < VIEW_SWEEP_NS ||
      !__atomic_compare_exchange_n(&S.view_swept_ns, &last, now, 0, __ATOMIC_RELAXED,
                                   __ATOMIC_RELAXED))
    return 0;
  return gs_region_reclaim(S.region) >= 0;
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
    gs_slice_lock();
    e = gs_slice_attach_locked();
    if (e == 0)
      e = gs_region_reserve(S.region, S.proc, slot, bytes, &d);
    if (e == -ESTALE) /* our entry was taken from us: take a new one */
      S.attached = 0;
    gs_slice_unlock();
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
  gs_slice_lock();
  if (S.attached)
    gs_region_release(S.region, S.proc, slot, bytes);
  gs_slice_unlock();
}

/* Opens ticket t (its dev and ctx set) for `bytes`. The device's slot and, in the common case,
 * the reservation are one critical section: an allocation took S.lock once for the slot and
 * again to reserve. The common case is the one where reserve() would do nothing else: the
 * process has its entry, no reconciliation is due before the call (gs_reconcile would return
 * at once: another thread probing, or not 200 ms since the last) and the reservation is
 * granted. Anything else — the first allocation (the entry taken, its error said once), a
 * refusal (pool trims, a forced reconciliation, the message), a lost entry, a reconciliation
 * due — goes the long way through reserve(), from the start: this section changed nothing but
 * S.attached on a lost entry, and a refusal is decided again there. */
static CUresult ticket_open(struct gs_ticket *t, uint64_t bytes, const char *what,
                            int before_call) {
  uint64_t now = gs_mono_ns();
  int reserved = 0;

  gs_slice_lock();
  int e = gs_slot_for_alloc_locked(t->dev, &t->slot);
  int due = before_call && !S.reconciling &&
            now - __atomic_load_n(&S.reconciled_ns[t->slot], __ATOMIC_RELAXED) >= RECONCILE_NS;
  if (e == 0 && !due && S.attached) {
    int r = gs_region_reserve(S.region, S.proc, t->slot, bytes, NULL);
    if (r == -ESTALE) /* our entry was taken from us: reserve() takes a new one */
      S.attached = 0;
    reserved = r == 0;
  }
  gs_slice_unlock();
  if (e != 0)
    return gs_slot_refusal(e);
  if (!reserved && reserve(t->dev, t->slot, bytes, what, before_call) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  t->active = 1;
  t->bytes = bytes;
  return CUDA_SUCCESS;
}

/* Starts an allocation on the current context's device. Returns CUDA_SUCCESS with t->active
 * clear when there is nothing to count against (no context: the real call will say so). */
CUresult gs_ticket_open(struct gs_ticket *t, uint64_t bytes, const char *what) {
  memset(t, 0, sizeof(*t));
  gs_setup();
  if (gs_current_device(&t->dev, &t->ctx) < 0)
    return CUDA_SUCCESS;
  return ticket_open(t, bytes, what, 1);
}

/* The same for an explicit device (VMM, context creation). */
static CUresult ticket_open_on(struct gs_ticket *t, CUdevice dev, CUcontext ctx, uint64_t bytes,
                               const char *what, int before_call) {
  memset(t, 0, sizeof(*t));
  gs_setup();
  t->dev = dev;
  t->ctx = ctx;
  return ticket_open(t, bytes, what, before_call);
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
  gs_slice_lock();
  int e = gs_allocs_put(&S.allocs, &a);
  if (e == -EEXIST && gs_allocs_take(&S.allocs, kind, key, &stale) == 0) {
    /* Freed behind the hook's back (a path it does not see) and handed out again. */
    if (S.attached)
      gs_region_release(S.region, S.proc, stale.slot, stale.bytes);
    e = gs_allocs_put(&S.allocs, &a);
  }
  gs_slice_unlock();
  if (e < 0)
    gs_log(GS_LOG_ERROR, "cannot record an allocation: %s", strerror(-e));
  t->active = 0;
  return e;
}

int gs_forget(enum gs_alloc_kind kind, uint64_t key, struct gs_alloc *ret) {
  gs_slice_lock();
  int e = gs_allocs_take(&S.allocs, kind, key, ret);
  gs_slice_unlock();
  return e;
}

static void remember(const struct gs_alloc *a) {
  gs_slice_lock();
  gs_allocs_put(&S.allocs, a);
  gs_slice_unlock();
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
