/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's HTTP side (server.h) on the shared server (httpd.h): the verbs' listener, a
 * thread per connection (kube-scheduler keeps a few long-lived ones; /bind waits on the API
 * server without holding up the others), and the metrics listener, one epoll thread (/metrics
 * and the probes answer from memory at once, so idle sockets cost it a descriptor each, never
 * a turn). */
#include "server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "event.h"
#include "httpd.h"
#include "prom.h"

/* A request body: NodeNames of VERB_NODES_MAX names of up to 253 bytes (4.2 MB at most,
 * some 0.5 MB for 15,000 real names) and a Pod (the API server stores at most 1.5 MiB). */
#define BODY_MAX (8u << 20)
/* Bytes of request bodies held over all connections at once, charged as they arrive (a body
 * declared and never sent holds a first buffer, not its length), and of those per address:
 * kube-scheduler's calls (one scheduling cycle at a time, NodeNames of 15,000 nodes some
 * 0.75 MB) fit its share with room, and an address that can reach the port (the kubeadm
 * overlay's host network, a Service set up wrong) holds at most a quarter of the budget, so
 * the others are still answered. */
#define BODY_BUDGET (64u << 20)
#define PEER_BUDGET (16u << 20)
/* Connections (each a thread on the verbs listener) over all peers, and per address: idle
 * sockets of a few hundred peers take neither the last thread nor a probe's turn. */
#define VERB_CONNECTIONS 1024
#define VERB_THREAD_STACK (1u << 20)
/* The probes share this listener with Prometheus: a pod that can reach it must not take every
 * slot from them. Many more slots than sources get (epoll: an idle socket costs a descriptor
 * and a small pool), so filling it takes 512 source addresses. */
#define METRICS_CONNECTIONS 2048
#define METRICS_PER_IP 4
#define METRICS_CONNECTION_MEMORY (16u << 10)
#define REQUEST_TIMEOUT_S 10
#define PER_IP_CONNECTIONS 32

/* gslice_extender_request_duration_seconds: each verb's time from its body read to its answer
 * made, 0.1 ms .. 10 s. Counts per bucket (not cumulative) and the sum, atomic. */
#define DUR_BUCKETS 16
static const double dur_bounds[DUR_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1,      2.5,     5,      10};
enum { VERB_FILTER, VERB_PRIORITIZE, VERB_BIND, VERB_KINDS };
struct duration {
  uint64_t bucket[DUR_BUCKETS + 1]; /* the last: over 10 s */
  uint64_t sum_ns;
};

struct ext_server {
  struct httpd *verbs, *metrics;
  struct duration dur[VERB_KINDS];
  struct verbs *v;
};

static void counter(struct gs_buf *b, const char *name, const char *help, const char *label,
                    const char *const *values, const uint64_t *n, size_t count) {
  gs_prom_family(b, name, "counter", help);
  for (size_t i = 0; i < count; i++)
    gs_prom_sample_u64(b, name, NULL, label ? (const char *const[]){label, values[i], NULL} : NULL,
                       n[i]);
}

/* Cumulative buckets, _sum and _count (the +Inf bucket) of each verb's durations. */
static void durations(struct ext_server *s, struct gs_buf *b) {
  static const char *const verbs[VERB_KINDS] = {"filter", "prioritize", "bind"};
  const char *name = "gslice_extender_request_duration_seconds";

  gs_prom_family(b, name, "histogram",
                 "Time each verb took, from its body read to its answer made, by verb.");
  for (int v = 0; v < VERB_KINDS; v++) {
    uint64_t cum = 0;
    for (int i = 0; i <= DUR_BUCKETS; i++) {
      char le[32] = "+Inf";
      if (i < DUR_BUCKETS)
        snprintf(le, sizeof(le), "%g", dur_bounds[i]);
      cum += __atomic_load_n(&s->dur[v].bucket[i], __ATOMIC_RELAXED);
      gs_prom_sample_u64(b, name, "_bucket",
                         (const char *const[]){"verb", verbs[v], "le", le, NULL}, cum);
    }
    const char *const *l = (const char *const[]){"verb", verbs[v], NULL};
    gs_prom_sample(b, name, "_sum", l, __atomic_load_n(&s->dur[v].sum_ns, __ATOMIC_RELAXED) / 1e9);
    gs_prom_sample_u64(b, name, "_count", l, cum);
  }
}

/* The server's and the verbs' figures, after the cluster view's. */
static void metrics(struct ext_server *s, struct gs_buf *b) {
  struct verb_stats st;
  struct httpd_stats vs, ms = {0};
  struct cluster *c = verbs_cluster(s->v);

  verbs_stats_read(s->v, &st);
  httpd_stats(s->verbs, &vs);
  if (s->metrics)
    httpd_stats(s->metrics, &ms);
  cluster_metrics(c, b, gs_mono_ms());
  counter(b, "gslice_extender_requests_total", "Extender calls by verb.", "verb",
          (const char *const[]){"filter", "prioritize", "bind"},
          (const uint64_t[]){st.filter, st.prioritize, st.bind}, 3);
  durations(s, b);
  counter(b, "gslice_extender_bind_errors_total", "Binds answered with an Error.", NULL, NULL,
          &st.bind_errors, 1);
  counter(b, "gslice_extender_bind_refused_total",
          "Binds refused as not kube-scheduler's to ask (another UID or schedulerName, a node "
          "/filter did not pass).",
          NULL, NULL, &st.bind_refused, 1);
  counter(b, "gslice_extender_bind_repeated_total",
          "Binds whose Binding was already in place with the same assignment (409, counted as "
          "success).",
          NULL, NULL, &st.bind_conflicts_same, 1);
  counter(b, "gslice_extender_not_ready_total",
          "Filter or prioritize calls answered 503 before the first sync.", NULL, NULL,
          &st.not_ready, 1);
  counter(b, "gslice_extender_bad_requests_total", "Calls with a malformed body.", NULL, NULL,
          &st.bad_requests, 1);
  counter(b, "gslice_extender_connections_cut_total",
          "Connections closed for running past the request deadline (--request-timeout), or "
          "refused for the bytes of bodies held.",
          "reason", (const char *const[]){"deadline", "bodies"},
          (const uint64_t[]){vs.cut_deadline + ms.cut_deadline, vs.refused_bodies}, 2);
  gs_prom_family(b, "gslice_extender_connections", "gauge", "Connections open now, by listener.");
  gs_prom_sample_u64(b, "gslice_extender_connections", NULL,
                     (const char *const[]){"listener", "verbs", NULL}, vs.connections);
  gs_prom_sample_u64(b, "gslice_extender_connections", NULL,
                     (const char *const[]){"listener", "metrics", NULL}, ms.connections);
  gs_prom_family(b, "gslice_extender_request_body_bytes", "gauge",
                 "Bytes held now for request bodies not yet answered (bounded in all).");
  gs_prom_sample_u64(b, "gslice_extender_request_body_bytes", NULL, NULL, vs.body_bytes);
  struct kube_events *ev = verbs_events(s->v);
  if (ev)
    kube_events_prom(ev, "gslice_extender", b);
  gs_prom_family(b, "gslice_extender_ready", "gauge",
                 "Whether the first list of nodes and pods is done.");
  gs_prom_sample_u64(b, "gslice_extender_ready", NULL, NULL, cluster_synced(c) ? 1 : 0);
}

static void duration_add(struct duration *d, uint64_t ns) {
  int i = 0;
  while (i < DUR_BUCKETS && (double)ns > dur_bounds[i] * 1e9)
    i++;
  __atomic_add_fetch(&d->bucket[i], 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&d->sum_ns, ns, __ATOMIC_RELAXED);
}

/* ---- the two listeners' callbacks --------------------------------------------------------- */

static int metrics_route(void *cls, const struct httpd_req *rq, size_t *ret_max,
                         struct httpd_reply *rp) {
  struct ext_server *s = cls;
  (void)ret_max;
  if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0)
    httpd_reply_text(rp, 405, "method not allowed: this listener serves GET only\n");
  else if (strcmp(rq->url, "/livez") == 0)
    httpd_reply_text(rp, 200, "ok\n");
  else if (strcmp(rq->url, "/healthz") == 0)
    httpd_reply_text(rp, cluster_synced(verbs_cluster(s->v)) ? 200 : 503,
                     cluster_synced(verbs_cluster(s->v))
                         ? "ok\n"
                         : "not ready: the first list of nodes and pods is not read yet\n");
  else if (strcmp(rq->url, "/metrics") == 0) {
    struct gs_buf b = GS_BUF_INIT(0);
    metrics(s, &b);
    *rp = (struct httpd_reply){200, NULL, 0, "text/plain; version=0.0.4; charset=utf-8"};
    if (!(rp->body = gs_buf_steal(&b, &rp->len, NULL)))
      rp->status = 0;
  } else
    httpd_reply_text(rp, 404, "not found: this listener serves GET /metrics, /healthz, /livez\n");
  return 0;
}

static void metrics_serve(void *cls, const struct httpd_req *rq, struct httpd_reply *rp) {
  metrics_route(cls, rq, NULL, rp); /* never reached: the route answers every request */
}

/* A request's headers: the verb, its method and its body's bound. */
static int verbs_route(void *cls, const struct httpd_req *rq, size_t *ret_max,
                       struct httpd_reply *rp) {
  (void)cls;
  if (strcmp(rq->method, "POST") != 0) {
    if (strcmp(rq->url, "/healthz") == 0 || strcmp(rq->url, "/metrics") == 0)
      httpd_reply_text(rp, 404,
                       "not found: /healthz and /metrics are served on --metrics-listen\n");
    else
      httpd_reply_text(rp, 405,
                       "method not allowed: the verbs are POST /filter, /prioritize and /bind\n");
    return 0;
  }
  bool is_bind = strcmp(rq->url, "/bind") == 0;
  if (!is_bind && strcmp(rq->url, "/filter") != 0 && strcmp(rq->url, "/prioritize") != 0) {
    httpd_reply_json_error(rp, 404, "not found: the verbs are /filter, /prioritize and /bind");
    return 0;
  }
  *ret_max = is_bind ? VERB_BIND_BODY_MAX : BODY_MAX;
  return 1;
}

static void verbs_serve(void *cls, const struct httpd_req *rq, struct httpd_reply *rp) {
  struct ext_server *s = cls;
  uint64_t t0 = gs_mono_ns(), now = t0 / 1000000;
  char *body = NULL;
  size_t len = 0;
  int status;
  int verb = !strcmp(rq->url, "/filter")       ? VERB_FILTER
             : !strcmp(rq->url, "/prioritize") ? VERB_PRIORITIZE
                                               : VERB_BIND;
  if (verb == VERB_FILTER)
    status = verb_filter(s->v, rq->body, rq->len, now, &body, &len);
  else if (verb == VERB_PRIORITIZE)
    status = verb_prioritize(s->v, rq->body, rq->len, now, &body, &len);
  else
    status = verb_bind(s->v, rq->body, rq->len, now, &body, &len);
  duration_add(&s->dur[verb], gs_mono_ns() - t0);
  *rp = (struct httpd_reply){body ? (unsigned)status : 0, body, len, "application/json"};
}

/* ---- starting ------------------------------------------------------------------------------ */

/* Off loopback, the verbs need a client certificate, or --insecure-listen said. */
static int cfg_check(const struct ext_server_cfg *cfg, char *err, size_t errlen) {
  if (cfg->client_ca || cfg->insecure_listen)
    return 0;
  int loop = httpd_listen_loopback(cfg->listen, err, errlen);
  if (loop < 0)
    return loop;
  if (loop == 0) {
    snprintf(err, errlen,
             "refusing to serve the verbs on %s to any peer that connects: give --tls-cert, "
             "--tls-key and --client-ca (kube-scheduler's client certificate), listen on "
             "loopback (a sidecar of kube-scheduler), or say --insecure-listen",
             cfg->listen);
    return -EPERM;
  }
  return 0;
}

int ext_server_start(const struct ext_server_cfg *cfg, struct ext_server **ret, char *err,
                     size_t errlen) {
  struct ext_server *s = calloc(1, sizeof(*s));
  unsigned timeout_ms =
      1000u * (cfg->request_timeout_s ? cfg->request_timeout_s : REQUEST_TIMEOUT_S);
  int rc;

  if (!s)
    return -ENOMEM;
  s->v = cfg->verbs;
  struct httpd_cfg vc = {
      .name = "gslice-extender",
      .flag = "--listen",
      .listen = cfg->listen,
      .tls_cert = cfg->tls_cert,
      .tls_key = cfg->tls_key,
      .client_ca = cfg->client_ca,
      .threads = 0,
      .connections = VERB_CONNECTIONS,
      .per_peer = cfg->per_ip_connections ? cfg->per_ip_connections : PER_IP_CONNECTIONS,
      .timeout_ms = timeout_ms,
      .body_budget = BODY_BUDGET,
      .peer_budget = PEER_BUDGET,
      .thread_stack = VERB_THREAD_STACK,
      .json_errors = true,
      .log = cfg->log,
      .route = verbs_route,
      .serve = verbs_serve,
      .cls = s,
  };
  struct httpd_cfg mc = {
      .name = "gslice-extender",
      .flag = "--metrics-listen",
      .listen = cfg->metrics_listen,
      .threads = 1,
      .connections = METRICS_CONNECTIONS,
      .per_peer = METRICS_PER_IP,
      .timeout_ms = timeout_ms,
      .connection_memory = METRICS_CONNECTION_MEMORY,
      .log = cfg->log,
      .route = metrics_route,
      .serve = metrics_serve,
      .cls = s,
  };
  if ((rc = cfg_check(cfg, err, errlen)) || (rc = httpd_start(&vc, &s->verbs, err, errlen)) ||
      (cfg->metrics_listen && (rc = httpd_start(&mc, &s->metrics, err, errlen)))) {
    ext_server_stop(s);
    return rc;
  }
  *ret = s;
  return 0;
}

uint16_t ext_server_port(const struct ext_server *s) {
  return httpd_port(s->verbs);
}

uint16_t ext_server_metrics_port(const struct ext_server *s) {
  return s->metrics ? httpd_port(s->metrics) : 0;
}

void ext_server_stop(struct ext_server *s) {
  if (!s)
    return;
  httpd_stop(s->verbs);
  httpd_stop(s->metrics);
  free(s);
}
