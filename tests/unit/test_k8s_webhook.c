/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-webhook's decision (src/k8s/webhook/review.h): a body that is no AdmissionReview v1
 * is an error saying why, never a crash; a Pod CREATE asking for gslice.io resources gets the
 * one JSONPatch operation setting spec.schedulerName; one that does not, or is no Pod CREATE,
 * is allowed with no patch; a malformed gslice request is denied with gslice-extender's own
 * message (podspec_request's, word for word); another scheduler named explicitly is denied. */
#include <errno.h>
#include <openssl/evp.h>

#include "review.h"
#include "test.h"

#define POD_CREATE "{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"}", "CREATE", NULL

static const struct wh_cfg plain = {0};

/* An AdmissionReview of object (JSON text) with request.kind KIND and operation OP. */
static char *review_text(const char *uid, const char *kind, const char *op, const char *sub,
                         const char *object) {
  char *t = NULL;
  if (asprintf(&t,
               "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
               "\"request\":{\"uid\":\"%s\",\"kind\":%s,\"resource\":{\"group\":\"\","
               "\"version\":\"v1\",\"resource\":\"pods\"},%s%s%s\"operation\":\"%s\","
               "\"namespace\":\"team\",\"object\":%s}}",
               uid, kind, sub ? "\"subResource\":\"" : "", sub ? sub : "", sub ? "\"," : "", op,
               object) < 0)
    abort();
  return t;
}

/* The answer to body: its response object (caller decrefs the root in *ret_root). */
static json_t *answer(const struct wh_cfg *cfg, const char *body, enum wh_verdict *ret_v,
                      json_t **ret_root, char *err, size_t errlen) {
  char *out = NULL;
  size_t len = 0;
  int rc = wh_review(body, strlen(body), cfg, &out, &len, ret_v, err, errlen);
  CHECK_EQ_INT(rc, 0);
  if (rc)
    return NULL;
  CHECK_EQ_U64(strlen(out), len);
  json_error_t je;
  json_t *root = json_loadb(out, len, 0, &je);
  free(out);
  CHECK(root != NULL);
  CHECK_STR(json_string_value(json_object_get(root, "apiVersion")), "admission.k8s.io/v1");
  CHECK_STR(json_string_value(json_object_get(root, "kind")), "AdmissionReview");
  *ret_root = root;
  return json_object_get(root, "response");
}

static json_t *pod_review(const struct wh_cfg *cfg, const char *pod, enum wh_verdict *ret_v,
                          json_t **ret_root, char *err, size_t errlen) {
  char *body = review_text("uid-1", POD_CREATE, pod);
  json_t *r = answer(cfg, body, ret_v, ret_root, err, errlen);
  free(body);
  if (r)
    CHECK_STR(json_string_value(json_object_get(r, "uid")), "uid-1");
  return r;
}

/* pod is allowed with no patch. */
static void allowed(const struct wh_cfg *cfg, const char *pod) {
  enum wh_verdict v = WH_DENIED;
  char err[512];
  json_t *root = NULL, *r = pod_review(cfg, pod, &v, &root, err, sizeof err);
  CHECK_EQ_INT(v, WH_ALLOWED);
  CHECK(json_is_true(json_object_get(r, "allowed")));
  CHECK(!json_object_get(r, "patch") && !json_object_get(r, "patchType"));
  CHECK(!json_object_get(r, "status"));
  json_decref(root);
}

/* pod is allowed with the schedulerName patch, exactly. */
static void patched(const struct wh_cfg *cfg, const char *pod, const char *scheduler) {
  enum wh_verdict v = WH_DENIED;
  char err[512];
  json_t *root = NULL, *r = pod_review(cfg, pod, &v, &root, err, sizeof err);
  CHECK_EQ_INT(v, WH_PATCHED);
  CHECK(json_is_true(json_object_get(r, "allowed")));
  CHECK_STR(json_string_value(json_object_get(r, "patchType")) ?: "", "JSONPatch");
  const char *b64 = json_string_value(json_object_get(r, "patch"));
  CHECK(b64 != NULL);
  if (b64) {
    unsigned char raw[512];
    size_t n = strlen(b64);
    CHECK(n < 600 && n % 4 == 0);
    int got = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)n);
    CHECK(got > 0);
    while (got > 0 && raw[got - 1] == 0) /* EVP_DecodeBlock counts the padding's bytes */
      got--;
    raw[got > 0 ? got : 0] = 0;
    char want[256];
    snprintf(want, sizeof want,
             "[{\"op\":\"add\",\"path\":\"/spec/schedulerName\",\"value\":\"%s\"}]", scheduler);
    json_t *a = json_loads((const char *)raw, 0, NULL), *b = json_loads(want, 0, NULL);
    CHECK(a && b && json_equal(a, b));
    if (!(a && b && json_equal(a, b)))
      fprintf(stderr, "patch %s, want %s\n", raw, want);
    json_decref(a);
    json_decref(b);
  }
  json_decref(root);
}

/* pod is denied (code 400) with a message containing word, or equal to exact. */
static void denied(const struct wh_cfg *cfg, const char *pod, const char *word, const char *exact) {
  enum wh_verdict v = WH_ALLOWED;
  char err[512];
  json_t *root = NULL, *r = pod_review(cfg, pod, &v, &root, err, sizeof err);
  CHECK_EQ_INT(v, WH_DENIED);
  CHECK(json_is_false(json_object_get(r, "allowed")));
  CHECK(!json_object_get(r, "patch"));
  json_t *st = json_object_get(r, "status");
  CHECK_EQ_INT(json_integer_value(json_object_get(st, "code")), 400);
  const char *msg = json_string_value(json_object_get(st, "message"));
  CHECK(msg != NULL);
  if (msg && word && !strstr(msg, word))
    fprintf(stderr, "message \"%s\" does not say \"%s\"\n", msg, word);
  CHECK(!word || (msg && strstr(msg, word)));
  if (exact)
    CHECK_STR(msg ? msg : "", exact);
  json_decref(root);
}

/* What gslice-extender says of pod (podspec_request, as its filter does). */
static void extender_says(const char *pod, char *err, size_t errlen) {
  json_t *o = json_loads(pod, 0, NULL);
  struct place_pod p;
  err[0] = 0;
  CHECK(o != NULL);
  CHECK_EQ_INT(podspec_request(o, PLACE_BINPACK, &p, err, errlen), -EINVAL);
  CHECK(err[0] != 0);
  json_decref(o);
}

static void malformed(const char *body, size_t len, const char *word) {
  char *out = (char *)"untouched", err[512] = "";
  size_t olen = 7;
  enum wh_verdict v = WH_PATCHED;
  CHECK_EQ_INT(wh_review(body, len, &plain, &out, &olen, &v, err, sizeof err), -EINVAL);
  CHECK_STR(out, "untouched");
  CHECK_EQ_U64(olen, 7);
  CHECK_EQ_INT(v, WH_PATCHED);
  if (!strstr(err, word))
    fprintf(stderr, "error \"%s\" does not say \"%s\"\n", err, word);
  CHECK(strstr(err, word) != NULL);
}

static void test_malformed_reviews(void) {
  malformed("", 0, "no JSON");
  malformed("garbage", 7, "no JSON");
  malformed("{\"apiVersion\":", 14, "no JSON");
  malformed("[]", 2, "no JSON object");
  malformed("{}", 2, "admission.k8s.io/v1");
  const char *beta = "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\","
                     "\"request\":{\"uid\":\"u\"}}";
  malformed(beta, strlen(beta), "admission.k8s.io/v1beta1");
  malformed("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", 61,
            "without request");
  const char *nouid = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                      "\"request\":{\"uid\":7}}";
  malformed(nouid, strlen(nouid), "request.uid");
  const char *dup = "{\"apiVersion\":\"admission.k8s.io/v1\",\"apiVersion\":\"x\"}";
  malformed(dup, strlen(dup), "no JSON");
  /* A Pod CREATE without its object. */
  const char *noobj =
      "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
      "\"uid\":\"u\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
      "\"operation\":\"CREATE\"}}";
  malformed(noobj, strlen(noobj), "request.object");
  /* Deep nesting and NULs: refused by the parser, no crash. */
  size_t n = 200000;
  char *deep = malloc(n);
  memset(deep, '[', n);
  malformed(deep, n, "no JSON");
  free(deep);
  malformed("{\"a\":\"\0\"}", 9, "no JSON");
}

#define GPU_CTR(extra)                                                                             \
  "{\"name\":\"main\",\"resources\":{\"limits\":{\"gslice.io/gpu\":\"1\","                         \
  "\"gslice.io/gpu-memory\":\"2Gi\"" extra "}}}"

static void test_patch(void) {
  /* The API server has filled in default-scheduler when the pod named none. */
  patched(&plain,
          "{\"metadata\":{\"generateName\":\"p-\"},\"spec\":{\"schedulerName\":"
          "\"default-scheduler\",\"containers\":[" GPU_CTR("") "]}}",
          WH_SCHEDULER);
  patched(&plain, "{\"spec\":{\"containers\":[" GPU_CTR(",\"gslice.io/gpu-compute\":\"30\"") "]}}",
          WH_SCHEDULER);
  /* Requests only, in an init container; the app container asks for nothing. */
  patched(&plain,
          "{\"spec\":{\"initContainers\":[{\"name\":\"prep\",\"resources\":{\"requests\":{"
          "\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"1Gi\"}}}],\"containers\":[{"
          "\"name\":\"app\"}]}}",
          WH_SCHEDULER);
  const struct wh_cfg other = {.scheduler = "gpu-sched"};
  patched(&other, "{\"spec\":{\"containers\":[" GPU_CTR("") "]}}", "gpu-sched");
}

static void test_allowed(void) {
  allowed(&plain, "{\"spec\":{\"containers\":[{\"name\":\"web\",\"resources\":{\"limits\":{"
                  "\"cpu\":\"1\",\"nvidia.com/gpu\":\"1\"}}}]}}");
  allowed(&plain, "{\"spec\":{\"containers\":[{\"name\":\"web\"}]}}");
  /* Already gslice-scheduler's. */
  allowed(&plain,
          "{\"spec\":{\"schedulerName\":\"gslice-scheduler\",\"containers\":[" GPU_CTR("") "]}}");
  /* gslice.io/gpu 0: nothing to place (the extender: "asks for no gslice.io/gpu"). */
  allowed(&plain, "{\"spec\":{\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":{"
                  "\"gslice.io/gpu\":\"0\"}}}]}}");
  /* A pod asking for no GPU is not judged by gslice's annotations. */
  allowed(&plain, "{\"metadata\":{\"annotations\":{\"gslice.io/priority\":\"urgent\"}},"
                  "\"spec\":{\"containers\":[{\"name\":\"web\"}]}}");
  /* Not a Pod CREATE: an UPDATE, a Deployment, a subresource. All allowed, no patch. */
  const char *gpod = "{\"spec\":{\"containers\":[" GPU_CTR("") "]}}";
  const char *cases[][4] = {
      {"{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"}", "UPDATE", NULL},
      {"{\"group\":\"apps\",\"version\":\"v1\",\"kind\":\"Deployment\"}", "CREATE", NULL},
      {"{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"}", "CREATE", "binding"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *body = review_text("u2", cases[i][0], cases[i][1], cases[i][2], gpod);
    enum wh_verdict v = WH_DENIED;
    char err[256];
    json_t *root = NULL, *r = answer(&plain, body, &v, &root, err, sizeof err);
    CHECK_EQ_INT(v, WH_ALLOWED);
    CHECK(json_is_true(json_object_get(r, "allowed")) && !json_object_get(r, "patch"));
    CHECK_STR(json_string_value(json_object_get(r, "uid")) ?: "", "u2");
    json_decref(root);
    free(body);
  }
}

static void test_denied(void) {
  /* Malformed requests: the extender's message, word for word. */
  const char *pods[] = {
      "{\"spec\":{\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{"
      "\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"lots\"}}}]}}",
      "{\"spec\":{\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{"
      "\"gslice.io/gpu\":\"1\"}}}]}}",
      "{\"spec\":{\"containers\":[" GPU_CTR(",\"gslice.io/gpu-compute\":\"150\"") "]}}",
      "{\"spec\":{\"initContainers\":[{\"name\":\"i\",\"resources\":{\"limits\":{"
      "\"gslice.io/gpu-memory\":\"1Gi\"}}}],\"containers\":[]}}",
      "{\"metadata\":{\"annotations\":{\"gslice.io/priority\":\"urgent\"}},"
      "\"spec\":{\"containers\":[" GPU_CTR("") "]}}",
      "{\"spec\":{\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{"
      "\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"1Gi\"},\"requests\":{"
      "\"gslice.io/gpu\":\"2\"}}}]}}",
  };
  for (size_t i = 0; i < sizeof pods / sizeof pods[0]; i++) {
    char ext[512];
    extender_says(pods[i], ext, sizeof ext);
    denied(&plain, pods[i], NULL, ext);
  }
  denied(&plain, pods[0], "\"lots\"", NULL); /* the field's value, named */
  denied(&plain, pods[0], "gslice.io/gpu-memory", NULL);
  /* A gslice.io/ name no node advertises: the pod would wait for ever. */
  denied(&plain,
         "{\"spec\":{\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":{"
         "\"gslice.io/gpus\":\"1\"}}}]}}",
         "\"gslice.io/gpus\" is no gslice resource", NULL);
  /* Another scheduler would bind it without an assignment. */
  denied(&plain, "{\"spec\":{\"schedulerName\":\"volcano\",\"containers\":[" GPU_CTR("") "]}}",
         "spec.schedulerName is \"volcano\"", NULL);
  /* The admin's priority class, as the extender has it: its compute ceiling. */
  struct podspec_class k;
  char err[256];
  CHECK_EQ_INT(podspec_class_parse("batch=low:limit=50", &k, err, sizeof err), 0);
  const struct podspec_cfg pc = {.policy = PLACE_BINPACK, .classes = &k, .nclasses = 1};
  const struct wh_cfg classes = {.pod = &pc};
  const char *batch = "{\"spec\":{\"priorityClassName\":\"batch\",\"containers\":[" GPU_CTR(
      ",\"gslice.io/gpu-compute\":\"80\"") "]}}";
  denied(&classes, batch, "gslice.io/compute-limit 50%", NULL);
  patched(&plain, batch, WH_SCHEDULER);
}

int main(void) {
  test_malformed_reviews();
  test_patch();
  test_allowed();
  test_denied();
  return test_done();
}
