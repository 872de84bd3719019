/* SPDX-License-Identifier: Apache-2.0 */
/* An assignment against its pod (podcheck.h). */
#include "podcheck.h"
#include "errtext.h"
#include "quantity.h"
#include "words.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int k8s_container_resource(const json_t *ctr, const char *cname, const char *res, int64_t *ret,
                           bool *ret_set, char *err, size_t errlen) {
  json_t *rs = json_object_get(ctr, "resources");
  const char *from[2] = {"limits", "requests"};
  int64_t got[2] = {0, 0};
  bool set[2] = {false, false};
  char qerr[200];

  for (int i = 0; i < 2; i++) {
    json_t *v = json_object_get(json_object_get(rs, from[i]), res);
    char num[64];
    const char *text;
    if (!v)
      continue;
    if (json_is_integer(v)) {
      snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
      text = num;
    } else if (json_is_string(v)) {
      text = json_string_value(v);
    } else {
      return k8s_err(err, errlen, -EINVAL,
                     "container %s: resources.%s[%s] must be a quantity string", cname, from[i],
                     res);
    }
    if (k8s_quantity_parse(text, 0, &got[i], qerr, sizeof qerr))
      return k8s_err(err, errlen, -EINVAL, "container %s: resources.%s[%s]: %s", cname, from[i],
                     res, qerr);
    if (got[i] < 0)
      return k8s_err(err, errlen, -EINVAL, "container %s: resources.%s[%s] is negative (%s)", cname,
                     from[i], res, text);
    set[i] = true;
  }
  if (set[0] && set[1] && got[0] != got[1])
    return k8s_err(err, errlen, -EINVAL,
                   "container %s: %s requests (%lld) and limits (%lld) differ; extended "
                   "resources need them equal",
                   cname, res, (long long)got[1], (long long)got[0]);
  *ret_set = set[0] || set[1];
  *ret = set[0] ? got[0] : set[1] ? got[1] : 0;
  return 0;
}

bool k8s_container_is_sidecar(const json_t *init_ctr) {
  const char *rp = json_string_value(json_object_get(init_ctr, "restartPolicy"));
  return rp && strcmp(rp, "Always") == 0;
}

uint64_t k8s_split(uint64_t total, uint32_t n, uint32_t j) {
  return n ? total / n + (j < total % n ? 1 : 0) : 0;
}

/* One declared container against its entry (NULL: none). */
static int check_container(const struct k8s_assigned *a, const json_t *ctr, bool init, bool *used,
                           char *err, size_t errlen) {
  const char *cname = json_string_value(json_object_get(ctr, "name"));
  int64_t gpus = 0, mem = 0, compute = 0;
  bool gset, mset, cset;
  const struct k8s_assigned_container *c = NULL;
  int rc;

  if (!cname || !*cname)
    return k8s_err(err, errlen, -EINVAL, "a container of the pod has no name");
  if ((rc = k8s_container_resource(ctr, cname, K8S_RES_GPU, &gpus, &gset, err, errlen)) ||
      (rc = k8s_container_resource(ctr, cname, K8S_RES_MEMORY, &mem, &mset, err, errlen)) ||
      (rc = k8s_container_resource(ctr, cname, K8S_RES_COMPUTE, &compute, &cset, err, errlen)))
    return rc;
  for (uint32_t i = 0; i < a->ncontainers; i++)
    if (a->containers[i].init == init && strcmp(a->containers[i].name, cname) == 0) {
      c = &a->containers[i];
      used[i] = true;
    }
  if (gpus <= 0) {
    if (c)
      return k8s_err(err, errlen, -EINVAL, "container %s asks for no %s but is assigned GPUs",
                     cname, K8S_RES_GPU);
    return 0;
  }
  if (!c)
    return k8s_err(err, errlen, -EINVAL, "container %s asks for %s but is not assigned any", cname,
                   K8S_RES_GPU);
  bool sidecar = init && k8s_container_is_sidecar(ctr);
  if (c->sidecar != sidecar)
    return k8s_err(err, errlen, -EINVAL,
                   "container %s: the assignment %s it a sidecar; the pod's init container %s "
                   "restartPolicy Always",
                   cname, c->sidecar ? "makes" : "does not make", sidecar ? "has" : "lacks");
  if ((uint64_t)gpus != c->ngpus)
    return k8s_err(err, errlen, -EINVAL, "container %s: assigned %u GPU(s), %s is %lld", cname,
                   c->ngpus, K8S_RES_GPU, (long long)gpus);
  if (c->compute_limit < 1 || c->compute_limit > GS_PERCENT_MAX || c->weight < GS_WEIGHT_MIN ||
      c->weight > GS_WEIGHT_MAX || (unsigned)c->priority > K8S_PRIO_HIGH)
    return k8s_err(err, errlen, -EINVAL,
                   "container %s: computeLimit %u (1..%u), weight %u (%u..%u) or priority %s "
                   "(%s) out of bounds",
                   cname, c->compute_limit, GS_PERCENT_MAX, c->weight, GS_WEIGHT_MIN, GS_WEIGHT_MAX,
                   k8s_priority_name(c->priority), GS_PRIORITY_WORDS);
  for (uint32_t j = 0; j < c->ngpus; j++) {
    const struct k8s_assigned_gpu *g = &c->gpus[j];
    uint64_t wm = k8s_split((uint64_t)mem, c->ngpus, j);
    uint64_t wc = k8s_split((uint64_t)compute, c->ngpus, j);
    if (g->memory < 1)
      return k8s_err(err, errlen, -EINVAL,
                     "container %s: GPU %s has memory 0 (no cap); a Kubernetes slice is always "
                     "capped",
                     cname, g->uuid);
    if (g->memory != wm || g->compute != wc)
      return k8s_err(err, errlen, -EINVAL,
                     "container %s: GPU %s is assigned %llu B and %u%%; the pod declares "
                     "%lld B and %lld%% over %u GPU(s), so %llu B and %llu%% there",
                     cname, g->uuid, (unsigned long long)g->memory, g->compute, (long long)mem,
                     (long long)compute, c->ngpus, (unsigned long long)wm, (unsigned long long)wc);
    if (g->compute > c->compute_limit)
      return k8s_err(err, errlen, -EINVAL, "container %s: compute %u%% above computeLimit %u%%",
                     cname, g->compute, c->compute_limit);
  }
  return 0;
}

int k8s_assigned_check_pod(const struct k8s_assigned *a, const json_t *pod, char *err,
                           size_t errlen) {
  const json_t *spec = json_object_get(pod, "spec");
  const char *node = json_string_value(json_object_get(spec, "nodeName"));
  const char *lists[2] = {"initContainers", "containers"};
  bool used[K8S_MAX_CONTAINERS] = {false};
  int rc;

  if (a->ncontainers > K8S_MAX_CONTAINERS)
    return k8s_err(err, errlen, -EINVAL, "%s has more than %d containers", K8S_ANNOT_ASSIGNED,
                   K8S_MAX_CONTAINERS);
  if (!node || strcmp(node, a->node) != 0)
    return k8s_err(err, errlen, -EINVAL, "%s names node %s, the pod's spec.nodeName is %s",
                   K8S_ANNOT_ASSIGNED, a->node, node ? node : "unset");
  for (int l = 0; l < 2; l++) {
    const json_t *list = json_object_get(spec, lists[l]);
    if (list && !json_is_array(list) && !json_is_null(list))
      return k8s_err(err, errlen, -EINVAL, "spec.%s is not a list", lists[l]);
    for (size_t i = 0; i < json_array_size(list); i++)
      if ((rc = check_container(a, json_array_get(list, i), l == 0, used, err, errlen)))
        return rc;
  }
  for (uint32_t i = 0; i < a->ncontainers; i++)
    if (!used[i])
      return k8s_err(err, errlen, -EINVAL, "%s names %scontainer %s, which the pod lacks",
                     K8S_ANNOT_ASSIGNED, a->containers[i].init ? "init " : "",
                     a->containers[i].name);
  return 0;
}
