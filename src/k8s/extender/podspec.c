/* SPDX-License-Identifier: Apache-2.0 */
/* Pods as the extender reads and writes them (podspec.h). */
#include "podspec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"
#include "podcheck.h"
#include "quantity.h"
#include "words.h"

/* What a pod gets when neither its PriorityClass nor its annotations say. */
#define CLASS_DEFAULT                                                                              \
  { .priority = K8S_PRIO_NORMAL, .weight = GS_WEIGHT_MIN, .compute_limit = GS_PERCENT_MAX }

static int copy_str(const json_t *v, char *buf, size_t len) {
  if (!json_is_string(v) || json_string_length(v) >= len)
    return -EINVAL;
  memcpy(buf, json_string_value(v), json_string_length(v) + 1);
  return 0;
}

int podspec_id(const json_t *pod, struct pod_id *ret, char *err, size_t errlen) {
  struct pod_id id = {0};
  json_t *meta = json_object_get(pod, "metadata"), *v;
  const char *phase;

  if (!json_is_object(meta) || copy_str(json_object_get(meta, "name"), id.name, sizeof id.name)) {
    snprintf(err, errlen, "pod without metadata.name");
    return -EINVAL;
  }
  v = json_object_get(meta, "namespace");
  if (v ? copy_str(v, id.ns, sizeof id.ns) : (snprintf(id.ns, sizeof id.ns, "default"), 0)) {
    snprintf(err, errlen, "pod %s: bad metadata.namespace", id.name);
    return -EINVAL;
  }
  v = json_object_get(meta, "uid");
  if (v && copy_str(v, id.uid, sizeof id.uid)) {
    snprintf(err, errlen, "pod %s/%s: bad metadata.uid", id.ns, id.name);
    return -EINVAL;
  }
  v = json_object_get(json_object_get(pod, "spec"), "nodeName");
  if (v && !json_is_null(v) && copy_str(v, id.node, sizeof id.node)) {
    snprintf(err, errlen, "pod %s/%s: bad spec.nodeName", id.ns, id.name);
    return -EINVAL;
  }
  phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
  id.done = phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
  *ret = id;
  return 0;
}

/* A resource's quantity from limits or requests; *ret_set false when absent. One reader
 * with gslice-node's check of an assignment (podcheck.h). */
static int resource(const json_t *ctr, const char *cname, const char *res, int64_t *ret,
                    bool *ret_set, char *err, size_t errlen) {
  return k8s_container_resource(ctr, cname, res, ret, ret_set, err, errlen);
}

static int annot_uint(const json_t *pod, const char *key, uint32_t min, uint32_t max, uint32_t dflt,
                      uint32_t *ret, char *err, size_t errlen) {
  const char *v = kube_annotation(pod, key);
  uint64_t n;
  if (!v) {
    *ret = dflt;
    return 0;
  }
  if (gs_uint_parse(v, min, max, &n)) {
    snprintf(err, errlen, "annotation %s is \"%s\", must be a whole number %u..%u", key, v, min,
             max);
    return -EINVAL;
  }
  *ret = (uint32_t)n;
  return 0;
}

void podspec_request_free(struct place_pod *p) {
  free(p->containers);
  p->containers = NULL;
  p->ncontainers = 0;
}

/* One ":weight=N" or ":limit=P" field of --priority-class at f (after the colon); *ret_end
 * is where it ends. */
static int class_field(const char *text, const char *f, struct podspec_class *k,
                       const char **ret_end, char *err, size_t errlen) {
  bool w = strncmp(f, "weight=", 7) == 0, l = strncmp(f, "limit=", 6) == 0;
  char num[32];
  uint64_t v;
  if (!w && !l) {
    snprintf(err, errlen, "--priority-class \"%s\": unknown field at \"%s\" (weight=N or limit=P)",
             text, f);
    return -EINVAL;
  }
  f += w ? 7 : 6;
  size_t n = strcspn(f, ":");
  uint32_t max = w ? GS_WEIGHT_MAX : GS_PERCENT_MAX;
  if (n >= sizeof num || (memcpy(num, f, n), num[n] = 0, gs_uint_parse(num, 1, max, &v))) {
    snprintf(err, errlen, "--priority-class \"%s\": %s must be 1..%u", text, w ? "weight" : "limit",
             max);
    return -EINVAL;
  }
  if (w)
    k->weight = (uint32_t)v;
  else
    k->compute_limit = (uint32_t)v;
  *ret_end = f + n;
  return 0;
}

int podspec_class_parse(const char *text, struct podspec_class *ret, char *err, size_t errlen) {
  struct podspec_class k = CLASS_DEFAULT;
  const char *eq = text ? strchr(text, '=') : NULL, *p;
  char prio[16];
  size_t n;

  if (!eq || eq == text || (size_t)(eq - text) >= sizeof k.name) {
    snprintf(err, errlen, "--priority-class \"%s\": want NAME=high|normal|low[:weight=N][:limit=P]",
             text ? text : "");
    return -EINVAL;
  }
  memcpy(k.name, text, (size_t)(eq - text));
  p = eq + 1;
  n = strcspn(p, ":");
  if (n >= sizeof prio ||
      (memcpy(prio, p, n), prio[n] = 0, k8s_priority_parse(prio, &k.priority))) {
    snprintf(err, errlen, "--priority-class \"%s\": the priority must be " GS_PRIORITY_WORDS, text);
    return -EINVAL;
  }
  for (p += n; *p == ':';)
    if (class_field(text, p + 1, &k, &p, err, errlen))
      return -EINVAL;
  if (*p) {
    snprintf(err, errlen, "--priority-class \"%s\": unexpected \"%s\"", text, p);
    return -EINVAL;
  }
  *ret = k;
  return 0;
}

int podspec_request(const json_t *pod, enum place_policy dflt, struct place_pod *ret, char *err,
                    size_t errlen) {
  struct podspec_cfg cfg = {.policy = dflt};
  return podspec_request_cfg(pod, &cfg, ret, err, errlen);
}

/* The pod's class: its PriorityClass's ceiling (the admin's), lowered by its annotations; and
 * its policy. */
static int pod_class(const json_t *pod, const struct podspec_cfg *cfg, struct podspec_class *ret,
                     enum place_policy *ret_policy, char *err, size_t errlen) {
  const char *pclass =
      json_string_value(json_object_get(json_object_get(pod, "spec"), "priorityClassName"));
  struct podspec_class k = CLASS_DEFAULT;
  uint32_t limit, weight;
  enum k8s_priority prio;
  const char *v;
  int rc;

  for (size_t i = 0; pclass && i < cfg->nclasses; i++)
    if (strcmp(cfg->classes[i].name, pclass) == 0)
      k = cfg->classes[i];
  prio = k.priority;
  if ((rc = annot_uint(pod, K8S_ANNOT_COMPUTE_LIMIT, 1, GS_PERCENT_MAX, k.compute_limit, &limit,
                       err, errlen)) ||
      (rc = annot_uint(pod, K8S_ANNOT_WEIGHT, GS_WEIGHT_MIN, GS_WEIGHT_MAX, k.weight, &weight, err,
                       errlen)))
    return rc;
  if ((v = kube_annotation(pod, K8S_ANNOT_PRIORITY)) && k8s_priority_parse(v, &prio)) {
    snprintf(err, errlen, "annotation %s is \"%s\", must be " GS_PRIORITY_WORDS, K8S_ANNOT_PRIORITY,
             v);
    return -EINVAL;
  }
  if (limit < k.compute_limit)
    k.compute_limit = limit;
  if (weight < k.weight)
    k.weight = weight;
  if (prio < k.priority)
    k.priority = prio;
  if ((v = kube_annotation(pod, K8S_ANNOT_POLICY)) && place_policy_parse(v, ret_policy)) {
    snprintf(err, errlen, "annotation %s is \"%s\", must be binpack or spread", K8S_ANNOT_POLICY,
             v);
    return -EINVAL;
  }
  *ret = k;
  return 0;
}

/* One container's gslice resources into *pc: 0, 1 when it asks for no gslice GPU, or
 * -EINVAL with err saying why. */
static int pod_container(const json_t *c, bool init, const struct podspec_class *k,
                         struct place_container *pc, char *err, size_t errlen) {
  int64_t gpus, mem, compute;
  bool gset, mset, cset;
  char cname[K8S_NAME_MAX];
  int rc;

  if (copy_str(json_object_get(c, "name"), cname, sizeof cname))
    return -ENOENT;
  if ((rc = resource(c, cname, K8S_RES_GPU, &gpus, &gset, err, errlen)) ||
      (rc = resource(c, cname, K8S_RES_MEMORY, &mem, &mset, err, errlen)) ||
      (rc = resource(c, cname, K8S_RES_COMPUTE, &compute, &cset, err, errlen)))
    return rc;
  if (!gset || gpus == 0) {
    if (!mset && !cset)
      return 1;
    snprintf(err, errlen, "container %s: %s and %s need %s (how many GPUs) too", cname,
             K8S_RES_MEMORY, K8S_RES_COMPUTE, K8S_RES_GPU);
    return -EINVAL;
  }
  if (gpus > K8S_MAX_GPUS) {
    snprintf(err, errlen, "container %s: %s is %lld, at most %d", cname, K8S_RES_GPU,
             (long long)gpus, K8S_MAX_GPUS);
    return -EINVAL;
  }
  if (!mset || mem < gpus) {
    snprintf(err, errlen, "container %s: %s must be given (e.g. 3Gi), at least 1 byte per GPU",
             cname, K8S_RES_MEMORY);
    return -EINVAL;
  }
  if (compute > (int64_t)GS_PERCENT_MAX * gpus) {
    snprintf(err, errlen, "container %s: %s is %lld, more than %u per GPU over %lld GPU(s)", cname,
             K8S_RES_COMPUTE, (long long)compute, GS_PERCENT_MAX, (long long)gpus);
    return -EINVAL;
  }
  memcpy(pc->name, cname, sizeof cname);
  pc->init = init;
  pc->sidecar = init && k8s_container_is_sidecar(c);
  pc->ngpus = (uint32_t)gpus;
  pc->memory = (uint64_t)mem;
  pc->compute = (uint32_t)compute;
  pc->compute_limit = k->compute_limit;
  pc->priority = k->priority;
  pc->weight = k->weight;
  return 0;
}

int podspec_request_cfg(const json_t *pod, const struct podspec_cfg *cfg, struct place_pod *ret,
                        char *err, size_t errlen) {
  static const char *const lists[2] = {"initContainers", "containers"};
  struct place_pod p = {.policy = cfg->policy};
  json_t *spec = json_object_get(pod, "spec");
  struct podspec_class k;
  size_t total = 0;
  int rc;

  if ((rc = pod_class(pod, cfg, &k, &p.policy, err, errlen)))
    return rc;
  for (int l = 0; l < 2; l++) {
    json_t *list = json_object_get(spec, lists[l]);
    if (list && !json_is_array(list) && !json_is_null(list)) {
      snprintf(err, errlen, "spec.%s is not a list", lists[l]);
      return -EINVAL;
    }
    total += json_array_size(list);
  }
  if (total > K8S_MAX_CONTAINERS) {
    snprintf(err, errlen, "the pod has %zu containers, more than %d", total, K8S_MAX_CONTAINERS);
    return -EINVAL;
  }
  p.containers = calloc(total ? total : 1, sizeof(*p.containers));
  if (!p.containers)
    return -ENOMEM;
  for (int l = 0; l < 2; l++) {
    json_t *list = json_object_get(spec, lists[l]);
    for (size_t i = 0; i < json_array_size(list); i++) {
      rc = pod_container(json_array_get(list, i), l == 0, &k, &p.containers[p.ncontainers], err,
                         errlen);
      if (rc == -ENOENT) {
        snprintf(err, errlen, "spec.%s[%zu] has no name", lists[l], i);
        rc = -EINVAL;
      }
      if (rc < 0)
        goto fail;
      p.ncontainers += rc == 0;
    }
  }
  if (p.ncontainers == 0) {
    free(p.containers);
    p.containers = NULL;
  } else if ((rc = place_pod_check(&p, err, errlen))) {
    goto fail;
  }
  *ret = p;
  return 0;
fail:
  free(p.containers);
  return rc;
}

int podspec_assignment(const char *node_name, const struct place_node *node,
                       const struct place_pod *pod, const struct place_choice *choice,
                       struct k8s_assigned *ret) {
  struct k8s_assigned a = {.version = K8S_ANNOT_VERSION};

  if (strlen(node_name) >= sizeof a.node)
    return -EINVAL;
  strcpy(a.node, node_name);
  a.containers = calloc(pod->ncontainers ? pod->ncontainers : 1, sizeof(*a.containers));
  if (!a.containers)
    return -ENOMEM;
  for (uint32_t i = 0; i < pod->ncontainers; i++) {
    const struct place_container *pc = &pod->containers[i];
    struct k8s_assigned_container *c = &a.containers[a.ncontainers++];
    memcpy(c->name, pc->name, sizeof c->name);
    c->init = pc->init;
    c->sidecar = pc->sidecar;
    if (c->sidecar)
      a.version = K8S_ANNOT_ASSIGNED_SIDECAR_VERSION; /* what the encoder writes for it */
    c->compute_limit = pc->compute_limit;
    c->priority = pc->priority;
    c->weight = pc->weight;
    c->gpus = calloc(pc->ngpus, sizeof(*c->gpus));
    if (!c->gpus) {
      k8s_assigned_free(&a);
      return -ENOMEM;
    }
    for (uint32_t s = 0; s < choice->nshares; s++) {
      const struct place_share *sh = &choice->shares[s];
      if (sh->container != i || c->ngpus >= pc->ngpus || sh->gpu >= node->ngpus)
        continue;
      struct k8s_assigned_gpu *g = &c->gpus[c->ngpus++];
      memcpy(g->uuid, node->gpus[sh->gpu].uuid, sizeof g->uuid);
      g->index = node->gpus[sh->gpu].index;
      g->memory = sh->memory;
      g->compute = sh->compute;
    }
    if (c->ngpus != pc->ngpus) {
      k8s_assigned_free(&a);
      return -EINVAL; /* a choice that does not cover the pod: the caller's bug */
    }
  }
  *ret = a;
  return 0;
}

int podspec_from_assignment(const struct k8s_assigned *a, const struct place_node *node,
                            struct place_pod *ret_pod, struct place_share *shares,
                            uint32_t *ret_nshares) {
  struct place_pod p = {.policy = PLACE_BINPACK};
  uint32_t n = 0;

  p.containers = calloc(a->ncontainers ? a->ncontainers : 1, sizeof(*p.containers));
  if (!p.containers)
    return -ENOMEM;
  for (uint32_t i = 0; i < a->ncontainers; i++) {
    const struct k8s_assigned_container *c = &a->containers[i];
    struct place_container *pc = &p.containers[p.ncontainers++];
    memcpy(pc->name, c->name, sizeof pc->name);
    pc->init = c->init;
    pc->sidecar = c->sidecar;
    pc->ngpus = c->ngpus;
    pc->compute_limit = c->compute_limit;
    pc->priority = c->priority;
    pc->weight = c->weight;
    for (uint32_t j = 0; j < c->ngpus; j++) {
      pc->memory += c->gpus[j].memory;
      pc->compute += c->gpus[j].compute;
      if (!node || n >= PLACE_MAX_SHARES)
        continue;
      for (uint32_t g = 0; g < node->ngpus; g++) {
        if (strcmp(node->gpus[g].uuid, c->gpus[j].uuid) != 0)
          continue;
        shares[n++] = (struct place_share){i, g, c->gpus[j].memory, c->gpus[j].compute};
        break;
      }
    }
  }
  *ret_pod = p;
  *ret_nshares = n;
  return 0;
}
