/* SPDX-License-Identifier: Apache-2.0 */
/* The cluster view's records, private to it: cluster.c (keeping them as events and relists
 * arrive), cluster_place.c (the scheduler's questions) and cluster_report.c (totals, metrics)
 * share these; everything else goes through cluster.h. Every field is read under c->lock
 * (rdlock) and changed under it (wrlock), except where a field's comment says otherwise. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cluster.h"
#include "smap.h"

struct xpod;

struct xnode {
  char name[K8S_NAME_MAX];
  bool present;       /* the Node object exists (else: a placeholder its pods point to) */
  bool seen_relist;   /* during a relist */
  char unusable[256]; /* "" when usable */
  time_t hb;          /* heartbeat value last seen */
  /* Liveness: from the node's Lease when one is believed (cluster_lease.c), else from the
   * annotation's heartbeat; each the view's clock when its time last changed (the first one
   * seen aged by the wall clock). pn.heartbeat_ms is the one that counts (xnode_liveness). */
  uint64_t annot_ms, lease_ms;
  bool lease;              /* a Lease believed */
  bool lease_seen_relist;  /* during a relist of Leases */
  char lease_renew[40];    /* its spec.renewTime last seen */
  char lease_refused[128]; /* why the Lease last seen is not believed (said once) */
  struct place_node pn;
  struct place_gpu *gpus;
  struct xpod *pods; /* held on this node */
  pthread_mutex_t bind_lock;
  uint64_t gone_ms;         /* when it was last present, or made a placeholder */
  uint64_t buried_ms;       /* out of the map since (on c->graves) */
  struct xnode *grave_next; /* on c->graves */
};

struct xpod {
  char key[2 * K8S_NAME_MAX + 2]; /* ns/name */
  struct pod_id id;
  bool seen_relist;
  /* Bound or assumed: what it holds, and where. */
  struct k8s_assigned a;
  bool held;
  bool assumed;
  uint64_t assumed_ms;
  struct xnode *node;
  struct xpod *prev, *next; /* on node->pods */
  uint64_t mem_total;       /* what it was assigned, for per-namespace quota metrics */
  uint32_t compute_total;
  /* Bound with an assignment that does not count (unsigned, signed for another pod or
   * node, or not what the pod declares): held is false. */
  bool forged;
  char forged_why[96]; /* the start of the last refusal's reason: a new one is logged */
};

struct cluster {
  struct cluster_cfg cfg;
  pthread_rwlock_t lock;
  /* The nodes of the last list of names evaluated (records live as long as the
   * cluster, so the pointers stay good); one filter at a time uses it. */
  pthread_mutex_t names_lock;
  struct xnode **last;
  size_t nlast;
  /* cluster_memo_put/get */
  pthread_mutex_t memo_lock;
  char memo_uid[POD_UID_MAX];
  uint64_t memo_ms;
  const struct xnode **memo_nodes;
  int *memo_scores;
  size_t memo_n, memo_cap;
  struct smap nodes, pods;
  bool synced_nodes, synced_pods, synced_leases;
  /* The view's clock: the latest now_ms a node event brought (pod events bring none). */
  uint64_t now_ms;
  /* Node records out of the map, freed CLUSTER_NODE_GRACE_MS later (a verb may still hold
   * a handle from before); free_gen counts removals, last_gen (under names_lock) the
   * removals c->last has been cleared for. */
  struct xnode *graves;
  uint64_t free_gen, last_gen, sweep_ms;
  uint64_t forged_total;
};

/* Under c->lock (wrlock to create): the record of node `name` (a placeholder when create and it
 * is not known yet), or NULL. */
struct xnode *xnode_get(struct cluster *c, const char *name, bool create);
/* The same for a pod. */
struct xpod *xpod_get(struct cluster *c, const struct pod_id *id, bool create);
/* p holds a (taken over: *a is left empty) on node n, instead of what it held. */
void xpod_hold(struct xpod *p, struct xnode *n, struct k8s_assigned *a);
/* p holds nothing any more; its node's usage drops by what it held. */
void xpod_unhold(struct xpod *p);
/* Under wrlock: n's pn.heartbeat_ms from its Lease when one is believed, else its annotation. */
void xnode_liveness(struct xnode *n);
/* Under wrlock: the time of a first heartbeat `at` (wall clock) on the view's clock now_ms. */
uint64_t xnode_first_beat(uint64_t now_ms, time_t wall, time_t at);
