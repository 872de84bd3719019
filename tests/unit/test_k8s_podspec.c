/* SPDX-License-Identifier: Apache-2.0 */
/* Reading a pod's gslice request (quantities, limits vs requests, init containers, the
 * annotations; every malformed value refused by name) and writing its assignment. */
#include <errno.h>

#include "podspec.h"
#include "test.h"

#define GiB (1ULL << 30)

static json_t *pod(const char *text) {
  json_error_t je;
  json_t *p = json_loads(text, 0, &je);
  if (!p)
    fprintf(stderr, "bad test JSON: %s\n", je.text);
  return p;
}

static void bad(const char *text, const char *word) {
  struct place_pod p = {.ncontainers = 77};
  char err[512] = "";
  json_t *o = pod(text);
  CHECK_EQ_INT(podspec_request(o, PLACE_BINPACK, &p, err, sizeof err), -EINVAL);
  CHECK_EQ_INT(p.ncontainers, 77);
  if (!strstr(err, word))
    fprintf(stderr, "error \"%s\" does not say \"%s\"\n", err, word);
  CHECK(strstr(err, word) != NULL);
  json_decref(o);
}

static void class_bad(const char *text, const char *word) {
  struct podspec_class k = {.weight = 77};
  char err[512] = "";
  CHECK_EQ_INT(podspec_class_parse(text, &k, err, sizeof err), -EINVAL);
  CHECK_EQ_INT(k.weight, 77);
  if (!strstr(err, word))
    fprintf(stderr, "error \"%s\" does not say \"%s\"\n", err, word);
  CHECK(strstr(err, word) != NULL);
}

/* A pod of class pclass (NULL: none) with annotations ann (JSON members, may be ""). */
static struct place_container class_pod(const struct podspec_cfg *cfg, const char *pclass,
                                        const char *ann) {
  char text[1024];
  struct place_pod p = {0};
  struct place_container got = {0};
  char err[512];
  snprintf(text, sizeof text,
           "{\"metadata\":{\"name\":\"p\",\"annotations\":{%s}},\"spec\":{%s%s%s"
           "\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":{\"gslice.io/gpu\":\"1\","
           "\"gslice.io/gpu-memory\":\"1Gi\",\"gslice.io/gpu-compute\":\"10\"}}}]}}",
           ann, pclass ? "\"priorityClassName\":\"" : "", pclass ? pclass : "",
           pclass ? "\"," : "");
  json_t *o = pod(text);
  CHECK_EQ_INT(podspec_request_cfg(o, cfg, &p, err, sizeof err), 0);
  if (p.ncontainers == 1)
    got = p.containers[0];
  podspec_request_free(&p);
  json_decref(o);
  return got;
}

/* The admin decides priority: a class's ceiling; annotations only lower. */
static void test_classes(void) {
  struct podspec_class cls[2];
  char err[512];
  CHECK_EQ_INT(podspec_class_parse("gold=high:weight=4:limit=80", &cls[0], err, sizeof err), 0);
  CHECK_STR(cls[0].name, "gold");
  CHECK_EQ_INT(cls[0].priority, K8S_PRIO_HIGH);
  CHECK_EQ_INT(cls[0].weight, 4);
  CHECK_EQ_INT(cls[0].compute_limit, 80);
  CHECK_EQ_INT(podspec_class_parse("batch=low", &cls[1], err, sizeof err), 0);
  CHECK_EQ_INT(cls[1].priority, K8S_PRIO_LOW);
  CHECK_EQ_INT(cls[1].weight, 1);
  CHECK_EQ_INT(cls[1].compute_limit, 100);
  class_bad("gold", "want NAME=");
  class_bad("=high", "want NAME=");
  class_bad("gold=urgent", "high, normal or low");
  class_bad("gold=high:weight=0", "weight must be 1..1000");
  class_bad("gold=high:weight=1001", "weight must be 1..1000");
  class_bad("gold=high:limit=101", "limit must be 1..100");
  class_bad("gold=high:limit=-5", "limit must be 1..100");
  class_bad("gold=high:color=red", "unknown field");

  struct podspec_cfg cfg = {.policy = PLACE_BINPACK, .classes = cls, .nclasses = 2};
  const char *greedy = "\"gslice.io/priority\":\"high\",\"gslice.io/weight\":\"1000\","
                       "\"gslice.io/compute-limit\":\"100\"";
  struct place_container c = class_pod(&cfg, "gold", greedy);
  CHECK_EQ_INT(c.priority, K8S_PRIO_HIGH);
  CHECK_EQ_INT(c.weight, 4);
  CHECK_EQ_INT(c.compute_limit, 80);
  c = class_pod(&cfg, "gold",
                "\"gslice.io/priority\":\"low\",\"gslice.io/weight\":\"2\","
                "\"gslice.io/compute-limit\":\"50\"");
  CHECK_EQ_INT(c.priority, K8S_PRIO_LOW);
  CHECK_EQ_INT(c.weight, 2);
  CHECK_EQ_INT(c.compute_limit, 50);
  c = class_pod(&cfg, "gold", "");
  CHECK_EQ_INT(c.priority, K8S_PRIO_HIGH);
  CHECK_EQ_INT(c.weight, 4);
  CHECK_EQ_INT(c.compute_limit, 80);
  /* Unmapped class, or none: normal, 1, 100 at most. */
  c = class_pod(&cfg, "system-cluster-critical", greedy);
  CHECK_EQ_INT(c.priority, K8S_PRIO_NORMAL);
  CHECK_EQ_INT(c.weight, 1);
  CHECK_EQ_INT(c.compute_limit, 100);
  c = class_pod(&cfg, NULL, greedy);
  CHECK_EQ_INT(c.priority, K8S_PRIO_NORMAL);
  c = class_pod(&cfg, "batch", greedy);
  CHECK_EQ_INT(c.priority, K8S_PRIO_LOW);
}

/* A native sidecar (restartPolicy Always on an init container) is read as one, its entry says
 * so, and the view read back from the assignment counts it beside the app container. */
static void test_sidecar(void) {
  struct place_pod p, back;
  struct place_share shares[PLACE_MAX_SHARES];
  struct k8s_assigned a;
  char err[512], *text = NULL;
  uint32_t n;
  json_t *o = pod(
      "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"initContainers\":[{\"name\":\"side\","
      "\"restartPolicy\":\"Always\",\"resources\":{\"limits\":{\"gslice.io/gpu\":\"1\","
      "\"gslice.io/gpu-memory\":\"8Gi\",\"gslice.io/gpu-compute\":\"50\"}}},{\"name\":\"setup\","
      "\"resources\":{\"limits\":{\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"1Gi\"}}}],"
      "\"containers\":[{\"name\":\"app\",\"restartPolicy\":\"Always\",\"resources\":{\"limits\":{"
      "\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"1Gi\",\"gslice.io/gpu-compute\":\"1\"}}}"
      "]}}");
  CHECK_EQ_INT(podspec_request(o, PLACE_BINPACK, &p, err, sizeof err), 0);
  CHECK_EQ_INT(p.ncontainers, 3);
  CHECK(p.containers[0].init && p.containers[0].sidecar);
  CHECK(p.containers[1].init && !p.containers[1].sidecar);
  CHECK(!p.containers[2].init && !p.containers[2].sidecar);

  struct place_gpu g[1] = {
      {.index = 0, .uuid = "GPU-0", .memory = 16 * GiB, .healthy = true, .slots = 4}};
  struct place_node node = {.name = "n", .heartbeat_ms = 1, .ngpus = 1, .gpus = g};
  struct place_cfg cfg = {.node_timeout_ms = 60000};
  struct place_verdict v = {0};
  struct place_choice ch;
  place_eval(&cfg, &node, &p, 1, &v, &ch);
  CHECK(v.fits);
  CHECK_EQ_INT(podspec_assignment("n", &node, &p, &ch, &a), 0);
  CHECK(a.containers[0].sidecar && !a.containers[1].sidecar && !a.containers[2].sidecar);
  CHECK_EQ_INT(k8s_assigned_encode(&a, &text), 0);
  CHECK(strstr(text, "\"version\":2,") && strstr(text, "\"sidecar\":true"));
  free(text);
  CHECK_EQ_INT(podspec_from_assignment(&a, &node, &back, shares, &n), 0);
  CHECK(back.containers[0].sidecar && !back.containers[1].sidecar);
  place_apply(&node, &back, shares, n, +1);
  CHECK_EQ_U64(g[0].mem_used, 9 * GiB); /* side + app (setup + side, 9 GiB, as much) */
  CHECK_EQ_INT(g[0].compute_used, 51);
  CHECK_EQ_INT(g[0].slices, 2);
  podspec_request_free(&back);
  k8s_assigned_free(&a);
  podspec_request_free(&p);
  json_decref(o);
}

int main(void) {
  struct place_pod p;
  struct pod_id id;
  char err[512];
  json_t *o;

  o = pod("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u1\",\"annotations\":{"
          "\"gslice.io/compute-limit\":\"60\",\"gslice.io/priority\":\"high\","
          "\"gslice.io/weight\":\"3\",\"gslice.io/policy\":\"spread\"}},"
          "\"spec\":{\"nodeName\":\"n\",\"initContainers\":[{\"name\":\"setup\",\"resources\":{"
          "\"limits\":{\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"500Mi\"}}}],"
          "\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{\"gslice.io/gpu\":\"2\","
          "\"gslice.io/gpu-memory\":\"3Gi\",\"gslice.io/gpu-compute\":\"30\"},\"requests\":{"
          "\"gslice.io/gpu-memory\":\"3221225472\"}}},{\"name\":\"side\",\"resources\":{"
          "\"limits\":{\"cpu\":\"1\"}}}]},\"status\":{\"phase\":\"Running\"}}");
  CHECK_EQ_INT(podspec_id(o, &id, err, sizeof err), 0);
  CHECK_STR(id.ns, "ns");
  CHECK_STR(id.uid, "u1");
  CHECK_STR(id.node, "n");
  CHECK(!id.done);
  CHECK_EQ_INT(podspec_request(o, PLACE_BINPACK, &p, err, sizeof err), 0);
  CHECK_EQ_INT(p.ncontainers, 2); /* "side" asks for no GPU */
  CHECK_EQ_INT(p.policy, PLACE_SPREAD);
  CHECK_STR(p.containers[0].name, "setup");
  CHECK(p.containers[0].init);
  CHECK_EQ_U64(p.containers[0].memory, 500ULL << 20);
  CHECK_EQ_INT(p.containers[0].compute, 0);
  CHECK_STR(p.containers[1].name, "main");
  CHECK_EQ_INT(p.containers[1].ngpus, 2);
  CHECK_EQ_U64(p.containers[1].memory, 3 * GiB);
  CHECK_EQ_INT(p.containers[1].compute, 30);
  CHECK_EQ_INT(p.containers[1].compute_limit, 60);
  /* No priority class mapped: normal and weight 1 at most, whatever the annotations ask. */
  CHECK_EQ_INT(p.containers[1].priority, K8S_PRIO_NORMAL);
  CHECK_EQ_INT(p.containers[1].weight, 1);

  /* The assignment of a placement, and back. */
  struct place_gpu g[2] = {
      {.index = 0, .uuid = "GPU-0", .memory = 16 * GiB, .healthy = true, .slots = 4},
      {.index = 1, .uuid = "GPU-1", .memory = 16 * GiB, .healthy = true, .slots = 4}};
  struct place_node node = {.name = "n", .heartbeat_ms = 1, .ngpus = 2, .gpus = g};
  struct place_cfg cfg = {.node_timeout_ms = 60000};
  struct place_verdict v = {0};
  struct place_choice ch;
  struct k8s_assigned a;
  p.containers[1].memory = 3 * GiB + 1;
  p.containers[1].compute = 31;
  place_eval(&cfg, &node, &p, 1, &v, &ch);
  CHECK(v.fits);
  CHECK_EQ_INT(podspec_assignment("n", &node, &p, &ch, &a), 0);
  CHECK_EQ_INT(a.ncontainers, 2);
  CHECK_EQ_INT(a.containers[1].ngpus, 2);
  CHECK_EQ_U64(a.containers[1].gpus[0].memory + a.containers[1].gpus[1].memory, 3 * GiB + 1);
  CHECK_EQ_INT(a.containers[1].gpus[0].compute + a.containers[1].gpus[1].compute, 31);
  CHECK(strcmp(a.containers[1].gpus[0].uuid, a.containers[1].gpus[1].uuid) != 0);
  CHECK_EQ_INT(a.containers[1].compute_limit, 60);
  char *text;
  CHECK_EQ_INT(k8s_assigned_encode(&a, &text), 0);
  free(text);
  struct place_pod back;
  struct place_share shares[PLACE_MAX_SHARES];
  uint32_t n;
  CHECK_EQ_INT(podspec_from_assignment(&a, &node, &back, shares, &n), 0);
  CHECK_EQ_INT(n, 3);
  CHECK_EQ_U64(back.containers[1].memory, 3 * GiB + 1);
  place_apply(&node, &back, shares, n, +1);
  CHECK_EQ_U64(g[0].mem_used + g[1].mem_used, 3 * GiB + 1); /* init's 500Mi within the max */
  podspec_request_free(&back);
  k8s_assigned_free(&a);
  podspec_request_free(&p);
  json_decref(o);

  /* A pod asking for nothing of gslice. */
  o = pod("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
  CHECK_EQ_INT(podspec_request(o, PLACE_BINPACK, &p, err, sizeof err), 0);
  CHECK_EQ_INT(p.ncontainers, 0);
  CHECK_EQ_INT(podspec_id(o, &id, err, sizeof err), 0);
  CHECK_STR(id.ns, "default");
  json_decref(o);

  /* Refusals name the container, field and value. */
#define C(lim)                                                                                     \
  "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{" lim   \
  "}}]}}"
  bad(C("\"limits\":{\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"3GB\"}"), "3GB");
  bad(C("\"limits\":{\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"3GB\"}"),
      "container c: resources.limits[gslice.io/gpu-memory]");
  bad(C("\"limits\":{\"gslice.io/gpu\":\"1\"}"), "gslice.io/gpu-memory must be given");
  bad(C("\"limits\":{\"gslice.io/gpu-memory\":\"1Gi\"}"), "need gslice.io/gpu");
  bad(C("\"limits\":{\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"1Gi\","
        "\"gslice.io/gpu-compute\":\"101\"}"),
      "more than 100 per GPU");
  bad(C("\"limits\":{\"gslice.io/gpu\":\"65\",\"gslice.io/gpu-memory\":\"1Gi\"}"), "at most 64");
  bad(C("\"limits\":{\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"-1Gi\"}"), "negative");
  bad(C("\"limits\":{\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"1Gi\"},"
        "\"requests\":{\"gslice.io/gpu-memory\":\"2Gi\"}"),
      "differ");
  bad(C("\"limits\":{\"gslice.io/gpu\":true}"), "quantity string");
  bad("{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gslice.io/compute-limit\":\"60%\"}},"
      "\"spec\":{\"containers\":[]}}",
      "gslice.io/compute-limit is \"60%\"");
  bad("{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gslice.io/priority\":\"urgent\"}},"
      "\"spec\":{\"containers\":[]}}",
      "high, normal or low");
  bad("{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gslice.io/policy\":\"pack\"}},"
      "\"spec\":{\"containers\":[]}}",
      "binpack or spread");
  bad("{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gslice.io/weight\":\"0\"}},"
      "\"spec\":{\"containers\":[]}}",
      "1..1000");
  bad("{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gslice.io/compute-limit\":\"20\"}},"
      "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
      "\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"1Gi\",\"gslice.io/"
      "gpu-compute\":\"30\"}}}]}}",
      "compute-limit 20%");
  bad("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":{}}}", "not a list");
  o = pod("{\"metadata\":{}}");
  CHECK_EQ_INT(podspec_id(o, &id, err, sizeof err), -EINVAL);
  json_decref(o);
  test_classes();
  test_sidecar();
  return test_done();
}
