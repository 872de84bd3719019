/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-webhook's decision (src/k8s/webhook/review.h): a body that is no AdmissionReview v1
 * is an error saying why, never a crash; a Pod CREATE asking for gslice.io resources gets the
 * one JSONPatch operation setting spec.schedulerName; one that does not, or is no Pod CREATE,
 * is allowed with no patch; a malformed gslice request is denied with gslice-extender's own
 * message (podspec_request's, word for word); another scheduler named explicitly is denied. */
#include <errno.h>
#include <openssl/evp.h>
#include <sys/resource.h>

#include "buf.h"
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
  /* Deep nesting: refused before the parser; NULs: by the parser; no crash. */
  size_t n = 200000;
  char *deep = malloc(n);
  memset(deep, '[', n);
  malformed(deep, n, "levels of nesting");
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

static long peak_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* A Pod CREATE whose object carries `"x":[UNIT,UNIT,...]` of len bytes or so beside a gslice
 * container, uid "big" (malloc'd). */
static char *flood_review(const char *unit, size_t len) {
  const char *pre = "{\"spec\":{\"containers\":[" GPU_CTR("") "]},\"x\":[";
  size_t ul = strlen(unit), n = len / (ul + 1) + 1, at = strlen(pre);
  char *pod = malloc(at + n * (ul + 1) + 3);
  memcpy(pod, pre, at);
  for (size_t i = 0; i < n; i++, at += ul + 1) {
    memcpy(pod + at, unit, ul);
    pod[at + ul] = ',';
  }
  memcpy(pod + at - 1, "]}", 3);
  char *body = review_text("big", POD_CREATE, pod);
  free(pod);
  return body;
}

/* Security finding 1: a 4 MiB body of 1.4 million empty objects took gslice-webhook from 9 MB
 * to 330 MB (jansson's tree), past its 256Mi limit. It is refused as no Pod's AdmissionReview
 * (400) before any tree is built: the peak grows by less than the body. Runs first, while the
 * process's peak is still low. */
static void test_bounded(void) {
  static const char *const units[] = {"{}", "[]", "1", "\"\"", "{\"a\":{}}"};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    char *body = flood_review(units[i], (size_t)4 << 20);
    long before = peak_kib();
    malformed(body, strlen(body), "more than any Pod has");
    long grew = peak_kib() - before;
    if (grew > 8 * 1024)
      fprintf(stderr, "a flood of %s: the peak grew by %ld KiB\n", units[i], grew);
    CHECK(grew <= 8 * 1024);
    free(body);
  }
  char *body = flood_review("{}", (size_t)4 << 20), err[512];
  CHECK(strstr(body, "\"uid\":\"big\"") != NULL);
  enum wh_verdict v = WH_ALLOWED;
  char *out = NULL;
  size_t olen = 0;
  CHECK_EQ_INT(wh_review(body, strlen(body), &plain, &out, &olen, &v, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "objects and arrays") && strstr(err, "32768"));
  free(body);
  /* Under the bounds, however flat: read and judged as before (patched). */
  body = flood_review("{}", 3 * (WH_JSON_CONTAINERS_MAX - 100));
  CHECK_EQ_INT(wh_review(body, strlen(body), &plain, &out, &olen, &v, err, sizeof err), 0);
  CHECK_EQ_INT(v, WH_PATCHED);
  free(out);
  free(body);
}

/* A Pod larger than any seen (3 containers of 1,000 environment variables each, and the
 * managedFields the API server writes for them: ~42,000 values, 15,000 objects) is read and
 * patched as a small one is. */
static void test_large_pod(void) {
  struct gs_buf b;
  gs_buf_init(&b, 0);
  gs_buf_puts(&b, "{\"metadata\":{\"name\":\"big\",\"managedFields\":[{\"manager\":\"kubectl\","
                  "\"operation\":\"Update\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{"
                  "\"f:spec\":{\"f:containers\":{");
  for (int c = 0; c < 3; c++) {
    gs_buf_printf(&b, "%s\"k:{\\\"name\\\":\\\"c%d\\\"}\":{\".\":{},\"f:env\":{", c ? "," : "", c);
    for (int e = 0; e < 1000; e++)
      gs_buf_printf(&b,
                    "%s\"k:{\\\"name\\\":\\\"V%d\\\"}\":{\".\":{},\"f:name\":{},\"f:value\":{}}",
                    e ? "," : "", e);
    gs_buf_puts(&b, "}}");
  }
  gs_buf_puts(&b, "}}}}]},\"spec\":{\"containers\":[");
  for (int c = 0; c < 3; c++) {
    gs_buf_printf(&b, "%s{\"name\":\"c%d\",\"env\":[", c ? "," : "", c);
    for (int e = 0; e < 1000; e++)
      gs_buf_printf(&b, "%s{\"name\":\"V%d\",\"value\":\"value of V%d\"}", e ? "," : "", e, e);
    gs_buf_printf(&b, "],\"resources\":{\"limits\":{\"gslice.io/gpu\":\"1\","
                      "\"gslice.io/gpu-memory\":\"1Gi\"}}}");
  }
  gs_buf_puts(&b, "]}}");
  CHECK_EQ_INT(b.err, 0);
  patched(&plain, b.p, WH_SCHEDULER);
  gs_buf_free(&b);
}

int main(void) {
  test_bounded();
  test_large_pod();
  test_malformed_reviews();
  test_patch();
  test_allowed();
  test_denied();
  return test_done();
}
