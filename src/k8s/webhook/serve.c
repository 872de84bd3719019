/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-webhook's HTTPS server (serve.h) on the shared server (httpd.h): a few epoll threads
 * serve every connection (an answer is computed from the body alone, at once, so no request
 * waits on another), and a renewed certificate and key are served without a restart. */
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "httpd.h"
#include "log.h"

/* Bytes of request bodies held over all connections at once, and by one address: the API
 * server's few addresses take what they need (a Pod is some KiB), one peer stalling its
 * bodies cannot take the rest from the others. */
#define BODY_BUDGET (64u << 20)
#define PEER_BUDGET (16u << 20)
#define CONNECTIONS 1024
#define PER_IP_CONNECTIONS 32
#define THREADS 4
#define REQUEST_TIMEOUT_S 10

struct wh_server {
  struct httpd *h;
  const struct wh_cfg *review;
  bool log;
};

/* ---- replies ------------------------------------------------------------------------------ */

static void reply_text(struct httpd_reply *rp, unsigned status, const char *text) {
  struct gs_buf b = GS_BUF_INIT(0);
  gs_buf_printf(&b, "%s\n", text);
  *rp = (struct httpd_reply){status, NULL, 0, "text/plain; charset=utf-8"};
  if (!(rp->body = gs_buf_steal(&b, &rp->len, NULL)))
    rp->status = 0;
}

/* ---- requests ----------------------------------------------------------------------------- */

/* Method and path judged before a byte of the body is read. */
static int route(void *cls, const struct httpd_req *rq, size_t *ret_max, struct httpd_reply *rp) {
  bool get = strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0;
  (void)cls;
  if (strcmp(rq->url, "/healthz") == 0)
    reply_text(rp, get ? 200 : 405, get ? "ok" : "/healthz is GET only");
  else if (strcmp(rq->url, "/mutate") != 0)
    reply_text(rp, 404, "not found: gslice-webhook serves POST /mutate, GET /healthz");
  else if (strcmp(rq->method, "POST") != 0)
    reply_text(rp, 405, "method not allowed: /mutate is POST only");
  else {
    *ret_max = WH_BODY_MAX;
    return 1;
  }
  return 0;
}

static void mutate(void *cls, const struct httpd_req *rq, struct httpd_reply *rp) {
  struct wh_server *s = cls;
  char err[K8S_ERR_MAX * 2];
  enum wh_verdict v;
  char *out = NULL;
  size_t len = 0;
  int rc = wh_review(rq->body, rq->len, s->review, &out, &len, &v, err, sizeof err);
  if (rc == -ENOMEM) {
    reply_text(rp, 500, "out of memory");
  } else if (rc) {
    if (s->log)
      gs_log(GS_LOG_WARNING, "a malformed AdmissionReview: %s", err);
    reply_text(rp, 400, err);
  } else {
    if (s->log && v == WH_DENIED)
      gs_log(GS_LOG_INFO, "denied a pod: %s", err);
    *rp = (struct httpd_reply){out ? 200 : 0, out, len, "application/json"};
  }
}

/* ---- starting ----------------------------------------------------------------------------- */

int wh_server_start(const struct wh_server_cfg *cfg, struct wh_server **ret, char *err,
                    size_t errlen) {
  struct wh_server *s;
  int rc;

  if (!cfg->tls_cert || !cfg->tls_key) {
    snprintf(err, errlen,
             "--tls-cert and --tls-key are required: the API server calls "
             "admission webhooks over HTTPS only");
    return -EINVAL;
  }
  if (!(s = calloc(1, sizeof(*s))))
    return -ENOMEM;
  s->review = cfg->review;
  s->log = cfg->log;
  struct httpd_cfg hc = {
      .name = "gslice-webhook",
      .flag = "--listen",
      .listen = cfg->listen,
      .tls_cert = cfg->tls_cert,
      .tls_key = cfg->tls_key,
      .tls_reload = true,
      .threads = THREADS,
      .connections = CONNECTIONS,
      .per_peer = cfg->per_ip_connections ? cfg->per_ip_connections : PER_IP_CONNECTIONS,
      .timeout_ms = 1000u * (cfg->request_timeout_s ? cfg->request_timeout_s : REQUEST_TIMEOUT_S),
      .body_budget = BODY_BUDGET,
      .peer_budget = PEER_BUDGET,
      .log = cfg->log,
      .route = route,
      .serve = mutate,
      .cls = s,
  };
  if ((rc = httpd_start(&hc, &s->h, err, errlen))) {
    free(s);
    return rc;
  }
  *ret = s;
  return 0;
}

uint16_t wh_server_port(const struct wh_server *s) {
  return httpd_port(s->h);
}

void wh_server_stop(struct wh_server *s) {
  if (!s)
    return;
  httpd_stop(s->h);
  free(s);
}
