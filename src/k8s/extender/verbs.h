/* SPDX-License-Identifier: Apache-2.0 */
/* The kube-scheduler extender verbs on request bodies, without HTTP (server.c serves
 * them; the bench calls them in process). Types and keys are the extender v1 API's
 * (k8s.io/kube-scheduler/extender/v1): ExtenderArgs {Pod, Nodes, NodeNames} in,
 * ExtenderFilterResult {Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes,
 * Error}, HostPriorityList [{Host, Score}], ExtenderBindingArgs {PodName,
 * PodNamespace, PodUID, Node} in, ExtenderBindingResult {Error} out. Keys are read
 * as Go reads them (any case: "NodeNames" and the older "nodenames" alike) and
 * written capitalised, which every version decodes. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "kube.h"

/* The reason of the Event on each pod bound (type Normal; the message names the GPUs). */
#define VERB_EVENT_ASSIGNED "GSliceAssigned"
struct kube_events;

/* What one call may carry, sized for 15,000 nodes (docs/kubernetes.md, "Limits"): names
 * in NodeNames (or Nodes.items), and the bytes of an answer. A request beyond them is
 * refused (400), an answer beyond them is an Error (500): never gigabytes for one call. */
#define VERB_NODES_MAX 16384
#define VERB_ANSWER_MAX (32u << 20)
/* An ExtenderBindingArgs is four names. */
#define VERB_BIND_BODY_MAX 65536u
/* How long a node /filter passed for a pod may be bound to (kube-scheduler binds within
 * a scheduling cycle's moments; a Permit plugin may hold it longer, then it filters again). */
#define VERB_PASS_TTL_MS 60000

/* Counters for /metrics, counted atomically: read them with verbs_stats_read. */
struct verb_stats {
  uint64_t filter, prioritize, bind, bind_errors, bind_conflicts_same, not_ready, bad_requests;
  uint64_t bind_refused; /* binds kube-scheduler cannot have asked for (not filtered, ...) */
};

struct verbs_cfg {
  struct cluster *cluster;
  struct kube *kube; /* for /bind; NULL: every bind fails with an Error (bench) */
  bool log;          /* whether to gs_log refusals and binds (false: silent, as in bench/) */
  /* A GSliceAssigned Event on each pod bound, queued here (NULL: none). */
  struct kube_events *events;
  /* /bind takes only pods whose spec.schedulerName is one of these (NULL: the one
   * "default-scheduler"). The strings must outlive the verbs. */
  const char *const *scheduler_names;
  size_t nscheduler_names;
};

struct verbs;

/* 0 or -ENOMEM. */
int verbs_new(const struct verbs_cfg *cfg, struct verbs **ret);
void verbs_free(struct verbs *v);
/* A snapshot of the counters, each read atomically (the verbs run on many threads). */
void verbs_stats_read(struct verbs *v, struct verb_stats *ret);
struct cluster *verbs_cluster(struct verbs *v);
/* cfg.events (NULL: none). */
struct kube_events *verbs_events(struct verbs *v);

/* Each returns the HTTP status and a malloc'd body (*ret_body, *ret_len). A
 * malformed body is 400 with a JSON Error saying what was wrong. /filter remembers
 * which nodes it passed for which pod UID (bounded: VERB_PASS_TTL_MS, and a cap on
 * the bytes), and /bind takes only such a (pod UID, node). */
int verb_filter(struct verbs *v, const char *body, size_t len, uint64_t now_ms, char **ret_body,
                size_t *ret_len);
int verb_prioritize(struct verbs *v, const char *body, size_t len, uint64_t now_ms, char **ret_body,
                    size_t *ret_len);
int verb_bind(struct verbs *v, const char *body, size_t len, uint64_t now_ms, char **ret_body,
              size_t *ret_len);
