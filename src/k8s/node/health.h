/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node's probes (--health-listen): GET /healthz (the process serves: 200), GET /readyz
 * (200 once registered with the kubelet and the pod cache synced, else 503 naming what is
 * missing) and GET /metrics (the Events it posts, gslice_node_events_*: kube_events_prom), on
 * the Kubernetes programs' shared HTTP server (src/k8s/common/httpd.h). */
#ifndef GSLICE_NODE_HEALTH_H
#define GSLICE_NODE_HEALTH_H

#include <stddef.h>
#include <stdint.h>

struct node;
struct node_health;

/* Serves on `listen` ([HOST:]PORT, "[v6]:PORT" too; no host: 127.0.0.1); NULL and err set on
 * failure. */
struct node_health *node_health_start(struct node *n, const char *listen, char *err,
                                      size_t err_len);
/* Stops the server and frees h; NULL: nothing. */
void node_health_stop(struct node_health *h);

#endif
