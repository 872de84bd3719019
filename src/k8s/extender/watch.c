/* SPDX-License-Identifier: Apache-2.0 */
/* List + watch threads (watch.h). */
#include "watch.h"

#include "clock.h"
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The server ends each watch after this long; a fresh one resumes from the last
 * version seen, as client-go's reflector does. */
#define WATCH_TIMEOUT_S 300
#define BACKOFF_MAX_MS 5000

struct watcher {
  struct ext_watch *w;
  const char *kind; /* "nodes" | "pods" | "leases" */
  char path[128];
  struct kube *k;
  pthread_t thread;
  bool started;
};

struct ext_watch {
  struct cluster *c;
  atomic_int stop;
  struct watcher nodes, pods, leases;
};

#define NWATCHERS 3

static void nap(struct ext_watch *w, unsigned ms) {
  for (unsigned t = 0; t < ms && !atomic_load(&w->stop); t += 50)
    usleep(50000);
}

static int on_event(const char *type, json_t *obj, void *user) {
  struct watcher *x = user;
  if (strcmp(type, "BOOKMARK") == 0)
    return 0;
  if (x == &x->w->nodes)
    cluster_node_event(x->w->c, type, obj, gs_mono_ms(), time(NULL), true);
  else if (x == &x->w->leases)
    cluster_lease_event(x->w->c, type, obj, gs_mono_ms(), time(NULL), true);
  else
    cluster_pod_event(x->w->c, type, obj, true);
  return atomic_load(&x->w->stop) ? -ECANCELED : 0;
}

/* One page of a list at a time: each object straight into the cluster view. */
struct relist {
  struct watcher *x;
  size_t n;
};

static int relist_item(json_t *obj, void *user) {
  struct relist *r = user;
  struct ext_watch *w = r->x->w;
  if (r->x == &w->nodes)
    cluster_node_relist_item(w->c, obj, gs_mono_ms(), time(NULL), true);
  else if (r->x == &w->leases)
    cluster_lease_relist_item(w->c, obj, gs_mono_ms(), time(NULL), true);
  else
    cluster_pod_relist_item(w->c, obj, true);
  r->n++;
  return atomic_load(&w->stop) ? -ECANCELED : 0;
}

static void *run(void *arg) {
  struct watcher *x = arg;
  struct ext_watch *w = x->w;
  char err[KUBE_ERR_MAX];
  unsigned backoff = 100;

  while (!atomic_load(&w->stop)) {
    struct relist r = {x, 0};
    char *rv = NULL;
    uint64_t since = gs_mono_ms();
    bool nodes = x == &w->nodes, leases = x == &w->leases;
    if (leases)
      cluster_lease_relist_begin(w->c);
    else
      cluster_relist_begin(w->c, nodes);
    int rc = kube_list_each(x->k, x->path, relist_item, &r, &rv, err, sizeof err);
    if (rc) {
      if (!atomic_load(&w->stop))
        gs_log(GS_LOG_WARNING, "listing %s: %s; retrying in %u ms", x->kind, err, backoff);
      nap(w, backoff);
      backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
      continue;
    }
    if (leases) {
      cluster_lease_relist_end(w->c);
      cluster_set_leases_synced(w->c);
    } else {
      cluster_relist_end(w->c, nodes, since);
      cluster_set_synced(w->c, nodes, !nodes);
    }
    gs_log(GS_LOG_INFO, "listed %zu %s at resourceVersion %s", r.n, x->kind, rv);
    backoff = 100;
    while (!atomic_load(&w->stop)) {
      rc = kube_watch(x->k, x->path, rv, WATCH_TIMEOUT_S, on_event, x, &rv, err, sizeof err);
      if (rc == 0) {
        backoff = 100;
        continue; /* the server's timeout: resume */
      }
      if (atomic_load(&w->stop))
        break;
      gs_log(GS_LOG_WARNING, "watching %s: %s; %s", x->kind, err,
             rc == -ESTALE ? "listing again" : "resuming");
      if (rc == -ESTALE)
        break;
      nap(w, backoff);
      backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
    free(rv);
  }
  return NULL;
}

void ext_watch_stop(struct ext_watch *w) {
  if (!w)
    return;
  atomic_store(&w->stop, 1);
  struct watcher *xs[NWATCHERS] = {&w->nodes, &w->pods, &w->leases};
  for (int i = 0; i < NWATCHERS; i++) {
    if (xs[i]->k)
      kube_cancel(xs[i]->k);
    if (xs[i]->started)
      pthread_join(xs[i]->thread, NULL);
    kube_close(xs[i]->k);
  }
  free(w);
}

int ext_watch_start(struct cluster *c, const char *kubeconfig, const char *lease_ns,
                    struct ext_watch **ret, char *err, size_t errlen) {
  struct ext_watch *w = calloc(1, sizeof(*w));
  int rc;

  if (!w)
    return -ENOMEM;
  w->c = c;
  atomic_init(&w->stop, 0);
  w->nodes = (struct watcher){.w = w, .kind = "nodes", .path = "/api/v1/nodes"};
  w->pods = (struct watcher){.w = w, .kind = "pods", .path = "/api/v1/pods"};
  w->leases = (struct watcher){.w = w, .kind = "leases"};
  if (lease_ns)
    snprintf(w->leases.path, sizeof w->leases.path,
             "/apis/coordination.k8s.io/v1/namespaces/%s/leases", lease_ns);
  struct watcher *xs[NWATCHERS] = {&w->nodes, &w->pods, &w->leases};
  size_t nx = lease_ns ? NWATCHERS : 2;
  for (size_t i = 0; i < nx; i++) {
    rc = kube_open(kubeconfig, &xs[i]->k, err, errlen);
    if (rc)
      goto fail;
    kube_set_timeout(xs[i]->k, 60000); /* a list of many pods takes a while */
  }
  for (size_t i = 0; i < nx; i++) {
    rc = -pthread_create(&xs[i]->thread, NULL, run, xs[i]);
    if (rc) {
      snprintf(err, errlen, "cannot start a thread: %s", strerror(-rc));
      goto fail;
    }
    xs[i]->started = true;
  }
  *ret = w;
  return 0;
fail:
  ext_watch_stop(w);
  return rc;
}
