/* The cluster view (cluster.h): nodes and pods by name in two hash maps, each node's
 * usage kept as the sum of its pods' holdings (place_apply), one rwlock over it all. */
#include "cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"

/* ---- a string-keyed hash map (chained, grows at load 1) -------------------------------- */

struct entry {
  char *key;
  void *value;
  struct entry *next;
};

struct smap {
  struct entry **b;
  size_t nb, n;
};

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static void *smap_get(const struct smap *m, const char *key) {
  if (!m->nb)
    return NULL;
  for (struct entry *e = m->b[hash(key) % m->nb]; e; e = e->next)
    if (strcmp(e->key, key) == 0)
      return e->value;
  return NULL;
}

static int smap_grow(struct smap *m) {
  size_t nb = m->nb ? m->nb * 2 : 64;
  struct entry **b = calloc(nb, sizeof(*b));
  if (!b)
    return -ENOMEM;
  for (size_t i = 0; i < m->nb; i++) {
    for (struct entry *e = m->b[i], *next; e; e = next) {
      next = e->next;
      size_t h = hash(e->key) % nb;
      e->next = b[h];
      b[h] = e;
    }
  }
  free(m->b);
  m->b = b;
  m->nb = nb;
  return 0;
}

static int smap_put(struct smap *m, const char *key, void *value) {
  struct entry *e;
  if (m->n >= m->nb && smap_grow(m))
    return -ENOMEM;
  e = malloc(sizeof(*e));
  if (!e || !(e->key = strdup(key))) {
    free(e);
    return -ENOMEM;
  }
  size_t h = hash(key) % m->nb;
  e->value = value;
  e->next = m->b[h];
  m->b[h] = e;
  m->n++;
  return 0;
}

static void smap_del(struct smap *m, const char *key) {
  if (!m->nb)
    return;
  for (struct entry **p = &m->b[hash(key) % m->nb]; *p; p = &(*p)->next) {
    if (strcmp((*p)->key, key) == 0) {
      struct entry *e = *p;
      *p = e->next;
      free(e->key);
      free(e);
      m->n--;
      return;
    }
  }
}

#define SMAP_EACH(m, e)                                                                            \
  for (size_t i_##e = 0; i_##e < (m)->nb; i_##e++)                                                 \
    for (struct entry *e = (m)->b[i_##e], *e##_next = e ? e->next : NULL; e;                       \
         e = e##_next, e##_next = e ? e->next : NULL)

/* ---- records ------------------------------------------------------------------------------ */

struct xpod;

struct xnode {
  char name[K8S_NAME_MAX];
  bool present;       /* the Node object exists (else: a placeholder its pods point to) */
  bool seen_relist;   /* during a relist */
  char unusable[256]; /* "" when usable */
  time_t hb;          /* heartbeat value last seen */
  struct place_node pn;
  struct place_gpu *gpus;
  struct xpod *pods; /* held on this node */
  pthread_mutex_t bind_lock;
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
  /* Pending (unbound) and asking for gslice: its request as last seen. */
  bool pending;
  int req_rc;
  struct place_pod req;
  char req_err[256];
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
  bool synced_nodes, synced_pods;
};

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
  podspec_request_free(&p->req);
  free(p);
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
    struct xnode *n = e->value;
    pthread_mutex_destroy(&n->bind_lock);
    free(n->gpus);
    free(n);
    free(e->key);
    free(e);
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

static struct xnode *node_get(struct cluster *c, const char *name, bool create) {
  struct xnode *n = smap_get(&c->nodes, name);
  if (n || !create || strlen(name) >= sizeof n->name)
    return n;
  n = calloc(1, sizeof(*n));
  if (!n)
    return NULL;
  strcpy(n->name, name);
  n->pn.name = n->name;
  pthread_mutex_init(&n->bind_lock, NULL);
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

static void unhold(struct xpod *p) {
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
static void hold(struct xpod *p, struct xnode *n, struct k8s_assigned *a) {
  unhold(p);
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
      p->mem_total += p->a.containers[i].gpus[j].memory;
      p->compute_total += p->a.containers[i].gpus[j].compute;
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
                        FILE *log) {
  const char *name = kube_meta_str(obj, "name"), *text;
  struct k8s_node_gpus *g = NULL;
  char err[K8S_ERR_MAX];
  struct xnode *n;

  if (!name)
    return;
  n = node_get(c, name, true);
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
      fprintf(log, "gslice-extender: node %s: %s; the node is out of placement\n", name, err);
    snprintf(n->unusable, sizeof n->unusable, "%s", err);
    n->pn.unusable = n->unusable;
    free(g);
    return;
  }
  /* Heartbeat age: by the node's clock once, when first seen; afterwards by
   * when this process saw the value change, so clock skew cannot age a node. */
  if (!n->hb || n->unusable[0]) {
    uint64_t age_ms = wall > g->heartbeat ? (uint64_t)(wall - g->heartbeat) * 1000 : 0;
    n->pn.heartbeat_ms = now_ms > age_ms ? now_ms - age_ms : 0;
  } else if (g->heartbeat != n->hb) {
    n->pn.heartbeat_ms = now_ms;
  }
  n->hb = g->heartbeat;
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

static void node_gone(struct xnode *n) {
  /* Its pods keep pointing at it: they still hold what they hold if it comes back. */
  n->present = false;
  snprintf(n->unusable, sizeof n->unusable, "no such node");
  n->pn.unusable = n->unusable;
  n->hb = 0;
}

void cluster_node_event(struct cluster *c, const char *type, const json_t *node, uint64_t now_ms,
                        time_t wall, FILE *log) {
  pthread_rwlock_wrlock(&c->lock);
  if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
    node_update(c, node, now_ms, wall, log);
  } else if (strcmp(type, "DELETED") == 0) {
    const char *name = kube_meta_str(node, "name");
    struct xnode *n = name ? node_get(c, name, false) : NULL;
    if (n)
      node_gone(n);
  }
  pthread_rwlock_unlock(&c->lock);
}

void cluster_node_relist(struct cluster *c, const json_t *items, uint64_t now_ms, time_t wall,
                         FILE *log) {
  cluster_relist_begin(c, true);
  for (size_t i = 0; i < json_array_size(items); i++)
    cluster_node_relist_item(c, json_array_get(items, i), now_ms, wall, log);
  cluster_relist_end(c, true, 0);
}

/* ---- pods ------------------------------------------------------------------------------------ */

static struct xpod *pod_get(struct cluster *c, const struct pod_id *id, bool create) {
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
  unhold(p);
  smap_del(&c->pods, p->key);
  pod_free(p);
}

static void pod_update(struct cluster *c, const json_t *obj, FILE *log) {
  struct pod_id id;
  struct place_pod req = {0};
  struct xpod *p;
  char err[K8S_ERR_MAX];
  const char *text;
  int rc;

  if (podspec_id(obj, &id, err, sizeof err))
    return;
  p = pod_get(c, &id, false);
  if (id.done) {
    /* Finished pods hold nothing. */
    if (p)
      pod_remove(c, p);
    return;
  }
  text = kube_annotation(obj, K8S_ANNOT_ASSIGNED);
  if (id.node[0] && text) {
    struct k8s_assigned a;
    if (!p && !(p = pod_get(c, &id, true)))
      return;
    p->id = id;
    p->seen_relist = true;
    p->pending = false;
    podspec_request_free(&p->req);
    if (k8s_assigned_decode(text, &a, err, sizeof err)) {
      if (log)
        fprintf(log, "gslice-extender: pod %s: %s; not counted\n", p->key, err);
      unhold(p);
    } else if (strcmp(a.node, id.node) != 0) {
      if (log)
        fprintf(log, "gslice-extender: pod %s is on node %s but %s names node %s; not counted\n",
                p->key, id.node, K8S_ANNOT_ASSIGNED, a.node);
      unhold(p);
    } else if (p->held && strcmp(p->node->name, id.node) == 0 && k8s_assigned_equal(&a, &p->a)) {
      p->assumed = false; /* the watch's echo of our binding, or a status update */
    } else {
      struct xnode *n = node_get(c, id.node, true);
      if (n)
        hold(p, n, &a);
    }
    k8s_assigned_free(&a);
    return;
  }
  if (p && p->assumed) {
    /* An event older than the binding being written: the reservation stays. */
    p->seen_relist = true;
    return;
  }
  if (id.node[0]) {
    /* Bound without our annotation (another scheduler, nodeName set by hand):
     * it holds nothing we know of. */
    if (p)
      pod_remove(c, p);
    return;
  }
  /* Pending: remember its request for /bind, if it asks for gslice at all. */
  rc = podspec_request(obj, c->cfg.policy, &req, err, sizeof err);
  if (rc == 0 && req.ncontainers == 0) {
    if (p)
      pod_remove(c, p);
    return;
  }
  if (!p && !(p = pod_get(c, &id, true))) {
    podspec_request_free(&req);
    return;
  }
  unhold(p);
  p->id = id;
  p->seen_relist = true;
  podspec_request_free(&p->req);
  p->req = req;
  p->req_rc = rc;
  snprintf(p->req_err, sizeof p->req_err, "%s", rc ? err : "");
  p->pending = true;
}

void cluster_pod_event(struct cluster *c, const char *type, const json_t *pod, FILE *log) {
  pthread_rwlock_wrlock(&c->lock);
  if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
    pod_update(c, pod, log);
  } else if (strcmp(type, "DELETED") == 0) {
    struct pod_id id;
    char err[K8S_ERR_MAX];
    struct xpod *p = podspec_id(pod, &id, err, sizeof err) ? NULL : pod_get(c, &id, false);
    if (p)
      pod_remove(c, p);
  }
  pthread_rwlock_unlock(&c->lock);
}

void cluster_pod_relist(struct cluster *c, const json_t *items, uint64_t since_ms, FILE *log) {
  cluster_relist_begin(c, false);
  for (size_t i = 0; i < json_array_size(items); i++)
    cluster_pod_relist_item(c, json_array_get(items, i), log);
  cluster_relist_end(c, false, since_ms);
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
                              FILE *log) {
  pthread_rwlock_wrlock(&c->lock);
  node_update(c, node, now_ms, wall, log);
  pthread_rwlock_unlock(&c->lock);
}

void cluster_pod_relist_item(struct cluster *c, const json_t *pod, FILE *log) {
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
        node_gone(n);
    }
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
  s = c->synced_nodes && c->synced_pods;
  pthread_rwlock_unlock(&c->lock);
  return s;
}

/* ---- verbs --------------------------------------------------------------------------------------
 */

int cluster_request(struct cluster *c, const json_t *pod, struct place_pod *ret, char *err,
                    size_t errlen) {
  int rc = podspec_request(pod, c->cfg.policy, ret, err, errlen);
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
  n = node_get(c, node_name, false);
  if (!n || !n->present) {
    snprintf(err, errlen, "node %s is not known to gslice-extender", node_name);
    rc = -ENOENT;
    goto out;
  }
  p = pod_get(c, id, false);
  if (p && p->held) {
    /* A retried bind of a pod we hold already: the same answer again, unless it
     * is for another node (then the old holding goes first). */
    if (strcmp(p->node->name, node_name) == 0) {
      rc = -EALREADY;
      goto copy;
    }
    unhold(p);
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
  p = pod_get(c, id, true);
  if (!p) {
    k8s_assigned_free(&a);
    rc = -ENOMEM;
    goto out;
  }
  hold(p, n, &a);
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
  struct xpod *p = pod_get(c, id, false);
  if (p && p->assumed)
    unhold(p);
  pthread_rwlock_unlock(&c->lock);
}

void *cluster_node_lock(struct cluster *c, const char *node_name) {
  struct xnode *n;
  pthread_rwlock_rdlock(&c->lock);
  n = node_get(c, node_name, false);
  pthread_rwlock_unlock(&c->lock);
  /* Node records are never freed while the process runs, so the lock outlives
   * the read lock it was found under. */
  if (!n)
    return NULL;
  pthread_mutex_lock(&n->bind_lock);
  return &n->bind_lock;
}

void cluster_node_unlock(void *lock) {
  if (lock)
    pthread_mutex_unlock(lock);
}

int cluster_pending_request(struct cluster *c, const char *ns, const char *name,
                            struct pod_id *ret_id, struct place_pod *ret_req, char *err,
                            size_t errlen) {
  struct pod_id id = {0};
  struct xpod *p;
  int rc = -ENOENT;

  snprintf(id.ns, sizeof id.ns, "%s", ns);
  snprintf(id.name, sizeof id.name, "%s", name);
  pthread_rwlock_rdlock(&c->lock);
  p = pod_get(c, &id, false);
  if (p && p->pending) {
    rc = p->req_rc;
    if (rc) {
      snprintf(err, errlen, "%s", p->req_err);
    } else {
      *ret_id = p->id;
      *ret_req = p->req;
      ret_req->containers = NULL;
      if (p->req.ncontainers) {
        ret_req->containers = malloc(p->req.ncontainers * sizeof(*p->req.containers));
        if (!ret_req->containers)
          rc = -ENOMEM;
        else
          memcpy(ret_req->containers, p->req.containers,
                 p->req.ncontainers * sizeof(*p->req.containers));
      }
    }
  }
  pthread_rwlock_unlock(&c->lock);
  return rc;
}

/* ---- reporting
 * ------------------------------------------------------------------------------------ */

struct ns_sum {
  char ns[K8S_NAME_MAX];
  uint64_t mem;
  uint64_t compute;
  uint32_t pods;
};

static int ns_cmp(const void *a, const void *b) {
  return strcmp(((const struct ns_sum *)a)->ns, ((const struct ns_sum *)b)->ns);
}

void cluster_totals(struct cluster *c, uint64_t now_ms, struct cluster_totals *ret) {
  struct cluster_totals t = {0};
  pthread_rwlock_rdlock(&c->lock);
  SMAP_EACH(&c->nodes, e) {
    struct xnode *n = e->value;
    if (!n->present)
      continue;
    t.nodes++;
    if (!n->unusable[0] && now_ms > n->pn.heartbeat_ms &&
        now_ms - n->pn.heartbeat_ms > c->cfg.node_timeout_ms)
      t.stale_nodes++;
    for (uint32_t i = 0; i < n->pn.ngpus; i++) {
      t.gpus++;
      t.memory += n->gpus[i].memory;
      t.mem_used += n->gpus[i].mem_used;
      t.compute_used += n->gpus[i].compute_used;
    }
  }
  SMAP_EACH(&c->pods, e) {
    struct xpod *p = e->value;
    if (p->held) {
      t.pods++;
      t.assumed += p->assumed;
    }
  }
  pthread_rwlock_unlock(&c->lock);
  *ret = t;
}

void cluster_gpu_stats(struct cluster *c, uint64_t fit_mem, uint32_t fit_compute,
                       struct cluster_gpu_stats *ret) {
  struct cluster_gpu_stats t = {0};
  pthread_rwlock_rdlock(&c->lock);
  SMAP_EACH(&c->nodes, e) {
    struct xnode *n = e->value;
    if (!n->present || n->unusable[0])
      continue;
    for (uint32_t i = 0; i < n->pn.ngpus; i++) {
      const struct place_gpu *g = &n->gpus[i];
      uint64_t free_mem = g->memory > g->mem_used ? g->memory - g->mem_used : 0;
      t.gpus++;
      t.memory += g->memory;
      t.mem_used += g->mem_used;
      t.compute_used += g->compute_used;
      if (g->slices == 0)
        t.whole_free++;
      if (g->compute_used + fit_compute > 100) {
        t.stranded += free_mem;
        t.stranded_compute_full += free_mem;
      } else if (free_mem < fit_mem || g->slices >= g->slots || !g->healthy) {
        t.stranded += free_mem;
        t.stranded_fragment += free_mem;
      }
    }
  }
  pthread_rwlock_unlock(&c->lock);
  *ret = t;
}

void cluster_metrics(struct cluster *c, FILE *out, uint64_t now_ms) {
  struct ns_sum *sums = NULL;
  size_t n = 0, cap = 0;
  struct cluster_totals t;

  cluster_totals(c, now_ms, &t);
  pthread_rwlock_rdlock(&c->lock);
  SMAP_EACH(&c->pods, e) {
    struct xpod *p = e->value;
    size_t i;
    if (!p->held)
      continue;
    for (i = 0; i < n && strcmp(sums[i].ns, p->id.ns) != 0; i++)
      ;
    if (i == n) {
      if (n == cap) {
        struct ns_sum *s = realloc(sums, (cap = cap ? cap * 2 : 16) * sizeof(*s));
        if (!s)
          break;
        sums = s;
      }
      memset(&sums[n], 0, sizeof sums[n]);
      memcpy(sums[n].ns, p->id.ns, sizeof sums[n].ns);
      n++;
    }
    sums[i].mem += p->mem_total;
    sums[i].compute += p->compute_total;
    sums[i].pods++;
  }
  pthread_rwlock_unlock(&c->lock);
  if (n)
    qsort(sums, n, sizeof(*sums), ns_cmp);
  fputs("# HELP gslice_namespace_memory_bytes GPU memory assigned to the namespace's pods "
        "(bound or being bound), bytes: what requests.gslice.io/gpu-memory quota counts.\n"
        "# TYPE gslice_namespace_memory_bytes gauge\n",
        out);
  for (size_t i = 0; i < n; i++)
    fprintf(out, "gslice_namespace_memory_bytes{namespace=\"%s\"} %" PRIu64 "\n", sums[i].ns,
            sums[i].mem);
  fputs("# HELP gslice_namespace_compute_percent GPU compute assigned to the namespace's pods, "
        "% of one GPU: what requests.gslice.io/gpu-compute quota counts.\n"
        "# TYPE gslice_namespace_compute_percent gauge\n",
        out);
  for (size_t i = 0; i < n; i++)
    fprintf(out, "gslice_namespace_compute_percent{namespace=\"%s\"} %" PRIu64 "\n", sums[i].ns,
            sums[i].compute);
  fputs("# HELP gslice_namespace_pods Pods of the namespace holding gslice GPU slices.\n"
        "# TYPE gslice_namespace_pods gauge\n",
        out);
  for (size_t i = 0; i < n; i++)
    fprintf(out, "gslice_namespace_pods{namespace=\"%s\"} %u\n", sums[i].ns, sums[i].pods);
  fprintf(out,
          "# HELP gslice_extender_nodes Nodes known, and those whose heartbeat is stale.\n"
          "# TYPE gslice_extender_nodes gauge\n"
          "gslice_extender_nodes{state=\"all\"} %u\ngslice_extender_nodes{state=\"stale\"} %u\n"
          "# HELP gslice_extender_gpus GPUs on known nodes.\n# TYPE gslice_extender_gpus gauge\n"
          "gslice_extender_gpus %u\n"
          "# HELP gslice_extender_memory_bytes GPU memory on known nodes, and assigned.\n"
          "# TYPE gslice_extender_memory_bytes gauge\n"
          "gslice_extender_memory_bytes{state=\"total\"} %" PRIu64 "\n"
          "gslice_extender_memory_bytes{state=\"assigned\"} %" PRIu64 "\n"
          "# HELP gslice_extender_assumed_pods Pods bound by this extender whose binding the "
          "watch has not echoed yet.\n# TYPE gslice_extender_assumed_pods gauge\n"
          "gslice_extender_assumed_pods %u\n",
          t.nodes, t.stale_nodes, t.gpus, t.memory, t.mem_used, t.assumed);
  free(sums);
}
