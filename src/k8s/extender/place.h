/* SPDX-License-Identifier: Apache-2.0 */
/* Placement of a pod's slices on a node's GPUs: pure policy over plain structs and a
 * clock value, no I/O (the extender's cluster view and the bench both drive it). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "annot.h"

/* What one pod may ask for in all: containers x GPUs each. */
#define PLACE_MAX_SHARES 256
#define PLACE_REASON_MAX 1024
#define PLACE_SCORE_MAX 10 /* kube-scheduler's MaxExtenderPriority */

enum place_policy {
  PLACE_BINPACK, /* fill used GPUs and nodes first: whole GPUs stay free */
  PLACE_SPREAD,  /* emptiest node and GPU first: least contention */
  PLACE_FIRSTFIT /* lowest GPU index that fits (a baseline for the bench) */
};

/* One GPU of a node and what is held on it (assigned + assumed). */
struct place_gpu {
  uint32_t index;
  char uuid[K8S_UUID_MAX];
  uint64_t memory; /* bytes a slice may be given */
  bool healthy;
  uint32_t slots; /* most slices it takes */
  uint64_t mem_used;
  uint32_t compute_used; /* % */
  uint32_t slices;
};

struct place_node {
  const char *name;
  /* Non-NULL: the node cannot take slices at all, and why (no or a broken
   * gslice.io/gpus annotation); preemption would not help. */
  const char *unusable;
  uint64_t heartbeat_ms; /* when its heartbeat last changed, on the caller's clock */
  uint32_t ngpus;
  struct place_gpu *gpus;
};

/* One container that asks for gslice.io/gpu. memory and compute are the
 * container's totals over its ngpus GPUs (what quota counts). */
struct place_container {
  char name[K8S_NAME_MAX];
  bool init;
  /* An init container with restartPolicy Always (a native sidecar): it starts in its turn among
   * the init containers and runs beside everything after it, to the pod's end. init is true. */
  bool sidecar;
  uint32_t ngpus;
  uint64_t memory;
  uint32_t compute;
  uint32_t compute_limit; /* % of each GPU */
  enum k8s_priority priority;
  uint32_t weight;
};

struct place_pod {
  uint32_t ncontainers;
  struct place_container *containers;
  enum place_policy policy;
};

struct place_cfg {
  uint64_t node_timeout_ms; /* a heartbeat older than this takes the node out */
};

/* One container's part on one GPU. Parts of a container follow its order of
 * GPUs; the first ones take the remainder of the split. */
struct place_share {
  uint32_t container; /* index into pod->containers */
  uint32_t gpu;       /* index into node->gpus (not the GPU's own index) */
  uint64_t memory;
  uint32_t compute;
};

struct place_choice {
  uint32_t nshares;
  struct place_share shares[PLACE_MAX_SHARES];
};

enum place_cause {
  PLACE_FITS,
  PLACE_NO_ROOM,  /* its GPUs lack room (for now, or for good: unresolvable) */
  PLACE_UNUSABLE, /* node->unusable */
  PLACE_STALE     /* heartbeat older than node_timeout_ms */
};

struct place_verdict {
  bool fits;
  enum place_cause cause;
  bool unresolvable; /* would not fit even with no other pod on the node */
  int score;         /* 0..PLACE_SCORE_MAX when it fits */
  /* The caller's buffer for why it does not fit (PLACE_REASON_MAX is plenty), or
   * NULL when no reason is wanted: then the verdict costs a fraction. */
  char *reason;
  size_t reason_len;
  /* With a reason: the same words for every node that fails for room (no per-GPU
   * figures), so that kube-scheduler's message, which counts identical reasons,
   * stays short over thousands of nodes. */
  bool brief;
};

/* Checks a pod against what the placement can do at all: 0 or -EINVAL with
 * err saying which container and field (compute limit below the per-GPU
 * compute, too many GPUs or shares...). */
int place_pod_check(const struct place_pod *pod, char *err, size_t errlen);

/* Whether and how well pod fits node at now_ms. ret_choice (may be NULL) gets
 * the GPUs chosen, by the pod's policy. */
void place_eval(const struct place_cfg *cfg, const struct place_node *node,
                const struct place_pod *pod, uint64_t now_ms, struct place_verdict *ret,
                struct place_choice *ret_choice);

/* What a placed pod holds on each GPU of its node, as Kubernetes counts a pod's effective
 * request (KEP-753): init containers start one at a time in their order; a regular one ends
 * before the next starts, a sidecar keeps running. So each GPU holds the most of any phase:
 * max(each regular init container's part + the parts of the sidecars before it, the app
 * containers' parts + all the sidecars' parts), memory, compute and slices each.
 * Adds (sign +1) or removes (-1) that from node's usage. Shares name GPUs by
 * their position in node->gpus. */
void place_apply(struct place_node *node, const struct place_pod *pod,
                 const struct place_share *shares, uint32_t nshares, int sign);

/* The per-GPU split of a container's totals: part j of n. */
uint64_t place_split_u64(uint64_t total, uint32_t n, uint32_t j);
uint32_t place_split_u32(uint32_t total, uint32_t n, uint32_t j);
/* a + b, or the type's largest value where that would wrap: every sum of parts in the cluster
 * view and placement is one of these (parts from many pods must never wrap a counter). */
uint64_t place_sat_add(uint64_t a, uint64_t b);
uint32_t place_sat_add32(uint32_t a, uint32_t b);

/* "binpack" / "spread" -> enum; 0 or -EINVAL. */
int place_policy_parse(const char *text, enum place_policy *ret);
const char *place_policy_name(enum place_policy p);
