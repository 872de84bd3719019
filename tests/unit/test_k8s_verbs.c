/* SPDX-License-Identifier: Apache-2.0 */
/* The extender verbs on crafted bodies (src/k8s/extender/verbs.c): /filter and /prioritize
 * refuse what is not JSON whichever parser reads it, and say what the full parser says;
 * /bind answers an Error whenever a step failed, even one that left no words; the counters
 * read as a snapshot. The API server is two
 * functions put in place of kube_get and kube_post at link time (-Wl,--wrap), so /bind runs its
 * whole path without a network. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "cluster.h"
#include "test.h"
#include "verbs.h"

#define GiB (1ULL << 30)
#define WALL 1893456000 /* 2030-01-01: the heartbeat below is fresh against it */
#define NOW 1000

/* ---- the API server's side of /bind ------------------------------------------------------ */

static const char pod_text[] =
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"t\",\"uid\":\"u1\"},"
    "\"spec\":{\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{"
    "\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"1Gi\"}}}]}}";

static int post_rc;    /* what the Binding's POST returns */
static bool post_word; /* whether a failed POST says why */
static int posts;

int __wrap_kube_get(struct kube *k, const char *path, json_t **ret_body, char *err, size_t errlen);
int __wrap_kube_post(struct kube *k, const char *path, const json_t *body, json_t **ret_body,
                     char *err, size_t errlen);

int __wrap_kube_get(struct kube *k, const char *path, json_t **ret_body, char *err, size_t errlen) {
  (void)k;
  if (strcmp(path, "/api/v1/namespaces/t/pods/p") != 0) {
    snprintf(err, errlen, "GET %s: HTTP 404", path);
    return -ENOENT;
  }
  *ret_body = json_loads(pod_text, 0, NULL);
  return *ret_body ? 0 : -ENOMEM;
}

int __wrap_kube_post(struct kube *k, const char *path, const json_t *body, json_t **ret_body,
                     char *err, size_t errlen) {
  (void)k;
  (void)body;
  (void)path;
  posts++;
  if (ret_body)
    *ret_body = NULL;
  if (post_rc && post_word)
    snprintf(err, errlen, "POST %s: HTTP 500: no", path);
  return post_rc;
}

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
  cluster_node_event(c, "ADDED", o, NOW, WALL, false);
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

/* ---- /bind -------------------------------------------------------------------------------- */

static const char bind_body[] =
    "{\"PodName\":\"p\",\"PodNamespace\":\"t\",\"PodUID\":\"u1\",\"Node\":\"n1\"}";

static void test_bind(struct cluster *c, struct verbs *v) {
  static const char args[] = "{\"Pod\":" /* as pod_text */
                             "{\"metadata\":{\"name\":\"p\",\"namespace\":\"t\",\"uid\":\"u1\"},"
                             "\"spec\":{\"containers\":[{\"name\":\"main\",\"resources\":{"
                             "\"limits\":{\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":"
                             "\"1Gi\"}}}]}},\"NodeNames\":[\"n1\"]}";
  struct verb_stats st;
  struct cluster_totals t;
  char *body;

  CHECK_EQ_INT(call(verb_filter, v, args, &body), 200);
  CHECK(body && strstr(body, "\"NodeNames\":[\"n1\"]"));
  free(body);

  /* The Binding's POST fails without a word: an Error all the same, and nothing held. */
  post_rc = -EIO;
  post_word = false;
  CHECK_EQ_INT(call(verb_bind, v, bind_body, &body), 200);
  CHECK_EQ_INT(posts, 1);
  CHECK(body && strcmp(body, "{\"Error\":\"\"}") != 0);
  CHECK(body && strstr(body, "\"Error\":\"") && strstr(body, "Input/output error"));
  free(body);
  cluster_totals(c, NOW, &t);
  CHECK_EQ_INT(t.assumed, 0);
  CHECK_EQ_U64(t.mem_used, 0);
  verbs_stats_read(v, &st);
  CHECK_EQ_U64(st.bind, 1);
  CHECK_EQ_U64(st.bind_errors, 1);

  /* With words: they are the Error. */
  post_word = true;
  CHECK_EQ_INT(call(verb_bind, v, bind_body, &body), 200);
  CHECK(body && strstr(body, "HTTP 500: no"));
  free(body);

  /* Through: no Error, and the pod's GPU is held as assumed. */
  post_rc = 0;
  CHECK_EQ_INT(call(verb_bind, v, bind_body, &body), 200);
  CHECK_STR(body ? body : "", "{\"Error\":\"\"}");
  free(body);
  cluster_totals(c, NOW, &t);
  CHECK_EQ_INT(t.assumed, 1);
  CHECK_EQ_U64(t.mem_used, GiB);

  /* Refused (another uid than /filter passed): 403, counted as refused. */
  static const char other[] =
      "{\"PodName\":\"p\",\"PodNamespace\":\"t\",\"PodUID\":\"u9\",\"Node\":\"n1\"}";
  CHECK_EQ_INT(call(verb_bind, v, other, &body), 403);
  CHECK(body && strstr(body, "it was replaced"));
  free(body);
  /* Malformed: 400. */
  CHECK_EQ_INT(call(verb_bind, v, "{\"PodName\":1}", &body), 400);
  free(body);

  verbs_stats_read(v, &st);
  CHECK_EQ_U64(st.bind, 5);
  CHECK_EQ_U64(st.bind_errors, 4);
  CHECK_EQ_U64(st.bind_refused, 1);
  CHECK_EQ_U64(st.filter, 1 + 15 + 6); /* this test's, and test_args_json's */
  CHECK_EQ_U64(st.bad_requests, 2 * 15);
}

/* ---- counters read while the verbs run ---------------------------------------------------- */

#define RACE_CALLS 200

static void *filter_many(void *arg) {
  static const char body[] = "{\"Pod\":" POD ",\"NodeNames\":[\"n1\"]}";
  for (int i = 0; i < RACE_CALLS; i++) {
    char *out;
    size_t len;
    verb_filter(arg, body, sizeof body - 1, NOW, &out, &len);
    free(out);
  }
  return NULL;
}

/* A snapshot taken while two threads count: each counter read atomically (a plain read of
 * one is a data race, which ThreadSanitizer reports), and none ever going back. */
static void test_stats_while_counting(struct verbs *v) {
  struct verb_stats before, st;
  pthread_t t[2];
  uint64_t last = 0;
  bool monotonic = true;

  verbs_stats_read(v, &before);
  for (int i = 0; i < 2; i++)
    CHECK_EQ_INT(pthread_create(&t[i], NULL, filter_many, v), 0);
  do {
    verbs_stats_read(v, &st);
    monotonic &= st.filter >= last;
    last = st.filter;
  } while (st.filter < before.filter + 2 * RACE_CALLS);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  CHECK(monotonic);
  verbs_stats_read(v, &st);
  CHECK_EQ_U64(st.filter, before.filter + 2 * RACE_CALLS);
}

int main(void) {
  struct cluster *c = one_node();
  struct verbs *v = NULL;
  CHECK(c != NULL);
  if (!c)
    return test_done();
  struct verbs_cfg cfg = {.cluster = c, .kube = (struct kube *)&post_rc /* never dereferenced */};
  CHECK_EQ_INT(verbs_new(&cfg, &v), 0);
  test_args_json(v);
  test_bind(c, v);
  test_stats_while_counting(v);
  verbs_free(v);
  cluster_free(c);
  return test_done();
}
