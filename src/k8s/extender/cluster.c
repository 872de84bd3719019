/* SPDX-License-Identifier: Apache-2.0 */
/* The cluster view (cluster.h): its records of nodes and pods (cluster_records.h), kept up to date
 * from watch events and relists, each node's usage the sum of its pods' holdings (place_apply),
 * one rwlock over it all. Answering the scheduler is cluster_place.c's, reporting
 * cluster_report.c's; this file only keeps the records. */
#include "cluster_records.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"
#include "log.h"
#include "podcheck.h"
#include "sign.h"

int cluster_new(const struct cluster_cfg *cfg, struct cluster **ret) {
  struct cluster *c = calloc(1, sizeof(*c));
  if (!c)
    return -ENOMEM;
  c->cfg = *cfg;
  pthread_rwlock_init(&c->lock, NULL);
  pthread_mutex_init(&c->names_lock, NULL);
  pthread_mutex_init(&c->memo_lock, NULL);
  *ret = c;
  return 0;
}

static void pod_free(struct xpod *p) {
  k8s_assigned_free(&p->a);
  free(p);
}

static void node_free(struct xnode *n) {
  pthread_mutex_destroy(&n->bind_lock);
  free(n->gpus);
  free(n);
}

void cluster_free(struct cluster *c) {
  if (!c)
    return;
  SMAP_EACH(&c->pods, e) {
    pod_free(e->value);
    free(e->key);
    free(e);
  }
  SMAP_EACH(&c->nodes, e) {
    node_free(e->value);
    free(e->key);
    free(e);
  }
  while (c->graves) {
    struct xnode *n = c->graves;
    c->graves = n->grave_next;
    node_free(n);
  }
  free(c->pods.b);
  free(c->nodes.b);
  free(c->last);
  free(c->memo_nodes);
  free(c->memo_scores);
  pthread_mutex_destroy(&c->memo_lock);
  pthread_mutex_destroy(&c->names_lock);
  pthread_rwlock_destroy(&c->lock);
  free(c);
}

struct xnode *xnode_get(struct cluster *c, const char *name, bool create) {
  struct xnode *n = smap_get(&c->nodes, name);
  if (n || !create || strlen(name) >= sizeof n->name)
    return n;
  n = calloc(1, sizeof(*n));
  if (!n)
    return NULL;
  strcpy(n->name, name);
  n->pn.name = n->name;
  pthread_mutex_init(&n->bind_lock, NULL);
  n->gone_ms = c->now_ms;
  snprintf(n->unusable, sizeof n->unusable, "no such node");
  n->pn.unusable = n->unusable;
  if (smap_put(&c->nodes, name, n)) {
    free(n);
    return NULL;
  }
  return n;
}

/* ---- holdings ------------------------------------------------------------------------------ */

/* Adds (sign +1) or removes (-1) what p holds to its node's GPUs. */
static void hold_apply(struct xpod *p, int sign) {
  struct place_share shares[PLACE_MAX_SHARES];
  struct place_pod pp;
  uint32_t n;

  if (!p->node || !p->node->gpus)
    return;
  if (podspec_from_assignment(&p->a, &p->node->pn, &pp, shares, &n))
    return;
  place_apply(&p->node->pn, &pp, shares, n, sign);
  podspec_request_free(&pp);
}

void xpod_unhold(struct xpod *p) {
  if (!p->held)
    return;
  hold_apply(p, -1);
  if (p->prev)
    p->prev->next = p->next;
  else if (p->node)
    p->node->pods = p->next;
  if (p->next)
    p->next->prev = p->prev;
  p->prev = p->next = NULL;
  p->node = NULL;
  p->held = false;
  p->assumed = false;
  k8s_assigned_free(&p->a);
}

/* p holds a (taken over) on node n. */
void xpod_hold(struct xpod *p, struct xnode *n, struct k8s_assigned *a) {
  xpod_unhold(p);
  p->a = *a;
  *a = (struct k8s_assigned){0};
  p->node = n;
  p->next = n->pods;
  if (n->pods)
    n->pods->prev = p;
  n->pods = p;
  p->prev = NULL;
  p->held = true;
  p->mem_total = 0;
  p->compute_total = 0;
  for (uint32_t i = 0; i < p->a.ncontainers; i++)
    for (uint32_t j = 0; j < p->a.containers[i].ngpus; j++) {
      p->mem_total = place_sat_add(p->mem_total, p->a.containers[i].gpus[j].memory);
      p->compute_total = place_sat_add32(p->compute_total, p->a.containers[i].gpus[j].compute);
    }
  hold_apply(p, +1);
}

/* The node's GPUs changed: usage is summed again from its pods. */
static void node_recount(struct xnode *n) {
  for (uint32_t i = 0; i < n->pn.ngpus; i++) {
    n->gpus[i].mem_used = 0;
    n->gpus[i].compute_used = 0;
    n->gpus[i].slices = 0;
  }
  for (struct xpod *p = n->pods; p; p = p->next)
    hold_apply(p, +1);
}

/* ---- nodes ------------------------------------------------------------------------------- */

uint64_t xnode_first_beat(uint64_t now_ms, time_t wall, time_t at) {
  uint64_t age_ms = wall > at ? (uint64_t)(wall - at) * 1000 : 0;
  return now_ms > age_ms ? now_ms - age_ms : 0;
}

void xnode_liveness(struct xnode *n) {
  n->pn.heartbeat_ms = n->lease ? n->lease_ms : n->annot_ms;
}

static bool same_gpus(const struct xnode *n, const struct k8s_node_gpus *g) {
  if (n->pn.ngpus != g->ngpus || !n->gpus)
    return false;
  for (uint32_t i = 0; i < g->ngpus; i++) {
    const struct place_gpu *a = &n->gpus[i];
    const struct k8s_gpu *b = &g->gpus[i];
    if (a->index != b->index || strcmp(a->uuid, b->uuid) != 0 || a->memory != b->memory ||
        a->healthy != b->healthy || a->slots != b->slots)
      return false;
  }
  return true;
}

static void node_update(struct cluster *c, const json_t *obj, uint64_t now_ms, time_t wall,
                        bool log) {
  const char *name = kube_meta_str(obj, "name"), *text;
  struct k8s_node_gpus *g = NULL;
  char err[K8S_ERR_MAX];
  struct xnode *n;

  if (!name)
    return;
  n = xnode_get(c, name, true);
  if (!n)
    return;
  n->present = true;
  n->seen_relist = true;
  text = kube_annotation(obj, K8S_ANNOT_GPUS);
  if (!text) {
    snprintf(n->unusable, sizeof n->unusable,
             "no %s annotation (is gslice-node running on the node?)", K8S_ANNOT_GPUS);
    n->pn.unusable = n->unusable;
    return;
  }
  g = malloc(sizeof(*g));
  if (!g)
    return;
  if (k8s_node_gpus_decode(text, g, err, sizeof err)) {
    if (log && strcmp(n->unusable, err) != 0)
      gs_log(GS_LOG_WARNING, "node %s: %s; the node is out of placement", name, err);
    snprintf(n->unusable, sizeof n->unusable, "%s", err);
    n->pn.unusable = n->unusable;
    free(g);
    return;
  }
  if (g->heartbeat < CLUSTER_HEARTBEAT_MIN || g->heartbeat > wall + CLUSTER_HEARTBEAT_AHEAD_S) {
    char hb[32];
    k8s_time_format(g->heartbeat, hb, sizeof hb);
    snprintf(err, sizeof err,
             "%s: heartbeat %s is not a time gslice-node wrote (before 2000, or more than a "
             "day ahead of this clock)",
             K8S_ANNOT_GPUS, hb);
    if (log && strcmp(n->unusable, err) != 0)
      gs_log(GS_LOG_WARNING, "node %s: %s; the node is out of placement", name, err);
    snprintf(n->unusable, sizeof n->unusable, "%s", err);
    n->pn.unusable = n->unusable;
    n->hb = 0;
    free(g);
    return;
  }
  /* Heartbeat age: by the node's clock once, when first seen; afterwards by
   * when this process saw the value change, so clock skew cannot age a node. */
  if (!n->hb || n->unusable[0])
    n->annot_ms = xnode_first_beat(now_ms, wall, g->heartbeat);
  else if (g->heartbeat != n->hb)
    n->annot_ms = now_ms;
  n->hb = g->heartbeat;
  xnode_liveness(n);
  n->unusable[0] = 0;
  n->pn.unusable = NULL;
  if (!same_gpus(n, g)) {
    struct place_gpu *gpus = calloc(g->ngpus ? g->ngpus : 1, sizeof(*gpus));
    if (!gpus) {
      free(g);
      return;
    }
    for (uint32_t i = 0; i < g->ngpus; i++) {
      gpus[i].index = g->gpus[i].index;
      memcpy(gpus[i].uuid, g->gpus[i].uuid, sizeof gpus[i].uuid);
      gpus[i].memory = g->gpus[i].memory;
      gpus[i].healthy = g->gpus[i].healthy;
      gpus[i].slots = g->gpus[i].slots;
    }
    free(n->gpus);
    n->gpus = gpus;
    n->pn.gpus = gpus;
    n->pn.ngpus = g->ngpus;
    node_recount(n);
  }
  free(g);
}

static void node_gone(struct cluster *c, struct xnode *n) {
  /* Its pods keep pointing at it: they still hold what they hold if it comes back. */
  n->present = false;
  n->gone_ms = c->now_ms;
  snprintf(n->unusable, sizeof n->unusable, "no such node");
  n->pn.unusable = n->unusable;
  n->hb = 0;
}

/* Under wrlock: forgets node records gone for CLUSTER_NODE_FORGET_MS that no pod holds on
 * (every name ever seen would otherwise stay for good), and frees those forgotten more than
 * CLUSTER_NODE_GRACE_MS ago. At most every 10 s: a walk of every node. */
static void nodes_sweep(struct cluster *c, uint64_t now_ms) {
  if (c->sweep_ms && now_ms >= c->sweep_ms && now_ms - c->sweep_ms < 10000)
    return;
  c->sweep_ms = now_ms;
  for (struct xnode **pp = &c->graves; *pp;) {
    struct xnode *n = *pp;
    /* A bind still holding its lock (found before the node left the map) keeps it. */
    if (now_ms >= n->buried_ms && now_ms - n->buried_ms >= CLUSTER_NODE_GRACE_MS &&
        pthread_mutex_trylock(&n->bind_lock) == 0) {
      pthread_mutex_unlock(&n->bind_lock);
      *pp = n->grave_next;
      node_free(n);
    } else {
      pp = &n->grave_next;
    }
  }
  SMAP_EACH(&c->nodes, e) {
    struct xnode *n = e->value;
    if (n->present || n->pods || now_ms < n->gone_ms ||
        now_ms - n->gone_ms < CLUSTER_NODE_FORGET_MS)
      continue;
    smap_del(&c->nodes, n->name);
    n->buried_ms = now_ms;
    n->grave_next = c->graves;
    c->graves = n;
    c->free_gen++;
  }
}

static void clock_to(struct cluster *c, uint64_t now_ms) {
  if (now_ms > c->now_ms)
    c->now_ms = now_ms;
}

void cluster_node_event(struct cluster *c, const char *type, const json_t *node, uint64_t now_ms,
                        time_t wall, bool log) {
  pthread_rwlock_wrlock(&c->lock);
  clock_to(c, now_ms);
  if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
    node_update(c, node, now_ms, wall, log);
  } else if (strcmp(type, "DELETED") == 0) {
    const char *name = kube_meta_str(node, "name");
    struct xnode *n = name ? xnode_get(c, name, false) : NULL;
    if (n)
      node_gone(c, n);
  }
  nodes_sweep(c, now_ms);
  pthread_rwlock_unlock(&c->lock);
}

/* ---- pods ------------------------------------------------------------------------------------ */

struct xpod *xpod_get(struct cluster *c, const struct pod_id *id, bool create) {
  char key[sizeof(((struct xpod *)0)->key)];
  struct xpod *p;
  snprintf(key, sizeof key, "%s/%s", id->ns, id->name);
  p = smap_get(&c->pods, key);
  if (p || !create)
    return p;
  p = calloc(1, sizeof(*p));
  if (!p)
    return NULL;
  memcpy(p->key, key, sizeof key);
  p->id = *id;
  if (smap_put(&c->pods, key, p)) {
    free(p);
    return NULL;
  }
  return p;
}

static void pod_remove(struct cluster *c, struct xpod *p) {
  xpod_unhold(p);
  smap_del(&c->pods, p->key);
  pod_free(p);
}

/* Whether a (decoded from text) is one the extender made for this pod, on its node, and
 * agrees with what the pod declares: 0, or -EPERM / -EINVAL with err. */
static int assignment_trusted(const struct cluster *c, const json_t *obj, const struct pod_id *id,
                              const char *text, const struct k8s_assigned *a, char *err,
                              size_t errlen) {
  int rc;
  if (!c->cfg.keys)
    return 0; /* the bench's cluster: taken as written */
  rc = k8s_assigned_verify(c->cfg.keys, id->uid, id->node, text,
                           kube_annotation(obj, K8S_ANNOT_ASSIGNED_SIG), err, errlen);
  if (rc)
    return rc;
  return k8s_assigned_check_pod(a, obj, err, errlen);
}

/* p's assignment does not count: it holds nothing; a refusal for a new reason is counted
 * and logged (the same one again, at every status update of the pod, is not). */
static void pod_refuse(struct cluster *c, struct xpod *p, const char *why, bool log) {
  xpod_unhold(p);
  if (!p->forged || strncmp(p->forged_why, why, sizeof p->forged_why - 1) != 0) {
    p->forged = true;
    /* Its start only (what the comparison above looks at): cut on purpose. */
    snprintf(p->forged_why, sizeof p->forged_why, "%.*s", (int)sizeof p->forged_why - 1, why);
    c->forged_total++;
    if (log)
      gs_log(GS_LOG_WARNING, "pod %s (uid %s): %s; its %s is not counted", p->key,
             p->id.uid[0] ? p->id.uid : "?", why, K8S_ANNOT_ASSIGNED);
  }
}

/* A bound pod with an assignment: counted when it is one this cluster's signing keys vouch
 * for and the pod declares, else refused. */
static void pod_assigned(struct cluster *c, struct xpod *p, const struct pod_id *id,
                         const json_t *obj, const char *text, bool log) {
  struct k8s_assigned a;
  char err[K8S_ERR_MAX];
  /* The same incarnation on the same node as the holding we counted. */
  bool same_pod = p->held && id->uid[0] && strcmp(p->id.uid, id->uid) == 0 &&
                  strcmp(p->node->name, id->node) == 0;
  if (strcmp(p->id.uid, id->uid) != 0)
    p->forged = false; /* another incarnation: judged afresh */
  if (!p->forged)
    p->forged_why[0] = 0;
  p->id = *id;
  p->seen_relist = true;
  if (k8s_assigned_decode(text, &a, err, sizeof err)) {
    pod_refuse(c, p, err, log);
    return;
  }
  if (strcmp(a.node, id->node) != 0) {
    char why[2 * K8S_NAME_MAX + 64];
    snprintf(why, sizeof why, "it is on node %s but %s names node %s", id->node, K8S_ANNOT_ASSIGNED,
             a.node);
    pod_refuse(c, p, why, log);
  } else if (assignment_trusted(c, obj, id, text, &a, err, sizeof err)) {
    if (same_pod && !p->assumed) {
      /* A bound pod's annotation edited after the fact changes nothing: it still holds
       * what it was given (gslice-node keeps the slice it made). */
      if (log && !p->forged)
        gs_log(GS_LOG_WARNING,
               "pod %s: %s was changed after binding (%s); it still holds what it was assigned",
               p->key, K8S_ANNOT_ASSIGNED, err);
      p->forged = true;
    } else {
      pod_refuse(c, p, err, log);
    }
  } else if (p->held && strcmp(p->node->name, id->node) == 0 && k8s_assigned_equal(&a, &p->a)) {
    p->assumed = false; /* the watch's echo of our binding, or a status update */
    p->forged = false;
  } else {
    struct xnode *n = xnode_get(c, id->node, true);
    p->forged = false;
    if (n)
      xpod_hold(p, n, &a);
  }
  k8s_assigned_free(&a);
}

static void pod_update(struct cluster *c, const json_t *obj, bool log) {
  struct pod_id id;
  struct xpod *p;
  char err[K8S_ERR_MAX];
  const char *text;

  if (podspec_id(obj, &id, err, sizeof err))
    return;
  p = xpod_get(c, &id, false);
  if (id.done) {
    /* Finished pods hold nothing. */
    if (p)
      pod_remove(c, p);
    return;
  }
  text = kube_annotation(obj, K8S_ANNOT_ASSIGNED);
  if (id.node[0] && text) {
    if (p || (p = xpod_get(c, &id, true)))
      pod_assigned(c, p, &id, obj, text, log);
    return;
  }
  if (p && p->assumed) {
    /* An event older than the binding being written: the reservation stays. */
    p->seen_relist = true;
    return;
  }
  /* Pending, or bound without our annotation (another scheduler, nodeName set by hand):
   * it holds nothing we know of. */
  if (p)
    pod_remove(c, p);
}

void cluster_pod_event(struct cluster *c, const char *type, const json_t *pod, bool log) {
  pthread_rwlock_wrlock(&c->lock);
  if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
    pod_update(c, pod, log);
  } else if (strcmp(type, "DELETED") == 0) {
    struct pod_id id;
    char err[K8S_ERR_MAX];
    struct xpod *p = podspec_id(pod, &id, err, sizeof err) ? NULL : xpod_get(c, &id, false);
    if (p)
      pod_remove(c, p);
  }
  pthread_rwlock_unlock(&c->lock);
}

void cluster_relist_begin(struct cluster *c, bool nodes) {
  pthread_rwlock_wrlock(&c->lock);
  if (nodes) {
    SMAP_EACH(&c->nodes, e) {
      ((struct xnode *)e->value)->seen_relist = false;
    }
  } else {
    SMAP_EACH(&c->pods, e) {
      ((struct xpod *)e->value)->seen_relist = false;
    }
  }
  pthread_rwlock_unlock(&c->lock);
}

void cluster_node_relist_item(struct cluster *c, const json_t *node, uint64_t now_ms, time_t wall,
                              bool log) {
  pthread_rwlock_wrlock(&c->lock);
  clock_to(c, now_ms);
  node_update(c, node, now_ms, wall, log);
  pthread_rwlock_unlock(&c->lock);
}

void cluster_pod_relist_item(struct cluster *c, const json_t *pod, bool log) {
  pthread_rwlock_wrlock(&c->lock);
  pod_update(c, pod, log);
  pthread_rwlock_unlock(&c->lock);
}

void cluster_relist_end(struct cluster *c, bool nodes, uint64_t since_ms) {
  pthread_rwlock_wrlock(&c->lock);
  if (nodes) {
    SMAP_EACH(&c->nodes, e) {
      struct xnode *n = e->value;
      if (!n->seen_relist && n->present)
        node_gone(c, n);
    }
    nodes_sweep(c, c->now_ms);
  } else {
    SMAP_EACH(&c->pods, e) {
      struct xpod *p = e->value;
      if (!p->seen_relist && !(p->assumed && p->assumed_ms >= since_ms))
        pod_remove(c, p);
    }
  }
  pthread_rwlock_unlock(&c->lock);
}

void cluster_set_synced(struct cluster *c, bool nodes, bool pods) {
  pthread_rwlock_wrlock(&c->lock);
  c->synced_nodes |= nodes;
  c->synced_pods |= pods;
  pthread_rwlock_unlock(&c->lock);
}

bool cluster_synced(struct cluster *c) {
  bool s;
  pthread_rwlock_rdlock(&c->lock);
  s = c->synced_nodes && c->synced_pods && (c->synced_leases || !c->cfg.lease_namespace);
  pthread_rwlock_unlock(&c->lock);
  return s;
}
