/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's cluster view (src/k8s/extender/cluster*.c) fed as the watch feeds it: only
 * assignments signed for the pod's uid and node and agreeing with the pod count; sums of parts
 * saturate instead of wrapping (a wrapped counter would let a pod in beside a full GPU);
 * metrics never wrap; an absurd heartbeat is refused, not aged; gone node records are freed. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster.h"
#include "sign.h"
#include "test.h"

#define GiB (1ULL << 30)
#define WALL 1893456000 /* 2030-01-01: the heartbeats below are fresh against it */

static void add_node(struct cluster *c, const char *name, uint64_t mem, const char *hb,
                     uint64_t now_ms) {
  char inv[512];
  snprintf(inv, sizeof inv,
           "{\"version\":1,\"heartbeat\":\"%s\",\"slotsPerGpu\":16,\"gpus\":[{\"index\":0,"
           "\"uuid\":\"GPU-%s-0\",\"memory\":%llu}]}",
           hb, name, (unsigned long long)mem);
  json_t *o = json_pack("{s:{s:s,s:{s:s}}}", "metadata", "name", name, "annotations",
                        "gslice.io/gpus", inv);
  cluster_node_event(c, "ADDED", o, now_ms, WALL, false);
  json_decref(o);
}

/* A bound pod of one container per (mem, compute) part, all on GPU 0 of node; its resources
 * declare the same; signed with keys when given (sig overrides). */
static void add_pod(struct cluster *c, const struct k8s_keys *keys, const char *name,
                    const char *uid, const char *node, const uint64_t *mem, int n,
                    const char *sig) {
  char text[4096] = "", s[K8S_SIG_MAX] = "";
  size_t len = 0;
  json_t *ctrs = json_array();
  len += (size_t)snprintf(text + len, sizeof text - len,
                          "{\"version\":1,\"node\":\"%s\",\"containers\":[", node);
  for (int i = 0; i < n; i++) {
    char cname[16], m[32];
    snprintf(cname, sizeof cname, "c%d", i);
    snprintf(m, sizeof m, "%llu", (unsigned long long)mem[i]);
    len += (size_t)snprintf(text + len, sizeof text - len,
                            "%s{\"name\":\"%s\",\"gpus\":[{\"uuid\":\"GPU-%s-0\",\"index\":0,"
                            "\"memory\":%s,\"compute\":0}]}",
                            i ? "," : "", cname, node, m);
    json_array_append_new(ctrs,
                          json_pack("{s:s,s:{s:{s:s,s:s}}}", "name", cname, "resources", "limits",
                                    "gslice.io/gpu", "1", "gslice.io/gpu-memory", m));
  }
  snprintf(text + len, sizeof text - len, "]}");
  if (keys && !sig && k8s_assigned_sign(keys, uid, node, text, s, sizeof s) == 0)
    sig = s;
  json_t *o = json_pack("{s:{s:s,s:s,s:s,s:{s:s}},s:{s:s,s:o}}", "metadata", "name", name,
                        "namespace", "t", "uid", uid, "annotations", "gslice.io/assigned", text,
                        "spec", "nodeName", node, "containers", ctrs);
  if (sig)
    json_object_set_new(json_object_get(json_object_get(o, "metadata"), "annotations"),
                        "gslice.io/assigned-signature", json_string(sig));
  cluster_pod_event(c, "ADDED", o, false);
  json_decref(o);
}

static bool fits(struct cluster *c, const char *node, uint64_t mem, uint64_t now_ms, char *why,
                 size_t len) {
  struct place_container pc = {.name = "main",
                               .ngpus = 1,
                               .memory = mem,
                               .compute = 1,
                               .compute_limit = 100,
                               .priority = K8S_PRIO_NORMAL,
                               .weight = 1};
  struct place_pod req = {.ncontainers = 1, .containers = &pc, .policy = PLACE_BINPACK};
  struct place_verdict v;
  const void *h;
  cluster_eval(c, &req, &node, 1, now_ms, &v, &h);
  if (!v.fits && why)
    cluster_explain(c, &req, h, now_ms, false, why, len);
  return v.fits;
}

static void test_forged_not_counted(const struct k8s_keys *keys, const struct k8s_keys *other) {
  struct cluster_cfg cfg = {.policy = PLACE_BINPACK, .node_timeout_ms = 60000, .keys = keys};
  struct cluster *c;
  struct cluster_totals t;
  char sig[K8S_SIG_MAX];
  uint64_t twelve = 12 * GiB, four = 4 * GiB;

  CHECK_EQ_INT(cluster_new(&cfg, &c), 0);
  add_node(c, "n1", 16 * GiB, "2030-01-01T00:00:00Z", 1000);
  add_pod(c, NULL, "unsigned", "u1", "n1", &twelve, 1, NULL);
  add_pod(c, other, "otherkey", "u2", "n1", &twelve, 1, NULL);
  /* A valid signature of uid u9's assignment, copied onto u3. */
  char text[512];
  snprintf(text, sizeof text,
           "{\"version\":1,\"node\":\"n1\",\"containers\":[{\"name\":\"c0\",\"gpus\":[{\"uuid\":"
           "\"GPU-n1-0\",\"index\":0,\"memory\":%llu,\"compute\":0}]}]}",
           (unsigned long long)twelve);
  CHECK_EQ_INT(k8s_assigned_sign(keys, "u9", "n1", text, sig, sizeof sig), 0);
  add_pod(c, NULL, "copied", "u3", "n1", &twelve, 1, sig);
  /* A pod on a node name nobody has: no record is made for it. */
  add_pod(c, NULL, "ghost", "u4", "ghost-node", &twelve, 1, NULL);
  cluster_totals(c, 1000, &t);
  CHECK_EQ_U64(t.mem_used, 0);
  CHECK_EQ_INT(t.pods, 0);
  CHECK_EQ_INT(t.forged_pods, 4);
  CHECK_EQ_U64(t.forged_total, 4);
  CHECK_EQ_INT(t.node_records, 1);
  CHECK(fits(c, "n1", 16 * GiB, 1000, NULL, 0));
  /* Signed for its own uid and node: counted. */
  add_pod(c, keys, "real", "u5", "n1", &four, 1, NULL);
  cluster_totals(c, 1000, &t);
  CHECK_EQ_U64(t.mem_used, 4 * GiB);
  CHECK_EQ_INT(t.pods, 1);
  CHECK(fits(c, "n1", 12 * GiB, 1000, NULL, 0));
  CHECK(!fits(c, "n1", 12 * GiB + 1, 1000, NULL, 0));
  cluster_free(c);
}

static void test_saturating(void) {
  /* The bench's cluster (no keys) takes assignments as written: the sums must still hold. */
  struct cluster_cfg cfg = {.policy = PLACE_BINPACK, .node_timeout_ms = 60000};
  struct cluster *c;
  struct cluster_totals t;
  uint64_t twelve = 12 * GiB;
  /* Parts that add up to 2^64 exactly: a wrapping counter reads 12GiB again. */
  uint64_t parts[2] = {INT64_MAX, (1ULL << 63) + 1};
  char why[1024] = "";
  CHECK_EQ_INT(cluster_new(&cfg, &c), 0);
  add_node(c, "n1", 16 * GiB, "2030-01-01T00:00:00Z", 1000);
  add_pod(c, NULL, "a", "ua", "n1", &twelve, 1, NULL);
  CHECK(!fits(c, "n1", 12 * GiB, 1000, why, sizeof why));
  /* 2^63 + 1 is above INT64_MAX: the decoder refuses it. */
  add_pod(c, NULL, "b", "ub", "n1", parts, 2, NULL);
  cluster_totals(c, 1000, &t);
  CHECK_EQ_U64(t.mem_used, 12 * GiB); /* b refused as malformed, a counted */
  uint64_t wrap[2] = {INT64_MAX, INT64_MAX - 12 * GiB + 2};
  add_pod(c, NULL, "b", "ub", "n1", wrap, 2, NULL);
  cluster_totals(c, 1000, &t);
  CHECK_EQ_U64(t.mem_used, UINT64_MAX);
  CHECK(!fits(c, "n1", 12 * GiB, 1000, why, sizeof why));
  CHECK(!fits(c, "n1", 1, 1000, why, sizeof why));
  /* /metrics: saturated figures, never a wrapped one. */
  struct gs_buf out = GS_BUF_INIT(0);
  cluster_metrics(c, &out, 1000);
  char *buf = gs_buf_steal(&out, NULL, NULL);
  CHECK(strstr(buf, "gslice_extender_memory_bytes{state=\"assigned\"} 18446744073709551615\n"));
  CHECK(strstr(buf, "gslice_namespace_memory_bytes{namespace=\"t\"} 18446744073709551615\n"));
  CHECK(strstr(buf, "gslice_extender_forged_assignments_total 1\n")); /* the malformed b */
  free(buf);
  cluster_free(c);
}

static void test_heartbeats_and_records(void) {
  struct cluster_cfg cfg = {.policy = PLACE_BINPACK, .node_timeout_ms = 60000};
  struct cluster *c;
  struct cluster_totals t;
  char why[1024] = "";
  uint64_t now = 1000;

  CHECK_EQ_INT(cluster_new(&cfg, &c), 0);
  /* Year 0: refused, not "2862 s old". */
  add_node(c, "zero", 16 * GiB, "0000-01-01T00:00:00Z", now);
  CHECK(!fits(c, "zero", GiB, now, why, sizeof why));
  CHECK(strstr(why, "not a time gslice-node wrote") != NULL);
  CHECK(strstr(why, " s old") == NULL);
  /* A day ahead of the wall clock: refused too. */
  add_node(c, "ahead", 16 * GiB, "2030-01-03T00:00:00Z", now);
  CHECK(!fits(c, "ahead", GiB, now, why, sizeof why));
  CHECK(strstr(why, "not a time gslice-node wrote") != NULL);
  /* Feb 31 is no date. */
  add_node(c, "feb", 16 * GiB, "2029-02-31T00:00:00Z", now);
  CHECK(!fits(c, "feb", GiB, now, why, sizeof why));
  CHECK(strstr(why, "February 2029 has 28 days") != NULL);
  add_node(c, "ok", 16 * GiB, "2030-01-01T00:00:00Z", now);
  CHECK(fits(c, "ok", GiB, now, why, sizeof why));

  /* Deleted nodes are forgotten after CLUSTER_NODE_FORGET_MS, unless pods still hold there. */
  uint64_t one = GiB;
  add_pod(c, NULL, "holder", "uh", "ahead", &one, 1, NULL);
  json_t *o = json_pack("{s:{s:s}}", "metadata", "name", "zero");
  cluster_node_event(c, "DELETED", o, now, WALL, false);
  json_decref(o);
  o = json_pack("{s:{s:s}}", "metadata", "name", "ahead");
  cluster_node_event(c, "DELETED", o, now, WALL, false);
  json_decref(o);
  cluster_totals(c, now, &t);
  CHECK_EQ_INT(t.node_records, 4);
  now += CLUSTER_NODE_FORGET_MS + 1;
  add_node(c, "ok", 16 * GiB, "2030-01-01T00:00:00Z", now);
  cluster_totals(c, now, &t);
  CHECK_EQ_INT(t.node_records, 3); /* zero forgotten; ahead has a pod; feb is present */
  /* A freed record is not used by a list of names evaluated before. */
  CHECK(!fits(c, "zero", GiB, now, why, sizeof why));
  CHECK(strstr(why, "no such node") != NULL);
  now += CLUSTER_NODE_GRACE_MS + 20000;
  add_node(c, "ok", 16 * GiB, "2030-01-01T00:00:00Z", now); /* frees the grave */
  o = json_pack("{s:{s:s,s:s,s:s},s:{s:s}}", "metadata", "name", "holder", "namespace", "t", "uid",
                "uh", "status", "phase", "Succeeded");
  cluster_pod_event(c, "MODIFIED", o, false);
  json_decref(o);
  now += CLUSTER_NODE_FORGET_MS + 20000;
  add_node(c, "ok", 16 * GiB, "2030-01-01T00:00:00Z", now);
  cluster_totals(c, now, &t);
  CHECK_EQ_INT(t.node_records, 2); /* ahead went with its last pod */
  cluster_free(c);
}

int main(void) {
  char dir[] = "/tmp/gslice-cluster.XXXXXX", k1[64], k2[64];
  struct k8s_keys keys, other;
  char err[K8S_ERR_MAX];
  if (!mkdtemp(dir))
    return 77;
  snprintf(k1, sizeof k1, "%s/k1", dir);
  snprintf(k2, sizeof k2, "%s/k2", dir);
  const char *paths[2] = {k1, k2};
  for (int i = 0; i < 2; i++) {
    int fd = open(paths[i], O_WRONLY | O_CREAT | O_EXCL, 0600);
    const char *key =
        i ? "second key of thirty-two bytes or more" : "first key, thirty-two bytes long!!";
    if (fd < 0 || write(fd, key, strlen(key)) < 0)
      return 77;
    close(fd);
  }
  CHECK_EQ_INT(k8s_keys_load(paths, 1, &keys, err, sizeof err), 0);
  CHECK_EQ_INT(k8s_keys_load(paths + 1, 1, &other, err, sizeof err), 0);
  unlink(k1);
  unlink(k2);
  rmdir(dir);
  test_forged_not_counted(&keys, &other);
  test_saturating();
  test_heartbeats_and_records();
  return test_done();
}
