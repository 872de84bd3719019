/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-webhook's decision on one AdmissionReview (admission.k8s.io/v1): a Pod CREATE that
 * asks for any gslice.io/ resource gets a JSONPatch setting spec.schedulerName to gslice's
 * scheduler, or is denied with the extender's own field-and-value message when its request is
 * malformed (podspec.h reads it, as gslice-extender does); anything else is allowed unchanged.
 * No I/O, no log. */
#pragma once
#include <stddef.h>

#include "podspec.h"

/* The scheduler every gslice pod is given (deploy/overlays/managed). */
#define WH_SCHEDULER "gslice-scheduler"
/* The scheduler the API server fills in when a pod names none. */
#define WH_DEFAULT_SCHEDULER "default-scheduler"
/* request.uid: the API server's is a UUID; more is no AdmissionReview of its. */
#define WH_UID_MAX 128
/* What a body may hold before a tree is built of it (jsonbound.h): a jansson tree costs ~230
 * bytes an object and ~40-110 a scalar or member, so a 4 MiB body of "{}," was 330 MB. The
 * largest Pods seen hold a few thousand values (managedFields included, which is mostly empty
 * objects: `"f:name":{}`); these are 25-50 times that and cost ~15 MB at most, so the
 * webhook's 4 threads stay inside its 256Mi limit. Nesting: a Pod's deepest path (its
 * managedFields' `f:env` `k:{...}` `f:valueFrom` ...) is ~15 levels. */
#define WH_JSON_VALUES_MAX 131072
#define WH_JSON_CONTAINERS_MAX 32768
#define WH_JSON_DEPTH_MAX 64

struct wh_cfg {
  const char *scheduler;         /* NULL: WH_SCHEDULER */
  const struct podspec_cfg *pod; /* the extender's --priority-class; NULL: none */
};

/* What wh_review decided (for the caller's log and the tests). */
enum wh_verdict {
  WH_ALLOWED, /* not a gslice pod, or already gslice-scheduler's: no patch */
  WH_PATCHED, /* allowed with the schedulerName patch */
  WH_DENIED,  /* allowed:false, status.message saying what is wrong */
};

/* Reads the AdmissionReview body (len bytes) and writes its answer, an AdmissionReview with
 * response.uid echoed, into *ret (malloc'd, NUL-terminated; *ret_len bytes). 0 with
 * *ret_verdict set (and the message of a denial in err), -EINVAL when the body is no
 * AdmissionReview v1 (err says what: the HTTP answer is a 400) or holds more than the
 * WH_JSON_*_MAX bounds (refused before it is parsed), -ENOMEM. */
int wh_review(const char *body, size_t len, const struct wh_cfg *cfg, char **ret, size_t *ret_len,
              enum wh_verdict *ret_verdict, char *err, size_t errlen);
