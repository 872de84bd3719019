/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-extender's HTTP side (libmicrohttpd): the kube-scheduler extender verbs /filter,
 * /prioritize and /bind on one listener (HTTPS with client certificates, or plain HTTP on
 * loopback for a sidecar), /healthz, /livez and /metrics on another, each peer bounded in
 * connections, time and bytes by the shared server (src/k8s/common/httpd.h, which also reads
 * [HOST:]PORT). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "verbs.h"

struct ext_server;

struct ext_server_cfg {
  const char *listen;         /* the verbs: "[HOST:]PORT"; port 0: any free one */
  const char *metrics_listen; /* /metrics, /healthz, /livez; NULL: not served */
  /* PEM files. With cert and key the verbs are served over TLS; with client_ca too, only to
   * peers whose certificate that CA signed (refused in the handshake). */
  const char *tls_cert, *tls_key, *client_ca;
  /* Plain HTTP, or TLS without client_ca, on an address other than loopback. */
  bool insecure_listen;
  unsigned request_timeout_s;  /* to send a request's headers and body, and idle; 0: 10 */
  unsigned per_ip_connections; /* 0: 32 */
  struct verbs *verbs;
  bool log; /* whether to gs_log libmicrohttpd's messages (false: silent, as in bench/) */
};

/* 0, or a negative errno with err saying what (a taken port: -EADDRINUSE; a bad
 * certificate or key: -EINVAL; a plain listener off loopback: -EPERM). */
int ext_server_start(const struct ext_server_cfg *cfg, struct ext_server **ret, char *err,
                     size_t errlen);
uint16_t ext_server_port(const struct ext_server *s);
uint16_t ext_server_metrics_port(const struct ext_server *s); /* 0: none */
void ext_server_stop(struct ext_server *s);
