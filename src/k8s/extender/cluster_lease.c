/* SPDX-License-Identifier: Apache-2.0 */
/* The nodes' liveness Leases in the cluster view (cluster.h, cluster_lease_event): which Lease
 * is believed, and the liveness it gives its node. */
#include "cluster_records.h"

#include <stdio.h>
#include <string.h>

#include "kube.h"
#include "log.h"

/* The node a Lease speaks for, and whether it is believed: NULL (no node: not one of ours), or
 * the node's name with *why "" (believed) or the reason it is not. */
static const char *lease_node(const json_t *lease, time_t wall, time_t *ret_renew,
                              const char **ret_renew_text, char *why, size_t why_len) {
  const char *name = kube_meta_str(lease, "name");
  size_t pl = strlen(CLUSTER_LEASE_PREFIX);

  why[0] = 0;
  if (!name || strncmp(name, CLUSTER_LEASE_PREFIX, pl) != 0 || !name[pl])
    return NULL;
  const char *node = name + pl;
  json_t *spec = kube_json_get(lease, "spec");
  json_t *holder = spec ? kube_json_get(spec, "holderIdentity") : NULL;
  json_t *renew = spec ? kube_json_get(spec, "renewTime") : NULL;
  if (!json_is_string(holder) || strcmp(json_string_value(holder), node) != 0) {
    snprintf(why, why_len, "its holderIdentity is %s%.64s%s, not the node",
             json_is_string(holder) ? "\"" : "",
             json_is_string(holder) ? json_string_value(holder) : "not set",
             json_is_string(holder) ? "\"" : "");
    return node;
  }
  if (!json_is_string(renew) || k8s_time_parse(json_string_value(renew), ret_renew) < 0 ||
      *ret_renew < CLUSTER_HEARTBEAT_MIN || *ret_renew > wall + CLUSTER_HEARTBEAT_AHEAD_S) {
    snprintf(why, why_len, "its renewTime is not a time gslice-node wrote");
    return node;
  }
  *ret_renew_text = json_string_value(renew);
  return node;
}

static void lease_drop(struct xnode *n) {
  n->lease = false;
  n->lease_renew[0] = 0;
  xnode_liveness(n);
}

/* Under wrlock. */
static void lease_update(struct cluster *c, const json_t *lease, uint64_t now_ms, time_t wall,
                         bool log) {
  char why[sizeof(((struct xnode *)0)->lease_refused)];
  const char *renew_text = NULL;
  time_t renew = 0;
  const char *node = lease_node(lease, wall, &renew, &renew_text, why, sizeof why);
  if (!node)
    return;
  struct xnode *n = xnode_get(c, node, true);
  if (!n)
    return;
  n->lease_seen_relist = true;
  if (why[0]) {
    if (log && strcmp(n->lease_refused, why) != 0)
      gs_log(GS_LOG_WARNING,
             "Lease %s%s: %s; not believed (the node is judged by its %s heartbeat)",
             CLUSTER_LEASE_PREFIX, node, why, K8S_ANNOT_GPUS);
    snprintf(n->lease_refused, sizeof n->lease_refused, "%s", why);
    lease_drop(n);
    return;
  }
  n->lease_refused[0] = 0;
  if (!n->lease)
    n->lease_ms = xnode_first_beat(now_ms, wall, renew);
  else if (strncmp(n->lease_renew, renew_text, sizeof n->lease_renew - 1) != 0)
    n->lease_ms = now_ms;
  snprintf(n->lease_renew, sizeof n->lease_renew, "%s", renew_text);
  n->lease = true;
  xnode_liveness(n);
}

static void clock_to(struct cluster *c, uint64_t now_ms) {
  if (now_ms > c->now_ms)
    c->now_ms = now_ms;
}

void cluster_lease_event(struct cluster *c, const char *type, const json_t *lease, uint64_t now_ms,
                         time_t wall, bool log) {
  pthread_rwlock_wrlock(&c->lock);
  clock_to(c, now_ms);
  if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
    lease_update(c, lease, now_ms, wall, log);
  } else if (strcmp(type, "DELETED") == 0) {
    const char *name = kube_meta_str(lease, "name");
    size_t pl = strlen(CLUSTER_LEASE_PREFIX);
    struct xnode *n = name && strncmp(name, CLUSTER_LEASE_PREFIX, pl) == 0
                          ? xnode_get(c, name + pl, false)
                          : NULL;
    if (n)
      lease_drop(n);
  }
  pthread_rwlock_unlock(&c->lock);
}

void cluster_lease_relist_begin(struct cluster *c) {
  pthread_rwlock_wrlock(&c->lock);
  SMAP_EACH(&c->nodes, e) {
    ((struct xnode *)e->value)->lease_seen_relist = false;
  }
  pthread_rwlock_unlock(&c->lock);
}

void cluster_lease_relist_item(struct cluster *c, const json_t *lease, uint64_t now_ms, time_t wall,
                               bool log) {
  pthread_rwlock_wrlock(&c->lock);
  clock_to(c, now_ms);
  lease_update(c, lease, now_ms, wall, log);
  pthread_rwlock_unlock(&c->lock);
}

void cluster_lease_relist_end(struct cluster *c) {
  pthread_rwlock_wrlock(&c->lock);
  SMAP_EACH(&c->nodes, e) {
    struct xnode *n = e->value;
    if (n->lease && !n->lease_seen_relist)
      lease_drop(n);
  }
  pthread_rwlock_unlock(&c->lock);
}

void cluster_set_leases_synced(struct cluster *c) {
  pthread_rwlock_wrlock(&c->lock);
  c->synced_leases = true;
  pthread_rwlock_unlock(&c->lock);
}
