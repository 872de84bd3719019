/* SPDX-License-Identifier: Apache-2.0 */
/* This node's pods as the API server has them: a list, then a watch, of the pods with
 * fieldSelector spec.nodeName=<node> on a thread of their own, so that what answers the kubelet
 * reads memory and never waits on the network. Owns the cache (entries, sync state, its
 * condition variable); the mutex is the node's (n->lock), never held across API server I/O. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube.h"
#include "log.h"
#include "node.h"

/* The server ends each watch after this long and a new one resumes from the last version: a
 * healthy server so says something at least this often, which bounds how stale a cache can be
 * without being marked so (a hung stream: STALE_NS, then kube_watch's own timeout). */
#define WATCH_TIMEOUT_S 60
#define STALE_NS ((WATCH_TIMEOUT_S + 30) * 1000000000ull)
/* A list from scratch now and then, whatever the watch said: what a missed event broke heals. */
#define RESYNC_NS (30 * 60 * 1000000000ull)
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
/* Memory: a node runs some hundred pods (the kubelet's default is 110); an object is at most
 * what etcd stores (1.5 MiB). Past either bound pods are left out, and a pod not found is then
 * "not known" (-EAGAIN), never "not there". */
#define PODS_MAX 1024
#define PODS_BYTES_MAX (64u << 20)

struct pod_ent {
  char key[2 * NODE_NAME_MAX]; /* "ns/name" */
  json_t *pod;
  size_t bytes;
};

struct node_pods {
  struct node *n;
  struct kube *k; /* its own: kube_cancel stops this thread's list or watch only */
  char path[NODE_NAME_MAX + 64];
  pthread_t thread;
  bool started;
  atomic_int stop;
  /* under n->lock */
  pthread_cond_t changed; /* broadcast on every change of the entries or of the sync state */
  struct pod_ent *ents[PODS_MAX];
  uint32_t nents;
  size_t bytes;
  bool overflow;  /* some pod was left out */
  bool listed;    /* a whole list was read and nothing failed since */
  bool failed;    /* a list or watch failed since the start */
  uint64_t ok_at; /* monotonic ns of the last word from the server (list, event, bookmark, end) */
  uint64_t gen;
  char why[KUBE_ERR_MAX]; /* the last failure, for errors */
};

static bool synced(const struct node_pods *p) {
  return p->listed && node_now() - p->ok_at < STALE_NS;
}

static void ents_free(struct pod_ent **ents, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    json_decref(ents[i]->pod);
    free(ents[i]);
  }
}

static int ent_find(struct pod_ent *const *ents, uint32_t n, const char *key) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(ents[i]->key, key))
      return (int)i;
  return -1;
}

/* A table being filled (a list) or the live one (under n->lock). */
struct table {
  struct pod_ent **ents;
  uint32_t *n;
  size_t *bytes;
  bool *overflow;
};

static int pod_key(json_t *pod, char *key, size_t len) {
  const char *ns = kube_meta_str(pod, "namespace"), *name = kube_meta_str(pod, "name");
  if (!ns || !name || (size_t)snprintf(key, len, "%s/%s", ns, name) >= len)
    return -EINVAL;
  return 0;
}

static void table_del(struct table *t, const char *key) {
  int i = ent_find(t->ents, *t->n, key);
  if (i < 0)
    return;
  *t->bytes -= t->ents[i]->bytes;
  json_decref(t->ents[i]->pod);
  free(t->ents[i]);
  t->ents[i] = t->ents[--*t->n];
}

/* Takes a reference to pod (managedFields, the largest part and of no use here, dropped). */
static void table_put(struct table *t, json_t *pod) {
  char key[2 * NODE_NAME_MAX];
  if (pod_key(pod, key, sizeof(key)) < 0)
    return;
  json_object_del(json_object_get(pod, "metadata"), "managedFields");
  size_t bytes = json_dumpb(pod, NULL, 0, JSON_COMPACT);
  table_del(t, key);
  struct pod_ent *e =
      *t->n < PODS_MAX && *t->bytes + bytes <= PODS_BYTES_MAX ? calloc(1, sizeof(*e)) : NULL;
  if (!e) {
    *t->overflow = true;
    return;
  }
  snprintf(e->key, sizeof(e->key), "%s", key);
  e->pod = json_incref(pod);
  e->bytes = bytes;
  *t->bytes += bytes;
  t->ents[(*t->n)++] = e;
}

static void mark_failed(struct node_pods *p, const char *why) {
  pthread_mutex_lock(&p->n->lock);
  p->listed = false;
  p->failed = true;
  snprintf(p->why, sizeof(p->why), "%s", why);
  p->gen++;
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->n->lock);
}

static void nap(struct node_pods *p, unsigned ms) {
  for (unsigned t = 0; t < ms && !atomic_load(&p->stop); t += 50)
    nanosleep(&(struct timespec){0, 50000000}, NULL);
}

struct fresh {
  struct pod_ent *ents[PODS_MAX];
  uint32_t n;
  size_t bytes;
  bool overflow;
};

static int list_item(json_t *pod, void *user) {
  struct fresh *f = user;
  struct table t = {f->ents, &f->n, &f->bytes, &f->overflow};
  table_put(&t, pod);
  return 0;
}

static int on_event(const char *type, json_t *pod, void *user) {
  struct node_pods *p = user;
  struct table t = {p->ents, &p->nents, &p->bytes, &p->overflow};
  char key[2 * NODE_NAME_MAX];

  pthread_mutex_lock(&p->n->lock);
  p->ok_at = node_now();
  if (!strcmp(type, "DELETED")) {
    if (pod_key(pod, key, sizeof(key)) == 0)
      table_del(&t, key);
  } else if (strcmp(type, "BOOKMARK")) {
    table_put(&t, pod);
  }
  p->gen++;
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->n->lock);
  return atomic_load(&p->stop) ? -ECANCELED : 0;
}

static void *run(void *arg) {
  struct node_pods *p = arg;
  unsigned backoff = BACKOFF_MIN_MS;
  char err[KUBE_ERR_MAX];
  bool said = true;    /* the next list is said: the first, the first after a failure */
  bool warned = false; /* a failure to list is said once until a list works */

  while (!atomic_load(&p->stop)) {
    struct fresh *f = calloc(1, sizeof(*f));
    char *rv = NULL;
    if (!f) {
      nap(p, backoff);
      continue;
    }
    int rc = kube_list_each(p->k, p->path, list_item, f, &rv, err, sizeof(err));
    if (rc) {
      ents_free(f->ents, f->n);
      free(f);
      if (atomic_load(&p->stop))
        break;
      mark_failed(p, err);
      if (!warned)
        gs_log(GS_LOG_WARNING,
               "cannot list this node's pods: %s (retrying; containers starting meanwhile are "
               "told to retry)",
               err);
      said = warned = true;
      nap(p, backoff);
      backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
      continue;
    }
    pthread_mutex_lock(&p->n->lock);
    ents_free(p->ents, p->nents);
    memcpy(p->ents, f->ents, f->n * sizeof(f->ents[0]));
    p->nents = f->n;
    p->bytes = f->bytes;
    if (f->overflow && !p->overflow)
      gs_log(GS_LOG_WARNING,
             "this node has more pods than gslice-node keeps (%d, %u MiB): pods left "
             "out are retried, not refused",
             PODS_MAX, PODS_BYTES_MAX >> 20);
    p->overflow = f->overflow;
    p->listed = true;
    p->ok_at = node_now();
    p->gen++;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->n->lock);
    free(f);
    if (said)
      gs_log(GS_LOG_INFO, "listed this node's pods: %u", p->nents);
    said = warned = false;
    backoff = BACKOFF_MIN_MS;
    uint64_t listed_at = node_now();
    while (!atomic_load(&p->stop) && node_now() - listed_at < RESYNC_NS) {
      rc = kube_watch(p->k, p->path, rv, WATCH_TIMEOUT_S, on_event, p, &rv, err, sizeof(err));
      if (rc == 0) {
        /* The server's end of a watch: a word from it, the cache is as fresh as then. */
        pthread_mutex_lock(&p->n->lock);
        p->ok_at = node_now();
        pthread_mutex_unlock(&p->n->lock);
        continue;
      }
      if (atomic_load(&p->stop))
        break;
      /* 410 or a broken stream: what happened meanwhile is unknown until a list says it. */
      mark_failed(p, err);
      said = true;
      if (rc != -ESTALE) {
        gs_log(GS_LOG_WARNING, "watching this node's pods: %s (listing again)", err);
        nap(p, backoff);
      }
      break;
    }
    free(rv);
  }
  return NULL;
}

int node_pods_start(struct node *n, char *err, size_t err_len) {
  struct node_pods *p = calloc(1, sizeof(*p));
  pthread_condattr_t ca;
  int r;

  if (!p)
    return -ENOMEM;
  p->n = n;
  atomic_init(&p->stop, 0);
  snprintf(p->why, sizeof(p->why), "not listed yet");
  snprintf(p->path, sizeof(p->path), "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s",
           n->cfg.node_name);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->changed, &ca);
  pthread_condattr_destroy(&ca);
  r = kube_open(n->cfg.kubeconfig[0] ? n->cfg.kubeconfig : NULL, &p->k, err, err_len);
  if (r < 0)
    goto fail;
  kube_set_timeout(p->k, 30000); /* one page of a list */
  n->pods = p;
  r = -pthread_create(&p->thread, NULL, run, p);
  if (r < 0) {
    n->pods = NULL;
    snprintf(err, err_len, "cannot start a thread: %s", strerror(-r));
    goto fail;
  }
  p->started = true;
  return 0;
fail:
  kube_close(p->k);
  pthread_cond_destroy(&p->changed);
  free(p);
  return r;
}

void node_pods_stop(struct node *n) {
  struct node_pods *p = n->pods;
  if (!p)
    return;
  atomic_store(&p->stop, 1);
  kube_cancel(p->k);
  if (p->started)
    pthread_join(p->thread, NULL);
  pthread_mutex_lock(&n->lock);
  n->pods = NULL;
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&n->lock);
  ents_free(p->ents, p->nents);
  kube_close(p->k);
  pthread_cond_destroy(&p->changed);
  free(p);
}

#ifndef NDEBUG
/* n->lock is an error-checking mutex: locking it again from its holder says EDEADLK. */
static bool held(struct node *n) {
  return pthread_mutex_lock(&n->lock) == EDEADLK;
}
#endif

static void deadline_ts(uint64_t at_ns, struct timespec *ts) {
  ts->tv_sec = (time_t)(at_ns / 1000000000ull);
  ts->tv_nsec = (long)(at_ns % 1000000000ull);
}

int node_pods_get(struct node *n, const char *ns, const char *name, int wait_ms, json_t **ret_pod,
                  char *err, size_t err_len) {
  char key[2 * NODE_NAME_MAX];
  uint64_t until = node_now() + (uint64_t)(wait_ms > 0 ? wait_ms : 0) * 1000000ull;

  assert(held(n));
  if ((size_t)snprintf(key, sizeof(key), "%s/%s", ns, name) >= sizeof(key)) {
    snprintf(err, err_len, "\"%s/%s\" is not a pod name", ns, name);
    return -EINVAL;
  }
  for (;;) {
    struct node_pods *p = n->pods;
    if (!p) {
      snprintf(err, err_len, "gslice-node reads no pods (no API server)");
      return -ENOTCONN;
    }
    uint64_t now = node_now();
    /* Just started, the first list under way: worth a wait, as for a pod not there yet. */
    bool first = !p->listed && !p->failed && now < until;
    if (!synced(p) && !first) {
      snprintf(err, err_len, "this node's pods are not known now (the API server: %s)",
               p->listed ? "silent for too long" : p->why);
      return -EAGAIN;
    }
    int i = first ? -1 : ent_find(p->ents, p->nents, key);
    if (i >= 0) {
      *ret_pod = json_incref(p->ents[i]->pod);
      return 0;
    }
    if (!first && p->overflow) {
      snprintf(err, err_len, "pod %s/%s is not among the pods gslice-node keeps (too many)", ns,
               name);
      return -EAGAIN;
    }
    if (now >= until) {
      snprintf(err, err_len, "the API server has no pod %s/%s on node %s", ns, name,
               n->cfg.node_name);
      return -ENOENT;
    }
    struct timespec ts;
    deadline_ts(until, &ts);
    pthread_cond_timedwait(&p->changed, &n->lock, &ts);
  }
}

int node_pods_wait(struct node *n, uint64_t *gen, int wait_ms) {
  struct node_pods *p = n->pods;
  uint64_t until = node_now() + (uint64_t)(wait_ms > 0 ? wait_ms : 0) * 1000000ull;
  struct timespec ts;

  assert(held(n));
  if (!p)
    return -ENOTCONN;
  deadline_ts(until, &ts);
  while (n->pods == p && p->gen == *gen && node_now() < until)
    pthread_cond_timedwait(&p->changed, &n->lock, &ts);
  if (n->pods != p)
    return -ENOTCONN;
  bool moved = p->gen != *gen;
  *gen = p->gen;
  return moved ? 0 : -ETIMEDOUT;
}

uint64_t node_pods_gen(struct node *n) {
  return n->pods ? n->pods->gen : 0;
}

bool node_pods_synced(struct node *n) {
  pthread_mutex_lock(&n->lock);
  bool ok = n->pods && synced(n->pods);
  pthread_mutex_unlock(&n->lock);
  return ok;
}
