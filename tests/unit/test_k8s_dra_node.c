/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA plugin's pure part (dra_rec.c): a prepared claim's record on disk and back (it decides
 * which slice a restarting container gets, so a malformed one is refused, never half believed),
 * the one slice a claim's shares make, the kubelet's names checked, and a batch answered claim
 * by claim (one failing never fails another; every claim asked has an answer). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dra.h"
#include "dra.pb-c.h"
#include "node.h"
#include "status.h"
#include "test.h"

static const struct node_gpu gpus[] = {
    {.index = 0, .uuid = "GPU-a", .memory = 80ull << 30},
    {.index = 1, .uuid = "GPU-b", .memory = 80ull << 30},
};

static void share(struct dra_claim *c, const char *req, uint32_t gpu, uint64_t mem, uint32_t comp,
                  uint32_t limit) {
  struct dra_share *s = &c->shares[c->nshares++];
  memset(s, 0, sizeof(*s));
  snprintf(s->request, sizeof(s->request), "%s", req);
  snprintf(s->pool, sizeof(s->pool), "node-1");
  snprintf(s->device, sizeof(s->device), "gpu-%u", gpu);
  s->gpu_index = gpu;
  s->memory = mem;
  s->compute = comp;
  s->cfg.compute_limit = limit;
  s->cfg.priority = GS_PRIORITY_NORMAL;
  s->cfg.weight = 1;
}

static void claim(struct dra_claim *c, const char *uid) {
  memset(c, 0, sizeof(*c));
  snprintf(c->ns, sizeof(c->ns), "team-a");
  snprintf(c->name, sizeof(c->name), "train-gpu");
  snprintf(c->uid, sizeof(c->uid), "%s", uid);
}

static void test_from_claim(void) {
  static struct dra_claim c;
  static struct dra_rec r;
  struct gs_slice_spec spec;
  char err[512] = "";

  /* A hard 60: request 60, limit 60, 1 GiB on GPU 1. */
  claim(&c, "u-1");
  share(&c, "gpu", 1, 1ull << 30, 60, 60);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), 0);
  CHECK_STR(r.gpus, "1:60:1073741824");
  CHECK_STR(r.memory, "0=1073741824"); /* CUDA ordinal 0 is GPU 1 inside the container */
  CHECK_STR(r.devices, "GPU-b");
  CHECK_EQ_INT(r.compute_limit, 60);
  CHECK_STR(r.priority, "normal");
  CHECK_STR(r.results, "gpu node-1 gpu-1");
  snprintf(r.slice_name, sizeof(r.slice_name), "dra.1.team-a.train-gpu");
  CHECK_EQ_INT(dra_rec_spec(&r, &spec), 0);
  CHECK_EQ_INT(spec.gpu_mask, 2);
  CHECK_EQ_INT(spec.gpu_compute_request[1], 60);
  CHECK_EQ_U64(spec.gpu_memory_cap[1], 1ull << 30);
  CHECK_EQ_INT(spec.compute_limit, 60);
  CHECK_STR(spec.name, "dra.1.team-a.train-gpu");

  /* No limit given: 100 (bursts to the whole GPU); two shares on one GPU add up. */
  claim(&c, "u-2");
  share(&c, "a", 0, 1ull << 30, 20, 0);
  share(&c, "b", 0, 2ull << 30, 10, 0);
  share(&c, "c", 1, 4ull << 30, 30, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), 0);
  CHECK_STR(r.gpus, "0:30:3221225472,1:30:4294967296");
  CHECK_STR(r.memory, "0=3221225472,1=4294967296");
  CHECK_STR(r.devices, "GPU-a,GPU-b");
  CHECK_EQ_INT(r.compute_limit, 100);
  CHECK_STR(r.results, "a node-1 gpu-0,b node-1 gpu-0,c node-1 gpu-1");

  /* Refused, each with what was wrong. */
  claim(&c, "u-3");
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "no device") != NULL);
  share(&c, "gpu", 5, 1ull << 30, 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -ENODEV);
  CHECK(strstr(err, "gpu-5") != NULL);
  claim(&c, "u-4");
  share(&c, "a", 0, 1ull << 30, 60, 0);
  share(&c, "b", 0, 1ull << 30, 50, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "whole GPU") != NULL);
  claim(&c, "u-5");
  share(&c, "a", 0, 1ull << 30, 10, 0);
  share(&c, "b", 1, 1ull << 30, 10, 0);
  c.shares[1].cfg.priority = GS_PRIORITY_HIGH;
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "priorit") != NULL);
  claim(&c, "u-6");
  share(&c, "a", 0, 0, 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  /* A limit below the share's request is refused (the parser refuses it first): a slice's limit
   * is never above what a share's class sets for it. */
  claim(&c, "u-7");
  share(&c, "a", 0, 1ull << 30, 40, 30);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "\"a\"") && strstr(err, "40") && strstr(err, "30"));
}

/* A class's computeLimit holds every share of it, whatever else the claim asks. */
static void test_limit_ceiling(void) {
  static struct dra_claim c;
  static struct dra_rec r;
  char err[512] = "";

  /* The attack: a claim of class capped (computeLimit 30) plus one tiny request of the uncapped
   * class gslice.io, on the same GPU or another, either order: refused naming both requests and
   * their limits (it made a slice of limit 100). */
  for (int order = 0; order < 2; order++)
    for (uint32_t g = 0; g < 2; g++) {
      claim(&c, "u-mix");
      if (order == 0)
        share(&c, "big", 0, 8ull << 30, 30, 30);
      share(&c, "tiny", g, 2ull << 20, 1, 0);
      if (order == 1)
        share(&c, "big", 0, 8ull << 30, 30, 30);
      err[0] = 0;
      CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
      CHECK(strstr(err, "\"big\" has computeLimit 30") || strstr(err, "\"big\" 30"));
      CHECK(strstr(err, "\"tiny\"") && strstr(err, "100 (none set)"));
      CHECK(strstr(err, "computeLimit") != NULL);
    }
  /* Two classes' different limits, both set. */
  claim(&c, "u-mix2");
  share(&c, "a", 0, 1ull << 30, 10, 30);
  share(&c, "b", 1, 1ull << 30, 10, 50);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "\"a\" has computeLimit 30") && strstr(err, "\"b\" 50"));
  /* One limit: the slice's. */
  claim(&c, "u-same");
  share(&c, "a", 0, 1ull << 30, 10, 30);
  share(&c, "b", 1, 1ull << 30, 20, 30);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), 0);
  CHECK_EQ_INT(r.compute_limit, 30);
  /* Shares stacked on one GPU request more than their limit together: the limit is raised to
   * their sum (within what their limits allow there, 60)... */
  claim(&c, "u-stack");
  share(&c, "a", 0, 1ull << 30, 20, 30);
  share(&c, "b", 0, 1ull << 30, 20, 30);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), 0);
  CHECK_EQ_INT(r.compute_limit, 40);
  /* ...but not where that lifts another GPU of the slice past its own shares' 30. */
  share(&c, "c", 1, 1ull << 30, 20, 30);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "gpu-0") && strstr(err, "gpu-1") && strstr(err, "40") && strstr(err, "30"));
  /* Two on each GPU: 60 may be used on each, 40 is fine. */
  share(&c, "d", 1, 1ull << 30, 10, 30);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), 0);
  CHECK_EQ_INT(r.compute_limit, 40);
  /* Priority and weight: both requests named. */
  claim(&c, "u-prio");
  share(&c, "a", 0, 1ull << 30, 10, 0);
  share(&c, "b", 1, 1ull << 30, 10, 0);
  c.shares[1].cfg.weight = 3;
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "\"a\"") && strstr(err, "\"b\"") && strstr(err, "weight 3"));
}

/* A status may be forged (the allocator never writes these): nothing past the GPU it names. */
static void test_forged_status(void) {
  static struct dra_claim c;
  static struct dra_rec r;
  char err[512] = "";

  /* memory 1Ei of an 80 GiB GPU. */
  claim(&c, "u-f1");
  share(&c, "gpu", 0, 1ull << 60, 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "memory") && strstr(err, "1152921504606846976") && strstr(err, "85899345920"));
  /* Two shares of one GPU whose sum is past its memory, each within it; and near wrapping. */
  claim(&c, "u-f2");
  share(&c, "a", 1, 50ull << 30, 10, 0);
  share(&c, "b", 1, 40ull << 30, 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "\"b\"") && strstr(err, "gpu-1") && strstr(err, "85899345920"));
  claim(&c, "u-f3");
  share(&c, "a", 0, 80ull << 30, 10, 0);
  share(&c, "b", 0, UINT64_MAX - (40ull << 30), 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  /* The whole GPU's memory, in two shares, is one. */
  claim(&c, "u-f4");
  share(&c, "a", 0, 40ull << 30, 10, 0);
  share(&c, "b", 0, 40ull << 30, 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), 0);
  CHECK_STR(r.gpus, "0:20:85899345920");
  /* Compute over 100 on one GPU, a GPU this node does not have. */
  claim(&c, "u-f5");
  share(&c, "a", 1, 1ull << 30, 70, 0);
  share(&c, "b", 1, 1ull << 30, 31, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "whole GPU") != NULL);
  claim(&c, "u-f6");
  share(&c, "a", 0, 1ull << 30, 10, 0);
  share(&c, "b", 7, 1ull << 30, 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -ENODEV);
  CHECK(strstr(err, "gpu-7") != NULL);
}

/* A slice without room for one CUDA context on a GPU (the ResourceSlice's validRange min rounds
 * such requests up; this is a status from a slice published without it, or written by hand):
 * refused, saying what was given, the floor and what to do. Two shares summing past the floor on
 * one GPU make one slice that has the room. */
static void test_context_floor(void) {
  static struct dra_claim c;
  static struct dra_rec r;
  char err[768] = "";

  claim(&c, "u-c1");
  share(&c, "gpu", 1, 2ull << 20, 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "team-a/train-gpu") && strstr(err, "\"gpu\"") && strstr(err, "gpu-1"));
  CHECK(strstr(err, "2097152 bytes") && strstr(err, "768 MiB") && strstr(err, "CUDA context"));
  CHECK(strstr(err, "at least 768Mi") != NULL);
  /* Just under, on the second GPU of a claim whose first is fine. */
  claim(&c, "u-c2");
  share(&c, "a", 0, 1ull << 30, 10, 0);
  share(&c, "b", 1, DRA_CONTEXT_FLOOR - (2u << 20), 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "\"b\"") && strstr(err, "gpu-1") && strstr(err, "766 MiB"));
  /* Exactly the floor; and two shares below it on one GPU whose sum is the floor. */
  claim(&c, "u-c3");
  share(&c, "a", 0, DRA_CONTEXT_FLOOR, 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), 0);
  claim(&c, "u-c4");
  share(&c, "a", 0, DRA_CONTEXT_FLOOR / 2, 10, 0);
  share(&c, "b", 0, DRA_CONTEXT_FLOOR / 2, 10, 0);
  CHECK_EQ_INT(dra_rec_from_claim(&c, gpus, 2, &r, err, sizeof(err)), 0);
  CHECK_STR(r.gpus, "0:20:805306368");
}

static void fill(struct dra_rec *r) {
  static struct dra_claim c;
  char err[256];
  claim(&c, "0b6c7d2e-1f3a-4c5b-9d8e-7f6a5b4c3d2e");
  share(&c, "gpu", 0, 1ull << 30, 30, 30);
  dra_rec_from_claim(&c, gpus, 2, r, err, sizeof(err));
  r->slice_id = 9;
  r->nonce = 0xfeedface;
  snprintf(r->slice_name, sizeof(r->slice_name), "dra.1.team-a.train-gpu");
  snprintf(r->start, sizeof(r->start), "claim-%s.17", r->uid);
  snprintf(r->slice_dir, sizeof(r->slice_dir), "/var/lib/gslice/held/9");
}

static int parse(const char *text, struct dra_rec *r) {
  char *copy = strdup(text);
  memset(r, 0, sizeof(*r));
  int e = dra_rec_parse(copy, r);
  free(copy);
  return e;
}

static void test_record(void) {
  static struct dra_rec r, back;
  char *text = NULL, *bad;
  size_t len = 0;

  fill(&r);
  CHECK_EQ_INT(dra_rec_format(&r, &text, &len), 0);
  CHECK(strstr(text, "uid=0b6c7d2e-1f3a-4c5b-9d8e-7f6a5b4c3d2e\n") != NULL);
  CHECK(strstr(text, "nonce=00000000feedface\n") != NULL);
  CHECK(strstr(text, "gpus=0:30:1073741824\n") != NULL);
  CHECK_EQ_INT(parse(text, &back), 0);
  CHECK(memcmp(&r, &back, sizeof(r)) == 0);
  /* Refused: a missing required field, a field twice, a spec no slice can be made of. */
  bad = strdup(text);
  *strstr(bad, "results=") = 'X';
  CHECK_EQ_INT(parse(bad, &back), -EBADMSG);
  free(bad);
  size_t l = strlen(text);
  bad = malloc(2 * l + 1);
  memcpy(bad, text, l);
  memcpy(bad + l, text, l + 1);
  CHECK_EQ_INT(parse(bad, &back), -EBADMSG);
  free(bad);
  const char *spoil[] = {"gpus=0:30:1073741824", "priority=normal", "weight=1", "compute_limit=30"};
  const char *with[] = {"gpus=0:130:1073741824", "priority=urgent", "weight=0", "compute_limit=0"};
  for (size_t i = 0; i < 4; i++) {
    char *p = strstr(text, spoil[i]);
    CHECK(p != NULL);
    if (!p)
      continue;
    size_t pre = (size_t)(p - text), sl = strlen(spoil[i]);
    bad = malloc(l + 16);
    snprintf(bad, l + 16, "%.*s%s%s", (int)pre, text, with[i], p + sl);
    CHECK_EQ_INT(parse(bad, &back), -EBADMSG);
    free(bad);
  }
  free(text);
}

static void test_ids(void) {
  char err[256];
  CHECK_EQ_INT(dra_claim_ids_check("default", "my-claim.x", "0b6c7d2e-1f3a", err, sizeof(err)), 0);
  CHECK_EQ_INT(dra_claim_ids_check("default", "c", "../../etc", err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "not a UID") != NULL);
  CHECK_EQ_INT(dra_claim_ids_check("default", "c", "", err, sizeof(err)), -EINVAL);
  CHECK_EQ_INT(dra_claim_ids_check("Default", "c", "u", err, sizeof(err)), -EINVAL);
  CHECK_EQ_INT(dra_claim_ids_check("default", "c/..", "u", err, sizeof(err)), -EINVAL);
  CHECK_EQ_INT(dra_claim_ids_check("default", "-c", "u", err, sizeof(err)), -EINVAL);
  CHECK_EQ_INT(dra_claim_ids_check("default", "a..b", "u", err, sizeof(err)), -EINVAL);
  char key[DRA_KEY_MAX], file[DRA_KEY_MAX + 32];
  dra_key("u-1", key, sizeof(key));
  dra_cdi_file("u-1", file, sizeof(file));
  CHECK_STR(key, "claim-u-1");
  CHECK_STR(file, "gslice.io-claim_u-1");
}

/* ---- batches, with per-claim outcomes given by the test ---- */

static int prepared_calls, unprepared_calls;

static int fake_prepare(void *ctx, const char *ns, const char *name, const char *uid,
                        struct dra_rec *out, char *err, size_t err_len) {
  (void)ctx, (void)ns;
  prepared_calls++;
  if (!strcmp(name, "bad")) {
    snprintf(err, err_len, "claim %s/%s: refused by the test", ns, name);
    return -EINVAL;
  }
  memset(out, 0, sizeof(*out));
  snprintf(out->uid, sizeof(out->uid), "%s", uid);
  snprintf(out->results, sizeof(out->results), "%s",
           !strcmp(name, "two") ? "a node-1 gpu-0,b node-1 gpu-1" : "gpu node-1 gpu-0");
  return 0;
}

static int fake_unprepare(void *ctx, const char *ns, const char *name, const char *uid, char *err,
                          size_t err_len) {
  (void)ctx, (void)ns, (void)uid;
  unprepared_calls++;
  if (!strcmp(name, "bad")) {
    snprintf(err, err_len, "gsliced does not answer (test)");
    return -EAGAIN;
  }
  return 0;
}

static const struct dra_ops fake = {.prepare = fake_prepare, .unprepare = fake_unprepare};

/* Claims of one batch at once (dra_ops.parallel): how many were in prepare together, at most. */
static int running, most_running, parallel_calls;

/* One more claim in a slow op: counted, then back once 4 were in at once (2 s at most). */
static void slow_op(void) {
  struct timespec ms = {0, 1000000};
  int now = __atomic_add_fetch(&running, 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&parallel_calls, 1, __ATOMIC_SEQ_CST);
  for (int m = __atomic_load_n(&most_running, __ATOMIC_SEQ_CST); now > m;)
    if (__atomic_compare_exchange_n(&most_running, &m, now, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
      break;
  /* Wait (2 s at most) until 4 are in: a batch run one claim after the other never gets there. */
  for (int i = 0; i < 2000 && __atomic_load_n(&most_running, __ATOMIC_SEQ_CST) < 4; i++)
    nanosleep(&ms, NULL);
  nanosleep(&ms, NULL);
  __atomic_sub_fetch(&running, 1, __ATOMIC_SEQ_CST);
}

static int slow_unprepare(void *ctx, const char *ns, const char *name, const char *uid, char *err,
                          size_t err_len) {
  (void)ctx, (void)uid;
  slow_op();
  if (!strcmp(name, "bad")) {
    snprintf(err, err_len, "claim %s/%s: gsliced does not answer (test)", ns, name);
    return -EAGAIN;
  }
  return 0;
}

static int slow_prepare(void *ctx, const char *ns, const char *name, const char *uid,
                        struct dra_rec *out, char *err, size_t err_len) {
  (void)ctx;
  slow_op();
  if (!strcmp(name, "bad")) {
    snprintf(err, err_len, "claim %s/%s: refused by the test", ns, name);
    return -EINVAL;
  }
  memset(out, 0, sizeof(*out));
  snprintf(out->uid, sizeof(out->uid), "%s", uid);
  snprintf(out->results, sizeof(out->results), "gpu node-1 gpu-%c", uid[strlen(uid) - 1]);
  return 0;
}

static uint8_t *pack_claims(const char *const *names, const char *const *uids, size_t n,
                            size_t *len) {
  Dra__NodePrepareResourcesRequest rq = DRA__NODE_PREPARE_RESOURCES_REQUEST__INIT;
  Dra__Claim cl[16], *cp[16];
  for (size_t i = 0; i < n; i++) {
    dra__claim__init(&cl[i]);
    cl[i].namespace_ = "default";
    cl[i].name = (char *)names[i];
    cl[i].uid = (char *)uids[i];
    cp[i] = &cl[i];
  }
  rq.n_claims = n;
  rq.claims = cp;
  *len = dra__node_prepare_resources_request__get_packed_size(&rq);
  uint8_t *buf = malloc(*len + 1);
  dra__node_prepare_resources_request__pack(&rq, buf);
  return buf; /* the Unprepare request has the same fields: the same bytes */
}

static const Dra__NodePrepareResourceResponse *answer_of(Dra__NodePrepareResourcesResponse *rp,
                                                         const char *uid) {
  for (size_t i = 0; i < rp->n_claims; i++)
    if (!strcmp(rp->claims[i]->key, uid))
      return rp->claims[i]->value;
  return NULL;
}

static void test_prepare_batch(void) {
  const char *names[] = {"ok", "bad", "two", "ok", "evil"};
  const char *uids[] = {"u-1", "u-2", "u-3", "u-4", "../x"};
  size_t len, rlen = 0;
  uint8_t *req = pack_claims(names, uids, 5, &len), *reply = NULL;
  char err[256] = "";

  prepared_calls = 0;
  CHECK_EQ_INT(dra_prepare_batch(&fake, NULL, req, len, &reply, &rlen, err, sizeof(err)), 0);
  CHECK_EQ_INT(prepared_calls, 4); /* "../x" is refused before anything is done with it */
  Dra__NodePrepareResourcesResponse *rp =
      dra__node_prepare_resources_response__unpack(NULL, rlen, reply);
  CHECK(rp != NULL);
  if (rp) {
    CHECK_EQ_INT(rp->n_claims, 5); /* every claim asked is answered */
    const Dra__NodePrepareResourceResponse *a = answer_of(rp, "u-1"), *b = answer_of(rp, "u-2"),
                                           *t = answer_of(rp, "u-3"), *x = answer_of(rp, "../x");
    CHECK(a && b && t && x);
    if (a && b && t && x) {
      CHECK_STR(a->error, "");
      CHECK_EQ_INT(a->n_devices, 1);
      CHECK_STR(a->devices[0]->pool_name, "node-1");
      CHECK_STR(a->devices[0]->device_name, "gpu-0");
      CHECK_EQ_INT(a->devices[0]->n_request_names, 1);
      CHECK_STR(a->devices[0]->request_names[0], "gpu");
      CHECK_EQ_INT(a->devices[0]->n_cdi_device_ids, 1);
      CHECK_STR(a->devices[0]->cdi_device_ids[0], "gslice.io/claim=claim-u-1");
      CHECK(strstr(b->error, "refused by the test") != NULL);
      CHECK_EQ_INT(b->n_devices, 0);
      CHECK_EQ_INT(t->n_devices, 2);
      CHECK_STR(t->devices[1]->device_name, "gpu-1");
      CHECK_STR(t->devices[1]->cdi_device_ids[0], "gslice.io/claim=claim-u-3");
      CHECK(strstr(x->error, "not a UID") != NULL);
    }
    dra__node_prepare_resources_response__free_unpacked(rp, NULL);
  }
  free(reply);
  free(req);

  /* Not a batch: a claim named twice, garbage. The call fails as a whole (nothing done). */
  const char *dn[] = {"ok", "ok"}, *du[] = {"u-1", "u-1"};
  req = pack_claims(dn, du, 2, &len);
  prepared_calls = 0;
  CHECK_EQ_INT(dra_prepare_batch(&fake, NULL, req, len, &reply, &rlen, err, sizeof(err)), 3);
  CHECK(strstr(err, "twice") != NULL);
  CHECK_EQ_INT(prepared_calls, 0);
  free(req);
  uint8_t junk[] = {0x0a, 0x50, 0x01};
  CHECK_EQ_INT(dra_prepare_batch(&fake, NULL, junk, sizeof(junk), &reply, &rlen, err, sizeof(err)),
               3);
  /* An empty batch is answered, empty. */
  reply = NULL;
  CHECK_EQ_INT(dra_prepare_batch(&fake, NULL, junk, 0, &reply, &rlen, err, sizeof(err)), 0);
  CHECK_EQ_INT(rlen, 0);
  free(reply);
}

/* A batch with parallel 4: four claims in prepare at once, never five; every claim answered
 * with its own devices or its own error, in the reply to its UID. */
static void test_prepare_parallel(void) {
  static const struct dra_ops par = {.prepare = slow_prepare, .parallel = 4};
  const char *names[12], *uids[12];
  char uidbuf[12][8];
  size_t len, rlen = 0;
  char err[256] = "";

  for (int i = 0; i < 12; i++) {
    snprintf(uidbuf[i], sizeof(uidbuf[i]), "u-%d", i % 10);
    uidbuf[i][1] = (char)('a' + i); /* "ua-0", "ub-1", ...: distinct, ending in a digit */
    uids[i] = uidbuf[i];
    names[i] = i == 5 ? "bad" : "ok";
  }
  uint8_t *req = pack_claims(names, uids, 12, &len), *reply = NULL;
  CHECK_EQ_INT(dra_prepare_batch(&par, NULL, req, len, &reply, &rlen, err, sizeof(err)), 0);
  CHECK_EQ_INT(parallel_calls, 12);
  CHECK_EQ_INT(most_running, 4);
  Dra__NodePrepareResourcesResponse *rp =
      dra__node_prepare_resources_response__unpack(NULL, rlen, reply);
  CHECK(rp && rp->n_claims == 12);
  for (int i = 0; rp && i < 12; i++) {
    const Dra__NodePrepareResourceResponse *a = answer_of(rp, uids[i]);
    char dev[16];
    snprintf(dev, sizeof(dev), "gpu-%c", uids[i][strlen(uids[i]) - 1]);
    CHECK(a != NULL);
    if (a && i == 5)
      CHECK(strstr(a->error, "refused by the test") && a->n_devices == 0);
    else if (a && a->n_devices == 1)
      CHECK_STR(a->devices[0]->device_name, dev);
    else
      CHECK(!"a claim without its device");
  }
  if (rp)
    dra__node_prepare_resources_response__free_unpacked(rp, NULL);
  free(reply);
  free(req);
}

static void test_unprepare_batch(void) {
  const char *names[] = {"ok", "bad", "gone"};
  const char *uids[] = {"u-1", "u-2", "u-3"};
  size_t len, rlen = 0;
  uint8_t *req = pack_claims(names, uids, 3, &len), *reply = NULL;
  char err[256] = "";

  unprepared_calls = 0;
  CHECK_EQ_INT(dra_unprepare_batch(&fake, NULL, req, len, &reply, &rlen, err, sizeof(err)), 0);
  CHECK_EQ_INT(unprepared_calls, 3);
  Dra__NodeUnprepareResourcesResponse *rp =
      dra__node_unprepare_resources_response__unpack(NULL, rlen, reply);
  CHECK(rp != NULL);
  if (rp) {
    CHECK_EQ_INT(rp->n_claims, 3);
    for (size_t i = 0; i < rp->n_claims; i++) {
      const char *want = !strcmp(rp->claims[i]->key, "u-2") ? "gsliced does not answer (test)" : "";
      CHECK(rp->claims[i]->value != NULL);
      if (rp->claims[i]->value)
        CHECK_STR(rp->claims[i]->value->error, want);
    }
    dra__node_unprepare_resources_response__free_unpacked(rp, NULL);
  }
  free(reply);
  free(req);
}

/* Unprepare as Prepare: four claims at once, never five, each its own answer. */
static void test_unprepare_parallel(void) {
  static const struct dra_ops par = {.unprepare = slow_unprepare, .parallel = 4};
  const char *names[12], *uids[12];
  char uidbuf[12][8];
  size_t len, rlen = 0;
  char err[256] = "";

  running = most_running = parallel_calls = 0;
  for (int i = 0; i < 12; i++) {
    snprintf(uidbuf[i], sizeof(uidbuf[i]), "u%c-%d", 'a' + i, i % 10);
    uids[i] = uidbuf[i];
    names[i] = i == 7 ? "bad" : "ok";
  }
  uint8_t *req = pack_claims(names, uids, 12, &len), *reply = NULL;
  CHECK_EQ_INT(dra_unprepare_batch(&par, NULL, req, len, &reply, &rlen, err, sizeof(err)), 0);
  CHECK_EQ_INT(parallel_calls, 12);
  CHECK_EQ_INT(most_running, 4);
  Dra__NodeUnprepareResourcesResponse *rp =
      dra__node_unprepare_resources_response__unpack(NULL, rlen, reply);
  CHECK(rp && rp->n_claims == 12);
  for (size_t i = 0; rp && i < rp->n_claims; i++) {
    bool bad = !strcmp(rp->claims[i]->key, uids[7]);
    CHECK(rp->claims[i]->value != NULL);
    if (rp->claims[i]->value)
      CHECK(bad ? strstr(rp->claims[i]->value->error, "default/bad: gsliced") != NULL
                : !rp->claims[i]->value->error[0]);
  }
  if (rp)
    dra__node_unprepare_resources_response__free_unpacked(rp, NULL);
  free(reply);
  free(req);
}

int main(void) {
  test_from_claim();
  test_limit_ceiling();
  test_forged_status();
  test_context_floor();
  test_record();
  test_ids();
  test_prepare_batch();
  test_prepare_parallel();
  test_unprepare_batch();
  test_unprepare_parallel();
  return test_done();
}
