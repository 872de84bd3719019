/* SPDX-License-Identifier: Apache-2.0 */
/* The extender verbs on crafted bodies (src/k8s/extender/verbs.c): /filter and /prioritize
 * refuse what is not JSON whichever parser reads it, and say what the full parser says. */
#include <jansson.h>
#include <stdbool.h>

#include "cluster.h"
#include "test.h"
#include "verbs.h"

#define GiB (1ULL << 30)
#define WALL 1893456000 /* 2030-01-01: the heartbeat below is fresh against it */
#define NOW 1000

/* ---- a cluster of one node --------------------------------------------------------------- */

static struct cluster *one_node(void) {
  struct cluster_cfg cfg = {.policy = PLACE_BINPACK, .node_timeout_ms = 60000};
  struct cluster *c;
  char inv[512];
  if (cluster_new(&cfg, &c))
    return NULL;
  snprintf(inv, sizeof inv,
           "{\"version\":1,\"heartbeat\":\"2030-01-01T00:00:00Z\",\"slotsPerGpu\":16,\"gpus\":"
           "[{\"index\":0,\"uuid\":\"GPU-n1-0\",\"memory\":%llu}]}",
           (unsigned long long)(16 * GiB));
  json_t *o = json_pack("{s:{s:s,s:{s:s}}}", "metadata", "name", "n1", "annotations",
                        "gslice.io/gpus", inv);
  cluster_node_event(c, "ADDED", o, NOW, WALL, NULL);
  json_decref(o);
  cluster_set_synced(c, true, true);
  return c;
}

/* A verb's status; its body in *ret (free it). */
static int call(int (*verb)(struct verbs *, const char *, size_t, uint64_t, char **, size_t *),
                struct verbs *v, const char *body, char **ret) {
  size_t len = 0;
  *ret = NULL;
  return verb(v, body, strlen(body), NOW, ret, &len);
}

/* ---- ExtenderArgs that are not JSON ------------------------------------------------------ */

#define POD "{\"metadata\":{\"name\":\"q\",\"namespace\":\"t\",\"uid\":\"u2\"},\"spec\":{}}"

static void test_args_json(struct verbs *v) {
  /* Each has the Pod and NodeNames the fast scan takes, and something else that is not JSON. */
  static const char *const bad[] = {
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":tru}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":garbage}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":{\"a\" 1}}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":[1 2]}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":01}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":1.}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":-}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":\"a\tb\"}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":\"\\q\"}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":[1,]}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":{\"a\":1,}}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":]}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":\"\xff\"}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n\xc3\"]}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],}",
  };
  /* And the same shapes written right. */
  static const char *const good[] = {
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":true}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":{\"a\":[1,-2.5e3,null,false]}}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":\"a\\tb\\u00e9\\\"\"}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":0}",
      "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"],\"X\":\"\xc3\xa9\"}",
      " { \"NodeNames\" : [ \"n1\" ] , \"Nodes\" : null , \"Pod\" : " POD " } ",
  };
  char *body;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *j = json_loads(bad[i], 0, NULL);
    CHECK(!j); /* the full parser's verdict, which the verbs must share */
    json_decref(j);
    int st = call(verb_filter, v, bad[i], &body);
    if (st != 400)
      fprintf(stderr, "bad[%zu]: %d %s\n", i, st, body ? body : "(null)");
    CHECK_EQ_INT(st, 400);
    CHECK(body && strstr(body, "not a JSON object"));
    free(body);
    CHECK_EQ_INT(call(verb_prioritize, v, bad[i], &body), 400);
    free(body);
  }
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    int st = call(verb_filter, v, good[i], &body);
    if (st != 200)
      fprintf(stderr, "good[%zu]: %d %s\n", i, st, body ? body : "(null)");
    CHECK_EQ_INT(st, 200);
    CHECK(body && strstr(body, "\"NodeNames\":[\"n1\"]"));
    free(body);
  }
}

int main(void) {
  struct cluster *c = one_node();
  struct verbs *v = NULL;
  CHECK(c != NULL);
  if (!c)
    return test_done();
  struct verbs_cfg cfg = {.cluster = c};
  CHECK_EQ_INT(verbs_new(&cfg, &v), 0);
  test_args_json(v);
  verbs_free(v);
  cluster_free(c);
  return test_done();
}
