/* SPDX-License-Identifier: Apache-2.0 */
/* The pure part of the DRA plugin (dra.h): a prepared claim's record as text, what the kubelet
 * names a claim by, the one slice a claim's shares make, and the kubelet's batches answered
 * claim by claim. No I/O here: unit tests drive it all (tests/unit/test_k8s_dra_node.c). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra.h"
#include "dra.pb-c.h"
#include "node.h"
#include "status.h"
#include "words.h"

#define F(k, t, f, req)                                                                            \
  { k, t, offsetof(struct dra_rec, f), sizeof(((struct dra_rec *)0)->f), req }
static const struct node_kv_field dra_fields[] = {
    F("uid", REC_STR, uid, true),
    F("namespace", REC_STR, ns, true),
    F("name", REC_STR, name, true),
    F("slice", REC_U32, slice_id, true),
    F("nonce", REC_NONCE, nonce, true),
    F("pending", REC_BOOL, pending, true),
    F("slice_name", REC_STR, slice_name, true),
    F("start", REC_STR, start, false),
    F("slice_dir", REC_STR, slice_dir, false),
    F("memory", REC_STR, memory, true),
    F("devices", REC_STR, devices, true),
    F("compute_limit", REC_U32, compute_limit, true),
    F("gpus", REC_STR, gpus, true),
    F("priority", REC_STR, priority, true),
    F("weight", REC_U32, weight, true),
    F("results", REC_STR, results, true),
};
#undef F
#define DRA_NFIELDS (sizeof(dra_fields) / sizeof(dra_fields[0]))

int dra_rec_format(const struct dra_rec *r, char **ret, size_t *ret_len) {
  return node_kv_format(dra_fields, DRA_NFIELDS, r, DRA_REC_MAX, ret, ret_len);
}

int dra_rec_parse(char *text, struct dra_rec *r) {
  struct gs_slice_spec spec;
  int e = node_kv_parse(dra_fields, DRA_NFIELDS, text, r);
  if (e < 0)
    return e;
  /* A record that could not make its slice again is corrupt now, not at gsliced's restart. */
  return dra_rec_spec(r, &spec) < 0 ? -EBADMSG : 0;
}

static bool dns_label(const char *s, size_t max) {
  size_t l = strlen(s);
  if (l == 0 || l > max || s[0] == '-' || s[l - 1] == '-')
    return false;
  return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == l;
}

int dra_claim_ids_check(const char *ns, const char *name, const char *uid, char *err,
                        size_t err_len) {
  size_t ul = uid ? strlen(uid) : 0;
  if (!uid || ul == 0 || ul >= DRA_UID_MAX ||
      strspn(uid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != ul) {
    snprintf(err, err_len, "claim uid \"%.80s\" is not a UID (letters, digits and '-', 1..%d)",
             uid ? uid : "", DRA_UID_MAX - 1);
    return -EINVAL;
  }
  if (!ns || !dns_label(ns, 63)) {
    snprintf(err, err_len, "claim %s: namespace \"%.80s\" is not a namespace name", uid,
             ns ? ns : "");
    return -EINVAL;
  }
  /* A DNS subdomain: labels joined by '.'. */
  size_t nl = name ? strlen(name) : 0;
  bool ok = nl > 0 && nl <= 253 && name[0] != '.' && name[nl - 1] != '.' && !strstr(name, "..") &&
            strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-.") == nl;
  for (const char *p = name; ok && *p; p++)
    ok = !(*p == '-' && (p == name || p[-1] == '.' || p[1] == '.' || !p[1]));
  if (!ok) {
    snprintf(err, err_len, "claim %s: name \"%.80s\" is not a ResourceClaim name", uid,
             name ? name : "");
    return -EINVAL;
  }
  return 0;
}

void dra_key(const char *uid, char *out, size_t len) {
  snprintf(out, len, DRA_KEY_PREFIX "%s", uid);
}

void dra_cdi_file(const char *uid, char *out, size_t len) {
  snprintf(out, len, "%s-claim_%s", NODE_DRA_DRIVER, uid);
}

/* Appends to a comma-separated list; -ENAMETOOLONG when it does not fit. */
static int list_add(char *list, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int list_add(char *list, size_t size, const char *fmt, ...) {
  size_t l = strlen(list);
  va_list ap;
  if (l && l + 1 < size)
    list[l++] = ',';
  va_start(ap, fmt);
  int w = l < size ? vsnprintf(list + l, size - l, fmt, ap) : -1;
  va_end(ap);
  if (w < 0 || (size_t)w >= size - l) {
    list[l ? l - 1 : 0] = 0;
    return -ENAMETOOLONG;
  }
  return 0;
}

/* What a claim's shares make: per GPU the sums, and the one limit, priority and weight. */
struct sums {
  uint64_t mem[GS_MAX_GPUS];
  uint32_t req[GS_MAX_GPUS], n[GS_MAX_GPUS], mask, limit, weight;
  int32_t prio;
};

static const struct node_gpu *gpu_find(const struct node_gpu *gpus, uint32_t ngpus, uint32_t g) {
  for (uint32_t j = 0; j < ngpus; j++)
    if (gpus[j].index == g)
      return &gpus[j];
  return NULL;
}

/* One share against its GPU (gsliced's: the status may be forged, the allocator never writes
 * more than the device offers) and what the claim's shares before it consumed there. */
static int share_add(const struct dra_claim *c, const struct dra_share *sh,
                     const struct node_gpu *gpus, uint32_t ngpus, struct sums *s, char *err,
                     size_t err_len) {
  uint32_t g = sh->gpu_index;
  const struct node_gpu *gpu;

  if (g >= GS_MAX_GPUS || sh->memory == 0 || sh->compute == 0 || sh->compute > 100) {
    snprintf(err, err_len,
             "claim %s/%s: result %s of %s consumes memory %" PRIu64
             " and compute %u (wants memory > 0 and compute 1..100)",
             c->ns, c->name, sh->device, sh->request, sh->memory, sh->compute);
    return -EINVAL;
  }
  if (!(gpu = gpu_find(gpus, ngpus, g))) {
    snprintf(err, err_len, "claim %s/%s: gpu-%u is allocated, but gsliced has no GPU %u", c->ns,
             c->name, g, g);
    return -ENODEV;
  }
  /* s->mem[g] is at most the GPU's memory here: the sum cannot wrap. */
  if (sh->memory > gpu->memory - s->mem[g]) {
    snprintf(err, err_len,
             "claim %s/%s: request \"%s\" consumes memory %" PRIu64 " bytes of %s (beside %" PRIu64
             " of the claim's other shares there), more than the GPU's %" PRIu64
             ": not an allocation this node's ResourceSlice offers",
             c->ns, c->name, sh->request, sh->memory, sh->device, s->mem[g], gpu->memory);
    return -EINVAL;
  }
  if (s->req[g] + sh->compute > 100) {
    snprintf(err, err_len, "claim %s/%s: its shares of %s add up past the whole GPU", c->ns,
             c->name, sh->device);
    return -EINVAL;
  }
  s->mem[g] += sh->memory;
  s->req[g] += sh->compute;
  s->n[g]++;
  s->mask |= 1u << g;
  return 0;
}

/* The one limit, priority and weight of share i, or the error naming it and share 0. A limit is
 * the share's class's ceiling (100 when none is set): gsliced holds a slice to one limit on all
 * its GPUs, so shares with different limits would take the largest, and a request of an uncapped
 * class added to a claim would lift a capped class's ceiling. */
static int share_cfg_same(const struct dra_claim *c, size_t i, struct sums *s, char *err,
                          size_t err_len) {
  const struct dra_share *sh = &c->shares[i], *s0 = &c->shares[0];
  uint32_t l = sh->cfg.compute_limit ? sh->cfg.compute_limit : 100;
  uint32_t w = sh->cfg.weight ? sh->cfg.weight : 1;

  if (i == 0) {
    s->limit = l, s->prio = sh->cfg.priority, s->weight = w;
  } else if (l != s->limit) {
    snprintf(err, err_len,
             "claim %s/%s: request \"%s\" has computeLimit %u%s and request \"%s\" %u%s; one "
             "claim is one slice with one limit: give its requests one computeLimit (their "
             "DeviceClasses' or lower), or put them in claims of their own",
             c->ns, c->name, s0->request, s->limit, s0->cfg.compute_limit ? "" : " (none set)",
             sh->request, l, sh->cfg.compute_limit ? "" : " (none set)");
    return -EINVAL;
  } else if (sh->cfg.priority != s->prio || w != s->weight) {
    snprintf(err, err_len,
             "claim %s/%s: request \"%s\" has priority %s and weight %u, request \"%s\" "
             "priority %s and weight %u; one claim is one slice: give its requests one priority "
             "and weight",
             c->ns, c->name, s0->request, gs_priority_name(s->prio), s->weight, sh->request,
             gs_priority_name(sh->cfg.priority), w);
    return -EINVAL;
  }
  if (sh->compute > l) {
    snprintf(err, err_len,
             "claim %s/%s: request \"%s\" has compute %u above its computeLimit %u: a limit is "
             "at least the request",
             c->ns, c->name, sh->request, sh->compute, l);
    return -EINVAL;
  }
  return 0;
}

/* Every GPU of the slice has room for a CUDA context (DRA_CONTEXT_FLOOR): the ResourceSlice's
 * validRange rounds a smaller request up to it, so a share below it comes from a slice published
 * without it (an older gslice-node's, an API server that kept no request policy) or a status
 * written by hand, and would make a slice its containers cannot start CUDA in. */
static int floor_check(const struct dra_claim *c, const struct sums *s, char *err, size_t err_len) {
  for (size_t i = 0; i < c->nshares; i++) {
    const struct dra_share *sh = &c->shares[i];
    uint64_t got = s->mem[sh->gpu_index];
    if (got >= DRA_CONTEXT_FLOOR)
      continue;
    snprintf(err, err_len,
             "claim %s/%s: request \"%s\" leaves its slice %" PRIu64 " bytes (%" PRIu64
             " MiB) of memory on %s, less than the %llu MiB one CUDA context takes there: its "
             "containers could not start CUDA. Ask for memory of at least %lluMi (this node's "
             "ResourceSlice rounds a smaller request up to that; an allocation below it comes from "
             "a slice published without that minimum, or a status written by hand): delete the "
             "claim and make it again",
             c->ns, c->name, sh->request, got, got >> 20, sh->device, DRA_CONTEXT_FLOOR >> 20,
             DRA_CONTEXT_FLOOR >> 20);
    return -EINVAL;
  }
  return 0;
}

/* The shares' per-GPU sums, and the claim's one limit, priority and weight. The limit is raised
 * to the compute that shares stacked on one GPU request together (gsliced takes no limit below a
 * request), which their limits allow there (each is at least its request), but the raised limit
 * holds every GPU of the slice: refused where a GPU's own shares may use less. */
static int shares_sum(const struct dra_claim *c, const struct node_gpu *gpus, uint32_t ngpus,
                      struct sums *s, char *err, size_t err_len) {
  uint32_t top = 0;
  int e;

  for (size_t i = 0; i < c->nshares; i++)
    if ((e = share_add(c, &c->shares[i], gpus, ngpus, s, err, err_len)) < 0 ||
        (e = share_cfg_same(c, i, s, err, err_len)) < 0)
      return e;
  if ((e = floor_check(c, s, err, err_len)) < 0)
    return e;
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++)
    if (s->req[g] > s->req[top])
      top = g;
  if (s->req[top] <= s->limit)
    return 0;
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++)
    if ((s->mask & (1u << g)) && s->n[g] * s->limit < s->req[top]) {
      snprintf(err, err_len,
               "claim %s/%s: its shares of gpu-%u request compute %u in all, above their "
               "computeLimit %u, and one slice has one limit on all its GPUs: gpu-%u, whose "
               "shares may use %u, would be held to %u; put the requests in claims of their own",
               c->ns, c->name, top, s->req[top], s->limit, g, s->n[g] * s->limit, s->req[top]);
      return -EINVAL;
    }
  s->limit = s->req[top];
  return 0;
}

int dra_rec_from_claim(const struct dra_claim *c, const struct node_gpu *gpus, uint32_t ngpus,
                       struct dra_rec *r, char *err, size_t err_len) {
  struct sums s = {.weight = 1, .prio = GS_PRIORITY_NORMAL};
  uint32_t o = 0;
  int e;

  if (c->nshares == 0) {
    snprintf(err, err_len,
             "claim %s/%s has no device of driver " NODE_DRA_DRIVER " on this node allocated",
             c->ns, c->name);
    return -EINVAL;
  }
  if ((e = shares_sum(c, gpus, ngpus, &s, err, err_len)) < 0)
    return e;
  memset(r, 0, sizeof(*r));
  snprintf(r->uid, sizeof(r->uid), "%s", c->uid);
  snprintf(r->ns, sizeof(r->ns), "%s", c->ns);
  snprintf(r->name, sizeof(r->name), "%s", c->name);
  /* CUDA ordinal k is the k-th GPU of the mask in index order, as gsliced maps them. */
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
    if (!(s.mask & (1u << g)))
      continue;
    if (list_add(r->gpus, sizeof(r->gpus), "%u:%u:%" PRIu64, g, s.req[g], s.mem[g]) < 0 ||
        list_add(r->memory, sizeof(r->memory), "%u=%" PRIu64, o++, s.mem[g]) < 0 ||
        list_add(r->devices, sizeof(r->devices), "%s", gpu_find(gpus, ngpus, g)->uuid) < 0) {
      snprintf(err, err_len, "claim %s/%s: too many GPUs", c->ns, c->name);
      return -E2BIG;
    }
  }
  r->compute_limit = s.limit;
  r->weight = s.weight;
  snprintf(r->priority, sizeof(r->priority), "%s", gs_priority_name(s.prio));
  for (size_t i = 0; i < c->nshares; i++) {
    const struct dra_share *sh = &c->shares[i];
    if (strpbrk(sh->request, " ,\n") || strpbrk(sh->pool, " ,\n") || strpbrk(sh->device, " ,\n") ||
        !sh->request[0] || !sh->pool[0] || !sh->device[0] ||
        list_add(r->results, sizeof(r->results), "%s %s %s", sh->request, sh->pool, sh->device) <
            0) {
      snprintf(err, err_len, "claim %s/%s: result %zu names no request, pool and device", c->ns,
               c->name, i);
      return -EINVAL;
    }
  }
  return 0;
}

int dra_rec_spec(const struct dra_rec *r, struct gs_slice_spec *spec) {
  char gpus[sizeof(r->gpus)], *save = NULL;
  int32_t prio;

  memset(spec, 0, sizeof(*spec));
  snprintf(gpus, sizeof(gpus), "%s", r->gpus);
  for (char *t = strtok_r(gpus, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    unsigned g, q;
    uint64_t m;
    int used = 0;
    if (sscanf(t, "%u:%u:%" SCNu64 "%n", &g, &q, &m, &used) != 3 || t[used] || g >= GS_MAX_GPUS ||
        q > 100 || m == 0 || (spec->gpu_mask & (1u << g)))
      return -EBADMSG;
    spec->gpu_mask |= 1u << g;
    spec->gpu_compute_request[g] = q;
    spec->gpu_memory_cap[g] = m;
    if (q > spec->compute_request)
      spec->compute_request = q;
    if (m > spec->memory_cap)
      spec->memory_cap = m;
  }
  if (!spec->gpu_mask || gs_priority_parse(r->priority, &prio) < 0 || r->weight < GS_WEIGHT_MIN ||
      r->weight > GS_WEIGHT_MAX || r->compute_limit < spec->compute_request ||
      r->compute_limit > 100 || r->compute_limit == 0)
    return -EBADMSG;
  spec->priority = prio;
  spec->weight = r->weight;
  spec->compute_limit = r->compute_limit;
  spec->per_gpu = GS_SPEC_GPU_REQUEST | GS_SPEC_GPU_MEMORY;
  snprintf(spec->name, sizeof(spec->name), "%s", r->slice_name);
  return 0;
}

/* ---- the kubelet's batches ---- */

/* One claim of a batch: its map entry and answer, and the strings they point into. */
struct slot {
  Dra__NodePrepareResourcesResponse__ClaimsEntry pe;
  Dra__NodePrepareResourceResponse pa;
  Dra__NodeUnprepareResourcesResponse__ClaimsEntry ue;
  Dra__NodeUnprepareResourceResponse ua;
  char *results; /* the record's results, cut into the devices' names */
  char cdi[DRA_KEY_MAX + 64];
  char *ids[1];
  char err[512];
};

static void slots_free(struct slot *sl, size_t n) {
  for (size_t i = 0; sl && i < n; i++) {
    for (size_t d = 0; d < sl[i].pa.n_devices; d++) {
      free(sl[i].pa.devices[d]->request_names);
      free(sl[i].pa.devices[d]);
    }
    free(sl[i].pa.devices);
    free(sl[i].results);
  }
  free(sl);
}

/* The answer's devices: one per allocated result, each naming the claim's one CDI device. */
static int answer_devices(struct slot *s) {
  char *save = NULL;
  size_t n = 1;
  for (const char *p = s->results; *p; p++)
    n += *p == ',';
  s->pa.devices = calloc(n, sizeof(*s->pa.devices));
  if (!s->pa.devices)
    return -ENOMEM;
  for (char *t = strtok_r(s->results, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char *pool = strchr(t, ' '), *dev = pool ? strchr(pool + 1, ' ') : NULL;
    if (!dev || s->pa.n_devices == n)
      return -EBADMSG;
    Dra__Device *d = calloc(1, sizeof(*d));
    char **req = calloc(1, sizeof(*req));
    if (!d || !req) {
      free(d);
      free(req);
      return -ENOMEM;
    }
    dra__device__init(d);
    *pool++ = 0;
    *dev++ = 0;
    req[0] = t;
    d->n_request_names = 1;
    d->request_names = req;
    d->pool_name = pool;
    d->device_name = dev;
    d->n_cdi_device_ids = 1;
    d->cdi_device_ids = s->ids;
    s->pa.devices[s->pa.n_devices++] = d;
  }
  return 0;
}

/* The request's claims: -1 with err when it is not a batch the kubelet sends. */
static int batch_check(size_t n, Dra__Claim **claims, char *err, size_t err_len) {
  if (n > DRA_MAX_BATCH) {
    snprintf(err, err_len, "%zu claims in one call, past %d: send fewer at once", n, DRA_MAX_BATCH);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < i; k++)
      if (!strcmp(claims[i]->uid, claims[k]->uid)) {
        snprintf(err, err_len, "claim uid %.80s is named twice in one call", claims[i]->uid);
        return -1;
      }
  return 0;
}

/* One claim prepared into its answer: devices, or its own error. -ENOMEM only. */
static int prepare_one(const struct dra_ops *ops, void *ctx, const Dra__Claim *cl,
                       struct dra_rec *rec, struct slot *s) {
  dra__node_prepare_resource_response__init(&s->pa);
  if (dra_claim_ids_check(cl->namespace_, cl->name, cl->uid, s->err, sizeof(s->err)) == 0 &&
      ops->prepare(ctx, cl->namespace_, cl->name, cl->uid, rec, s->err, sizeof(s->err)) == 0) {
    char key[DRA_KEY_MAX];
    dra_key(rec->uid, key, sizeof(key));
    snprintf(s->cdi, sizeof(s->cdi), "%s=%s", NODE_CDI_KIND_CLAIM, key);
    s->ids[0] = s->cdi;
    if (!(s->results = strdup(rec->results)))
      return -ENOMEM;
    int r = answer_devices(s);
    if (r == -ENOMEM)
      return r;
    if (r == 0)
      return 0;
    snprintf(s->err, sizeof(s->err), "claim %s: its record's results are corrupt", cl->uid);
  }
  if (!s->err[0])
    snprintf(s->err, sizeof(s->err), "claim %.80s: not prepared (no reason given)", cl->uid);
  s->pa.error = s->err;
  return 0;
}

/* One claim unprepared into its answer: its own error, or none. */
static void unprepare_one(const struct dra_ops *ops, void *ctx, const Dra__Claim *cl,
                          struct slot *s) {
  dra__node_unprepare_resource_response__init(&s->ua);
  /* A UID that was never one was never prepared: nothing to undo, said as an error all the
   * same (the kubelet sent what no claim is). */
  if (dra_claim_ids_check(cl->namespace_, cl->name, cl->uid, s->err, sizeof(s->err)) == 0 &&
      ops->unprepare(ctx, cl->namespace_, cl->name, cl->uid, s->err, sizeof(s->err)) == 0)
    s->err[0] = 0;
  else if (!s->err[0])
    snprintf(s->err, sizeof(s->err), "claim %.80s: not unprepared (no reason given)", cl->uid);
  s->ua.error = s->err;
}

/* The claims of one batch, handed out to its threads one at a time. */
struct batch {
  const struct dra_ops *ops;
  void *ctx;
  Dra__Claim **claims;
  struct slot *sl;
  bool unprepare; /* else Prepare */
  size_t n, next; /* next: under mu */
  pthread_mutex_t mu;
  bool nomem;
};

static void *batch_run(void *arg) {
  struct batch *b = arg;
  struct dra_rec *rec = malloc(sizeof(*rec));
  for (;;) {
    pthread_mutex_lock(&b->mu);
    size_t i = b->next < b->n ? b->next++ : b->n;
    if (!rec)
      b->nomem = true;
    pthread_mutex_unlock(&b->mu);
    if (i == b->n || !rec)
      break;
    if (b->unprepare)
      unprepare_one(b->ops, b->ctx, b->claims[i], &b->sl[i]);
    else if (prepare_one(b->ops, b->ctx, b->claims[i], rec, &b->sl[i]) < 0) {
      pthread_mutex_lock(&b->mu);
      b->nomem = true;
      pthread_mutex_unlock(&b->mu);
    }
  }
  free(rec);
  return NULL;
}

/* Every claim of the batch through prepare_one (unprepare_one), ops->parallel of them at a
 * time: this thread is one of them, so a thread that cannot be made only makes the batch
 * slower. false on ENOMEM. */
static bool batch_run_all(const struct dra_ops *ops, void *ctx, Dra__Claim **claims, size_t n,
                          struct slot *sl, bool unprepare) {
  struct batch b = {
      .ops = ops, .ctx = ctx, .claims = claims, .sl = sl, .unprepare = unprepare, .n = n};
  pthread_t th[DRA_PREPARE_PARALLEL];
  size_t want = ops->parallel < n ? ops->parallel : n, k = 0;

  if (want > DRA_PREPARE_PARALLEL)
    want = DRA_PREPARE_PARALLEL;
  pthread_mutex_init(&b.mu, NULL);
  while (k + 1 < want && pthread_create(&th[k], NULL, batch_run, &b) == 0)
    k++;
  batch_run(&b);
  while (k)
    pthread_join(th[--k], NULL);
  pthread_mutex_destroy(&b.mu);
  return !b.nomem;
}

int dra_prepare_batch(const struct dra_ops *ops, void *ctx, const uint8_t *req, size_t len,
                      uint8_t **ret, size_t *ret_len, char *err, size_t err_len) {
  Dra__NodePrepareResourcesRequest *rq =
      dra__node_prepare_resources_request__unpack(NULL, len, req);
  Dra__NodePrepareResourcesResponse rp = DRA__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
  Dra__NodePrepareResourcesResponse__ClaimsEntry **entries = NULL;
  struct slot *sl = NULL;
  int st = 0;

  if (!rq) {
    snprintf(err, err_len, "NodePrepareResources: malformed request");
    return 3; /* INVALID_ARGUMENT */
  }
  if (batch_check(rq->n_claims, rq->claims, err, err_len) < 0) {
    st = 3;
    goto out;
  }
  sl = calloc(rq->n_claims ? rq->n_claims : 1, sizeof(*sl));
  entries = calloc(rq->n_claims ? rq->n_claims : 1, sizeof(*entries));
  if (!sl || !entries || !batch_run_all(ops, ctx, rq->claims, rq->n_claims, sl, false))
    goto nomem;
  for (size_t i = 0; i < rq->n_claims; i++) {
    dra__node_prepare_resources_response__claims_entry__init(&sl[i].pe);
    sl[i].pe.key = rq->claims[i]->uid;
    sl[i].pe.value = &sl[i].pa;
    entries[i] = &sl[i].pe;
  }
  rp.n_claims = rq->n_claims;
  rp.claims = entries;
  *ret_len = dra__node_prepare_resources_response__get_packed_size(&rp);
  if (!(*ret = malloc(*ret_len ? *ret_len : 1)))
    goto nomem;
  dra__node_prepare_resources_response__pack(&rp, *ret);
  goto out;
nomem:
  snprintf(err, err_len, "NodePrepareResources: out of memory");
  st = 8; /* RESOURCE_EXHAUSTED */
out:
  slots_free(sl, rq->n_claims);
  free(entries);
  dra__node_prepare_resources_request__free_unpacked(rq, NULL);
  return st;
}

int dra_unprepare_batch(const struct dra_ops *ops, void *ctx, const uint8_t *req, size_t len,
                        uint8_t **ret, size_t *ret_len, char *err, size_t err_len) {
  Dra__NodeUnprepareResourcesRequest *rq =
      dra__node_unprepare_resources_request__unpack(NULL, len, req);
  Dra__NodeUnprepareResourcesResponse rp = DRA__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
  Dra__NodeUnprepareResourcesResponse__ClaimsEntry **entries = NULL;
  struct slot *sl = NULL;
  int st = 0;

  if (!rq) {
    snprintf(err, err_len, "NodeUnprepareResources: malformed request");
    return 3;
  }
  if (batch_check(rq->n_claims, rq->claims, err, err_len) < 0) {
    st = 3;
    goto out;
  }
  sl = calloc(rq->n_claims ? rq->n_claims : 1, sizeof(*sl));
  entries = calloc(rq->n_claims ? rq->n_claims : 1, sizeof(*entries));
  if (!sl || !entries || !batch_run_all(ops, ctx, rq->claims, rq->n_claims, sl, true)) {
    snprintf(err, err_len, "NodeUnprepareResources: out of memory");
    st = 8;
    goto out;
  }
  for (size_t i = 0; i < rq->n_claims; i++) {
    struct slot *s = &sl[i];
    dra__node_unprepare_resources_response__claims_entry__init(&s->ue);
    s->ue.key = rq->claims[i]->uid;
    s->ue.value = &s->ua;
    entries[i] = &s->ue;
  }
  rp.n_claims = rq->n_claims;
  rp.claims = entries;
  *ret_len = dra__node_unprepare_resources_response__get_packed_size(&rp);
  if (!(*ret = malloc(*ret_len ? *ret_len : 1))) {
    snprintf(err, err_len, "NodeUnprepareResources: out of memory");
    st = 8;
    goto out;
  }
  dra__node_unprepare_resources_response__pack(&rp, *ret);
out:
  free(sl);
  free(entries);
  dra__node_unprepare_resources_request__free_unpacked(rq, NULL);
  return st;
}
