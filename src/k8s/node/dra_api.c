/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node --mode dra and the API server (resource.k8s.io/v1): the node's ResourceSlice, and
 * the ResourceClaims it prepares turned into the numbers of gsliced slices (dra_api.h).
 *
 * The request policies of each device gpu-<index> say what gslice can hold, so that
 * kube-scheduler's allocator (KEP-5075: a request is rounded up to the policy, and every
 * share consumes every capacity, its default where the request names none) never hands out a
 * share gslice would have to refuse or could not enforce exactly:
 * - memory (bytes): validRange min DRA_CONTEXT_FLOOR (768Mi: one CUDA context, which the hook
 *   counts against the cap; the documented rule rounds a request below min up to min, so no
 *   allocation leaves a slice in which cuCtxCreate cannot succeed), step 2Mi, max and default the
 *   GPU's memory rounded down to 2Mi. The hook reserves stream-ordered pools in 2 MiB granules
 *   (GS_POOL_GRANULE), so a cap that is not a multiple of 2 MiB is not what the hook can hold to
 *   the byte; a claim of 1Gi gets exactly 1Gi. A request that names no memory gets the whole
 *   GPU's memory: what a request does not ask to share, it gets whole, as a plain request for
 *   the device would.
 * - compute (percent of one GPU, 100 the whole): validRange 1..100 step 1, default 100. gsliced
 *   takes requests in whole percent (gs_slice_spec), and the sum of a GPU's requests is at most
 *   its 100, which the capacity's value bounds. No compute named: the whole GPU's compute.
 * - shares: value --slots-per-gpu (default 16), default 1, validValues [1]: every share takes
 *   exactly one, so one GPU never carries more slices than gslice-node's flag allows (the same
 *   bound as the device plugin's slots; 16 GPUs x 16 = gsliced's default max_slices 256).
 * A GPU whose gsliced is gone is left out of the slice (the whole slice is empty while gsliced
 * does not answer): device taints (KEP-5055) are alpha behind a gate off by default in 1.34 and
 * 1.35, where the API server would drop the field and the device would stay on offer. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra_api.h"
#include "kube.h"
#include "node.h"
#include "quantity.h"
#include "words.h"

#define DRA_PATH "/apis/resource.k8s.io/v1"
#define DRA_SLICES DRA_PATH "/resourceslices"
#define DRA_SLICE_SUFFIX "-" NODE_DRA_DRIVER
/* At most this many configs in one allocation (the API allows 32 per claim, more from classes). */
#define DRA_MAX_CONFIGS 64

/* ---- the ResourceSlice ---- */

static json_t *qty(uint64_t v) {
  char b[32];
  snprintf(b, sizeof(b), "%" PRIu64, v);
  return json_string(b);
}

/* Bytes with the largest binary suffix that keeps them whole ("80Gi"), as the API server
 * writes a BinarySI quantity back and as people read them in kubectl's output. */
static json_t *qty_bytes(uint64_t v) {
  static const char *const suffix[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
  char b[32];
  for (int i = 0; i < 6; i++) {
    unsigned shift = 10u * (6u - (unsigned)i);
    if (v && v % (1ull << shift) == 0) {
      snprintf(b, sizeof(b), "%" PRIu64 "%s", v >> shift, suffix[i]);
      return json_string(b);
    }
  }
  return qty(v);
}

static json_t *capacity_range(json_t *(*q)(uint64_t), uint64_t value, uint64_t dflt, uint64_t min,
                              uint64_t max, uint64_t step) {
  return json_pack("{s:o, s:{s:o, s:{s:o, s:o, s:o}}}", "value", q(value), "requestPolicy",
                   "default", q(dflt), "validRange", "min", q(min), "max", q(max), "step", q(step));
}

static json_t *device(const struct dra_gpu *g, uint32_t shares) {
  char name[32];
  uint64_t mem = g->memory / DRA_MEMORY_STEP * DRA_MEMORY_STEP;

  snprintf(name, sizeof(name), "gpu-%" PRIu32, g->index);
  json_t *attrs = json_pack("{s:{s:s}, s:{s:I}}", "uuid", "string", g->uuid, "index", "int",
                            (json_int_t)g->index);
  if (attrs && g->product[0])
    json_object_set_new(attrs, "productName", json_pack("{s:s}", "string", g->product));
  json_t *caps = json_pack(
      "{s:o, s:o, s:{s:o, s:{s:o, s:[o]}}}", "memory",
      capacity_range(qty_bytes, g->memory, mem, DRA_CONTEXT_FLOOR, mem, DRA_MEMORY_STEP), "compute",
      capacity_range(qty, GS_PERCENT_MAX, GS_PERCENT_MAX, 1, GS_PERCENT_MAX, 1), "shares", "value",
      qty(shares), "requestPolicy", "default", qty(1), "validValues", qty(1));
  return json_pack("{s:s, s:o, s:o, s:b}", "name", name, "attributes", attrs, "capacity", caps,
                   "allowMultipleAllocations", 1);
}

int dra_slice_name(const char *node, char *out, size_t len, char *err, size_t err_len) {
  size_t l = strlen(node);
  if (!l || l > 253 || strspn(node, "abcdefghijklmnopqrstuvwxyz0123456789-.") != l) {
    snprintf(err, err_len, "node name \"%s\" is not a DNS subdomain", node);
    return -EINVAL;
  }
  int w = snprintf(out, len, "%s" DRA_SLICE_SUFFIX, node);
  if (w < 0 || (size_t)w >= len || w > 253) {
    snprintf(err, err_len,
             "the node name is too long for its ResourceSlice's (over 253 characters): "
             "%s" DRA_SLICE_SUFFIX,
             node);
    return -EINVAL;
  }
  return 0;
}

json_t *dra_slice_build(const char *node, const struct dra_gpu *gpus, size_t ngpus,
                        int64_t generation, uint32_t shares) {
  char name[300], why[128];
  json_t *devs = json_array();

  if (dra_slice_name(node, name, sizeof(name), why, sizeof(why)) < 0)
    snprintf(name, sizeof(name), "%s", node); /* the API server says what is wrong with it */
  for (size_t i = 0; devs && i < ngpus; i++) {
    /* A validRange needs min + step within the value: a GPU without room for one context and
     * a step more is no GPU to share. */
    if (gpus[i].memory < DRA_CONTEXT_FLOOR + DRA_MEMORY_STEP)
      continue;
    json_t *d = device(&gpus[i], shares ? shares : 1);
    if (!d || json_array_append_new(devs, d)) {
      json_decref(devs);
      return NULL;
    }
  }
  if (!devs)
    return NULL;
  return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s, s:I, s:i}, s:o}}", "apiVersion",
                   "resource.k8s.io/v1", "kind", "ResourceSlice", "metadata", "name", name, "spec",
                   "driver", NODE_DRA_DRIVER, "nodeName", node, "pool", "name", node, "generation",
                   (json_int_t)generation, "resourceSliceCount", 1, "devices", devs);
}

/* What the API server leaves out when it is empty (omitempty) reads the same as not there. */
static bool empty(const json_t *v) {
  return !v || json_is_null(v) || json_is_false(v) ||
         (json_is_array(v) && json_array_size(v) == 0) ||
         (json_is_object(v) && json_object_size(v) == 0);
}

/* a and b say the same; under "capacity" strings are quantities, which the API server writes
 * back in its canonical form ("2097152" comes back as "2Mi"). */
static bool same(const json_t *a, const json_t *b, bool quantities) {
  if (json_is_string(a) && json_is_string(b)) {
    int64_t x, y;
    if (!strcmp(json_string_value(a), json_string_value(b)))
      return true;
    return quantities && !k8s_quantity_parse(json_string_value(a), 3, &x, NULL, 0) &&
           !k8s_quantity_parse(json_string_value(b), 3, &y, NULL, 0) && x == y;
  }
  if (json_is_object(a) && json_is_object(b)) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)a, k, v) {
      json_t *w = json_object_get(b, k);
      if (w ? !same(v, w, quantities || !strcmp(k, "capacity")) : !empty(v))
        return false;
    }
    json_object_foreach((json_t *)b, k, v) {
      if (!json_object_get(a, k) && !empty(v))
        return false;
    }
    return true;
  }
  if (json_is_array(a) && json_is_array(b)) {
    if (json_array_size(a) != json_array_size(b))
      return false;
    for (size_t i = 0; i < json_array_size(a); i++)
      if (!same(json_array_get(a, i), json_array_get(b, i), quantities))
        return false;
    return true;
  }
  return json_equal(a, b);
}

static int64_t generation_of(const json_t *slice) {
  json_t *spec = slice ? kube_json_get(slice, "spec") : NULL;
  json_t *pool = spec ? kube_json_get(spec, "pool") : NULL;
  json_t *g = pool ? kube_json_get(pool, "generation") : NULL;
  return json_is_integer(g) && json_integer_value(g) > 0 ? json_integer_value(g) : 0;
}

bool dra_slice_same(const json_t *have, const json_t *want) {
  json_t *a = json_deep_copy(kube_json_get(have, "spec"));
  json_t *b = json_deep_copy(kube_json_get(want, "spec"));
  bool r = false;
  if (json_is_object(a) && json_is_object(b)) {
    json_object_del(json_object_get(a, "pool"), "generation");
    json_object_del(json_object_get(b, "pool"), "generation");
    r = same(a, b, false);
  }
  json_decref(a);
  json_decref(b);
  return r;
}

bool dra_slice_needs_write(const json_t *have, const json_t *want, const json_t *cache) {
  if (dra_slice_same(have, want))
    return false;
  /* What the API server made of the same slice the last time: nothing another writer changed,
   * only what this server keeps of it (an API server whose DRAConsumableCapacity is off drops
   * allowMultipleAllocations and the request policies; writing again would change nothing
   * but the generation, every period). */
  const json_t *sent = cache ? json_object_get(cache, DRA_SENT_KEY) : NULL;
  return !(sent && dra_slice_same(sent, want) && dra_slice_same(have, cache));
}

int dra_slice_kept(const json_t *slice, char *err, size_t err_len) {
  const json_t *spec = kube_json_get(slice, "spec");
  const json_t *devs = spec ? kube_json_get(spec, "devices") : NULL;
  for (size_t i = 0; i < json_array_size(devs); i++) {
    const json_t *d = json_array_get(devs, i);
    if (!json_is_true(kube_json_get(d, "allowMultipleAllocations"))) {
      const char *name = json_string_value(kube_json_get(d, "name"));
      snprintf(err, err_len,
               "the API server keeps device %s of the ResourceSlice without "
               "allowMultipleAllocations: its DRAConsumableCapacity feature is off (on by "
               "default from Kubernetes 1.36; 1.34 and 1.35 need the feature gate on the API "
               "server and kube-scheduler), so each GPU would go whole to one claim",
               name ? name : "?");
      return -EOPNOTSUPP;
    }
  }
  return 0;
}

/* ---- publishing it ---- */

/* The GPUs to offer now: none while gsliced does not answer. */
static size_t offered(struct node *n, struct dra_gpu *gpus) {
  size_t k = 0;
  pthread_mutex_lock(&n->lock);
  for (uint32_t i = 0; n->daemon_up && i < n->ngpus && i < GS_MAX_GPUS; i++) {
    struct dra_gpu *g = &gpus[k++];
    memset(g, 0, sizeof(*g));
    g->index = n->gpus[i].index;
    snprintf(g->uuid, sizeof(g->uuid), "%s", n->gpus[i].uuid);
    snprintf(g->product, sizeof(g->product), "%s", n->gpus[i].name);
    g->memory = n->gpus[i].memory;
  }
  pthread_mutex_unlock(&n->lock);
  return k;
}

/* DELETE one object; gone already is success. */
static int delete_one(struct node *n, const char *path, char *err, size_t err_len) {
  long status = 0;
  json_t *body = NULL;
  int r = kube_request(n->kube, "DELETE", path, NULL, NULL, &status, &body, err, err_len);
  if (r == 0 && status != 200 && status != 202 && status != 404) {
    json_t *msg = body ? json_object_get(body, "message") : NULL;
    snprintf(err, err_len, "DELETE %s: HTTP %ld: %s", path, status,
             json_is_string(msg) ? json_string_value(msg) : "no message");
    r = status == 401 || status == 403 ? -EACCES : status == 409 ? -EEXIST : -EIO;
  }
  json_decref(body);
  return r;
}

/* This node's slices of driver gslice.io other than `keep` (NULL: all of them) are deleted:
 * those of an older gslice-node under another name would offer devices twice. */
static int delete_others(struct node *n, const char *keep, char *err, size_t err_len) {
  char path[600];
  json_t *items = NULL;
  char *rv = NULL;

  snprintf(path, sizeof(path), DRA_SLICES "?fieldSelector=spec.nodeName%%3D%s%%2Cspec.driver%%3D%s",
           n->cfg.node_name, NODE_DRA_DRIVER);
  int r = kube_list(n->kube, path, &items, &rv, err, err_len);
  free(rv);
  for (size_t i = 0; r == 0 && i < json_array_size(items); i++) {
    const char *name = kube_meta_str(json_array_get(items, i), "name");
    if (!name || (keep && !strcmp(name, keep)) ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(name))
      continue;
    snprintf(path, sizeof(path), DRA_SLICES "/%s", name);
    r = delete_one(n, path, err, err_len);
  }
  json_decref(items);
  return r;
}

static void keep(json_t **cache, json_t *slice) {
  json_decref(*cache);
  *cache = slice;
}

/* One try: the slice read (have, or NULL when there is none) made what `want` says. */
static int publish_once(struct node *n, const char *path, json_t *have, json_t *want,
                        json_t **cache, char *err, size_t err_len) {
  json_t *pool = json_object_get(json_object_get(want, "spec"), "pool"), *got = NULL;
  int64_t gen = generation_of(*cache), hgen = generation_of(have);
  int r;

  if (!have) {
    json_object_set_new(pool, "generation", json_integer(gen + 1));
    r = kube_post(n->kube, DRA_SLICES, want, &got, err, err_len);
  } else {
    json_object_set_new(pool, "generation", json_integer(hgen));
    if (!dra_slice_needs_write(have, want, *cache)) {
      if (dra_slice_same(have, want))
        keep(cache, json_incref(have));
      return dra_slice_kept(have, err, err_len);
    }
    /* driver, nodeName and pool.name are immutable: another writer's object under our name. */
    json_t *hs = kube_json_get(have, "spec"), *ws = json_object_get(want, "spec");
    json_t *hp = hs ? kube_json_get(hs, "pool") : NULL;
    if (!hs || !json_equal(kube_json_get(hs, "driver"), json_object_get(ws, "driver")) ||
        !json_equal(kube_json_get(hs, "nodeName"), json_object_get(ws, "nodeName")) || !hp ||
        !json_equal(kube_json_get(hp, "name"), json_object_get(pool, "name"))) {
      r = delete_one(n, path, err, err_len);
      return r < 0 ? r : -ENOENT; /* made again at the next try */
    }
    const char *rv = kube_meta_str(have, "resourceVersion");
    json_object_set_new(json_object_get(want, "metadata"), "resourceVersion",
                        json_string(rv ? rv : ""));
    json_object_set_new(pool, "generation", json_integer((gen > hgen ? gen : hgen) + 1));
    r = kube_put(n->kube, path, want, &got, err, err_len);
    json_object_del(json_object_get(want, "metadata"), "resourceVersion");
  }
  if (r < 0)
    return r;
  /* What was sent, for dra_slice_needs_write: the answer may not say all of it. */
  json_t *sent = json_deep_copy(want);
  if (!sent || json_object_set_new(got, DRA_SENT_KEY, sent)) {
    json_decref(got);
    return -ENOMEM;
  }
  keep(cache, got);
  return dra_slice_kept(got, err, err_len);
}

int dra_publish(struct node *n, json_t **cache, char *err, size_t err_len) {
  char name[300], path[400];
  struct dra_gpu gpus[GS_MAX_GPUS];
  int r;

  if ((r = dra_slice_name(n->cfg.node_name, name, sizeof(name), err, err_len)) < 0)
    return r;
  snprintf(path, sizeof(path), DRA_SLICES "/%s", name);
  size_t ngpus = offered(n, gpus);
  json_t *want = dra_slice_build(n->cfg.node_name, gpus, ngpus, 0, n->cfg.slots_per_gpu);
  if (!want)
    return -ENOMEM;
  /* At the first publish: not a reason to offer nothing when it fails (no list right). */
  if (!*cache)
    (void)delete_others(n, name, err, err_len);
  /* Three tries: read, then create or update; a conflict means another write came between. */
  for (int attempt = 0; attempt < 3; attempt++) {
    json_t *have = NULL;
    r = kube_get(n->kube, path, &have, err, err_len);
    if (r < 0 && r != -ENOENT)
      break;
    r = publish_once(n, path, have, want, cache, err, err_len);
    json_decref(have);
    if (r != -EEXIST && r != -ENOENT)
      break;
  }
  json_decref(want);
  if (r == 0 && err_len)
    err[0] = 0; /* a 404 read on the way is no error */
  return r;
}

int dra_unpublish(struct node *n, char *err, size_t err_len) {
  char name[300];
  int r = dra_slice_name(n->cfg.node_name, name, sizeof(name), err, err_len);
  return r < 0 ? r : delete_others(n, NULL, err, err_len);
}

/* ---- the claim ---- */

/* One SliceConfig: what it sets. */
struct layer {
  bool has_limit, has_priority, has_weight;
  uint32_t limit, weight;
  int32_t priority;
};

struct config {
  bool from_class;
  const json_t *requests; /* borrowed; NULL or empty: every request */
  struct layer l;
};

static int config_field(const char *k, const json_t *v, struct layer *l, const char *where,
                        char *err, size_t err_len) {
  if (!strcmp(k, "computeLimit")) {
    json_int_t x = json_integer_value(v);
    if (!json_is_integer(v) || x < 1 || x > GS_PERCENT_MAX) {
      snprintf(err, err_len, "%s: computeLimit must be a whole percent of one GPU, 1 to 100",
               where);
      return -EINVAL;
    }
    l->has_limit = true, l->limit = (uint32_t)x;
  } else if (!strcmp(k, "priority")) {
    if (!json_is_string(v) || gs_priority_parse(json_string_value(v), &l->priority) < 0) {
      snprintf(err, err_len, "%s: priority %s%s%s is not one of " GS_PRIORITY_WORDS, where,
               json_is_string(v) ? "\"" : "",
               json_is_string(v) ? json_string_value(v) : "(not a string)",
               json_is_string(v) ? "\"" : "");
      return -EINVAL;
    }
    l->has_priority = true;
  } else if (!strcmp(k, "weight")) {
    json_int_t x = json_integer_value(v);
    if (!json_is_integer(v) || x < GS_WEIGHT_MIN || x > GS_WEIGHT_MAX) {
      snprintf(err, err_len, "%s: weight must be a whole number, %u to %u", where, GS_WEIGHT_MIN,
               GS_WEIGHT_MAX);
      return -EINVAL;
    }
    l->has_weight = true, l->weight = (uint32_t)x;
  } else {
    snprintf(err, err_len,
             "%s: unknown field \"%s\" (a SliceConfig has apiVersion, kind, computeLimit, "
             "priority and weight)",
             where, k);
    return -EINVAL;
  }
  return 0;
}

/* opaque.parameters of driver gslice.io: a SliceConfig of gslice.io/v1, nothing else. */
static int slice_config(const json_t *p, struct layer *l, const char *where, char *err,
                        size_t err_len) {
  const char *k;
  json_t *v;

  memset(l, 0, sizeof(*l));
  if (!json_is_object(p)) {
    snprintf(err, err_len, "%s: opaque.parameters is not a JSON object", where);
    return -EINVAL;
  }
  const char *av = json_string_value(json_object_get(p, "apiVersion"));
  const char *kind = json_string_value(json_object_get(p, "kind"));
  if (!av || strcmp(av, "gslice.io/v1")) {
    snprintf(err, err_len, "%s: apiVersion \"%s\" is not gslice.io/v1", where, av ? av : "");
    return -EINVAL;
  }
  if (!kind || strcmp(kind, "SliceConfig")) {
    snprintf(err, err_len, "%s: kind \"%s\" is not SliceConfig (the only kind of gslice.io/v1)",
             where, kind ? kind : "");
    return -EINVAL;
  }
  json_object_foreach((json_t *)p, k, v) {
    if (strcmp(k, "apiVersion") && strcmp(k, "kind")) {
      int r = config_field(k, v, l, where, err, err_len);
      if (r < 0)
        return r;
    }
  }
  return 0;
}

/* status.allocation.devices.config[]: those of driver gslice.io, parsed (other drivers' are
 * theirs to read). */
static int configs_parse(const json_t *arr, struct config *cf, size_t *ret_n, char *err,
                         size_t err_len) {
  size_t k = 0;
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const json_t *c = json_array_get(arr, i);
    const json_t *op = json_is_object(c) ? kube_json_get(c, "opaque") : NULL;
    const char *drv = op ? json_string_value(kube_json_get(op, "driver")) : NULL;
    char where[96];
    if (!drv || strcmp(drv, NODE_DRA_DRIVER))
      continue;
    const char *src = json_string_value(kube_json_get(c, "source"));
    snprintf(where, sizeof(where), "status.allocation.devices.config[%zu] (%s)", i,
             src ? src : "no source");
    if (!src || (strcmp(src, "FromClass") && strcmp(src, "FromClaim"))) {
      snprintf(err, err_len, "%s: source is not FromClass or FromClaim", where);
      return -EINVAL;
    }
    if (k == DRA_MAX_CONFIGS) {
      snprintf(err, err_len, "more than %d configs of driver %s", DRA_MAX_CONFIGS, NODE_DRA_DRIVER);
      return -E2BIG;
    }
    cf[k].from_class = !strcmp(src, "FromClass");
    cf[k].requests = kube_json_get(c, "requests");
    int r = slice_config(kube_json_get(op, "parameters"), &cf[k].l, where, err, err_len);
    if (r < 0)
      return r;
    k++;
  }
  *ret_n = k;
  return 0;
}

/* A config's requests[] names this share's request: itself, or its main request. */
static bool applies(const json_t *requests, const char *request) {
  if (!json_is_array(requests) || json_array_size(requests) == 0)
    return true;
  for (size_t i = 0; i < json_array_size(requests); i++) {
    const char *r = json_string_value(json_array_get(requests, i));
    size_t l = r ? strlen(r) : 0;
    if (r && (!strcmp(r, request) || (!strncmp(r, request, l) && request[l] == '/')))
      return true;
  }
  return false;
}

static void layer_over(struct layer *to, const struct layer *from) {
  if (from->has_limit)
    to->has_limit = true, to->limit = from->limit;
  if (from->has_priority)
    to->has_priority = true, to->priority = from->priority;
  if (from->has_weight)
    to->has_weight = true, to->weight = from->weight;
}

static int raised(const char *field, const char *claim_v, const char *class_v, bool class_sets,
                  char *err, size_t err_len) {
  if (class_sets)
    snprintf(err, err_len,
             "the claim's SliceConfig raises %s to %s above %s from its DeviceClass: a claim may "
             "only lower what its class sets",
             field, claim_v, class_v);
  else
    snprintf(err, err_len,
             "the claim's SliceConfig raises %s to %s above %s, the most a claim may take when "
             "its DeviceClass sets no %s (an admin's class may allow more)",
             field, claim_v, class_v, field);
  return -EPERM;
}

/* The class's layer, then the claim's, which may only lower it. What the class leaves unset is
 * bounded by gslice's defaults: computeLimit 100 (a limit above the request only uses time no
 * other slice wants), priority normal and weight 1 (both take time from other slices: an
 * admin's class, which a ResourceQuota can govern, grants more). */
static int share_cfg(const struct config *cf, size_t ncf, struct dra_share *s, char *err,
                     size_t err_len) {
  struct layer cls = {0}, clm = {0};
  char a[32], b[32];

  for (size_t i = 0; i < ncf; i++)
    if (applies(cf[i].requests, s->request))
      layer_over(cf[i].from_class ? &cls : &clm, &cf[i].l);
  uint32_t lim = cls.has_limit ? cls.limit : GS_PERCENT_MAX;
  int32_t prio = cls.has_priority ? cls.priority : GS_PRIORITY_NORMAL;
  uint32_t w = cls.has_weight ? cls.weight : GS_WEIGHT_MIN;
  if (clm.has_limit && clm.limit > lim) {
    snprintf(a, sizeof(a), "%" PRIu32, clm.limit), snprintf(b, sizeof(b), "%" PRIu32, lim);
    return raised("computeLimit", a, b, cls.has_limit, err, err_len);
  }
  if (clm.has_priority && clm.priority > prio)
    return raised("priority", gs_priority_name(clm.priority), gs_priority_name(prio),
                  cls.has_priority, err, err_len);
  if (clm.has_weight && clm.weight > w) {
    snprintf(a, sizeof(a), "%" PRIu32, clm.weight), snprintf(b, sizeof(b), "%" PRIu32, w);
    return raised("weight", a, b, cls.has_weight, err, err_len);
  }
  layer_over(&cls, &clm);
  s->cfg.compute_limit = cls.has_limit ? cls.limit : 0;
  s->cfg.priority = cls.has_priority ? cls.priority : GS_PRIORITY_NORMAL;
  s->cfg.weight = cls.has_weight ? cls.weight : GS_WEIGHT_MIN;
  if (s->cfg.compute_limit && s->cfg.compute_limit < s->compute) {
    snprintf(err, err_len,
             "computeLimit %" PRIu32 " is below the compute %" PRIu32
             " allocated to request \"%s\" (device %s): a limit is at least the request",
             s->cfg.compute_limit, s->compute, s->request, s->device);
    return -EINVAL;
  }
  return 0;
}

static int copy_str(char *out, size_t len, const json_t *v, const char *field, bool required,
                    char *err, size_t err_len) {
  const char *s = json_string_value(v);
  if (!s && !required) {
    out[0] = 0;
    return 0;
  }
  if (!s || !*s || strlen(s) >= len) {
    snprintf(err, err_len, "%s is %s", field, !s || !*s ? "missing" : "too long");
    return -EINVAL;
  }
  memcpy(out, s, strlen(s) + 1);
  return 0;
}

/* consumedCapacity.memory (bytes, > 0) and .compute (whole percent 1..100). */
static int consumed(const json_t *cc, struct dra_share *s, const char *where, char *err,
                    size_t err_len) {
  const char *mem = json_string_value(cc ? kube_json_get(cc, "memory") : NULL);
  const char *cpu = json_string_value(cc ? kube_json_get(cc, "compute") : NULL);
  char why[KUBE_ERR_MAX];
  int64_t v;

  if (!mem || !cpu) {
    snprintf(err, err_len,
             "%s: consumedCapacity has no %s (the allocator must consume every capacity: is "
             "DRAConsumableCapacity on?)",
             where, !mem ? "memory" : "compute");
    return -EINVAL;
  }
  if (k8s_quantity_parse(mem, 0, &v, why, sizeof(why)) < 0) {
    snprintf(err, err_len, "%s: consumedCapacity.memory: %s", where, why);
    return -EINVAL;
  }
  if (v <= 0) {
    snprintf(err, err_len, "%s: consumedCapacity.memory \"%s\" is not a positive number of bytes",
             where, mem);
    return -EINVAL;
  }
  s->memory = (uint64_t)v;
  if (k8s_quantity_parse(cpu, 3, &v, why, sizeof(why)) < 0 || v % 1000 || v < 1000 ||
      v > 1000 * (int64_t)GS_PERCENT_MAX) {
    snprintf(err, err_len, "%s: consumedCapacity.compute \"%s\" is not a whole percent, 1 to 100",
             where, cpu);
    return -EINVAL;
  }
  s->compute = (uint32_t)(v / 1000);
  return 0;
}

/* One result of ours into s. */
static int result_parse(const json_t *res, struct dra_share *s, const char *where, char *err,
                        size_t err_len) {
  uint64_t idx;
  int r;

  if ((r = copy_str(s->request, sizeof(s->request), kube_json_get(res, "request"), "request", true,
                    err, err_len)) < 0 ||
      (r = copy_str(s->pool, sizeof(s->pool), kube_json_get(res, "pool"), "pool", true, err,
                    err_len)) < 0 ||
      (r = copy_str(s->device, sizeof(s->device), kube_json_get(res, "device"), "device", true, err,
                    err_len)) < 0 ||
      (r = copy_str(s->share_id, sizeof(s->share_id), kube_json_get(res, "shareID"), "shareID",
                    false, err, err_len)) < 0) {
    char why[128];
    snprintf(why, sizeof(why), "%s", err);
    snprintf(err, err_len, "%s: %s", where, why);
    return r;
  }
  /* The name as dra_slice_build writes it, and only so: "gpu-00" is no device of ours, and one
   * GPU under two names would be two devices to whoever counts them by name. */
  if (strncmp(s->device, "gpu-", 4) || gs_uint_parse(s->device + 4, 0, GS_MAX_GPUS - 1, &idx) ||
      (s->device[4] == '0' && s->device[5])) {
    snprintf(err, err_len,
             "%s: device \"%s\" is not one gslice-node offers (gpu-<index>, the index in "
             "decimal without leading zeros, 0 to %d)",
             where, s->device, GS_MAX_GPUS - 1);
    return -EINVAL;
  }
  s->gpu_index = (uint32_t)idx;
  if (json_is_true(kube_json_get(res, "adminAccess"))) {
    snprintf(err, err_len, "%s: adminAccess to %s is not offered by gslice", where, s->device);
    return -EINVAL;
  }
  return consumed(kube_json_get(res, "consumedCapacity"), s, where, err, err_len);
}

static int claim_meta(const json_t *claim, const char *uid, struct dra_claim *c, char *err,
                      size_t err_len) {
  json_t *meta = json_is_object(claim) ? kube_json_get(claim, "metadata") : NULL;
  int r;
  if (!json_is_object(meta)) {
    snprintf(err, err_len, "the ResourceClaim has no metadata");
    return -EINVAL;
  }
  if ((r = copy_str(c->ns, sizeof(c->ns), kube_json_get(meta, "namespace"), "metadata.namespace",
                    true, err, err_len)) < 0 ||
      (r = copy_str(c->name, sizeof(c->name), kube_json_get(meta, "name"), "metadata.name", true,
                    err, err_len)) < 0 ||
      (r = copy_str(c->uid, sizeof(c->uid), kube_json_get(meta, "uid"), "metadata.uid", true, err,
                    err_len)) < 0)
    return r;
  if (strcmp(c->uid, uid)) {
    snprintf(err, err_len,
             "ResourceClaim %s/%s has uid %s, not %s which the kubelet asked to prepare: the "
             "claim was deleted and made again",
             c->ns, c->name, c->uid, uid);
    return -ESTALE;
  }
  return 0;
}

int dra_claim_parse(const json_t *claim, const char *uid, const char *pool, struct dra_claim *c,
                    char *err, size_t err_len) {
  struct config cf[DRA_MAX_CONFIGS];
  size_t ncf = 0;
  int r;

  memset(c, 0, sizeof(*c));
  if ((r = claim_meta(claim, uid, c, err, err_len)) < 0)
    return r;
  json_t *st = kube_json_get(claim, "status");
  json_t *al = json_is_object(st) ? kube_json_get(st, "allocation") : NULL;
  json_t *dv = json_is_object(al) ? kube_json_get(al, "devices") : NULL;
  if (!json_is_object(dv)) {
    snprintf(err, err_len, "ResourceClaim %s/%s is not allocated (no status.allocation.devices)",
             c->ns, c->name);
    return -EAGAIN;
  }
  if ((r = configs_parse(kube_json_get(dv, "config"), cf, &ncf, err, err_len)) < 0)
    return r;
  json_t *res = kube_json_get(dv, "results");
  for (size_t i = 0; i < json_array_size(res); i++) {
    json_t *x = json_array_get(res, i);
    const char *drv = json_string_value(kube_json_get(x, "driver"));
    const char *p = json_string_value(kube_json_get(x, "pool"));
    char where[80];
    if (!drv || strcmp(drv, NODE_DRA_DRIVER) || !p || strcmp(p, pool))
      continue; /* another driver's, or another node's */
    if (c->nshares == DRA_MAX_SHARES) {
      snprintf(err, err_len, "ResourceClaim %s/%s has more than %d shares of %s on this node",
               c->ns, c->name, DRA_MAX_SHARES, NODE_DRA_DRIVER);
      return -E2BIG;
    }
    snprintf(where, sizeof(where), "status.allocation.devices.results[%zu]", i);
    struct dra_share *s = &c->shares[c->nshares];
    if ((r = result_parse(x, s, where, err, err_len)) < 0 ||
        (r = share_cfg(cf, ncf, s, err, err_len)) < 0)
      return r;
    c->nshares++;
  }
  if (!c->nshares) {
    snprintf(err, err_len, "ResourceClaim %s/%s has no device of driver %s in pool %s", c->ns,
             c->name, NODE_DRA_DRIVER, pool);
    return -ENOENT;
  }
  return 0;
}

int dra_claim_read(struct node *n, const char *ns, const char *name, const char *uid,
                   struct dra_claim *c, char *err, size_t err_len) {
  char path[512], why[KUBE_ERR_MAX];
  json_t *claim = NULL;
  size_t ln = strlen(ns), lm = strlen(name);

  /* Path segments from the kubelet: a namespace is a DNS label, a claim name a DNS subdomain. */
  if (!ln || ln > 63 || strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") != ln || !lm ||
      lm > 253 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-.") != lm) {
    snprintf(err, err_len, "\"%s/%s\" is not a ResourceClaim's namespace and name", ns, name);
    return -EINVAL;
  }
  snprintf(path, sizeof(path), DRA_PATH "/namespaces/%s/resourceclaims/%s", ns, name);
  int r = kube_get(n->kube, path, &claim, why, sizeof(why));
  if (r < 0) {
    snprintf(err, err_len, "ResourceClaim %s/%s: %s", ns, name, why);
    return r;
  }
  r = dra_claim_parse(claim, uid, n->cfg.node_name, c, err, err_len);
  json_decref(claim);
  return r;
}
