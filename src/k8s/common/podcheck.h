/* SPDX-License-Identifier: Apache-2.0 */
/* Whether an assignment agrees with the pod as written: what gslice-node and gslice-extender
 * both ask before they honour a (signed) gslice.io/assigned, so the two apply one rule. Also
 * the one reader of a container's gslice.io resources both use. No I/O. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "annot.h"

/* A container's quantity of resource res (limits, or requests; equal when both are given,
 * as extended resources need). 0 and *ret_set false when absent; -EINVAL with err naming
 * the container (cname), field and value. */
int k8s_container_resource(const json_t *ctr, const char *cname, const char *res, int64_t *ret,
                           bool *ret_set, char *err, size_t errlen);

/* Whether an entry of spec.initContainers is a native sidecar: restartPolicy "Always" (the one
 * value an init container may have; it then runs beside the app containers to the pod's end,
 * and the kubelet keeps its devices for it). */
bool k8s_container_is_sidecar(const json_t *init_ctr);

/* Part j of n of a container's total: total/n, the first total%n parts one more (memory in
 * bytes, compute in %). The one split the extender writes and gslice-node checks. */
uint64_t k8s_split(uint64_t total, uint32_t n, uint32_t j);

/* 0 when a matches pod (a Pod object as the API server has it): a->node is spec.nodeName;
 * every container (init ones too) that asks for gslice.io/gpu has exactly one entry, with
 * as many GPUs as its gslice.io/gpu, per GPU memory (>= 1 byte: a Kubernetes slice is never
 * uncapped) and compute the split above of its gslice.io/gpu-memory and gslice.io/gpu-compute
 * in the entry's order; an entry is a sidecar exactly when its init container is one
 * (k8s_container_is_sidecar); no entry names a container the pod lacks or one that asks for no GPU;
 * computeLimit 1..100 and at least each GPU's compute, priority a known one, weight 1..1000
 * (their values are the extender's, from the admin's priority classes: the signature vouches
 * for them, this checks only bounds). -EINVAL with err saying which rule failed, or -ENOMEM. */
int k8s_assigned_check_pod(const struct k8s_assigned *a, const json_t *pod, char *err,
                           size_t errlen);
