/* SPDX-License-Identifier: Apache-2.0 */
/* The gslice.io/gpus and gslice.io/assigned codecs: round trips, the contract's exact
 * examples, unknown fields ignored, newer versions and malformed values refused by name. */
#include <errno.h>

#include "annot.h"
#include "status.h"
#include "test.h"
#include "words.h"

static const char *node_example =
    "{\"version\":1,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":16,"
    "\"gpus\":[{\"index\":0,\"uuid\":\"GPU-aaaa\",\"memory\":85899345920,\"healthy\":true,"
    "\"slots\":16},{\"index\":1,\"uuid\":\"GPU-bbbb\",\"memory\":17179869184,\"healthy\":false,"
    "\"slots\":16,\"futureField\":[1,2]}],\"another\":{}}";

static const char *assigned_example =
    "{\"version\":1,\"node\":\"node-a\",\"containers\":[{\"name\":\"main\",\"init\":false,"
    "\"gpus\":[{\"uuid\":\"GPU-aaaa\",\"index\":0,\"memory\":1610612736,\"compute\":15}],"
    "\"computeLimit\":60,\"priority\":\"normal\",\"weight\":1}]}";

static void node_bad(const char *text, int want, const char *word) {
  struct k8s_node_gpus g;
  char err[K8S_ERR_MAX] = "";
  memset(&g, 0x5a, sizeof g);
  int rc = k8s_node_gpus_decode(text, &g, err, sizeof err);
  CHECK_EQ_INT(rc, want);
  CHECK(g.version == 0x5a5a5a5a); /* untouched */
  if (!strstr(err, word))
    fprintf(stderr, "error \"%s\" does not name \"%s\" (input %s)\n", err, word, text);
  CHECK(strstr(err, word) != NULL);
}

static void assigned_bad(const char *text, int want, const char *word) {
  struct k8s_assigned a = {.version = 99};
  char err[K8S_ERR_MAX] = "";
  int rc = k8s_assigned_decode(text, &a, err, sizeof err);
  CHECK_EQ_INT(rc, want);
  CHECK_EQ_INT(a.version, 99);
  if (!strstr(err, word))
    fprintf(stderr, "error \"%s\" does not name \"%s\" (input %s)\n", err, word, text);
  CHECK(strstr(err, word) != NULL);
}

/* A sidecar's entry: "sidecar": true on it alone, and the assignment version 2 (a reader that
 * ignored the field would count the sidecar as ending first and hand its entry on: it must
 * refuse instead); without sidecars the text is version 1, as before. */
static const char *sidecar_example =
    "{\"version\":2,\"node\":\"node-a\",\"containers\":[{\"name\":\"side\",\"init\":true,"
    "\"gpus\":[{\"uuid\":\"GPU-aaaa\",\"index\":0,\"memory\":1024,\"compute\":10}],"
    "\"computeLimit\":100,\"priority\":\"normal\",\"weight\":1,\"sidecar\":true},"
    "{\"name\":\"main\",\"init\":false,\"gpus\":[{\"uuid\":\"GPU-aaaa\",\"index\":0,"
    "\"memory\":2048,\"compute\":20}],\"computeLimit\":100,\"priority\":\"normal\","
    "\"weight\":1}]}";

static void test_sidecar(void) {
  struct k8s_assigned a, b;
  char err[K8S_ERR_MAX] = "", *text = NULL;

  CHECK_EQ_INT(k8s_assigned_decode(sidecar_example, &a, err, sizeof err), 0);
  CHECK_EQ_INT(a.version, 2);
  CHECK(a.containers[0].init && a.containers[0].sidecar);
  CHECK(!a.containers[1].init && !a.containers[1].sidecar);
  CHECK_EQ_INT(k8s_assigned_encode(&a, &text), 0);
  CHECK_STR(text, sidecar_example);
  CHECK_EQ_INT(k8s_assigned_decode(text, &b, err, sizeof err), 0);
  CHECK(k8s_assigned_equal(&a, &b));
  b.containers[0].sidecar = false;
  CHECK(!k8s_assigned_equal(&a, &b));
  /* No sidecar left: version 1 again, no "sidecar" field. */
  free(text);
  CHECK_EQ_INT(k8s_assigned_encode(&b, &text), 0);
  CHECK(strstr(text, "\"version\":1,") == text + 1 && !strstr(text, "sidecar"));
  free(text);
  /* A sidecar that is no init container is refused by the encoder. */
  a.containers[1].sidecar = true;
  CHECK_EQ_INT(k8s_assigned_encode(&a, &text), -EINVAL);
  k8s_assigned_free(&b);
  k8s_assigned_free(&a);

  /* Refused: a sidecar in version 1, a sidecar that is not an init container, not a boolean. */
  assigned_bad("{\"version\":1,\"node\":\"n\",\"containers\":[{\"name\":\"s\",\"init\":true,"
               "\"sidecar\":true,\"gpus\":[{\"uuid\":\"G\",\"index\":0,\"memory\":1,"
               "\"compute\":0}]}]}",
               -EINVAL, "version 2");
  assigned_bad("{\"version\":2,\"node\":\"n\",\"containers\":[{\"name\":\"s\",\"sidecar\":true,"
               "\"gpus\":[{\"uuid\":\"G\",\"index\":0,\"memory\":1,\"compute\":0}]}]}",
               -EINVAL, "init container");
  assigned_bad("{\"version\":2,\"node\":\"n\",\"containers\":[{\"name\":\"s\",\"init\":true,"
               "\"sidecar\":1,\"gpus\":[{\"uuid\":\"G\",\"index\":0,\"memory\":1,"
               "\"compute\":0}]}]}",
               -EINVAL, "sidecar");
  /* The inventory stays version 1: a version 2 gslice.io/gpus is still newer. */
  node_bad("{\"version\":2,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":1,\"gpus\":[]}",
           -EPROTONOSUPPORT, "version 2");
}

/* Numbers past 32 bits: memory bytes round-trip exactly (json_int_t all the way), and a
 * 32-bit field holding a value the decoder refuses (index, slots) is refused by the encoder
 * too, never written as the int its low bits make. */
static void test_wide_numbers(void) {
  struct k8s_node_gpus g = {.heartbeat = 1796061600, .slots_per_gpu = 16, .ngpus = 1}, g2;
  struct k8s_assigned_gpu gp = {.uuid = "G", .index = 3, .memory = (1ull << 40) + 7, .compute = 10};
  struct k8s_assigned_container c = {
      .name = "c", .ngpus = 1, .gpus = &gp, .compute_limit = 50, .weight = 1};
  struct k8s_assigned a = {.node = "n", .ncontainers = 1, .containers = &c}, b;
  char err[K8S_ERR_MAX] = "", *text = NULL;

  g.gpus[0] = (struct k8s_gpu){
      .index = 1, .uuid = "GPU-a", .memory = INT64_MAX, .healthy = true, .slots = 16};
  CHECK_EQ_INT(k8s_node_gpus_encode(&g, &text), 0);
  CHECK(text && strstr(text, "\"memory\":9223372036854775807"));
  CHECK_EQ_INT(k8s_node_gpus_decode(text, &g2, err, sizeof err), 0);
  CHECK_EQ_U64(g2.gpus[0].memory, (uint64_t)INT64_MAX);
  free(text);
  g.gpus[0].index = (1u << 31) + 1; /* as an int: negative */
  CHECK_EQ_INT(k8s_node_gpus_encode(&g, &text), -EINVAL);
  g.gpus[0].index = 1;
  g.gpus[0].slots = 1u << 31;
  CHECK_EQ_INT(k8s_node_gpus_encode(&g, &text), -EINVAL);
  g.gpus[0].slots = 16;
  g.gpus[0].memory = (uint64_t)INT64_MAX + 1;
  CHECK_EQ_INT(k8s_node_gpus_encode(&g, &text), -EINVAL);

  CHECK_EQ_INT(k8s_assigned_encode(&a, &text), 0);
  CHECK(text && strstr(text, "\"memory\":1099511627783"));
  CHECK_EQ_INT(k8s_assigned_decode(text, &b, err, sizeof err), 0);
  CHECK(k8s_assigned_equal(&a, &b));
  k8s_assigned_free(&b);
  free(text);
  gp.index = 1u << 31;
  CHECK_EQ_INT(k8s_assigned_encode(&a, &text), -EINVAL);
}

int main(void) {
  char err[K8S_ERR_MAX];
  struct k8s_node_gpus g, g2;
  char *text = NULL;

  /* The contract's node example, with fields added by a later writer. */
  CHECK_EQ_INT(k8s_node_gpus_decode(node_example, &g, err, sizeof err), 0);
  CHECK_EQ_INT(g.version, 1);
  CHECK_EQ_INT(g.ngpus, 2);
  CHECK_EQ_INT(g.slots_per_gpu, 16);
  CHECK_EQ_U64(g.gpus[0].memory, 85899345920ULL);
  CHECK_STR(g.gpus[1].uuid, "GPU-bbbb");
  CHECK(g.gpus[0].healthy && !g.gpus[1].healthy);
  CHECK_EQ_INT(g.heartbeat, 1796061600); /* date -u -d 2026-11-30T18:00:00Z +%s */
  CHECK_EQ_INT(k8s_node_gpus_encode(&g, &text), 0);
  CHECK_EQ_INT(k8s_node_gpus_decode(text, &g2, err, sizeof err), 0);
  CHECK(memcmp(&g.gpus, &g2.gpus, sizeof g.gpus) == 0 && g2.heartbeat == g.heartbeat);
  CHECK(strstr(text, "\"slotsPerGpu\":16") &&
        strstr(text, "\"heartbeat\":\"2026-11-30T18:00:00Z\""));
  free(text);

  /* Times: offsets and fractions. */
  time_t t;
  CHECK_EQ_INT(k8s_time_parse("2026-11-30T19:30:00.123+01:30", &t), 0);
  CHECK_EQ_INT(t, 1796061600);
  CHECK_EQ_INT(k8s_time_parse("2026-11-30 18:00:00Z", &t), -EINVAL);
  CHECK_EQ_INT(k8s_time_parse("2026-11-30T18:00:00", &t), -EINVAL);
  CHECK_EQ_INT(k8s_time_parse("2026-13-30T18:00:00Z", &t), -EINVAL);
  /* Dates that do not exist are refused, not rolled over (timegm makes Feb 31 Mar 3). */
  CHECK_EQ_INT(k8s_time_parse("2026-02-31T00:00:00Z", &t), -EINVAL);
  CHECK_EQ_INT(k8s_time_parse("2026-04-31T00:00:00Z", &t), -EINVAL);
  CHECK_EQ_INT(k8s_time_parse("2027-02-29T00:00:00Z", &t), -EINVAL);
  CHECK_EQ_INT(k8s_time_parse("2100-02-29T00:00:00Z", &t), -EINVAL);
  CHECK_EQ_INT(k8s_time_parse("2028-02-29T00:00:00Z", &t), 0);
  CHECK_EQ_INT(k8s_time_parse("2000-02-29T00:00:00Z", &t), 0);
  CHECK_EQ_INT(k8s_time_parse("2026-12-31T23:59:59Z", &t), 0);

  /* Impossible times are refused saying which field is wrong; a leap second only at 23:59 UTC. */
  char why[96] = "";
  CHECK_EQ_INT(k8s_time_parse_err("2026-02-31T00:00:00Z", &t, why, sizeof why), -EINVAL);
  CHECK_STR(why, "day 31: February 2026 has 28 days");
  CHECK_EQ_INT(k8s_time_parse_err("2028-02-30T00:00:00Z", &t, why, sizeof why), -EINVAL);
  CHECK_STR(why, "day 30: February 2028 has 29 days");
  CHECK_EQ_INT(k8s_time_parse_err("2026-11-00T00:00:00Z", &t, why, sizeof why), -EINVAL);
  CHECK(strstr(why, "day 0") != NULL);
  CHECK_EQ_INT(k8s_time_parse_err("2026-11-30T24:00:00Z", &t, why, sizeof why), -EINVAL);
  CHECK_STR(why, "hour 24 is not 0..23");
  CHECK_EQ_INT(k8s_time_parse_err("2026-11-30T18:60:00Z", &t, why, sizeof why), -EINVAL);
  CHECK_STR(why, "minute 60 is not 0..59");
  CHECK_EQ_INT(k8s_time_parse_err("2026-11-30T18:00:61Z", &t, why, sizeof why), -EINVAL);
  CHECK(strstr(why, "second 61") != NULL);
  CHECK_EQ_INT(k8s_time_parse_err("2026-11-30T12:34:60Z", &t, why, sizeof why), -EINVAL);
  CHECK(strstr(why, "leap second") != NULL);
  CHECK_EQ_INT(k8s_time_parse_err("2026-11-30T18:00:00+24:00", &t, why, sizeof why), -EINVAL);
  CHECK(strstr(why, "offset") != NULL);
  CHECK_EQ_INT(k8s_time_parse_err("2026-11-30", &t, why, sizeof why), -EINVAL);
  CHECK(strstr(why, "form") != NULL);
  CHECK_EQ_INT(k8s_time_parse("2016-12-31T23:59:60Z", &t), 0);
  CHECK_EQ_INT(t, 1483228800); /* a leap second reads as the next second, as POSIX time has it */
  CHECK_EQ_INT(k8s_time_parse("2017-01-01T00:59:60+01:00", &t), 0);
  CHECK_EQ_INT(t, 1483228800);
  node_bad("{\"version\":1,\"heartbeat\":\"2026-04-31T10:00:00Z\",\"slotsPerGpu\":1,\"gpus\":[]}",
           -EINVAL, "heartbeat\" is \"2026-04-31T10:00:00Z\": day 31: April 2026 has 30 days");

  /* Node: refusals name the field. */
  node_bad("", -EINVAL, "empty");
  node_bad("{", -EINVAL, "not JSON");
  node_bad("[1]", -EINVAL, "object");
  node_bad("{\"version\":2,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":1,\"gpus\":[]}",
           -EPROTONOSUPPORT, "version 2");
  node_bad("{\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":1,\"gpus\":[]}", -EINVAL,
           "version");
  node_bad("{\"version\":\"1\",\"heartbeat\":\"x\",\"slotsPerGpu\":1,\"gpus\":[]}", -EINVAL,
           "version");
  node_bad("{\"version\":1,\"heartbeat\":\"yesterday\",\"slotsPerGpu\":1,\"gpus\":[]}", -EINVAL,
           "heartbeat");
  node_bad("{\"version\":1,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":0,\"gpus\":[]}",
           -EINVAL, "slotsPerGpu");
  node_bad("{\"version\":1,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":1,\"gpus\":{}}",
           -EINVAL, "gpus");
  node_bad("{\"version\":1,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":1,"
           "\"gpus\":[{\"index\":0,\"uuid\":\"G\",\"memory\":-1}]}",
           -EINVAL, "memory");
  node_bad("{\"version\":1,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":1,"
           "\"gpus\":[{\"index\":0,\"uuid\":\"G\",\"memory\":1.5e9}]}",
           -EINVAL, "memory");
  node_bad("{\"version\":1,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":1,"
           "\"gpus\":[{\"index\":0,\"memory\":5}]}",
           -EINVAL, "uuid");
  node_bad("{\"version\":1,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":1,"
           "\"gpus\":[{\"index\":0,\"uuid\":\"G\",\"memory\":5},"
           "{\"index\":0,\"uuid\":\"H\",\"memory\":5}]}",
           -EINVAL, "twice");
  node_bad("{\"version\":1,\"heartbeat\":\"2026-11-30T18:00:00Z\",\"slotsPerGpu\":1,"
           "\"gpus\":[{\"index\":0,\"uuid\":\"G\",\"memory\":5,\"healthy\":\"yes\"}]}",
           -EINVAL, "healthy");
  node_bad("{\"version\":1,\"version\":1}", -EINVAL, "not JSON"); /* duplicate keys */

  /* Assigned: the contract's example, round trip, equality. */
  struct k8s_assigned a, b;
  CHECK_EQ_INT(k8s_assigned_decode(assigned_example, &a, err, sizeof err), 0);
  CHECK_STR(a.node, "node-a");
  CHECK_EQ_INT(a.ncontainers, 1);
  CHECK_STR(a.containers[0].name, "main");
  CHECK_EQ_INT(a.containers[0].compute_limit, 60);
  CHECK_EQ_INT(a.containers[0].priority, K8S_PRIO_NORMAL);
  CHECK_EQ_INT(a.containers[0].ngpus, 1);
  CHECK_EQ_U64(a.containers[0].gpus[0].memory, 1610612736ULL);
  CHECK_EQ_INT(a.containers[0].gpus[0].compute, 15);
  CHECK_EQ_INT(k8s_assigned_encode(&a, &text), 0);
  CHECK_STR(text, assigned_example); /* byte for byte, field order as in the contract */
  CHECK_EQ_INT(k8s_assigned_decode(text, &b, err, sizeof err), 0);
  CHECK(k8s_assigned_equal(&a, &b));
  b.containers[0].gpus[0].memory++;
  CHECK(!k8s_assigned_equal(&a, &b));
  k8s_assigned_free(&b);
  free(text);
  k8s_assigned_free(&a);

  /* Defaults when optional fields are missing; unknown fields ignored. */
  CHECK_EQ_INT(k8s_assigned_decode("{\"version\":1,\"node\":\"n\",\"extra\":1,\"containers\":"
                                   "[{\"name\":\"c\",\"gpus\":[{\"uuid\":\"G\",\"index\":3,"
                                   "\"memory\":0,\"compute\":0,\"x\":{}}]},"
                                   "{\"name\":\"c\",\"init\":true,\"priority\":\"high\","
                                   "\"weight\":5,\"gpus\":[{\"uuid\":\"G\",\"index\":3,"
                                   "\"memory\":1,\"compute\":100}]}]}",
                                   &a, err, sizeof err),
               0);
  CHECK_EQ_INT(a.ncontainers, 2);
  CHECK(!a.containers[0].init && a.containers[1].init);
  CHECK_EQ_INT(a.containers[0].compute_limit, 100);
  CHECK_EQ_INT(a.containers[0].weight, 1);
  CHECK_EQ_INT(a.containers[0].priority, K8S_PRIO_NORMAL);
  CHECK_EQ_INT(a.containers[1].priority, K8S_PRIO_HIGH);
  CHECK_EQ_INT(a.containers[1].weight, 5);
  k8s_assigned_free(&a);

  /* Assigned: refusals. */
  assigned_bad("{\"version\":3,\"node\":\"n\",\"containers\":[]}", -EPROTONOSUPPORT, "upgrade");
  assigned_bad("{\"version\":1,\"containers\":[]}", -EINVAL, "node");
  assigned_bad("{\"version\":1,\"node\":\"n\"}", -EINVAL, "containers");
  assigned_bad("{\"version\":1,\"node\":\"n\",\"containers\":[{\"name\":\"c\",\"gpus\":[]}]}",
               -EINVAL, "containers[0]: \"gpus\"");
  assigned_bad("{\"version\":1,\"node\":\"n\",\"containers\":[{\"name\":\"c\",\"gpus\":"
               "[{\"uuid\":\"G\",\"index\":0,\"memory\":1,\"compute\":101}]}]}",
               -EINVAL, "compute");
  assigned_bad("{\"version\":1,\"node\":\"n\",\"containers\":[{\"name\":\"c\",\"computeLimit\":20,"
               "\"gpus\":[{\"uuid\":\"G\",\"index\":0,\"memory\":1,\"compute\":30}]}]}",
               -EINVAL, "computeLimit");
  assigned_bad(
      "{\"version\":1,\"node\":\"n\",\"containers\":[{\"name\":\"c\",\"priority\":\"urgent\","
      "\"gpus\":[{\"uuid\":\"G\",\"index\":0,\"memory\":1,\"compute\":3}]}]}",
      -EINVAL, "priority");
  assigned_bad("{\"version\":1,\"node\":\"n\",\"containers\":[{\"name\":\"c\",\"gpus\":"
               "[{\"uuid\":\"G\",\"index\":0,\"memory\":1,\"compute\":3},"
               "{\"uuid\":\"G\",\"index\":1,\"memory\":1,\"compute\":3}]}]}",
               -EINVAL, "twice");
  assigned_bad("{\"version\":1,\"node\":\"n\",\"containers\":[{\"name\":\"c\",\"gpus\":"
               "[{\"uuid\":\"G\",\"index\":0,\"memory\":1,\"compute\":3}]},{\"name\":\"c\","
               "\"gpus\":[{\"uuid\":\"G\",\"index\":0,\"memory\":1,\"compute\":3}]}]}",
               -EINVAL, "twice");
  assigned_bad("{\"version\":1,\"node\":\"n\",\"containers\":[{\"name\":\"c\",\"gpus\":"
               "[{\"uuid\":\"G\",\"index\":0,\"memory\":\"1Gi\",\"compute\":3}]}]}",
               -EINVAL, "memory");

  /* Encoders refuse what a decoder would refuse. */
  struct k8s_assigned_gpu gp = {.uuid = "G", .memory = 1, .compute = 80};
  struct k8s_assigned_container c = {
      .name = "c", .ngpus = 1, .gpus = &gp, .compute_limit = 50, .weight = 1};
  struct k8s_assigned bad = {.node = "n", .ncontainers = 1, .containers = &c};
  CHECK_EQ_INT(k8s_assigned_encode(&bad, &text), -EINVAL);

  enum k8s_priority p;
  CHECK_EQ_INT(k8s_priority_parse("low", &p), 0);
  CHECK_EQ_INT(p, K8S_PRIO_LOW);
  CHECK_EQ_INT(k8s_priority_parse("High", &p), -EINVAL);
  CHECK_EQ_INT(k8s_priority_parse("normal", &p), 0);
  CHECK_EQ_INT(p, K8S_PRIO_NORMAL);
  CHECK_EQ_INT(k8s_priority_parse("high", &p), 0);
  CHECK_EQ_INT(p, K8S_PRIO_HIGH);
  CHECK_EQ_INT(k8s_priority_gs(K8S_PRIO_HIGH), GS_PRIORITY_HIGH);
  CHECK_EQ_INT(k8s_priority_gs(K8S_PRIO_LOW), GS_PRIORITY_LOW);
  CHECK_EQ_INT(k8s_priority_gs(K8S_PRIO_NORMAL), GS_PRIORITY_NORMAL);
  /* A priority outside the enum is named as unknown and never written as a valid one. */
  CHECK_STR(k8s_priority_name((enum k8s_priority)7), "unknown");
  CHECK_STR(k8s_priority_name(K8S_PRIO_LOW), "low");
  c = (struct k8s_assigned_container){.name = "c",
                                      .ngpus = 1,
                                      .gpus = &gp,
                                      .compute_limit = 100,
                                      .weight = 1,
                                      .priority = (enum k8s_priority)7};
  gp.compute = 10;
  CHECK_EQ_INT(k8s_assigned_encode(&bad, &text), -EINVAL);
  c.priority = K8S_PRIO_HIGH;
  CHECK_EQ_INT(k8s_assigned_encode(&bad, &text), 0);
  CHECK(text && strstr(text, "\"priority\":\"high\""));
  free(text);
  c.weight = GS_WEIGHT_MAX + 1;
  CHECK_EQ_INT(k8s_assigned_encode(&bad, &text), -EINVAL);
  test_sidecar();
  test_wide_numbers();
  return test_done();
}
