/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node's probes and metrics: /healthz, /readyz and /metrics on --health-listen, on the
 * shared server (src/k8s/common/httpd.h): one epoll thread answering from memory at once (never
 * n->lock), so a probe never holds the plugin up and an idle socket costs a descriptor, never a
 * turn. */
#include "health.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "event.h"
#include "httpd.h"
#include "kube.h"
#include "node.h"
#include "prom.h"

/* The kubelet probes from the node's one address, a connection a probe, liveness and readiness
 * possibly at once: a few per address, so that a pod filling the listener from its own address
 * cannot take every slot, and many more slots than one node's pods have addresses (110 by
 * default), so that they cannot together either. A peer is cut 2 s after it connects or its
 * last answer, however it drips its bytes. */
#define HEALTH_CONNS 512
#define HEALTH_CONNS_PER_IP 4
#define HEALTH_TIMEOUT_MS 2000
#define HEALTH_CONNECTION_MEMORY (16u << 10)

struct node_health {
  struct node *n;
  struct httpd *h;
};

/* Registered with the kubelet (the main loop's flag) and the pod cache synced. */
static void readiness(struct node *n, char *why, size_t len) {
  bool reg = __atomic_load_n(&n->registered, __ATOMIC_RELAXED);
  /* The DRA mode keeps no pod cache: registered with the kubelet is ready. */
  bool pods = n->cfg.no_api || n->cfg.dra || node_pods_synced(n);

  snprintf(why, len, "%s%s%s", reg ? "" : "not registered with the kubelet",
           !reg && !pods ? "; " : "", pods ? "" : "pod cache not synced");
}

/* The Events' series, as gslice-extender's (kube_events_prom, prefix gslice_node): where
 * gslice-node posts Events (an API server, device-plugin mode; none else). n->events is set
 * before this server starts and freed after it stops: read without n->lock. With an API server,
 * also its kept connections found out of step (kube_out_of_step). */
static void metrics(struct node *n, struct httpd_reply *rp) {
  struct gs_buf b = GS_BUF_INIT(0);
  if (n->events)
    kube_events_prom(n->events, "gslice_node", &b);
  /* n->kube: opened before this server starts, never closed while it runs (an atomic count). */
  if (n->kube) {
    const char *name = "gslice_node_api_connections_out_of_step_total";
    gs_prom_family(&b, name, "counter",
                   "Kept API server connections closed before a request because the server had "
                   "sent bytes on them unasked (an answer that would have been read as another's)");
    gs_prom_sample_u64(&b, name, NULL, NULL, kube_out_of_step(n->kube));
  }
  *rp = (struct httpd_reply){200, NULL, 0, "text/plain; version=0.0.4; charset=utf-8"};
  if (!(rp->body = gs_buf_steal(&b, &rp->len, NULL)))
    rp->status = 0;
}

/* Every request is answered from its headers (a body is not read). */
static int route(void *cls, const struct httpd_req *rq, size_t *ret_max, struct httpd_reply *rp) {
  struct node_health *nh = cls;
  char why[128], text[160] = "ok\n";
  unsigned status = 200;
  (void)ret_max;

  if (strcmp(rq->method, "GET") && strcmp(rq->method, "HEAD")) {
    status = 405;
    snprintf(text, sizeof text, "GET only\n");
  } else if (!strcmp(rq->url, "/readyz")) {
    readiness(nh->n, why, sizeof(why));
    if (why[0]) {
      status = 503;
      snprintf(text, sizeof(text), "not ready: %s\n", why);
    }
  } else if (!strcmp(rq->url, "/metrics")) {
    metrics(nh->n, rp);
    return 0;
  } else if (strcmp(rq->url, "/healthz")) {
    status = 404;
    snprintf(text, sizeof text, "not found: /healthz, /readyz or /metrics\n");
  }
  httpd_reply_text(rp, status, text);
  return 0;
}

static void serve(void *cls, const struct httpd_req *rq, struct httpd_reply *rp) {
  route(cls, rq, NULL, rp); /* never reached: the route answers every request */
}

struct node_health *node_health_start(struct node *n, const char *at, char *err, size_t err_len) {
  struct node_health *nh = calloc(1, sizeof(*nh));
  if (!nh) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  nh->n = n;
  struct httpd_cfg cfg = {
      .name = "gslice-node",
      .flag = "--health-listen",
      .listen = at,
      .default_host = "127.0.0.1",
      .threads = 1,
      .connections = HEALTH_CONNS,
      .per_peer = HEALTH_CONNS_PER_IP,
      .timeout_ms = HEALTH_TIMEOUT_MS,
      .connection_memory = HEALTH_CONNECTION_MEMORY,
      .route = route,
      .serve = serve,
      .cls = nh,
  };
  if (httpd_start(&cfg, &nh->h, err, err_len)) {
    free(nh);
    return NULL;
  }
  return nh;
}

void node_health_stop(struct node_health *nh) {
  if (!nh)
    return;
  httpd_stop(nh->h);
  free(nh);
}
