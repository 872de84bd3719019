/* The kube-scheduler extender verbs on request bodies, without HTTP (server.c serves
 * them; the bench calls them in process). Types and keys are the extender v1 API's
 * (k8s.io/kube-scheduler/extender/v1): ExtenderArgs {Pod, Nodes, NodeNames} in,
 * ExtenderFilterResult {Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes,
 * Error}, HostPriorityList [{Host, Score}], ExtenderBindingArgs {PodName,
 * PodNamespace, PodUID, Node} in, ExtenderBindingResult {Error} out. Keys are read
 * as Go reads them (any case: "NodeNames" and the older "nodenames" alike) and
 * written capitalised, which every version decodes. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "kube.h"

/* Counters for /metrics. */
struct verb_stats {
  uint64_t filter, prioritize, bind, bind_errors, bind_conflicts_same, not_ready, bad_requests;
};

/* Each returns the HTTP status and a malloc'd body (*ret_body, *ret_len). A
 * malformed body is 400 with a JSON Error saying what was wrong. */
int verb_filter(struct cluster *c, const char *body, size_t len, uint64_t now_ms, FILE *log,
                struct verb_stats *st, char **ret_body, size_t *ret_len);
int verb_prioritize(struct cluster *c, const char *body, size_t len, uint64_t now_ms, FILE *log,
                    struct verb_stats *st, char **ret_body, size_t *ret_len);
/* k NULL: every bind fails with an Error. */
int verb_bind(struct cluster *c, struct kube *k, const char *body, size_t len, uint64_t now_ms,
              FILE *log, struct verb_stats *st, char **ret_body, size_t *ret_len);
