/* SPDX-License-Identifier: Apache-2.0 */
/* Reading what a pod asks of gslice (its containers' gslice.io resources and annotations)
 * and writing the gslice.io/assigned a placement gives it. No I/O. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "annot.h"
#include "place.h"

#define POD_UID_MAX 64

struct pod_id {
  char ns[K8S_NAME_MAX];
  char name[K8S_NAME_MAX];
  char uid[POD_UID_MAX];
  char node[K8S_NAME_MAX]; /* spec.nodeName, "" when not bound */
  bool done;               /* status.phase Succeeded or Failed: holds nothing any more */
};

/* metadata.namespace/name/uid, spec.nodeName, status.phase. -EINVAL (err says
 * what) when the object is no pod. */
int podspec_id(const json_t *pod, struct pod_id *ret, char *err, size_t errlen);

/* What the cluster admin decides for pods of a PriorityClass (gslice-extender
 * --priority-class NAME=high|normal|low[:weight=N][:limit=P]): the gslice priority, the
 * weight and the compute ceiling its pods get at most. A pod of no mapped class gets
 * normal, weight 1, ceiling 100; its gslice.io/priority, gslice.io/weight and
 * gslice.io/compute-limit annotations may lower these, never raise them. */
struct podspec_class {
  char name[K8S_NAME_MAX]; /* spec.priorityClassName */
  enum k8s_priority priority;
  uint32_t weight;        /* 1..1000 */
  uint32_t compute_limit; /* 1..100, % of each GPU */
};

struct podspec_cfg {
  enum place_policy policy; /* when the pod does not say */
  const struct podspec_class *classes;
  size_t nclasses;
};

/* Parses "NAME=high|normal|low[:weight=N][:limit=P]" (weight 1 and limit 100 when not
 * given). 0 or -EINVAL with err saying what is wrong. */
int podspec_class_parse(const char *text, struct podspec_class *ret, char *err, size_t errlen);

/* The containers (init ones too) that ask for gslice.io/gpu, with their totals
 * of gslice.io/gpu-memory and gslice.io/gpu-compute (limits, or requests; equal
 * when both are given) and the pod's annotations gslice.io/compute-limit,
 * priority, weight, policy (dflt when absent). ret->containers is malloc'd
 * (ret->ncontainers 0 and NULL when the pod asks for none). -EINVAL with err
 * naming the container, field and value, or -ENOMEM. */
int podspec_request(const json_t *pod, enum place_policy dflt, struct place_pod *ret, char *err,
                    size_t errlen);
/* The same with the admin's classes: priority, weight and compute limit are the class's
 * (see struct podspec_class), lowered by the pod's annotations. podspec_request is this with
 * no class mapped. */
int podspec_request_cfg(const json_t *pod, const struct podspec_cfg *cfg, struct place_pod *ret,
                        char *err, size_t errlen);
void podspec_request_free(struct place_pod *p);

/* The annotation for a placement on node: per container its GPUs' uuid, index,
 * memory and compute in the order chosen. ret is freed with k8s_assigned_free. */
int podspec_assignment(const char *node_name, const struct place_node *node,
                       const struct place_pod *pod, const struct place_choice *choice,
                       struct k8s_assigned *ret);

/* The other way: an assignment as shares on node (GPUs found by uuid) and as the
 * pod it was for. Parts on GPUs the node no longer has are left out. */
int podspec_from_assignment(const struct k8s_assigned *a, const struct place_node *node,
                            struct place_pod *ret_pod, struct place_share *shares,
                            uint32_t *ret_nshares);
