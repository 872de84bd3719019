/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's slices: their limits and owners, admission, and persistence to the state dir (atomic
 * write + rename). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define REGISTRY_FILE "slices.state"
#define REGISTRY_MAX 256

struct conn;

struct slice {
  uint32_t id;
  uint64_t nonce; /* random, never 0: the slice's identity beyond its id (proto.h) */
  struct gs_slice_spec spec;
  uid_t uid; /* owner: SO_PEERCRED of the registering client */
  gid_t gid;
  pid_t runner_pid;      /* the `gslice run` whose life is the slice's */
  uint64_t runner_start; /* its start time, so a reused pid is not mistaken for it */
  uint32_t memory_force; /* the cap was set below use with force */
  uint32_t flags;        /* enum gs_register_flag: held (no runner), any uid's hooks */
  bool region_broken;    /* truncated under the daemon: never read again (snapshot.c) */
  bool region_grown;     /* its region was found grown past its size and cut (logged once) */
  /* The daemon's own descriptor of the region file, held for the slice's life (snapshot.c,
   * region_hold): while one is open elsewhere, the kernel gives no process a lease on the file,
   * so no process of the slice can make the daemon's opens of it wait out a lease break. */
  bool region_held;
  int region_fd;
  bool cap_pending;            /* its cap is written, or read back, at housekeeping (snapshot.c) */
  char dir[GS_PROTO_PATH_MAX]; /* <state_dir>/slices/<id>, or held/<id> with flags */
  /* The connections that said HELLO as this slice's (conn.c links them, not saved): its token
   * and its processes are found without walking every connection of the daemon. */
  struct conn *conns;
  uint64_t unreported_warned_at; /* the charge check's last warning of it (charge.c) */
  /* Its idle holding (token.c): the last warning, and the totals at the last look. */
  uint64_t idle_warned_at, idle_look_at, idle_look_idle_ns, idle_look_held_ns;
};

struct registry {
  char state_dir[GS_PROTO_PATH_MAX];
  uint32_t max_slices;
  uint32_t next_id;
  uint32_t n;
  struct slice *slices[REGISTRY_MAX];
};

/* Starts from <state_dir>/slices.state if it exists. A file that does not
 * parse is refused (-EBADMSG, the line and reason in why) and left in place. */
int registry_load(struct registry *reg, const char *state_dir, uint32_t max_slices, char *why,
                  size_t why_len);
void registry_free(struct registry *reg);
/* Writes the registry atomically (temp file, fsync, rename). */
int registry_save(const struct registry *reg);

struct slice *registry_find(struct registry *reg, uint32_t id);

/* Whether spec fits beside the other slices (except `except_id`) on ngpus
 * GPUs: requests on a GPU sum to at most 100. -EINVAL/-ENODEV/-EBUSY with a
 * message that says what is committed already. */
int registry_admit(const struct registry *reg, const struct gs_slice_spec *spec, uint32_t except_id,
                   uint32_t ngpus, char *why, size_t why_len);
/* Sum of requests on one GPU. */
uint32_t registry_committed(const struct registry *reg, uint32_t gpu, uint32_t except_id);

/* Adds a slice (id assigned, spec normalized, dir made, owned by uid/gid when run as root):
 * <state_dir>/slices/<id> (0700), or with flags (enum gs_register_flag) <state_dir>/held/<id>
 * under a 0700 parent of the daemon's (0755 when GS_REGISTER_ANY_UID). Does not save. Returns 0,
 * -ENOSPC, -ENOMEM, -EPERM (a parent that is not the daemon's) or a mkdir error. */
int registry_add(struct registry *reg, const struct gs_slice_spec *spec, uint32_t flags, uid_t uid,
                 gid_t gid, pid_t runner_pid, uint64_t runner_start, struct slice **ret);
/* Removes a slice and its dir. Does not save. */
void registry_remove(struct registry *reg, uint32_t id);

/* The GPU index behind device ordinal `ordinal` of the slice (the k-th GPU of its mask, as
 * CUDA_VISIBLE_DEVICES orders them; proto.h, "GPU numbering"): the one conversion of an
 * arriving ordinal. -ENODEV if none. */
int slice_gpu(const struct slice *s, uint32_t ordinal, uint32_t *ret_gpu);
/* The other way: the slice's device ordinal of GPU index `gpu` (one of its mask), the one
 * conversion of a departing one. */
uint32_t slice_ordinal(const struct slice *s, uint32_t gpu);
/* Its GPU mask, GPU 0 when empty. */
uint32_t slice_mask(const struct slice *s);
/* Names: letters, digits, '.', '_', '-'; at most 63. */
int slice_name_ok(const char *name);
