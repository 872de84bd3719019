/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node and the API server (src/k8s/common/kube.h): its pods' assignments; the heartbeat
 * thread's writes: the node's Lease (lease.c), the inventory annotation gslice.io/gpus when it
 * changes, and Events on pods. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "annot.h"
#include "event.h"
#include "kube.h"
#include "log.h"
#include "node.h"
#include "podcheck.h"

int node_kube_init(struct node *n, char *err, size_t err_len) {
  int r = kube_open(n->cfg.kubeconfig[0] ? n->cfg.kubeconfig : NULL, &n->kube, err, err_len);
  if (r < 0 && !n->cfg.kubeconfig[0]) {
    char why[KUBE_ERR_MAX];
    snprintf(why, sizeof(why), "%s", err);
    snprintf(err, err_len,
             "no API server: %s (outside a cluster give --kubeconfig FILE, or --no-api-server "
             "to run the device plugin alone)",
             why);
  }
  return r;
}

/* Path segments are names the kubelet gave us: DNS labels and subdomains, nothing to escape. */
static bool name_ok(const char *s) {
  size_t l = strlen(s);
  return l > 0 && l < 254 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") == l;
}

/* Both read the pod cache (pods.c): no API server I/O here, whatever thread calls, with n->lock
 * held. node_kube_pod does not wait for a pod the watch has not brought (node_reconcile's use:
 * "not there" is an answer); PreStartContainer's lookups wait (node_pods_get, NODE_POD_WAIT_MS). */
int node_kube_pod(struct node *n, const char *ns, const char *name, char **ret_assigned, char *uid,
                  size_t uid_len, char *phase, size_t phase_len, char *err, size_t err_len) {
  json_t *pod = NULL;

  *ret_assigned = NULL;
  if (!name_ok(ns) || !name_ok(name)) {
    snprintf(err, err_len, "\"%s/%s\" is not a pod name", ns, name);
    return -EINVAL;
  }
  int r = node_pods_get(n, ns, name, 0, &pod, err, err_len);
  if (r < 0)
    return r;
  const char *u = kube_meta_str(pod, "uid");
  const char *a = kube_annotation(pod, K8S_ANNOT_ASSIGNED);
  json_t *status = kube_json_get(pod, "status");
  json_t *ph = status ? kube_json_get(status, "phase") : NULL;
  snprintf(uid, uid_len, "%s", u ? u : "");
  snprintf(phase, phase_len, "%s", json_is_string(ph) ? json_string_value(ph) : "");
  if (a && !(*ret_assigned = strdup(a)))
    r = -ENOMEM;
  json_decref(pod);
  return r;
}

/* The inventory now (heartbeat 0: the time goes in when it is written). */
static void inventory(struct node *n, struct k8s_node_gpus *g) {
  memset(g, 0, sizeof(*g));
  g->version = K8S_ANNOT_VERSION;
  g->slots_per_gpu = n->cfg.slots_per_gpu;
  pthread_mutex_lock(&n->lock);
  g->ngpus = n->ngpus < K8S_MAX_GPUS ? n->ngpus : K8S_MAX_GPUS;
  for (uint32_t i = 0; i < g->ngpus; i++) {
    g->gpus[i].index = n->gpus[i].index;
    snprintf(g->gpus[i].uuid, sizeof(g->gpus[i].uuid), "%s", n->gpus[i].uuid);
    g->gpus[i].memory = n->gpus[i].memory;
    g->gpus[i].healthy = n->daemon_up;
    g->gpus[i].slots = n->cfg.slots_per_gpu;
  }
  pthread_mutex_unlock(&n->lock);
}

static int annotation_write(struct node *n, struct k8s_node_gpus *g, char *err, size_t err_len) {
  char path[NODE_NAME_MAX + 32], *text = NULL;

  g->heartbeat = time(NULL);
  int r = k8s_node_gpus_encode(g, &text);
  g->heartbeat = 0;
  if (r < 0) {
    snprintf(err, err_len, "cannot encode %s: %s", K8S_ANNOT_GPUS, strerror(-r));
    return r;
  }
  json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", K8S_ANNOT_GPUS, text);
  free(text);
  if (!patch)
    return -ENOMEM;
  if (!name_ok(n->cfg.node_name)) {
    json_decref(patch);
    snprintf(err, err_len, "\"%s\" is not a node name", n->cfg.node_name);
    return -EINVAL;
  }
  snprintf(path, sizeof(path), "/api/v1/nodes/%s", n->cfg.node_name);
  r = kube_merge_patch(n->kube, path, patch, NULL, err, err_len);
  json_decref(patch);
  return r;
}

int node_kube_heartbeat(struct node *n, char *err, size_t err_len) {
  static struct k8s_node_gpus g; /* its one caller is the heartbeat thread */
  inventory(n, &g);
  return annotation_write(n, &g, err, err_len);
}

/* ---- the API server's thread for the node's own writes ---- */

#define HEARTBEAT_NS 10000000000ull

struct node_api {
  pthread_t thread;
  pthread_cond_t wake; /* with n->lock */
  bool stop;           /* under n->lock */
  /* The heartbeat thread's own: */
  json_t *lease;                /* the Lease last read or written */
  struct k8s_node_gpus written; /* the inventory last written (heartbeat 0) */
  bool have_written;
  unsigned lease_fails, annot_fails, event_fails;
};

/* One heartbeat: the Lease renewed; the annotation written when the inventory changed, or
 * every time while the Lease cannot be written (an older RBAC, no namespace: the extender
 * then judges the node by the annotation's heartbeat, as before Leases). 0 when the node's
 * liveness went out one way or the other and the annotation is as it should be (the next
 * beat in 10 s), else the error (a retry sooner). */
static int beat(struct node *n, struct node_api *a) {
  static struct k8s_node_gpus g; /* the heartbeat thread's */
  char err[KUBE_ERR_MAX];
  int lr = node_lease_renew(n, &a->lease, err, sizeof(err));

  if (lr < 0 && a->lease_fails++ % 30 == 0)
    gs_log(GS_LOG_WARNING,
           "cannot renew the node's Lease %s%s in namespace %s: %s (retrying; until it works the "
           "%s annotation carries the heartbeat)",
           NODE_LEASE_PREFIX, n->cfg.node_name, n->cfg.lease_namespace, err, K8S_ANNOT_GPUS);
  if (lr == 0 && a->lease_fails) {
    gs_log(GS_LOG_INFO, "renewed the node's Lease %s%s again", NODE_LEASE_PREFIX, n->cfg.node_name);
    a->lease_fails = 0;
  }
  inventory(n, &g);
  if (lr == 0 && a->have_written && !memcmp(&g, &a->written, sizeof(g)))
    return 0;
  int r = annotation_write(n, &g, err, sizeof(err));
  if (r < 0 && a->annot_fails++ % 30 == 0)
    gs_log(GS_LOG_WARNING, "cannot write the node's %s annotation: %s (retrying every %llu s)",
           K8S_ANNOT_GPUS, err, HEARTBEAT_NS / 5 / 1000000000ull);
  if (r == 0) {
    if (a->annot_fails)
      gs_log(GS_LOG_INFO, "wrote the node's %s annotation again", K8S_ANNOT_GPUS);
    a->annot_fails = 0;
    a->written = g;
    a->have_written = true;
  }
  return r;
}

void node_kube_refused(struct node *n, const struct node_rec *r, const char *why) {
  if (!n->events || !r->ns[0] || !r->pod[0])
    return;
  char msg[KUBE_EVENT_MESSAGE_MAX];
  snprintf(msg, sizeof msg, "container %s gets no GPU: %s", r->container[0] ? r->container : "?",
           why);
  int e = kube_events_add(n->events, "Warning", NODE_EVENT_REFUSED, r->ns, r->pod, r->pod_uid, msg,
                          time(NULL));
  if (e >= 0 && n->api)
    pthread_cond_signal(&n->api->wake);
}

static void post_events(struct node *n, struct node_api *a) {
  char err[KUBE_ERR_MAX + 512] = "";
  kube_events_flush(n->events, n->kube, err, sizeof(err));
  if (err[0] && a->event_fails++ % 100 == 0)
    gs_log(GS_LOG_WARNING, "%s (Events not posted are counted, not retried)", err);
}

static void *heartbeat_run(void *arg) {
  struct node *n = arg;
  struct node_api *a = n->api;
  uint64_t next = 0;

  pthread_mutex_lock(&n->lock);
  while (!a->stop) {
    bool events = n->events && kube_events_pending(n->events);
    bool due = n->daemon_up && node_now() >= next;
    if (!events && !due) {
      uint64_t at = n->daemon_up ? next : node_now() + 200000000ull;
      struct timespec ts = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
      pthread_cond_timedwait(&a->wake, &n->lock, &ts);
      continue;
    }
    pthread_mutex_unlock(&n->lock);
    if (events)
      post_events(n, a);
    if (due) {
      int r = beat(n, a);
      next = node_now() + (r < 0 ? HEARTBEAT_NS / 5 : HEARTBEAT_NS);
    }
    pthread_mutex_lock(&n->lock);
  }
  pthread_mutex_unlock(&n->lock);
  return NULL;
}

int node_kube_start(struct node *n, char *err, size_t err_len) {
  struct node_api *a = calloc(1, sizeof(*a));
  pthread_condattr_t ca;
  int r;

  if (!a)
    return -ENOMEM;
  if (kube_events_new("gslice-node", n->cfg.node_name, &n->events) < 0) {
    free(a);
    return -ENOMEM;
  }
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&a->wake, &ca);
  pthread_condattr_destroy(&ca);
  /* One request, not a list or watch: a slow server holds up only this thread, and not long. */
  kube_set_timeout(n->kube, 10000);
  n->api = a;
  r = -pthread_create(&a->thread, NULL, heartbeat_run, n);
  if (r < 0) {
    n->api = NULL;
    pthread_cond_destroy(&a->wake);
    free(a);
    kube_events_free(n->events);
    n->events = NULL;
    snprintf(err, err_len, "cannot start a thread: %s", strerror(-r));
    return r;
  }
  r = node_pods_start(n, err, err_len);
  if (r < 0)
    node_kube_stop(n);
  return r;
}

void node_kube_stop(struct node *n) {
  struct node_api *a = n->api;
  node_pods_stop(n);
  if (!a)
    return;
  pthread_mutex_lock(&n->lock);
  a->stop = true;
  pthread_cond_broadcast(&a->wake);
  pthread_mutex_unlock(&n->lock);
  kube_cancel(n->kube);
  pthread_join(a->thread, NULL);
  pthread_cond_destroy(&a->wake);
  json_decref(a->lease);
  free(a);
  n->api = NULL;
  pthread_mutex_lock(&n->lock);
  struct kube_events *ev = n->events;
  n->events = NULL;
  pthread_mutex_unlock(&n->lock);
  kube_events_free(ev);
}

/* The state of init container `name` in the pod's status: 1 finished with exit 0, 2 finished
 * otherwise, 3 running, 0 not started (or not listed). */
static int init_state(json_t *pod, const char *name) {
  json_t *status = kube_json_get(pod, "status");
  json_t *list = status ? kube_json_get(status, "initContainerStatuses") : NULL;
  size_t i;
  json_t *st;

  json_array_foreach(list, i, st) {
    json_t *nm = kube_json_get(st, "name");
    if (!json_is_string(nm) || strcmp(json_string_value(nm), name))
      continue;
    json_t *state = kube_json_get(st, "state");
    json_t *term = state ? kube_json_get(state, "terminated") : NULL;
    if (term) {
      json_t *code = kube_json_get(term, "exitCode");
      return json_is_integer(code) && json_integer_value(code) == 0 ? 1 : 2;
    }
    return state && kube_json_get(state, "running") ? 3 : 0;
  }
  return 0;
}

/* Which container slots that PodResources lists under ctr are starting now. The kubelet's device
 * manager (devicemanager/manager.go, Allocate) goes through the init containers in their order,
 * then the app containers: a regular init container's devices go back to a pool that the
 * containers after it take from first (devicesToReuse); a sidecar (restartPolicy Always) takes
 * from that pool too but keeps what it got: its devices are taken out of the pool, and are never
 * another container's. PodResources lists the app containers and the sidecars (SidecarContainers,
 * on by default since 1.29), never the regular init containers. So the slots of ctr may start
 * the regular init containers before ctr (all of them for an app container; those before it in
 * spec.initContainers for a sidecar) and then ctr, never a sidecar other than ctr: a sidecar runs
 * to the pod's end and is never "terminated with exit 0", so counting it would hand its entry to
 * the containers after it. Regular init containers run one at a time, each to success. */
int node_kube_which(struct node *n, const char *ns, const char *name, const struct k8s_assigned *as,
                    const char *ctr, const char *prev, char *out, size_t out_len, char *err,
                    size_t err_len) {
  uint64_t until = node_now() + NODE_INIT_LAG_MS * 1000000ull, gen = node_pods_gen(n);
  const char *done = "";

  snprintf(out, out_len, "%s", ctr);
  if (!name_ok(ns) || !name_ok(name))
    return -EINVAL;
  /* The kubelet reports an init container's end to the API server on its own schedule: when
   * the one these slots last started still shows as running, its end is not there yet; the
   * watch brings it. */
  for (;;) {
    json_t *pod = NULL, *spec, *inits, *c;
    size_t i;
    bool lag = false;
    int r = node_pods_get(n, ns, name, NODE_POD_WAIT_MS, &pod, err, err_len);
    if (r < 0)
      return r;
    spec = kube_json_get(pod, "spec");
    inits = spec ? kube_json_get(spec, "initContainers") : NULL;
    json_array_foreach(inits, i, c) {
      json_t *nm = kube_json_get(c, "name");
      bool wants = false;
      if (!json_is_string(nm))
        continue;
      if (!strcmp(ctr, json_string_value(nm)))
        break; /* ctr itself, a sidecar: only the regular init containers before it */
      if (k8s_container_is_sidecar(c) || !strcmp(done, json_string_value(nm)))
        continue;
      for (uint32_t k = 0; k < as->ncontainers; k++)
        wants |= as->containers[k].init && !as->containers[k].sidecar &&
                 !strcmp(as->containers[k].name, json_string_value(nm));
      if (!wants)
        continue;
      int s = init_state(pod, json_string_value(nm));
      if (s == 1)
        continue;
      if (s == 3 && !strcmp(prev, json_string_value(nm))) {
        lag = true;
        break;
      }
      snprintf(out, out_len, "%s", json_string_value(nm));
      break;
    }
    json_decref(pod);
    if (!lag)
      return 0;
    uint64_t now = node_now();
    if (now >= until) {
      /* Still "running": it ended (the kubelet starts nothing on these slots before), so what
       * starts now is the one after it. */
      done = prev;
      continue;
    }
    node_pods_wait(n, &gen, (int)((until - now) / 1000000ull) + 1);
  }
}
