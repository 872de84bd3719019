/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-webhook's HTTPS server (libmicrohttpd with GnuTLS): POST /mutate (an AdmissionReview
 * in, its answer out, review.h) and GET /healthz, on one TLS listener; each peer bounded in
 * connections, bytes and time by the shared server (src/k8s/common/httpd.h). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "review.h"

/* A request body: an AdmissionReview holds one Pod (the API server stores at most 1.5 MiB)
 * and, for CREATE, no old object. */
#define WH_BODY_MAX (4u << 20)

struct wh_server;

struct wh_server_cfg {
  const char *listen;             /* "[HOST:]PORT"; port 0: any free one */
  const char *tls_cert, *tls_key; /* PEM files; both required */
  const struct wh_cfg *review;
  unsigned request_timeout_s;  /* to send a request's headers and body, and idle; 0: 10 */
  unsigned per_ip_connections; /* 0: 32 */
  bool log;                    /* gs_log each denial and libmicrohttpd's messages */
};

/* 0, or a negative errno with err saying what (a taken port: -EADDRINUSE; a bad certificate
 * or key: -EINVAL). */
int wh_server_start(const struct wh_server_cfg *cfg, struct wh_server **ret, char *err,
                    size_t errlen);
uint16_t wh_server_port(const struct wh_server *s);
void wh_server_stop(struct wh_server *s);
