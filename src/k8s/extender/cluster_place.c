/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler's questions to the cluster view (cluster.h): a pod's request, evaluating and
 * explaining nodes for it, the memo of the last pod's scores, reserving (assuming) a placement
 * until it is bound, and the per-node bind lock. It reads and holds records; it does not follow
 * the API server (cluster.c does). */
#include "cluster_records.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"

int cluster_request(struct cluster *c, const json_t *pod, struct place_pod *ret, char *err,
                    size_t errlen) {
  struct podspec_cfg pcfg = {c->cfg.policy, c->cfg.classes, c->cfg.nclasses};
  int rc = podspec_request_cfg(pod, &pcfg, ret, err, errlen);
  if (rc)
    return rc;
  if (ret->ncontainers == 0) {
    snprintf(err, errlen, "the pod asks for no %s", K8S_RES_GPU);
    return 1;
  }
  return 0;
}

static const struct place_node unknown_node = {.unusable = "no such node known to gslice-extender"};

void cluster_eval(struct cluster *c, const struct place_pod *req, const char *const *names,
                  size_t n, uint64_t now_ms, struct place_verdict *verdicts,
                  const void **ret_nodes) {
  struct place_cfg cfg = {.node_timeout_ms = c->cfg.node_timeout_ms};
  bool cache = pthread_mutex_trylock(&c->names_lock) == 0;

  if (cache && c->nlast < n) {
    struct xnode **more = realloc(c->last, n * sizeof(*more));
    if (more) {
      memset(more + c->nlast, 0, (n - c->nlast) * sizeof(*more));
      c->last = more;
      c->nlast = n;
    } else {
      pthread_mutex_unlock(&c->names_lock);
      cache = false;
    }
  }
  pthread_rwlock_rdlock(&c->lock);
  if (cache && c->last_gen != c->free_gen) {
    /* Node records were forgotten since: the remembered pointers may be among them. */
    memset(c->last, 0, c->nlast * sizeof(*c->last));
    c->last_gen = c->free_gen;
  }
  for (size_t i = 0; i < n; i++) {
    struct xnode *x = cache ? c->last[i] : NULL;
    if (!x || strcmp(x->name, names[i]) != 0) {
      x = smap_get(&c->nodes, names[i]);
      if (cache)
        c->last[i] = x;
    }
    verdicts[i].reason = NULL;
    verdicts[i].brief = false;
    place_eval(&cfg, x ? &x->pn : &unknown_node, req, now_ms, &verdicts[i], NULL);
    if (ret_nodes)
      ret_nodes[i] = x;
  }
  pthread_rwlock_unlock(&c->lock);
  if (cache)
    pthread_mutex_unlock(&c->names_lock);
}

void cluster_explain(struct cluster *c, const struct place_pod *req, const void *node,
                     uint64_t now_ms, bool brief, char *buf, size_t len) {
  struct place_cfg cfg = {.node_timeout_ms = c->cfg.node_timeout_ms};
  struct place_verdict v = {.reason = buf, .reason_len = len, .brief = brief};
  const struct xnode *x = node;

  pthread_rwlock_rdlock(&c->lock);
  place_eval(&cfg, x ? &x->pn : &unknown_node, req, now_ms, &v, NULL);
  pthread_rwlock_unlock(&c->lock);
  if (v.fits)
    snprintf(buf, len, "fits now (the cluster changed since)");
}

void cluster_memo_put(struct cluster *c, const char *pod_uid, const void *const *nodes,
                      const struct place_verdict *v, size_t n, uint64_t now_ms) {
  if (!pod_uid || !*pod_uid || strlen(pod_uid) >= POD_UID_MAX)
    return;
  pthread_mutex_lock(&c->memo_lock);
  if (c->memo_cap < n) {
    const struct xnode **nn = realloc(c->memo_nodes, n * sizeof(*nn));
    int *ns = nn ? realloc(c->memo_scores, n * sizeof(*ns)) : NULL;
    if (nn)
      c->memo_nodes = nn;
    if (ns)
      c->memo_scores = ns;
    if (!nn || !ns) {
      c->memo_n = 0;
      c->memo_uid[0] = 0;
      pthread_mutex_unlock(&c->memo_lock);
      return;
    }
    c->memo_cap = n;
  }
  c->memo_n = 0;
  for (size_t i = 0; i < n; i++) {
    if (!v[i].fits || !nodes[i])
      continue;
    c->memo_nodes[c->memo_n] = nodes[i];
    c->memo_scores[c->memo_n++] = v[i].score;
  }
  strcpy(c->memo_uid, pod_uid);
  c->memo_ms = now_ms;
  pthread_mutex_unlock(&c->memo_lock);
}

bool cluster_memo_get(struct cluster *c, const char *pod_uid, const char *const *names, size_t n,
                      uint64_t now_ms, int *ret_scores) {
  bool ok = false;
  if (!pod_uid || !*pod_uid)
    return false;
  pthread_mutex_lock(&c->memo_lock);
  if (strcmp(c->memo_uid, pod_uid) == 0 && now_ms >= c->memo_ms &&
      now_ms - c->memo_ms <= CLUSTER_MEMO_MS) {
    size_t j = 0, i;
    for (i = 0; i < n; i++) {
      while (j < c->memo_n && strcmp(c->memo_nodes[j]->name, names[i]) != 0)
        j++;
      if (j == c->memo_n)
        break;
      ret_scores[i] = c->memo_scores[j++];
    }
    ok = i == n;
  }
  pthread_mutex_unlock(&c->memo_lock);
  return ok;
}

int cluster_reserve(struct cluster *c, const struct pod_id *id, const struct place_pod *req,
                    const char *node_name, uint64_t now_ms, struct k8s_assigned *ret, char *err,
                    size_t errlen) {
  struct place_cfg cfg = {.node_timeout_ms = c->cfg.node_timeout_ms};
  struct place_choice *ch = malloc(sizeof(*ch));
  char why[PLACE_REASON_MAX];
  struct place_verdict v = {.reason = why, .reason_len = sizeof why};
  struct k8s_assigned a;
  struct xnode *n;
  struct xpod *p;
  int rc;

  if (!ch)
    return -ENOMEM;
  pthread_rwlock_wrlock(&c->lock);
  n = xnode_get(c, node_name, false);
  if (!n || !n->present) {
    snprintf(err, errlen, "node %s is not known to gslice-extender", node_name);
    rc = -ENOENT;
    goto out;
  }
  p = xpod_get(c, id, false);
  if (p && p->held) {
    /* A retried bind of a pod we hold already: the same answer again, unless it
     * is for another node (then the old holding goes first). */
    if (strcmp(p->node->name, node_name) == 0) {
      rc = -EALREADY;
      goto copy;
    }
    xpod_unhold(p);
  }
  place_eval(&cfg, &n->pn, req, now_ms, &v, ch);
  if (!v.fits) {
    snprintf(err, errlen, "no longer fits node %s: %s", node_name, why);
    rc = -ENOSPC;
    goto out;
  }
  rc = podspec_assignment(node_name, &n->pn, req, ch, &a);
  if (rc)
    goto out;
  p = xpod_get(c, id, true);
  if (!p) {
    k8s_assigned_free(&a);
    rc = -ENOMEM;
    goto out;
  }
  xpod_hold(p, n, &a);
  p->assumed = true;
  p->assumed_ms = now_ms;
  rc = 0;
copy:
  /* The caller gets its own copy of the assignment. */
  {
    char *text = NULL;
    int r = k8s_assigned_encode(&p->a, &text);
    if (!r)
      r = k8s_assigned_decode(text, ret, err, errlen);
    free(text);
    if (r)
      rc = r;
    else if (rc == -EALREADY)
      rc = 0;
  }
out:
  pthread_rwlock_unlock(&c->lock);
  free(ch);
  return rc;
}

void cluster_unreserve(struct cluster *c, const struct pod_id *id) {
  pthread_rwlock_wrlock(&c->lock);
  struct xpod *p = xpod_get(c, id, false);
  if (p && p->assumed)
    xpod_unhold(p);
  pthread_rwlock_unlock(&c->lock);
}

const struct k8s_keys *cluster_keys(struct cluster *c) {
  return c->cfg.keys;
}

void *cluster_node_lock(struct cluster *c, const char *node_name) {
  struct xnode *n;
  pthread_rwlock_rdlock(&c->lock);
  n = xnode_get(c, node_name, false);
  pthread_rwlock_unlock(&c->lock);
  /* A node record is freed only CLUSTER_NODE_GRACE_MS after it left the map (and only when
   * it was gone for CLUSTER_NODE_FORGET_MS before), far longer than a bind holds the lock. */
  if (!n)
    return NULL;
  pthread_mutex_lock(&n->bind_lock);
  return &n->bind_lock;
}

void cluster_node_unlock(void *lock) {
  if (lock)
    pthread_mutex_unlock(lock);
}
