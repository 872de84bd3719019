/* SPDX-License-Identifier: Apache-2.0 */
/* Keeps a cluster view current: list, then watch from the list's resourceVersion, for
 * nodes, for pods and for the nodes' Leases, each on its own thread; a 410 or a broken stream lists
 * again. */
#pragma once
#include "cluster.h"
#include "kube.h"

struct ext_watch;

/* Opens its own API connections from kubeconfig (NULL: in-cluster). Logs through gs_log.
 * lease_ns: the nodes' Leases are watched there too (NULL: not). */
int ext_watch_start(struct cluster *c, const char *kubeconfig, const char *lease_ns,
                    struct ext_watch **ret, char *err, size_t errlen);
void ext_watch_stop(struct ext_watch *w);
