/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's view of the cluster: nodes with their GPUs and what pods hold on them
 * (assigned, from gslice.io/assigned, or assumed between /bind and the watch's echo).
 * Fed by the watch (or the bench); read by the verbs under one read-write lock. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"
#include "place.h"
#include "podspec.h"

struct k8s_keys;

struct cluster_cfg {
  enum place_policy policy; /* when a pod does not say */
  uint64_t node_timeout_ms; /* --node-timeout */
  /* --priority-class: what the admin gives pods of each PriorityClass (podspec.h). */
  const struct podspec_class *classes;
  size_t nclasses;
  /* --signing-key: an assignment counts only when its gslice.io/assigned-signature verifies
   * for the pod's uid and node (and it agrees with the pod). NULL: assignments are taken
   * as written, for the bench's in-process cluster only; gslice-extender always has keys. */
  const struct k8s_keys *keys;
  /* --lease-namespace: the nodes' Leases are watched there (cluster_lease_event), and the view
   * is synced once they have been listed too. NULL: no Leases, every node judged by its
   * annotation's heartbeat (the bench). */
  const char *lease_namespace;
};

/* A node record that is gone (deleted, or a name only pods pointed at) and holds no pod is
 * forgotten this long after; its memory is given back a grace period later. */
#define CLUSTER_NODE_FORGET_MS (5 * 60 * 1000)
#define CLUSTER_NODE_GRACE_MS (60 * 1000)
/* A heartbeat before this (2000-01-01) or more than a day ahead of the wall clock is not a
 * time gslice-node wrote: the node is out of placement, with the reason. */
#define CLUSTER_HEARTBEAT_MIN 946684800
#define CLUSTER_HEARTBEAT_AHEAD_S 86400

struct cluster;

int cluster_new(const struct cluster_cfg *cfg, struct cluster **ret);
void cluster_free(struct cluster *c);

/* ---- feeding (watch thread, bench) ------------------------------------------------------ */

/* A watch event for a Node or a Pod: type ADDED, MODIFIED or DELETED (others
 * are ignored). now_ms is the monotonic clock, wall the real time (a new
 * heartbeat's age is judged by it once; then by when it changes). Malformed
 * objects are skipped (and logged through gs_log when log is true); a node with a
 * malformed gslice.io/gpus is kept out of placement with the reason. */
void cluster_node_event(struct cluster *c, const char *type, const json_t *node, uint64_t now_ms,
                        time_t wall, bool log);
void cluster_pod_event(struct cluster *c, const char *type, const json_t *pod, bool log);

/* A relist, one object at a time (a list comes in pages): begin, each listed
 * object, end. At the end what was not listed is gone, except pods assumed after
 * since_ms (their binding may be newer than the list). A relist that fails half
 * way only leaves records refreshed: nothing is dropped before an end. */
void cluster_relist_begin(struct cluster *c, bool nodes);
void cluster_node_relist_item(struct cluster *c, const json_t *node, uint64_t now_ms, time_t wall,
                              bool log);
void cluster_pod_relist_item(struct cluster *c, const json_t *pod, bool log);
void cluster_relist_end(struct cluster *c, bool nodes, uint64_t since_ms);

/* A node's liveness Lease (coordination.k8s.io/v1) in cfg.lease_namespace, as a watch event
 * (ADDED, MODIFIED, DELETED) or relist (begin, items, end) brings it. A Lease named
 * CLUSTER_LEASE_PREFIX<node> whose spec.holderIdentity is that node and whose spec.renewTime is
 * a time gslice-node can have written is believed: the node's liveness is its renewTime (aged by
 * the wall clock when first seen, then by when it changes). Any other Lease in the namespace
 * claims nothing: one for a node that does not exist stays on a placeholder, out of placement
 * like any such name; a node without a believed Lease is judged by its annotation's heartbeat,
 * as before Leases (gslice-node older than Leases, or one that cannot write its Lease). */
#define CLUSTER_LEASE_PREFIX "gslice-node-"
void cluster_lease_event(struct cluster *c, const char *type, const json_t *lease, uint64_t now_ms,
                         time_t wall, bool log);
void cluster_lease_relist_begin(struct cluster *c);
void cluster_lease_relist_item(struct cluster *c, const json_t *lease, uint64_t now_ms, time_t wall,
                               bool log);
void cluster_lease_relist_end(struct cluster *c);

/* /filter answers 503 until the lists (nodes, pods, and Leases when watched) have been read
 * once. */
void cluster_set_synced(struct cluster *c, bool nodes, bool pods);
void cluster_set_leases_synced(struct cluster *c);
bool cluster_synced(struct cluster *c);

/* ---- the verbs ---------------------------------------------------------------------------- */

/* The pod's request, for the verbs: 0, or -EINVAL with err (a malformed
 * request), or 1 when the pod asks for no gslice.io/gpu. */
int cluster_request(struct cluster *c, const json_t *pod, struct place_pod *ret, char *err,
                    size_t errlen);

/* Evaluates req on each named node at now_ms (verdicts[i] for names[i], without
 * reasons: see cluster_explain). ret_nodes (may be NULL) gets a handle per name
 * for cluster_explain (NULL: no such node). kube-scheduler sends the same list
 * of names call after call: the last list's nodes are remembered, so a repeated
 * list costs a string compare per node instead of a hash lookup. */
void cluster_eval(struct cluster *c, const struct place_pod *req, const char *const *names,
                  size_t n, uint64_t now_ms, struct place_verdict *verdicts,
                  const void **ret_nodes);

/* Why req does not fit a node (a handle from cluster_eval) now, in words, into buf
 * (the filter's FailedNodes); brief: without per-GPU figures (see place_verdict). */
void cluster_explain(struct cluster *c, const struct place_pod *req, const void *node,
                     uint64_t now_ms, bool brief, char *buf, size_t len);

/* The scores of the last filter, for the prioritize that kube-scheduler sends next
 * for the same pod with the nodes that passed (in the same order): a score is a
 * preference, and one a few ms old is as good (/bind re-checks the fit). Kept for
 * CLUSTER_MEMO_MS. put takes the handles and verdicts of cluster_eval. */
#define CLUSTER_MEMO_MS 2000
void cluster_memo_put(struct cluster *c, const char *pod_uid, const void *const *nodes,
                      const struct place_verdict *v, size_t n, uint64_t now_ms);
/* true and ret_scores[i] for names[i] when the memo covers them all. */
bool cluster_memo_get(struct cluster *c, const char *pod_uid, const char *const *names, size_t n,
                      uint64_t now_ms, int *ret_scores);

/* /bind's first half, under the node's bind lock (cluster_node_lock): re-checks
 * req on node_name, chooses the GPUs and holds them for the pod as assumed.
 * Returns 0 and the assignment, -ENOENT (unknown node), -ENOSPC (no longer
 * fits: err says why) or -ENOMEM. */
int cluster_reserve(struct cluster *c, const struct pod_id *id, const struct place_pod *req,
                    const char *node_name, uint64_t now_ms, struct k8s_assigned *ret, char *err,
                    size_t errlen);
/* Drops what cluster_reserve held (the binding failed). */
void cluster_unreserve(struct cluster *c, const struct pod_id *id);

/* The per-node lock /bind holds from re-check to the Binding's answer, so two
 * binds to one node never race for its last room. NULL for unknown nodes. */
void *cluster_node_lock(struct cluster *c, const char *node_name);
void cluster_node_unlock(void *lock);

/* The keys of cfg (NULL when none): /bind signs what it binds with the first. */
const struct k8s_keys *cluster_keys(struct cluster *c);

/* ---- reporting -------------------------------------------------------------------------- */

/* Prometheus text: per-namespace assigned memory and compute, nodes, GPUs. */
void cluster_metrics(struct cluster *c, struct gs_buf *out, uint64_t now_ms);

/* For tests and the bench: totals over every GPU of every node. */
struct cluster_totals {
  uint32_t nodes, stale_nodes, gpus, pods, assumed;
  uint32_t node_records; /* node records kept (present or not), for the sweep's tests */
  uint32_t forged_pods;  /* pods whose assignment is not counted (now) */
  uint64_t forged_total; /* assignments refused since start */
  uint64_t memory, mem_used;
  uint64_t compute_used;
};
void cluster_totals(struct cluster *c, uint64_t now_ms, struct cluster_totals *ret);

/* GPU-level figures for the bench: whole GPUs (no slice), and the free memory on
 * GPUs where a part of (fit_mem, fit_compute) no longer fits, split by why: no
 * compute left, or memory/slots too small although compute is left. */
struct cluster_gpu_stats {
  uint32_t gpus, whole_free;
  uint64_t memory, mem_used, compute_used;
  uint64_t stranded, stranded_compute_full, stranded_fragment;
};
void cluster_gpu_stats(struct cluster *c, uint64_t fit_mem, uint32_t fit_compute,
                       struct cluster_gpu_stats *ret);
