/* SPDX-License-Identifier: Apache-2.0 */
/* The slice's memory accounting region: one shared file per slice (GSLICE_STATE_DIR/memory.region)
 * holding each device's cap and one entry per process with the bytes it holds per device.
 *
 * Used by the hook (reserve/release around every allocation) and by the daemon (set the cap
 * live, read usage for status and metrics). Devices are keyed by their 16-byte UUID, never by
 * ordinal, because processes of one slice may see different CUDA_VISIBLE_DEVICES.
 *
 * Totals are never stored: a device's usage is the sum over live process entries, so a process
 * killed while holding the lock leaves nothing to repair but the lock itself (robust mutex). */
#pragma once
#include <stdint.h>
#include <sys/types.h>

/* Users of the region name devices and processes with these. */
#include "proc.h"
#include "uuid.h"

#define GS_REGION_FILE "memory.region"
#define GS_REGION_MAX_DEVICES 16
#define GS_REGION_MAX_PROCS 256
#define GS_REGION_UUID_LEN GS_UUID_LEN
/* The longest any call waits for the region's lock (held by a stopped process, or a lock word
 * someone overwrote) before returning -ETIMEDOUT. */
#define GS_REGION_LOCK_TIMEOUT_S 3
/* A device slot without a measured utilization (gs_region_set_util). */
#define GS_REGION_UTIL_NONE 0xffu
/* A device without a cap. */
#define GS_REGION_NO_CAP UINT64_MAX

struct gs_region;

/* Who set a device's cap. Once the daemon has set it, a process's GSLICE_MEMORY_LIMIT no longer
 * overrides it (gs_region_set_cap with GS_CAP_FROM_ENV is then a no-op returning -EPERM). */
enum gs_cap_source {
  GS_CAP_NONE = 0,
  GS_CAP_FROM_ENV = 1,
  GS_CAP_FROM_DAEMON = 2,
};

struct gs_region_device_info {
  unsigned slot;
  uint8_t uuid[GS_REGION_UUID_LEN];
  uint64_t cap;          /* GS_REGION_NO_CAP: no cap */
  uint64_t used;         /* sum over live process entries */
  uint64_t context_cost; /* last measured cost of one context on this device, 0 if unknown */
  enum gs_cap_source source;
};

struct gs_region_proc_info {
  unsigned slot;
  pid_t pid;                            /* in the pid namespace of the process that wrote it */
  uint64_t start_time;                  /* /proc/<pid>/stat field 22, clock ticks since boot */
  uint64_t pidns;                       /* inode of /proc/<pid>/ns/pid */
  uint64_t used[GS_REGION_MAX_DEVICES]; /* bytes per device slot */
};

/* Why a reservation was refused: enough for the one-line message. */
struct gs_region_denial {
  uint64_t used; /* the slice's usage on the device, without the request */
  uint64_t cap;  /* its cap */
};

/* Opens the region in `dir`, creating the directory (0700) and the file if missing. The file
 * appears atomically, fully initialized (written aside, then linked into place).
 * Returns 0, -EBADMSG (not a gslice region, or a corrupt one), -EPROTONOSUPPORT (another layout
 * version), or another -errno. */
int gs_region_open(const char *dir, struct gs_region **ret_region);
/* gs_region_open for a root daemon in a directory a user owns: the file is then given to
 * uid:gid through the descriptor it was opened and checked on (O_NOFOLLOW, fchown), never by
 * path: the user could swap the name for a link to any file between a check and a chown by
 * path. A file with other hard links is refused (-EMLINK): giving it away gives them too. */
int gs_region_open_as(const char *dir, uid_t uid, gid_t gid, struct gs_region **ret_region);
/* Opens an existing region only (the daemon's read side): -ENOENT when the slice has none. */
int gs_region_open_existing(const char *dir, struct gs_region **ret_region);
/* The daemon's handle. The file is the slice's to write, the daemon often root: it never waits
 * for the region's lock, which any process of the slice can hold (one stopped inside its critical
 * section would stall the daemon's loop), and never hands the lock to glibc (whose robust
 * mutexes keep list pointers inside the mutex, which the slice can rewrite: region.c). Reads take
 * no lock: each field is one aligned word its writers store whole, so a reader sees every value
 * as some writer left it, and a sum over entries may miss an update in flight, no more (status
 * and metrics). The layout's body is then checked by bounds as it is read, not at the open.
 * gs_region_set_cap stores the cap without the lock (the hooks read it at their next
 * reservation); adding a device (gs_region_device with create) takes the lock word once by
 * itself, without glibc: -EBUSY when it is held, for the caller to retry. A file grown past the
 * layout is cut back to it at the open (gs_region_cut). create: as gs_region_open; owner
 * (uid_t)-1: as is, else as gs_region_open_as. */
int gs_region_open_nowait(const char *dir, int create, uid_t owner, gid_t group,
                          struct gs_region **ret_region);
void gs_region_close(struct gs_region *region);
/* For a reader that survives SIGBUS (the daemon jumps out of a call when a slice truncates its
 * file under the mapping): frees what the gs_region_open* in progress on this thread held
 * (mapping, descriptor, handle) without touching the mapping; nothing when none was. After a
 * jump out of any other call, gs_region_close is safe: it does not touch the mapping either. */
void gs_region_forget_open(void);
/* The file behind the region (for messages). */
const char *gs_region_path(const struct gs_region *region);
/* Bytes a gs_region_open_nowait cut off the file's end (it had grown past the layout), else 0. */
uint64_t gs_region_cut(const struct gs_region *region);

/* Finds the device slot of `uuid`, adding it (no cap) when `create` is set and it is missing.
 * -ENOENT (absent, !create), -ENOSPC (no free slot). */
int gs_region_device(struct gs_region *region, const uint8_t uuid[GS_REGION_UUID_LEN], int create,
                     unsigned *ret_slot);
/* Sets a device's cap. New reservations obey it at once; what is held stays held.
 * From GS_CAP_FROM_ENV after the daemon set it: -EPERM and nothing changes. Through a nowait
 * handle (the daemon) without the lock: a process setting its GSLICE_MEMORY_LIMIT at that very
 * moment may overwrite it, so the daemon reads it back at its next look and writes it again. */
int gs_region_set_cap(struct gs_region *region, unsigned slot, uint64_t cap,
                      enum gs_cap_source source);
/* Records the measured cost of one context on the device (a hint for the next reservation). */
int gs_region_set_context_cost(struct gs_region *region, unsigned slot, uint64_t bytes);
/* One device's info, or all devices (up to `max`, the count in *ret_n). */
int gs_region_device_info(struct gs_region *region, unsigned slot,
                          struct gs_region_device_info *ret_info);
int gs_region_devices(struct gs_region *region, struct gs_region_device_info *out, unsigned max,
                      unsigned *ret_n);
/* Live process entries (up to `max`). Does not reclaim: a reader never changes the region. */
int gs_region_procs(struct gs_region *region, struct gs_region_proc_info *out, unsigned max,
                    unsigned *ret_n);

/* Takes a process entry for the calling process (pid + start time + pid namespace).
 * -EUSERS when all entries hold live processes. */
int gs_region_attach(struct gs_region *region, unsigned *ret_proc);

/* Adds `bytes` to entry `proc` on device `slot` if the slice stays within the cap (and, without
 * one, the device's sum within 2^64); otherwise
 * reclaims dead processes' entries (full check), tries once more, and returns -ENOMEM with
 * *ret_denial set. At most every 10 ms a call also drops entries of processes that are gone. */
int gs_region_reserve(struct gs_region *region, unsigned proc, unsigned slot, uint64_t bytes,
                      struct gs_region_denial *ret_denial);
/* Adds `bytes` whatever the cap (for memory the driver already holds and cannot give back);
 * -EOVERFLOW (nothing added) if the device's sum would pass 2^64. */
int gs_region_charge(struct gs_region *region, unsigned proc, unsigned slot, uint64_t bytes);
/* Gives back `bytes` (clamped at what the entry holds). */
int gs_region_release(struct gs_region *region, unsigned proc, unsigned slot, uint64_t bytes);
/* What entry `proc` holds on device `slot`. */
int gs_region_proc_used(struct gs_region *region, unsigned proc, unsigned slot,
                        uint64_t *ret_bytes);
/* Drops entries of dead processes of the caller's pid namespace (full check: exited, zombie,
 * or pid reused). Returns the number of entries reclaimed, or -errno. */
int gs_region_reclaim(struct gs_region *region);

/* The daemon's measured utilization of the slice: for each device slot the percent (0..100) of
 * a period ending at end_ns (CLOCK_MONOTONIC, period_ms long) that the slice's kernels ran, or
 * GS_REGION_UTIL_NONE. Stored without the lock (a nowait handle's way: each byte whole, the end
 * last), in bytes a region of before it leaves zero and never reads: an older hook ignores it,
 * and an older daemon's region reads as having none. */
int gs_region_set_util(struct gs_region *region, const uint8_t pct[GS_REGION_MAX_DEVICES],
                       uint64_t end_ns, uint32_t period_ms);
/* The last figure of device slot `slot` and the end of its period: 0, or -ENOENT when there is
 * none (never written, none for the slot, or a value out of range: the slice's processes can
 * write the file). Whether it is recent is the caller's to judge. */
int gs_region_util(struct gs_region *region, unsigned slot, unsigned *ret_pct,
                   uint64_t *ret_end_ns);
