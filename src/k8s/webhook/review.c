/* SPDX-License-Identifier: Apache-2.0 */
/* The AdmissionReview codec and the JSONPatch (review.h). */
#include "review.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonbound.h"

#define GSLICE_PREFIX "gslice.io/"

/* request.kind is the core group's v1 Pod, as a CREATE of the pods resource itself (not a
 * subresource: pods/binding, pods/ephemeralcontainers...). */
static bool pod_create(const json_t *req) {
  const json_t *kind = json_object_get(req, "kind");
  const char *group = json_string_value(json_object_get(kind, "group"));
  const char *k = json_string_value(json_object_get(kind, "kind"));
  const char *op = json_string_value(json_object_get(req, "operation"));
  const char *sub = json_string_value(json_object_get(req, "subResource"));
  return k && strcmp(k, "Pod") == 0 && (!group || !*group) && op && strcmp(op, "CREATE") == 0 &&
         (!sub || !*sub);
}

static bool known_resource(const char *name) {
  return strcmp(name, K8S_RES_GPU) == 0 || strcmp(name, K8S_RES_MEMORY) == 0 ||
         strcmp(name, K8S_RES_COMPUTE) == 0;
}

/* Whether any container (init ones too) names a gslice.io/ resource in its requests or
 * limits: 1, 0, or -EINVAL (err says which) for one gslice does not know, which no node
 * advertises, so the pod would wait unschedulable for ever. */
static int asks_gslice(const json_t *pod, char *err, size_t errlen) {
  static const char *const lists[2] = {"initContainers", "containers"};
  static const char *const parts[2] = {"requests", "limits"};
  const json_t *spec = json_object_get(pod, "spec");
  int found = 0;

  for (int l = 0; l < 2; l++) {
    const json_t *list = json_object_get(spec, lists[l]);
    for (size_t i = 0; i < json_array_size(list); i++) {
      const json_t *c = json_array_get(list, i);
      const char *cname = json_string_value(json_object_get(c, "name"));
      for (int p = 0; p < 2; p++) {
        const char *res;
        json_t *v;
        json_object_foreach(json_object_get(json_object_get(c, "resources"), parts[p]), res, v) {
          if (strncmp(res, GSLICE_PREFIX, strlen(GSLICE_PREFIX)) != 0)
            continue;
          if (!known_resource(res)) {
            snprintf(err, errlen,
                     "container %s: %s \"%s\" is no gslice resource (those are %s, %s and %s)",
                     cname ? cname : "(no name)", parts[p], res, K8S_RES_GPU, K8S_RES_MEMORY,
                     K8S_RES_COMPUTE);
            return -EINVAL;
          }
          found = 1;
        }
      }
    }
  }
  return found;
}

/* The verdict on a pod being created: err holds a denial's message. */
static int decide(const json_t *pod, const struct wh_cfg *cfg, enum wh_verdict *ret, char *err,
                  size_t errlen) {
  static const struct podspec_cfg none = {.policy = PLACE_BINPACK};
  const char *want = cfg->scheduler ? cfg->scheduler : WH_SCHEDULER;
  struct place_pod req;
  int rc = asks_gslice(pod, err, errlen);

  if (rc <= 0) {
    *ret = rc < 0 ? WH_DENIED : WH_ALLOWED;
    return 0;
  }
  rc = podspec_request_cfg(pod, cfg->pod ? cfg->pod : &none, &req, err, errlen);
  if (rc == -ENOMEM)
    return rc;
  if (rc) {
    *ret = WH_DENIED;
    return 0;
  }
  bool gpus = req.ncontainers > 0;
  podspec_request_free(&req);
  if (!gpus) { /* gslice.io/gpu 0 only: nothing to place, as the extender says */
    *ret = WH_ALLOWED;
    return 0;
  }
  const char *sched =
      json_string_value(json_object_get(json_object_get(pod, "spec"), "schedulerName"));
  if (!sched || !*sched || strcmp(sched, WH_DEFAULT_SCHEDULER) == 0) {
    *ret = WH_PATCHED;
  } else if (strcmp(sched, want) == 0) {
    *ret = WH_ALLOWED;
  } else {
    /* Another scheduler never asks gslice-extender: the pod would be bound without an
     * assignment and each of its GPU containers refused at start by gslice-node. */
    snprintf(err, errlen,
             "spec.schedulerName is \"%.*s\": a pod that asks for %s is placed by %s (leave "
             "schedulerName out, or set it to %s)",
             K8S_NAME_MAX, sched, K8S_RES_GPU, want, want);
    *ret = WH_DENIED;
  }
  return 0;
}

/* The JSONPatch, base64 (RFC 4648, what the API server's []byte field reads). "add" on an
 * existing member replaces it (RFC 6902 4.1), so one operation fits both cases. */
static json_t *patch_b64(const char *scheduler) {
  json_t *ops =
      json_pack("[{s:s,s:s,s:s}]", "op", "add", "path", "/spec/schedulerName", "value", scheduler);
  char *text = ops ? json_dumps(ops, JSON_COMPACT) : NULL;
  json_t *ret = NULL;
  json_decref(ops);
  if (!text)
    return NULL;
  size_t n = strlen(text);
  unsigned char *b64 = malloc(4 * ((n + 2) / 3) + 1);
  if (b64) {
    EVP_EncodeBlock(b64, (const unsigned char *)text, (int)n);
    ret = json_string((const char *)b64);
  }
  free(b64);
  free(text);
  return ret;
}

static int answer(const char *uid, enum wh_verdict v, const char *scheduler, const char *msg,
                  char **ret, size_t *ret_len) {
  json_t *resp = json_pack("{s:s,s:b}", "uid", uid, "allowed", v != WH_DENIED);
  json_t *root = resp ? json_pack("{s:s,s:s,s:O}", "apiVersion", "admission.k8s.io/v1", "kind",
                                  "AdmissionReview", "response", resp)
                      : NULL;
  int rc = root ? 0 : -ENOMEM;

  if (!rc && v == WH_PATCHED) {
    json_t *patch = patch_b64(scheduler);
    if (!patch || json_object_set_new(resp, "patch", patch) ||
        json_object_set_new(resp, "patchType", json_string("JSONPatch")))
      rc = -ENOMEM;
  } else if (!rc && v == WH_DENIED) {
    json_t *st = json_pack("{s:i,s:s,s:s}", "code", 400, "reason", "BadRequest", "message", msg);
    if (!st || json_object_set_new(resp, "status", st))
      rc = -ENOMEM;
  }
  char *text = rc ? NULL : json_dumps(root, JSON_COMPACT);
  json_decref(resp);
  json_decref(root);
  if (!text)
    return -ENOMEM;
  *ret = text;
  *ret_len = strlen(text);
  return 0;
}

/* The envelope: apiVersion, kind, request with its uid. */
static int envelope(const json_t *root, const json_t **ret_req, const char **ret_uid, char *err,
                    size_t errlen) {
  const char *api = json_string_value(json_object_get(root, "apiVersion"));
  const char *kind = json_string_value(json_object_get(root, "kind"));
  const json_t *req = json_object_get(root, "request");
  const json_t *uid = json_object_get(req, "uid");

  if (!json_is_object(root)) {
    snprintf(err, errlen, "the body is no JSON object");
  } else if (!api || strcmp(api, "admission.k8s.io/v1") != 0 || !kind ||
             strcmp(kind, "AdmissionReview") != 0) {
    snprintf(err, errlen,
             "apiVersion \"%.64s\", kind \"%.64s\": want admission.k8s.io/v1 "
             "AdmissionReview (admissionReviewVersions: [v1])",
             api ? api : "", kind ? kind : "");
  } else if (!json_is_object(req)) {
    snprintf(err, errlen, "an AdmissionReview without request");
  } else if (!json_is_string(uid) || !json_string_length(uid) ||
             json_string_length(uid) > WH_UID_MAX) {
    snprintf(err, errlen, "request.uid is missing or not a string of 1..%d bytes", WH_UID_MAX);
  } else {
    *ret_req = req;
    *ret_uid = json_string_value(uid);
    return 0;
  }
  return -EINVAL;
}

/* The bounds checked before parsing (review.h): a body over them is no Pod's AdmissionReview,
 * and is refused as malformed (400) without a tree: its uid cannot be read to deny it. */
static int bounded(const char *body, size_t len, char *err, size_t errlen) {
  static const struct jsonbound max = {
      .values = WH_JSON_VALUES_MAX,
      .containers = WH_JSON_CONTAINERS_MAX,
      .depth = WH_JSON_DEPTH_MAX,
  };
  char why[160];
  if (!jsonbound_check(body, len, &max, NULL, why, sizeof why))
    return 0;
  snprintf(err, errlen,
           "the body is no Pod's AdmissionReview: %s, more than any Pod has (gslice-webhook reads "
           "none past %d values, %d objects and arrays, %d levels)",
           why, WH_JSON_VALUES_MAX, WH_JSON_CONTAINERS_MAX, WH_JSON_DEPTH_MAX);
  return -EINVAL;
}

int wh_review(const char *body, size_t len, const struct wh_cfg *cfg, char **ret, size_t *ret_len,
              enum wh_verdict *ret_verdict, char *err, size_t errlen) {
  json_error_t je;
  json_t *root = NULL;
  const json_t *req = NULL;
  const char *uid = NULL;
  enum wh_verdict v = WH_ALLOWED;
  int rc;

  err[0] = 0;
  if (bounded(body, len, err, errlen))
    return -EINVAL;
  root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    snprintf(err, errlen, "the body is no JSON: %s (line %d, column %d)", je.text, je.line,
             je.column);
    return -EINVAL;
  }
  rc = envelope(root, &req, &uid, err, errlen);
  if (!rc && pod_create(req)) {
    const json_t *pod = json_object_get(req, "object");
    if (!json_is_object(pod)) {
      snprintf(err, errlen, "a Pod CREATE without request.object");
      rc = -EINVAL;
    } else {
      rc = decide(pod, cfg, &v, err, errlen);
    }
  }
  if (!rc)
    rc = answer(uid, v, cfg->scheduler ? cfg->scheduler : WH_SCHEDULER, err, ret, ret_len);
  if (!rc)
    *ret_verdict = v;
  json_decref(root);
  return rc;
}
