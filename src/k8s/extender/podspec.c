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
  char *end;
  unsigned long n;
  if (!v) {
    *ret = dflt;
    return 0;
  }
  errno = 0;
  n = strtoul(v, &end, 10);
  if (!*v || *end || errno || v[0] == '-' || v[0] == '+' || n < min || n > max) {
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

int podspec_class_parse(const char *text, struct podspec_class *ret, char *err, size_t errlen) {
  struct podspec_class k = {.priority = K8S_PRIO_NORMAL, .weight = 1, .compute_limit = 100};
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
    snprintf(err, errlen, "--priority-class \"%s\": the priority must be high, normal or low",
             text);
    return -EINVAL;
  }
  for (p += n; *p == ':';) {
    const char *f = p + 1;
    char *end;
    unsigned long v;
    bool w = strncmp(f, "weight=", 7) == 0, l = strncmp(f, "limit=", 6) == 0;
    if (!w && !l) {
      snprintf(err, errlen,
               "--priority-class \"%s\": unknown field at \"%s\" (weight=N or limit=P)", text, f);
      return -EINVAL;
    }
    f += w ? 7 : 6;
    errno = 0;
    v = strtoul(f, &end, 10);
    if (f[0] < '0' || f[0] > '9' || errno || (*end && *end != ':') || v < 1 ||
        v > (w ? 1000ul : 100ul)) {
      snprintf(err, errlen, "--priority-class \"%s\": %s must be 1..%u", text,
               w ? "weight" : "limit", w ? 1000 : 100);
      return -EINVAL;
    }
    if (w)
      k.weight = (uint32_t)v;
    else
      k.compute_limit = (uint32_t)v;
    p = end;
  }
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

int podspec_request_cfg(const json_t *pod, const struct podspec_cfg *cfg, struct place_pod *ret,
                        char *err, size_t errlen) {
  struct place_pod p = {.policy = cfg->policy};
  json_t *spec = json_object_get(pod, "spec");
  const char *lists[2] = {"initContainers", "containers"};
  const char *pclass = json_string_value(json_object_get(spec, "priorityClassName"));
  struct podspec_class k = {.priority = K8S_PRIO_NORMAL, .weight = 1, .compute_limit = 100};
  uint32_t limit, weight;
  enum k8s_priority prio;
  const char *v;
  size_t total = 0;
  int rc;

  /* The admin's ceiling for the pod's PriorityClass; the annotations only lower it. */
  for (size_t i = 0; pclass && i < cfg->nclasses; i++)
    if (strcmp(cfg->classes[i].name, pclass) == 0)
      k = cfg->classes[i];
  prio = k.priority;
  if ((rc = annot_uint(pod, K8S_ANNOT_COMPUTE_LIMIT, 1, 100, k.compute_limit, &limit, err, errlen)))
    return rc;
  if ((rc = annot_uint(pod, K8S_ANNOT_WEIGHT, 1, 1000, k.weight, &weight, err, errlen)))
    return rc;
  if ((v = kube_annotation(pod, K8S_ANNOT_PRIORITY)) && k8s_priority_parse(v, &prio)) {
    snprintf(err, errlen, "annotation %s is \"%s\", must be high, normal or low",
             K8S_ANNOT_PRIORITY, v);
    return -EINVAL;
  }
  if (limit > k.compute_limit)
    limit = k.compute_limit;
  if (weight > k.weight)
    weight = k.weight;
  if (prio > k.priority)
    prio = k.priority;
  if ((v = kube_annotation(pod, K8S_ANNOT_POLICY)) && place_policy_parse(v, &p.policy)) {
    snprintf(err, errlen, "annotation %s is \"%s\", must be binpack or spread", K8S_ANNOT_POLICY,
             v);
    return -EINVAL;
  }
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
      json_t *c = json_array_get(list, i);
      struct place_container *pc = &p.containers[p.ncontainers];
      int64_t gpus, mem, compute;
      bool gset, mset, cset;
      char cname[K8S_NAME_MAX];
      if (copy_str(json_object_get(c, "name"), cname, sizeof cname)) {
        snprintf(err, errlen, "spec.%s[%zu] has no name", lists[l], i);
        rc = -EINVAL;
        goto fail;
      }
      if ((rc = resource(c, cname, K8S_RES_GPU, &gpus, &gset, err, errlen)) ||
          (rc = resource(c, cname, K8S_RES_MEMORY, &mem, &mset, err, errlen)) ||
          (rc = resource(c, cname, K8S_RES_COMPUTE, &compute, &cset, err, errlen)))
        goto fail;
      if (!gset || gpus == 0) {
        if (mset || cset) {
          snprintf(err, errlen, "container %s: %s and %s need %s (how many GPUs) too", cname,
                   K8S_RES_MEMORY, K8S_RES_COMPUTE, K8S_RES_GPU);
          rc = -EINVAL;
          goto fail;
        }
        continue;
      }
      if (gpus > K8S_MAX_GPUS || !mset || mem < gpus || compute > 100 * gpus) {
        if (gpus > K8S_MAX_GPUS)
          snprintf(err, errlen, "container %s: %s is %lld, at most %d", cname, K8S_RES_GPU,
                   (long long)gpus, K8S_MAX_GPUS);
        else if (!mset || mem < gpus)
          snprintf(err, errlen,
                   "container %s: %s must be given (e.g. 3Gi), at least 1 byte per GPU", cname,
                   K8S_RES_MEMORY);
        else
          snprintf(err, errlen, "container %s: %s is %lld, more than 100 per GPU over %lld GPU(s)",
                   cname, K8S_RES_COMPUTE, (long long)compute, (long long)gpus);
        rc = -EINVAL;
        goto fail;
      }
      memcpy(pc->name, cname, sizeof cname);
      pc->init = l == 0;
      pc->sidecar = pc->init && k8s_container_is_sidecar(c);
      pc->ngpus = (uint32_t)gpus;
      pc->memory = (uint64_t)mem;
      pc->compute = (uint32_t)compute;
      pc->compute_limit = limit;
      pc->priority = prio;
      pc->weight = weight;
      p.ncontainers++;
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
