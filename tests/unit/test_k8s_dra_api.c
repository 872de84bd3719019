/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node --mode dra's API objects (src/k8s/node/dra_api.c): the ResourceSlice it publishes
 * (shape, request policies, the comparison with what the API server gives back) and the
 * ResourceClaims it prepares (uid, results of our driver and pool, consumed capacities as
 * quantities, SliceConfigs from class and claim: a claim may lower, never raise). */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dra_api.h"
#include "test.h"

#define UID "6c0f5b2e-8d7a-4c1e-9b3f-2a1d0e9c8b7a"
#define SHARE "0b7e4a52-1f3c-4d2e-8a9b-7c6d5e4f3a21"

static const char *str_at(const json_t *o, const char *path) {
  char buf[256], *save = NULL;
  snprintf(buf, sizeof(buf), "%s", path);
  const json_t *v = o;
  for (char *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
    v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
  return json_is_string(v) ? json_string_value(v) : "(none)";
}

static json_t *at(const json_t *o, const char *path) {
  char buf[256], *save = NULL;
  snprintf(buf, sizeof(buf), "%s", path);
  const json_t *v = o;
  for (char *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
    v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
  return (json_t *)v;
}

static void test_slice_shape(void) {
  struct dra_gpu g[5] = {
      {.index = 0,
       .uuid = "GPU-aaaa",
       .product = "NVIDIA H200",
       .memory = (80ull << 30) + (1u << 20)},
      {.index = 3, .uuid = "GPU-bbbb", .product = "", .memory = 16ull << 30},
      {.index = 5, .uuid = "GPU-tiny", .product = "x", .memory = 3u << 20}, /* no context: out */
      /* A context and not one step more: out (a validRange needs min + step within the value);
       * one step more: offered, its range min = max = default. */
      {.index = 6, .uuid = "GPU-ctx", .product = "x", .memory = DRA_CONTEXT_FLOOR},
      {.index = 7, .uuid = "GPU-ctx2", .product = "x", .memory = DRA_CONTEXT_FLOOR + (2u << 20)},
  };
  json_t *s = dra_slice_build("node-a", g, 5, 7, 16);
  CHECK(s != NULL);
  CHECK_STR(str_at(s, "apiVersion"), "resource.k8s.io/v1");
  CHECK_STR(str_at(s, "kind"), "ResourceSlice");
  CHECK_STR(str_at(s, "metadata.name"), "node-a-gslice.io");
  CHECK_STR(str_at(s, "spec.driver"), "gslice.io");
  CHECK_STR(str_at(s, "spec.nodeName"), "node-a");
  CHECK_STR(str_at(s, "spec.pool.name"), "node-a");
  CHECK_EQ_INT(json_integer_value(at(s, "spec.pool.generation")), 7);
  CHECK_EQ_INT(json_integer_value(at(s, "spec.pool.resourceSliceCount")), 1);
  CHECK_EQ_INT(json_array_size(at(s, "spec.devices")), 3);
  CHECK_STR(str_at(s, "spec.devices.2.name"), "gpu-7");
  CHECK_STR(str_at(s, "spec.devices.2.capacity.memory.requestPolicy.validRange.min"), "768Mi");
  CHECK_STR(str_at(s, "spec.devices.2.capacity.memory.requestPolicy.validRange.max"), "770Mi");
  CHECK_STR(str_at(s, "spec.devices.0.name"), "gpu-0");
  CHECK_STR(str_at(s, "spec.devices.0.attributes.uuid.string"), "GPU-aaaa");
  CHECK_EQ_INT(json_integer_value(at(s, "spec.devices.0.attributes.index.int")), 0);
  CHECK_STR(str_at(s, "spec.devices.0.attributes.productName.string"), "NVIDIA H200");
  CHECK(json_is_true(at(s, "spec.devices.0.allowMultipleAllocations")));
  /* memory: the value as it is, the policy in 2 MiB steps from one CUDA context (768Mi: a
   * smaller request is rounded up to it) up to the value rounded down */
  CHECK_STR(str_at(s, "spec.devices.0.capacity.memory.value"), "81921Mi");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.memory.requestPolicy.default"), "80Gi");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.memory.requestPolicy.validRange.min"), "768Mi");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.memory.requestPolicy.validRange.step"), "2Mi");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.memory.requestPolicy.validRange.max"), "80Gi");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.compute.value"), "100");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.compute.requestPolicy.default"), "100");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.compute.requestPolicy.validRange.min"), "1");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.compute.requestPolicy.validRange.max"), "100");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.compute.requestPolicy.validRange.step"), "1");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.shares.value"), "16");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.shares.requestPolicy.default"), "1");
  CHECK_STR(str_at(s, "spec.devices.0.capacity.shares.requestPolicy.validValues.0"), "1");
  CHECK_EQ_INT(json_array_size(at(s, "spec.devices.0.capacity.shares.requestPolicy.validValues")),
               1);
  CHECK_EQ_INT(json_object_size(at(s, "spec.devices.0.capacity")), 3);
  CHECK_STR(str_at(s, "spec.devices.1.name"), "gpu-3");
  CHECK(at(s, "spec.devices.1.attributes.productName") == NULL); /* unknown: left out */
  CHECK_STR(str_at(s, "spec.devices.1.capacity.memory.requestPolicy.default"), "16Gi");
  json_decref(s);

  s = dra_slice_build("node-a", NULL, 0, 1, 16); /* gsliced gone: nothing on offer */
  CHECK(s && json_is_array(at(s, "spec.devices")) && json_array_size(at(s, "spec.devices")) == 0);
  json_decref(s);
}

static void test_slice_name(void) {
  char name[300], err[256], node[260];
  CHECK_EQ_INT(dra_slice_name("node-a.example", name, sizeof(name), err, sizeof(err)), 0);
  CHECK_STR(name, "node-a.example-gslice.io");
  CHECK_EQ_INT(dra_slice_name("Node_A", name, sizeof(name), err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "Node_A") != NULL);
  memset(node, 'a', 250);
  node[250] = 0;
  CHECK_EQ_INT(dra_slice_name(node, name, sizeof(name), err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "253") != NULL);
}

/* What the API server returns is compared by meaning: quantities canonical ("2Mi"), empty
 * fields left out, generation not part of it. */
static void test_slice_same(void) {
  struct dra_gpu g[2] = {{.index = 0, .uuid = "GPU-a", .product = "P", .memory = 1ull << 30},
                         {.index = 1, .uuid = "GPU-b", .product = "P", .memory = 1ull << 30}};
  json_t *want = dra_slice_build("n", g, 2, 1, 16);
  json_t *have = json_deep_copy(want);
  json_t *mem = at(have, "spec.devices.0.capacity.memory");
  json_object_set_new(mem, "value", json_string("1073741824"));
  json_object_set_new(at(mem, "requestPolicy.validRange"), "min", json_string("786432Ki"));
  json_object_set_new(at(have, "spec.pool"), "generation", json_integer(9));
  json_object_set_new(at(have, "metadata"), "resourceVersion", json_string("77"));
  json_object_set_new(at(have, "spec"), "perDeviceNodeSelection", json_false());
  CHECK(dra_slice_same(have, want));
  json_object_set_new(mem, "value", json_string("2Gi"));
  CHECK(!dra_slice_same(have, want)); /* the memory changed */
  json_object_set_new(mem, "value", json_string("1073741824"));
  json_array_remove(at(have, "spec.devices"), 1);
  CHECK(!dra_slice_same(have, want)); /* a GPU went */
  json_decref(have);
  have = json_deep_copy(want);
  json_object_set_new(at(have, "spec.devices.0.attributes.uuid"), "string", json_string("GPU-z"));
  CHECK(!dra_slice_same(have, want));
  json_decref(have);
  have = json_deep_copy(want);
  json_object_set_new(at(have, "spec.devices.0"), "taints", json_pack("[{s:s}]", "key", "k"));
  CHECK(!dra_slice_same(have, want)); /* something we did not write */
  json_decref(have);
  json_decref(want);

  want = dra_slice_build("n", NULL, 0, 1, 16);
  have = json_deep_copy(want);
  json_object_del(at(have, "spec"), "devices"); /* omitempty */
  CHECK(dra_slice_same(have, want));
  json_decref(have);
  json_decref(want);
}

/* An API server that keeps less than it is sent (DRAConsumableCapacity off drops
 * allowMultipleAllocations and the request policies) is not written to every period. */
static void test_slice_needs_write(void) {
  struct dra_gpu g = {.index = 0, .uuid = "GPU-a", .product = "P", .memory = 1ull << 30};
  char e[512] = "";
  json_t *want = dra_slice_build("n", &g, 1, 1, 16);
  json_t *have = json_deep_copy(want);
  CHECK(!dra_slice_needs_write(have, want, NULL));
  CHECK_EQ_INT(dra_slice_kept(have, e, sizeof(e)), 0);
  /* What such a server keeps of it. */
  json_t *dev = at(have, "spec.devices.0");
  json_object_del(dev, "allowMultipleAllocations");
  const char *k;
  json_t *v;
  void *tmp;
  json_object_foreach_safe(at(dev, "capacity"), tmp, k, v) json_object_del(v, "requestPolicy");
  CHECK(dra_slice_needs_write(have, want, NULL)); /* first time: written */
  json_t *cache = json_deep_copy(have);           /* its answer to that write */
  json_object_set_new(cache, DRA_SENT_KEY, json_deep_copy(want));
  CHECK(!dra_slice_needs_write(have, want, cache)); /* the same answer again: no write */
  CHECK_EQ_INT(dra_slice_kept(have, e, sizeof(e)), -EOPNOTSUPP);
  CHECK(strstr(e, "DRAConsumableCapacity") && strstr(e, "gpu-0"));
  /* Another writer changed it since: written. */
  json_object_set_new(at(dev, "attributes.uuid"), "string", json_string("GPU-z"));
  CHECK(dra_slice_needs_write(have, want, cache));
  json_object_set_new(at(dev, "attributes.uuid"), "string", json_string("GPU-a"));
  /* What we want now is not what we sent then (a GPU changed): written. */
  json_t *want2 = dra_slice_build("n", &g, 1, 1, 8);
  CHECK(dra_slice_needs_write(have, want2, cache));
  json_decref(want2);
  json_decref(cache);
  json_decref(have);
  json_decref(want);
}

/* A claim allocated on pool node-a: results and configs as JSON text. */
static json_t *claim(const char *uid, const char *results, const char *configs) {
  char text[16384];
  snprintf(text, sizeof(text),
           "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
           "\"metadata\":{\"namespace\":\"team-a\",\"name\":\"c1\",\"uid\":\"%s\"},"
           "\"spec\":{},\"status\":{\"allocation\":{\"devices\":{\"results\":[%s],"
           "\"config\":[%s]}}}}",
           uid, results, configs);
  json_error_t e;
  json_t *j = json_loads(text, 0, &e);
  if (!j)
    fprintf(stderr, "bad test JSON: %s: %s\n", e.text, text);
  return j;
}

#define RES(req, dev, mem, cpu)                                                                    \
  "{\"request\":\"" req "\",\"driver\":\"gslice.io\",\"pool\":\"node-a\",\"device\":\"" dev        \
  "\",\"shareID\":\"" SHARE "\",\"consumedCapacity\":{\"memory\":\"" mem "\",\"compute\":\"" cpu   \
  "\",\"shares\":\"1\"}}"
#define CFG(src, params)                                                                           \
  "{\"source\":\"" src "\",\"opaque\":{\"driver\":\"gslice.io\",\"parameters\":{"                  \
  "\"apiVersion\":\"gslice.io/v1\",\"kind\":\"SliceConfig\"" params "}}}"

static struct dra_claim c;
static char err[512];

static int parse(const char *uid, const char *results, const char *configs) {
  json_t *j = claim(uid, results, configs);
  err[0] = 0;
  int r = j ? dra_claim_parse(j, UID, "node-a", &c, err, sizeof(err)) : -999;
  json_decref(j);
  return r;
}

static void test_claim_good(void) {
  const char *other =
      "{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"node-a\",\"device\":\"x\"},"
      "{\"request\":\"gpu\",\"driver\":\"gslice.io\",\"pool\":\"node-b\",\"device\":\"gpu-0\","
      "\"consumedCapacity\":{\"memory\":\"1Gi\",\"compute\":\"10\"}},";
  char res[2048];
  snprintf(res, sizeof(res), "%s" RES("gpu", "gpu-1", "1Gi", "60"), other);
  const char *cfgs =
      "{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":"
      "{\"whatever\":1}}}," CFG("FromClass",
                                ",\"computeLimit\":80,\"priority\":\"high\","
                                "\"weight\":4") "," CFG("FromClaim", ",\"computeLimit\":70,"
                                                                     "\"priority\":\"normal\","
                                                                     "\"weight\":2");
  CHECK_EQ_INT(parse(UID, res, cfgs), 0);
  CHECK_STR(c.ns, "team-a");
  CHECK_STR(c.name, "c1");
  CHECK_STR(c.uid, UID);
  CHECK_EQ_INT(c.nshares, 1); /* the other driver's and the other node's are not ours */
  CHECK_STR(c.shares[0].request, "gpu");
  CHECK_STR(c.shares[0].pool, "node-a");
  CHECK_STR(c.shares[0].device, "gpu-1");
  CHECK_STR(c.shares[0].share_id, SHARE);
  CHECK_EQ_INT(c.shares[0].gpu_index, 1);
  CHECK_EQ_U64(c.shares[0].memory, 1ull << 30);
  CHECK_EQ_INT(c.shares[0].compute, 60);
  CHECK_EQ_INT(c.shares[0].cfg.compute_limit, 70);
  CHECK_EQ_INT(c.shares[0].cfg.priority, GS_PRIORITY_NORMAL);
  CHECK_EQ_INT(c.shares[0].cfg.weight, 2);

  /* No config at all: nothing given (limit 0 = the caller's default), normal, weight 1. */
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "3221225472", "30"), ""), 0);
  CHECK_EQ_U64(c.shares[0].memory, 3ull << 30);
  CHECK_EQ_INT(c.shares[0].compute, 30);
  CHECK_EQ_INT(c.shares[0].cfg.compute_limit, 0);
  CHECK_EQ_INT(c.shares[0].cfg.priority, GS_PRIORITY_NORMAL);
  CHECK_EQ_INT(c.shares[0].cfg.weight, 1);
  CHECK_STR(c.shares[0].share_id, SHARE);

  /* The class alone sets them. */
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "60"),
                     CFG("FromClass", ",\"computeLimit\":60,\"priority\":\"high\",\"weight\":2")),
               0);
  CHECK_EQ_INT(c.shares[0].cfg.compute_limit, 60);
  CHECK_EQ_INT(c.shares[0].cfg.priority, GS_PRIORITY_HIGH);
  CHECK_EQ_INT(c.shares[0].cfg.weight, 2);

  /* A claim alone may ask for a limit above its request (idle time only) and lower priority. */
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
                     CFG("FromClaim", ",\"computeLimit\":100,\"priority\":\"low\"")),
               0);
  CHECK_EQ_INT(c.shares[0].cfg.compute_limit, 100);
  CHECK_EQ_INT(c.shares[0].cfg.priority, GS_PRIORITY_LOW);

  /* Configs go by request: one naming another request does not apply; a main request's name
   * applies to its subrequests. */
  CHECK_EQ_INT(parse(UID,
                     RES("gpu/big", "gpu-0", "1Gi", "30") "," RES("small", "gpu-0", "1Gi", "20"),
                     "{\"source\":\"FromClass\",\"requests\":[\"gpu\"],\"opaque\":{\"driver\":"
                     "\"gslice.io\",\"parameters\":{\"apiVersion\":\"gslice.io/v1\",\"kind\":"
                     "\"SliceConfig\",\"priority\":\"high\"}}}"),
               0);
  CHECK_EQ_INT(c.nshares, 2);
  CHECK_EQ_INT(c.shares[0].cfg.priority, GS_PRIORITY_HIGH);
  CHECK_EQ_INT(c.shares[1].cfg.priority, GS_PRIORITY_NORMAL);

  /* A request of class capped (computeLimit 30) beside one of class gslice.io (none): each share
   * keeps its own class's limit, 30 and none; dra_rec_from_claim refuses the mix
   * (test_k8s_dra_node). */
  CHECK_EQ_INT(parse(UID, RES("big", "gpu-0", "8Gi", "30") "," RES("tiny", "gpu-0", "2Mi", "1"),
                     "{\"source\":\"FromClass\",\"requests\":[\"big\"],\"opaque\":{\"driver\":"
                     "\"gslice.io\",\"parameters\":{\"apiVersion\":\"gslice.io/v1\",\"kind\":"
                     "\"SliceConfig\",\"computeLimit\":30}}}"),
               0);
  CHECK_EQ_INT(c.nshares, 2);
  CHECK_EQ_INT(c.shares[0].cfg.compute_limit, 30);
  CHECK_EQ_INT(c.shares[1].cfg.compute_limit, 0);
}

static void test_claim_uid(void) {
  CHECK_EQ_INT(parse("11111111-2222-3333-4444-555555555555", RES("gpu", "gpu-0", "1Gi", "60"), ""),
               -ESTALE);
  CHECK(strstr(err, "11111111-2222-3333-4444-555555555555") != NULL);
  CHECK(strstr(err, UID) != NULL);
  CHECK(strstr(err, "team-a/c1") != NULL);
}

static void test_claim_raise(void) {
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
            CFG("FromClass", ",\"computeLimit\":60") "," CFG("FromClaim", ",\"computeLimit\":80")),
      -EPERM);
  CHECK(strstr(err, "computeLimit") && strstr(err, "80") && strstr(err, "60"));
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
                     CFG("FromClass", ",\"priority\":\"normal\"") "," CFG(
                         "FromClaim", ",\"priority\":\"high\"")),
               -EPERM);
  CHECK(strstr(err, "priority") && strstr(err, "high") && strstr(err, "normal"));
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
                     CFG("FromClass", ",\"weight\":3") "," CFG("FromClaim", ",\"weight\":4")),
               -EPERM);
  CHECK(strstr(err, "weight") && strstr(err, "4") && strstr(err, "3"));
  /* A class that sets nothing: priority above normal and weight above 1 are an admin's. */
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromClaim", ",\"priority\":\"high\"")),
      -EPERM);
  CHECK(strstr(err, "sets no priority") != NULL);
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromClaim", ",\"weight\":2")),
               -EPERM);
  /* Lowering is fine; the claim's own order: the later config wins, each held to the class. */
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
                     CFG("FromClass", ",\"computeLimit\":90,\"weight\":5") "," CFG(
                         "FromClaim", ",\"computeLimit\":50,\"weight\":5")),
               0);
  CHECK_EQ_INT(c.shares[0].cfg.compute_limit, 50);
  CHECK_EQ_INT(c.shares[0].cfg.weight, 5);
  /* A limit below the share's request. */
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "60"), CFG("FromClaim", ",\"computeLimit\":30")),
      -EINVAL);
  CHECK(strstr(err, "30") && strstr(err, "60") && strstr(err, "below"));
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "60"), CFG("FromClass", ",\"computeLimit\":30")),
      -EINVAL);
}

static void test_claim_config_refused(void) {
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromClaim", ",\"burst\":true")),
               -EINVAL);
  CHECK(strstr(err, "\"burst\"") != NULL);
  CHECK(strstr(err, "config[0]") && strstr(err, "FromClaim"));
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
            "{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"gslice.io\",\"parameters\":"
            "{\"apiVersion\":\"gslice.io/v1\",\"kind\":\"SliceConf\"}}}"),
      -EINVAL);
  CHECK(strstr(err, "SliceConf\"") != NULL);
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
            "{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"gslice.io\",\"parameters\":"
            "{\"apiVersion\":\"gslice.io/v2\",\"kind\":\"SliceConfig\"}}}"),
      -EINVAL);
  CHECK(strstr(err, "gslice.io/v2") != NULL);
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
            "{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"gslice.io\",\"parameters\":"
            "{\"kind\":\"SliceConfig\"}}}"),
      -EINVAL);
  CHECK(strstr(err, "apiVersion") != NULL);
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromClaim", ",\"computeLimit\":0")),
      -EINVAL);
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromClass", ",\"computeLimit\":101")),
      -EINVAL);
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromClass", ",\"computeLimit\":\"60\"")),
      -EINVAL);
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromClass", ",\"priority\":\"urgent\"")),
      -EINVAL);
  CHECK(strstr(err, "urgent") != NULL);
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromClass", ",\"weight\":0")),
               -EINVAL);
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromClass", ",\"weight\":1001")),
               -EINVAL);
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"), CFG("FromNowhere", "")), -EINVAL);
  CHECK(strstr(err, "source") != NULL);
  /* parameters not an object */
  CHECK_EQ_INT(
      parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
            "{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"gslice.io\",\"parameters\":[]}}"),
      -EINVAL);
  /* A malformed config of ours is refused even when it names another request. */
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "30"),
                     "{\"source\":\"FromClaim\",\"requests\":[\"x\"],\"opaque\":{\"driver\":"
                     "\"gslice.io\",\"parameters\":{\"apiVersion\":\"gslice.io/v1\",\"kind\":"
                     "\"SliceConfig\",\"extra\":1}}}"),
               -EINVAL);
}

static void test_claim_quantities(void) {
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1.5Gi", "1e2"), ""), 0);
  CHECK_EQ_U64(c.shares[0].memory, 3ull << 29);
  CHECK_EQ_INT(c.shares[0].compute, 100);
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "4G", "1"), ""), 0);
  CHECK_EQ_U64(c.shares[0].memory, 4000000000ull);
  CHECK_EQ_INT(c.shares[0].compute, 1);
  const char *bad_mem[] = {"abc", "-1Gi", "0", "1Gix", "", "1 Gi"};
  for (size_t i = 0; i < sizeof(bad_mem) / sizeof(bad_mem[0]); i++) {
    char res[1024];
    snprintf(res, sizeof(res),
             "{\"request\":\"gpu\",\"driver\":\"gslice.io\",\"pool\":\"node-a\",\"device\":"
             "\"gpu-0\",\"consumedCapacity\":{\"memory\":\"%s\",\"compute\":\"10\"}}",
             bad_mem[i]);
    CHECK_EQ_INT(parse(UID, res, ""), -EINVAL);
    CHECK(strstr(err, "memory") != NULL);
  }
  const char *bad_cpu[] = {"0", "101", "60.5", "600m", "-5", "x", "1Ki"};
  for (size_t i = 0; i < sizeof(bad_cpu) / sizeof(bad_cpu[0]); i++) {
    char res[1024];
    snprintf(res, sizeof(res),
             "{\"request\":\"gpu\",\"driver\":\"gslice.io\",\"pool\":\"node-a\",\"device\":"
             "\"gpu-0\",\"consumedCapacity\":{\"memory\":\"1Gi\",\"compute\":\"%s\"}}",
             bad_cpu[i]);
    CHECK_EQ_INT(parse(UID, res, ""), -EINVAL);
    CHECK(strstr(err, "compute") != NULL);
  }
  /* No consumedCapacity at all (an allocator without consumable capacity). */
  CHECK_EQ_INT(parse(UID,
                     "{\"request\":\"gpu\",\"driver\":\"gslice.io\",\"pool\":\"node-a\",\"device\":"
                     "\"gpu-0\"}",
                     ""),
               -EINVAL);
  CHECK(strstr(err, "consumedCapacity") != NULL);
}

static void test_claim_results(void) {
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-x", "1Gi", "10"), ""), -EINVAL);
  CHECK(strstr(err, "gpu-x") != NULL);
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-16", "1Gi", "10"), ""), -EINVAL);
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-01x", "1Gi", "10"), ""), -EINVAL);
  /* Only the names the ResourceSlice gives: no leading zeros (gpu-00 was taken as gpu-0). */
  const char *zeros[] = {"gpu-00", "gpu-01", "gpu-007", "gpu-+1", "gpu- 1", "gpu-"};
  for (size_t i = 0; i < sizeof(zeros) / sizeof(zeros[0]); i++) {
    char res[1024];
    snprintf(res, sizeof(res),
             "{\"request\":\"gpu\",\"driver\":\"gslice.io\",\"pool\":\"node-a\",\"device\":"
             "\"%s\",\"consumedCapacity\":{\"memory\":\"1Gi\",\"compute\":\"10\"}}",
             zeros[i]);
    CHECK_EQ_INT(parse(UID, res, ""), -EINVAL);
    CHECK(strstr(err, zeros[i]) && strstr(err, "leading zeros"));
  }
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-0", "1Gi", "10"), ""), 0);
  CHECK_EQ_INT(c.shares[0].gpu_index, 0);
  CHECK_EQ_INT(parse(UID, RES("gpu", "gpu-10", "1Gi", "10"), ""), 0);
  CHECK_EQ_INT(c.shares[0].gpu_index, 10);
  /* Nothing of ours on this node. */
  CHECK_EQ_INT(parse(UID,
                     "{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"node-a\","
                     "\"device\":\"gpu-0\"}",
                     ""),
               -ENOENT);
  CHECK(strstr(err, "no device") != NULL);
  /* Not allocated (yet, or any more). */
  json_t *j = json_pack("{s:{s:s, s:s, s:s}, s:{}}", "metadata", "namespace", "team-a", "name",
                        "c1", "uid", UID, "status");
  CHECK_EQ_INT(dra_claim_parse(j, UID, "node-a", &c, err, sizeof(err)), -EAGAIN);
  json_decref(j);
  /* adminAccess is not ours to give. */
  CHECK_EQ_INT(parse(UID,
                     "{\"request\":\"gpu\",\"driver\":\"gslice.io\",\"pool\":\"node-a\",\"device\":"
                     "\"gpu-0\",\"adminAccess\":true,\"consumedCapacity\":{\"memory\":\"1Gi\","
                     "\"compute\":\"10\"}}",
                     ""),
               -EINVAL);
  CHECK(strstr(err, "adminAccess") != NULL);
  /* At most DRA_MAX_SHARES of ours. */
  char res[16000] = "";
  for (int i = 0; i <= DRA_MAX_SHARES; i++)
    strcat(strcat(res, i ? "," : ""), RES("gpu", "gpu-0", "2Mi", "1"));
  CHECK_EQ_INT(parse(UID, res, ""), -E2BIG);
  /* Not an object, no metadata. */
  j = json_array();
  CHECK_EQ_INT(dra_claim_parse(j, UID, "node-a", &c, err, sizeof(err)), -EINVAL);
  json_decref(j);
}

int main(void) {
  test_slice_shape();
  test_slice_name();
  test_slice_same();
  test_slice_needs_write();
  test_claim_good();
  test_claim_uid();
  test_claim_raise();
  test_claim_config_refused();
  test_claim_quantities();
  test_claim_results();
  return test_done();
}
