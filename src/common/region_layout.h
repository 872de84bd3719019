/* SPDX-License-Identifier: Apache-2.0 */
/* The region's layout and lock, private to common/: region.c (the file: create, open, validate,
 * the robust lock) and region_books.c (what is kept in it) share these; every other user goes
 * through region.h. Nothing here is stable API: the file's layout is versioned by REGION_VERSION,
 * and a change to anything the file holds must bump it, but for one kind: a field put into bytes
 * every earlier layout of the same version leaves zero and never reads (padding), where zero
 * means "none" (struct region_util). */
#pragma once
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "region.h"

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

/* The daemon's measured utilization of the slice (gs_region_set_util). It lives in what layout 1
 * left as padding between the header and the lock: a hook or daemon of before it never reads
 * these bytes, and every region it created has them zero (memset, posix_fallocate), which reads
 * as "no figure": so the version stays 1 and old and new readers of either file stay correct.
 * Written by the daemon without the lock, each word whole, end_ns last (release): a reader that
 * loads end_ns first (acquire) never pairs a new end with an older percent. */
struct region_util {
  uint64_t end_ns;                    /* CLOCK_MONOTONIC end of the period measured; 0: none yet */
  uint32_t period_ms;                 /* its length */
  uint32_t reserved;                  /* zero */
  uint8_t pct[GS_REGION_MAX_DEVICES]; /* per device slot, 0..100; GS_REGION_UTIL_NONE: none */
};

/* The file, as mapped. The header (magic .. check) is written once at creation and validated on
 * every open; `util` is the daemon's, stored without the lock; everything after the lock changes
 * only under it. */
struct region_layout {
  uint64_t magic;
  uint32_t version;
  uint32_t size;
  uint32_t max_devices;
  uint32_t max_procs;
  uint32_t mutex_size;
  uint32_t check; /* FNV-1a of the fields above */
  struct region_util util;
  pthread_mutex_t lock __attribute__((aligned(64)));
  uint32_t proc_hint;     /* no entry at or past this index is in use */
  uint32_t repairs;       /* times a holder died with the lock */
  uint64_t last_sweep_ns; /* CLOCK_MONOTONIC of the last cheap liveness sweep */
  struct region_device dev[GS_REGION_MAX_DEVICES];
  struct region_proc proc[GS_REGION_MAX_PROCS];
};

/* util must sit in layout 1's padding, not move the lock: else a new layout version. */
_Static_assert(offsetof(struct region_layout, util) == 32, "region_util after the header");
_Static_assert(offsetof(struct region_layout, lock) == 64, "region_util past layout 1's padding");

struct gs_region {
  struct region_layout *map;
  int nowait;   /* gs_region_open_nowait: never hands the mutex to glibc (region.c) */
  uint64_t cut; /* bytes the open cut off a file grown past the layout (nowait handles only) */
  uint64_t pidns;
  char path[PATH_MAX];
};

/* The lock (region.c says how it is bounded and repaired): 0, or -ETIMEDOUT, -EBUSY (a nowait
 * handle: the lock word taken by hand, once, never through glibc) and other -errno from the
 * mutex. Cancellation is off while a glibc-held lock is held. */
int region_lock(struct gs_region *r);
void region_unlock(struct gs_region *r);
/* The lock for a reader: none for a nowait handle (see gs_region_open_nowait). */
int region_read_lock(struct gs_region *r);
void region_read_unlock(struct gs_region *r);
/* A fresh layout: header, an initialized process-shared robust mutex, no devices, no entries. */
void region_layout_init(struct region_layout *l);
/* Empties a process entry (its bytes leave the slice's usage). */
void region_proc_clear(struct region_proc *p);
