/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node's probes (--health-listen): GET /healthz (the process serves: 200) and GET
 * /readyz (200 once registered with the kubelet and the pod cache synced, else 503 naming what
 * is missing), on a small libmicrohttpd server of one thread. */
#ifndef GSLICE_NODE_HEALTH_H
#define GSLICE_NODE_HEALTH_H

#include <stddef.h>
#include <stdint.h>

struct node;
struct node_health;

/* [HOST:]PORT ("[v6]:PORT" too); no host: 127.0.0.1. 0 or -EINVAL. */
int node_health_parse(const char *text, char *host, size_t hostlen, uint16_t *ret_port);
/* Serves on `listen` ([HOST:]PORT); NULL and err set on failure. */
struct node_health *node_health_start(struct node *n, const char *listen, char *err,
                                      size_t err_len);
/* Stops the server and frees h; NULL: nothing. */
void node_health_stop(struct node_health *h);

#endif
