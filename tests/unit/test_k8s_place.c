/* SPDX-License-Identifier: Apache-2.0 */
/* Placement: fit per GPU after what is held, N distinct GPUs per container, binpack and
 * spread at node and GPU level, reasons in words, unresolvable nodes, exact splits. */
#include <errno.h>

#include "place.h"
#include "test.h"

#define GiB (1ULL << 30)

static struct place_gpu gpus_a[8], gpus_b[8];

static void node_init(struct place_node *n, const char *name, struct place_gpu *g, uint32_t ngpus,
                      uint64_t mem) {
  memset(g, 0, sizeof(*g) * ngpus);
  for (uint32_t i = 0; i < ngpus; i++) {
    g[i].index = i;
    snprintf(g[i].uuid, sizeof g[i].uuid, "GPU-%s-%u", name, i);
    g[i].memory = mem;
    g[i].healthy = true;
    g[i].slots = 16;
  }
  *n = (struct place_node){.name = name, .heartbeat_ms = 1000, .ngpus = ngpus, .gpus = g};
}

static struct place_container ctr(const char *name, uint32_t ngpus, uint64_t mem,
                                  uint32_t compute) {
  struct place_container c = {.ngpus = ngpus,
                              .memory = mem,
                              .compute = compute,
                              .compute_limit = 100,
                              .priority = K8S_PRIO_NORMAL,
                              .weight = 1};
  snprintf(c.name, sizeof c.name, "%s", name);
  return c;
}

static const struct place_cfg cfg = {.node_timeout_ms = 60000};

static char reasons[4][PLACE_REASON_MAX];
static int next_reason;

/* Every verdict of the test gets a reason buffer of its own (a few are alive at once). */
static void with_reason(struct place_verdict *v) {
  v->reason = reasons[next_reason++ % 4];
  v->reason_len = PLACE_REASON_MAX;
}

static void eval(struct place_node *n, struct place_pod *p, struct place_verdict *v,
                 struct place_choice *ch) {
  with_reason(v);
  place_eval(&cfg, n, p, 2000, v, ch);
}

/* Sums of parts saturate: a counter wrapped by hostile parts made a full GPU look empty, and
 * over-held GPUs made /prioritize answer Score -554428741. */
static void test_saturating(void) {
  struct place_node n;
  struct place_verdict v;
  struct place_choice ch;
  struct place_container cs[3];
  struct place_pod pod = {.ncontainers = 1, .containers = cs, .policy = PLACE_BINPACK};
  struct place_share sh[2];

  /* 12GiB held, then two parts that take the counter to 2^64 exactly: wrapped, it read 0. */
  node_init(&n, "s", gpus_a, 2, 16 * GiB);
  cs[0] = ctr("a", 1, 12 * GiB, 0);
  sh[0] = (struct place_share){0, 0, 12 * GiB, 0};
  place_apply(&n, &pod, sh, 1, +1);
  cs[0] = ctr("x", 1, INT64_MAX, 0);
  cs[1] = ctr("y", 1, (1ULL << 63) + 1 - 12 * GiB, 0);
  pod.ncontainers = 2;
  sh[0] = (struct place_share){0, 0, INT64_MAX, 0};
  sh[1] = (struct place_share){1, 0, (1ULL << 63) + 1 - 12 * GiB, 0};
  place_apply(&n, &pod, sh, 2, +1);
  CHECK_EQ_U64(gpus_a[0].mem_used, UINT64_MAX);
  pod.ncontainers = 1;
  cs[0] = ctr("big", 1, 12 * GiB, 10);
  gpus_a[1].healthy = false;
  eval(&n, &pod, &v, &ch);
  CHECK(!v.fits); /* with the counter wrapped to 0 it fitted */
  /* Compute held far past 100% on another GPU: scores stay 0..10 either way. */
  gpus_a[1].healthy = true;
  gpus_a[0].mem_used = 0;
  gpus_a[1].compute_used = 250;
  gpus_a[1].mem_used = 40 * GiB;
  gpus_a[1].slices = 3;
  for (int p = 0; p < 2; p++) {
    pod.policy = p ? PLACE_SPREAD : PLACE_BINPACK;
    eval(&n, &pod, &v, &ch);
    CHECK(v.fits);
    CHECK(v.score >= 0 && v.score <= PLACE_SCORE_MAX);
  }
  /* The reason for a GPU held past 100% does not wrap to "4294967246% free". */
  cs[0] = ctr("c", 2, 2 * GiB, 20);
  eval(&n, &pod, &v, &ch);
  CHECK(!v.fits);
  CHECK(strstr(v.reason, "0% of compute free") != NULL || strstr(v.reason, "free, ") != NULL);
  CHECK(strstr(v.reason, "4294967") == NULL);
}

/* Native sidecars (init containers with restartPolicy Always) run beside everything after them,
 * to the pod's end: a pod holds max(each regular init container + the sidecars before it, the
 * app containers + all sidecars), as Kubernetes counts its effective request (KEP-753). Before,
 * a sidecar counted as ending before the app containers: 12 GiB + 12 GiB fitted a 16 GiB GPU. */
static void test_sidecar(void) {
  struct place_node n;
  struct place_verdict v;
  struct place_choice ch;
  struct place_container cs[3];
  struct place_pod pod = {.ncontainers = 2, .containers = cs, .policy = PLACE_BINPACK};
  char err[256];

  node_init(&n, "s", gpus_a, 1, 16 * GiB);
  cs[0] = ctr("side", 1, 12 * GiB, 50);
  cs[0].init = cs[0].sidecar = true;
  cs[1] = ctr("app", 1, 12 * GiB, 50);
  eval(&n, &pod, &v, &ch);
  CHECK(!v.fits && v.unresolvable);
  CHECK(strstr(v.reason, "container app") != NULL);
  cs[1].memory = 4 * GiB;
  eval(&n, &pod, &v, &ch);
  CHECK(v.fits);
  place_apply(&n, &pod, ch.shares, ch.nshares, +1);
  CHECK_EQ_U64(gpus_a[0].mem_used, 16 * GiB);
  CHECK_EQ_INT(gpus_a[0].compute_used, 100);
  CHECK_EQ_INT(gpus_a[0].slices, 2);
  /* The next pod finds the GPU full. */
  {
    struct place_container one = ctr("victim", 1, GiB, 1);
    struct place_pod p2 = {.ncontainers = 1, .containers = &one, .policy = PLACE_BINPACK};
    eval(&n, &p2, &v, NULL);
    CHECK(!v.fits && !v.unresolvable);
  }
  place_apply(&n, &pod, ch.shares, ch.nshares, -1);
  CHECK_EQ_U64(gpus_a[0].mem_used, 0);
  CHECK_EQ_INT(gpus_a[0].slices, 0);

  /* Two GPUs: the sidecar and the app container each take one. */
  node_init(&n, "s", gpus_a, 2, 16 * GiB);
  cs[1] = ctr("app", 1, 12 * GiB, 50);
  eval(&n, &pod, &v, &ch);
  CHECK(v.fits);
  CHECK_EQ_INT(ch.nshares, 2);
  CHECK(ch.shares[0].gpu != ch.shares[1].gpu);

  /* A regular init container after a sidecar runs beside it; one before it, alone. */
  node_init(&n, "s", gpus_a, 1, 16 * GiB);
  pod.ncontainers = 3;
  cs[0] = ctr("side", 1, 4 * GiB, 30);
  cs[0].init = cs[0].sidecar = true;
  cs[1] = ctr("setup", 1, 10 * GiB, 60);
  cs[1].init = true;
  cs[2] = ctr("app", 1, 2 * GiB, 10);
  eval(&n, &pod, &v, &ch);
  CHECK(v.fits);
  place_apply(&n, &pod, ch.shares, ch.nshares, +1);
  CHECK_EQ_U64(gpus_a[0].mem_used, 14 * GiB); /* setup + side */
  CHECK_EQ_INT(gpus_a[0].compute_used, 90);
  CHECK_EQ_INT(gpus_a[0].slices, 2);
  /* The same shares in another order count the same (an assignment read back). */
  {
    struct place_share rev[3] = {ch.shares[2], ch.shares[1], ch.shares[0]};
    place_apply(&n, &pod, rev, 3, -1);
    CHECK_EQ_U64(gpus_a[0].mem_used, 0);
    CHECK_EQ_INT(gpus_a[0].compute_used, 0);
    CHECK_EQ_INT(gpus_a[0].slices, 0);
  }
  cs[1].memory = 13 * GiB; /* 13 + 4 > 16 while setup runs */
  eval(&n, &pod, &v, &ch);
  CHECK(!v.fits && v.unresolvable);
  CHECK(strstr(v.reason, "container setup") != NULL);
  /* Before the sidecar, setup runs alone: 13 GiB fits, and the pod holds 13 GiB then 6. */
  {
    struct place_container t = cs[0];
    cs[0] = cs[1];
    cs[1] = t;
  }
  eval(&n, &pod, &v, &ch);
  CHECK(v.fits);
  place_apply(&n, &pod, ch.shares, ch.nshares, +1);
  CHECK_EQ_U64(gpus_a[0].mem_used, 13 * GiB);
  CHECK_EQ_INT(gpus_a[0].compute_used, 60);
  CHECK_EQ_INT(gpus_a[0].slices, 2); /* side + app at the end */
  place_apply(&n, &pod, ch.shares, ch.nshares, -1);

  /* A sidecar is an init container. */
  pod.ncontainers = 1;
  cs[0] = ctr("side", 1, GiB, 10);
  cs[0].sidecar = true;
  CHECK_EQ_INT(place_pod_check(&pod, err, sizeof err), -EINVAL);
  cs[0].init = true;
  CHECK_EQ_INT(place_pod_check(&pod, err, sizeof err), 0);
}

int main(void) {
  struct place_node a, b;
  struct place_verdict v;
  struct place_choice ch;
  struct place_container cs[4];
  struct place_pod pod = {.ncontainers = 1, .containers = cs, .policy = PLACE_BINPACK};

  /* Fragmentation: two half-full 16GiB GPUs refuse 10GiB, which fits neither, and
   * say why per GPU; it is resolvable (an empty node would take it). */
  node_init(&a, "a", gpus_a, 2, 16 * GiB);
  gpus_a[0].mem_used = 8 * GiB;
  gpus_a[0].slices = 1;
  gpus_a[1].mem_used = 8 * GiB;
  gpus_a[1].slices = 1;
  cs[0] = ctr("main", 1, 10 * GiB, 10);
  eval(&a, &pod, &v, &ch);
  CHECK(!v.fits && !v.unresolvable);
  CHECK(strstr(v.reason, "gpu 0: 8GiB of 16GiB free, 10GiB asked") != NULL);
  CHECK(strstr(v.reason, "gpu 1: 8GiB of 16GiB free, 10GiB asked") != NULL);
  CHECK(strstr(v.reason, "container main asks 10GiB") != NULL);
  CHECK_EQ_INT(ch.nshares, 0);
  /* ... while 8GiB fits exactly on one. */
  cs[0].memory = 8 * GiB;
  eval(&a, &pod, &v, &ch);
  CHECK(v.fits);
  CHECK_EQ_INT(ch.nshares, 1);
  CHECK_EQ_U64(ch.shares[0].memory, 8 * GiB);

  /* Unresolvable: bigger than any GPU of the node. */
  cs[0].memory = 17 * GiB;
  eval(&a, &pod, &v, &ch);
  CHECK(!v.fits && v.unresolvable);
  CHECK(strstr(v.reason, "17GiB asked") != NULL);

  /* GPU level: binpack takes the used GPU, spread the empty one. */
  node_init(&a, "a", gpus_a, 2, 16 * GiB);
  gpus_a[1].mem_used = 4 * GiB;
  gpus_a[1].compute_used = 20;
  gpus_a[1].slices = 1;
  cs[0] = ctr("main", 1, 4 * GiB, 20);
  eval(&a, &pod, &v, &ch);
  CHECK(v.fits);
  CHECK_EQ_INT(ch.shares[0].gpu, 1);
  pod.policy = PLACE_SPREAD;
  eval(&a, &pod, &v, &ch);
  CHECK(v.fits);
  CHECK_EQ_INT(ch.shares[0].gpu, 0);
  pod.policy = PLACE_FIRSTFIT;
  eval(&a, &pod, &v, &ch);
  CHECK_EQ_INT(ch.shares[0].gpu, 0);

  /* Node level: binpack scores the node in use above an empty one, spread below;
   * scores stay in 0..10. */
  node_init(&b, "b", gpus_b, 2, 16 * GiB);
  pod.policy = PLACE_BINPACK;
  struct place_verdict va, vb;
  eval(&a, &pod, &va, NULL);
  eval(&b, &pod, &vb, NULL);
  CHECK(va.fits && vb.fits && va.score > vb.score);
  CHECK_EQ_INT(vb.score, 0);
  CHECK(va.score >= 2 && va.score <= 10);
  pod.policy = PLACE_SPREAD;
  eval(&a, &pod, &va, NULL);
  eval(&b, &pod, &vb, NULL);
  CHECK(va.fits && vb.fits && va.score < vb.score);
  CHECK(vb.score <= 10 && va.score >= 0);
  /* A full GPU after placement scores 10 under binpack. */
  pod.policy = PLACE_BINPACK;
  gpus_a[1].mem_used = 12 * GiB;
  gpus_a[1].compute_used = 80;
  eval(&a, &pod, &va, &ch);
  CHECK(va.fits);
  CHECK_EQ_INT(ch.shares[0].gpu, 1);
  CHECK_EQ_INT(va.score, 10);

  /* Compute and slots are per-GPU limits too, with their own words. */
  node_init(&a, "a", gpus_a, 2, 16 * GiB);
  gpus_a[0].compute_used = 70;
  gpus_a[1].slots = 2;
  gpus_a[1].slices = 2;
  cs[0] = ctr("main", 1, 1 * GiB, 40);
  eval(&a, &pod, &v, NULL);
  CHECK(!v.fits && !v.unresolvable);
  CHECK(strstr(v.reason, "gpu 0: 30% of compute free, 40% asked") != NULL);
  CHECK(strstr(v.reason, "gpu 1: all 2 slots taken") != NULL);
  gpus_a[0].healthy = false;
  eval(&a, &pod, &v, NULL);
  CHECK(strstr(v.reason, "gpu 0: unhealthy") != NULL);

  /* Multi-GPU: N distinct GPUs, exact split (remainder to the first parts). */
  node_init(&a, "a", gpus_a, 4, 16 * GiB);
  gpus_a[2].mem_used = 15 * GiB + GiB / 2; /* no room here */
  cs[0] = ctr("main", 3, 3 * GiB + 2, 31);
  pod.policy = PLACE_BINPACK;
  eval(&a, &pod, &v, &ch);
  CHECK(v.fits);
  CHECK_EQ_INT(ch.nshares, 3);
  uint64_t msum = 0;
  uint32_t csum = 0;
  for (uint32_t i = 0; i < ch.nshares; i++) {
    msum += ch.shares[i].memory;
    csum += ch.shares[i].compute;
    CHECK(ch.shares[i].gpu != 2);
    for (uint32_t j = 0; j < i; j++)
      CHECK(ch.shares[i].gpu != ch.shares[j].gpu);
  }
  CHECK_EQ_U64(msum, 3 * GiB + 2);
  CHECK_EQ_INT(csum, 31);
  CHECK_EQ_U64(ch.shares[0].memory, GiB + 1);
  CHECK_EQ_U64(ch.shares[2].memory, GiB);
  CHECK_EQ_INT(ch.shares[0].compute, 11);
  CHECK_EQ_INT(ch.shares[1].compute, 10);
  /* Four GPUs asked of a node with three that have room: resolvable; five: not. */
  cs[0] = ctr("main", 4, 4 * GiB, 0);
  eval(&a, &pod, &v, NULL);
  CHECK(!v.fits && !v.unresolvable);
  CHECK(strstr(v.reason, "on each of 4 GPUs, 3 have room") != NULL);
  cs[0] = ctr("main", 5, 5 * GiB, 0);
  eval(&a, &pod, &v, NULL);
  CHECK(!v.fits && v.unresolvable);

  /* Two containers of one pod may share a GPU; their parts add up on it. */
  node_init(&a, "a", gpus_a, 1, 16 * GiB);
  cs[0] = ctr("one", 1, 6 * GiB, 50);
  cs[1] = ctr("two", 1, 6 * GiB, 50);
  pod.ncontainers = 2;
  eval(&a, &pod, &v, &ch);
  CHECK(v.fits);
  cs[1].compute = 51;
  eval(&a, &pod, &v, &ch);
  CHECK(!v.fits && v.unresolvable);
  CHECK(strstr(v.reason, "container two") != NULL);

  /* Init containers run alone first: each needs room next to other pods only, and the
   * pod holds the larger phase per GPU. */
  cs[1] = ctr("setup", 1, 10 * GiB, 90);
  cs[1].init = true;
  eval(&a, &pod, &v, &ch);
  CHECK(v.fits);
  place_apply(&a, &pod, ch.shares, ch.nshares, +1);
  CHECK_EQ_U64(gpus_a[0].mem_used, 10 * GiB);
  CHECK_EQ_INT(gpus_a[0].compute_used, 90);
  CHECK_EQ_INT(gpus_a[0].slices, 1);
  place_apply(&a, &pod, ch.shares, ch.nshares, -1);
  CHECK_EQ_U64(gpus_a[0].mem_used, 0);
  CHECK_EQ_INT(gpus_a[0].compute_used, 0);
  CHECK_EQ_INT(gpus_a[0].slices, 0);
  pod.ncontainers = 1;

  /* A stale heartbeat or an unusable node takes the node out, for good reason. */
  node_init(&a, "a", gpus_a, 1, 16 * GiB);
  cs[0] = ctr("main", 1, GiB, 10);
  with_reason(&v);
  place_eval(&cfg, &a, &pod, 1000 + 61000, &v, NULL);
  CHECK(!v.fits && v.unresolvable);
  CHECK(strstr(v.reason, "heartbeat is 61 s old") != NULL);
  with_reason(&v);
  place_eval(&cfg, &a, &pod, 1000 + 60000, &v, NULL);
  CHECK(v.fits);
  a.unusable = "no gslice.io/gpus annotation";
  eval(&a, &pod, &v, NULL);
  CHECK(!v.fits && v.unresolvable);
  CHECK_STR(v.reason, "no gslice.io/gpus annotation");
  a.unusable = NULL;
  a.ngpus = 0;
  eval(&a, &pod, &v, NULL);
  CHECK(!v.fits && v.unresolvable);
  CHECK(strstr(v.reason, "no GPUs") != NULL);

  /* What a pod may ask at all. */
  char err[256];
  cs[0] = ctr("main", 2, 2 * GiB, 100);
  cs[0].compute_limit = 40;
  CHECK_EQ_INT(place_pod_check(&pod, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "compute-limit 40%") && strstr(err, "50%"));
  cs[0].compute_limit = 50;
  CHECK_EQ_INT(place_pod_check(&pod, err, sizeof err), 0);
  cs[0].compute = 201;
  CHECK_EQ_INT(place_pod_check(&pod, err, sizeof err), -EINVAL);
  cs[0] = ctr("main", 1, 0, 10);
  CHECK_EQ_INT(place_pod_check(&pod, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "gpu-memory") != NULL);

  enum place_policy pp;
  CHECK_EQ_INT(place_policy_parse("spread", &pp), 0);
  CHECK_EQ_INT(pp, PLACE_SPREAD);
  CHECK_EQ_INT(place_policy_parse("Spread", &pp), -EINVAL);
  test_saturating();
  test_sidecar();
  return test_done();
}
