/* SPDX-License-Identifier: Apache-2.0 */
/* Placement (place.h): which GPUs of a node take a pod's slices, why a node cannot, and
 * how much the policy likes the node. */
#include "place.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podcheck.h"
#include "proto.h"
#include "size.h"

/* ---- small helpers -------------------------------------------------------------------- */

/* The split is gslice-node's too: both check it with k8s_split (podcheck.h). */
uint64_t place_split_u64(uint64_t total, uint32_t n, uint32_t j) {
  return k8s_split(total, n, j);
}

uint32_t place_split_u32(uint32_t total, uint32_t n, uint32_t j) {
  return (uint32_t)k8s_split(total, n, j);
}

uint64_t place_sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint32_t place_sat_add32(uint32_t a, uint32_t b) {
  return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}

int place_policy_parse(const char *text, enum place_policy *ret) {
  if (text && strcmp(text, "binpack") == 0)
    *ret = PLACE_BINPACK;
  else if (text && strcmp(text, "spread") == 0)
    *ret = PLACE_SPREAD;
  else
    return -EINVAL;
  return 0;
}

const char *place_policy_name(enum place_policy p) {
  return p == PLACE_SPREAD ? "spread" : p == PLACE_FIRSTFIT ? "first-fit" : "binpack";
}

/* Appends to a reason, keeping it NUL-terminated and cut at its size. */
struct text {
  char *p;
  size_t len, cap;
  bool brief; /* no per-GPU figures */
};

static void say(struct text *t, const char *fmt, ...) {
  va_list ap;
  int n;
  if (!t->cap || t->len + 1 >= t->cap)
    return;
  va_start(ap, fmt);
  n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
  va_end(ap);
  if (n > 0)
    t->len = t->len + (size_t)n >= t->cap ? t->cap - 1 : t->len + (size_t)n;
}

/* The hot path of a filter over thousands of nodes writes a reason per GPU of every
 * node that does not fit; these appenders cost a fraction of snprintf. */
static void add(struct text *t, const char *s) {
  if (!t->cap)
    return;
  while (*s && t->len + 1 < t->cap)
    t->p[t->len++] = *s++;
  t->p[t->len] = 0;
}

static void add_u(struct text *t, uint64_t v) {
  char buf[24];
  int i = sizeof buf - 1;
  buf[i] = 0;
  do {
    buf[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  add(t, buf + i);
}

/* As gs_size_format writes sizes ("2GiB", "1.5GiB", "17B"). */
static void add_size(struct text *t, uint64_t bytes) {
  static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned i = 0;
  while (i < 4 && bytes >= (1ULL << (10 * (i + 1))))
    i++;
  uint64_t unit = 1ULL << (10 * i);
  add_u(t, bytes / unit);
  if (i > 0 && bytes % unit) {
    add(t, ".");
    add_u(t, (bytes % unit) * 10 / unit);
  }
  add(t, names[i]);
}

int place_pod_check(const struct place_pod *pod, char *err, size_t errlen) {
  uint32_t shares = 0;
  for (uint32_t i = 0; i < pod->ncontainers; i++) {
    const struct place_container *c = &pod->containers[i];
    if (c->ngpus < 1 || c->ngpus > K8S_MAX_GPUS) {
      snprintf(err, errlen, "container %s: %s is %u, must be 1..%d", c->name, K8S_RES_GPU, c->ngpus,
               K8S_MAX_GPUS);
      return -EINVAL;
    }
    if (c->memory < c->ngpus) {
      snprintf(err, errlen, "container %s: %s must be set, at least 1 byte per GPU", c->name,
               K8S_RES_MEMORY);
      return -EINVAL;
    }
    if (c->compute > GS_PERCENT_MAX * c->ngpus) {
      snprintf(err, errlen, "container %s: %s is %u, more than %u per GPU over %u GPU(s)", c->name,
               K8S_RES_COMPUTE, c->compute, GS_PERCENT_MAX, c->ngpus);
      return -EINVAL;
    }
    if (c->sidecar && !c->init) {
      snprintf(err, errlen, "container %s: a sidecar is an init container", c->name);
      return -EINVAL;
    }
    if (c->compute_limit < 1 || c->compute_limit > GS_PERCENT_MAX ||
        c->compute_limit < place_split_u32(c->compute, c->ngpus, 0)) {
      snprintf(err, errlen,
               "container %s: %s %u%% (the annotation, or its priority class's limit) is "
               "below the %u%% of each GPU it asks for (or outside 1..%u)",
               c->name, K8S_ANNOT_COMPUTE_LIMIT, c->compute_limit,
               place_split_u32(c->compute, c->ngpus, 0), GS_PERCENT_MAX);
      return -EINVAL;
    }
    shares += c->ngpus;
  }
  if (shares > PLACE_MAX_SHARES) {
    snprintf(err, errlen, "the pod asks for %u GPU parts in all, more than %d", shares,
             PLACE_MAX_SHARES);
    return -EINVAL;
  }
  return 0;
}

/* ---- one container on a node ---------------------------------------------------------- */

struct usage {
  uint64_t mem;
  uint32_t compute;
  uint32_t slices;
};

/* Whether GPU g can take a part of (mem, compute) on top of u. */
static bool gpu_fits(const struct place_gpu *g, const struct usage *u, uint64_t mem,
                     uint32_t compute) {
  return g->healthy && u->mem <= g->memory && g->memory - u->mem >= mem &&
         (uint64_t)u->compute + compute <= GS_PERCENT_MAX && u->slices < g->slots;
}

static void gpu_why(struct text *t, const struct place_gpu *g, const struct usage *u, uint64_t mem,
                    uint32_t compute) {
  uint64_t free_mem = u->mem <= g->memory ? g->memory - u->mem : 0;
  add(t, "; gpu ");
  add_u(t, g->index);
  add(t, ": ");
  if (!g->healthy) {
    add(t, "unhealthy");
  } else if (free_mem < mem) {
    add_size(t, free_mem);
    add(t, " of ");
    add_size(t, g->memory);
    add(t, " free, ");
    add_size(t, mem);
    add(t, " asked");
  } else if ((uint64_t)u->compute + compute > GS_PERCENT_MAX) {
    add_u(t, u->compute < GS_PERCENT_MAX ? GS_PERCENT_MAX - u->compute : 0);
    add(t, "% of compute free, ");
    add_u(t, compute);
    add(t, "% asked");
  } else {
    add(t, "all ");
    add_u(t, g->slots);
    add(t, " slots taken");
  }
}

/* How the policy orders candidate GPUs: lower key first. Fractions are kept
 * in parts per million so the order is exact and the same on every machine. */
static int64_t gpu_key(enum place_policy policy, const struct place_gpu *g, const struct usage *u,
                       uint64_t mem, uint32_t compute) {
  int64_t mem_free = (int64_t)((double)(g->memory - u->mem - mem) / (double)g->memory * 1e6);
  int64_t cpu_free = (int64_t)(GS_PERCENT_MAX - u->compute - compute) * 10000;
  int64_t free_after = mem_free + cpu_free; /* 0 .. 2e6 */
  switch (policy) {
  case PLACE_BINPACK: return free_after; /* the tightest fit first */
  case PLACE_SPREAD: return -free_after;
  default: return 0;
  }
}

struct cand {
  uint32_t pos;
  int64_t key;
};

static int cand_cmp(const void *a, const void *b) {
  const struct cand *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Chooses c's GPUs on top of usage u (updated), appending shares; false (and the
 * reason) when fewer than c->ngpus GPUs have room. */
static bool place_container(const struct place_node *node, enum place_policy policy,
                            const struct place_container *c, uint32_t ci, struct usage *u,
                            struct place_choice *ch, struct text *why) {
  struct cand cands[K8S_MAX_GPUS];
  uint32_t n = 0;
  /* Every GPU must take the largest part (the first, with the remainder). */
  uint64_t mem = place_split_u64(c->memory, c->ngpus, 0);
  uint32_t compute = place_split_u32(c->compute, c->ngpus, 0);

  for (uint32_t i = 0; i < node->ngpus; i++)
    if (gpu_fits(&node->gpus[i], &u[i], mem, compute))
      cands[n++] = (struct cand){i, gpu_key(policy, &node->gpus[i], &u[i], mem, compute)};
  if (n < c->ngpus) {
    if (why) {
      add(why, "container ");
      add(why, c->name);
      add(why, " asks ");
      add_size(why, mem);
      add(why, " and ");
      add_u(why, compute);
      if (c->ngpus == 1) {
        add(why, "% compute on one GPU");
      } else {
        add(why, "% compute on each of ");
        add_u(why, c->ngpus);
        add(why, " GPUs, ");
        add_u(why, n);
        add(why, " have room");
      }
      if (node->ngpus == 0)
        add(why, "; the node has no GPUs");
      else if (why->brief)
        add(why, c->ngpus == 1 ? "; no GPU of the node has that free"
                               : "; too few GPUs of the node have that free");
      for (uint32_t i = 0; i < node->ngpus && !why->brief; i++)
        if (!gpu_fits(&node->gpus[i], &u[i], mem, compute))
          gpu_why(why, &node->gpus[i], &u[i], mem, compute);
    }
    return false;
  }
  /* At most 64 candidates, mostly 8: insertion sort, no allocation. */
  for (uint32_t i = 1; i < n; i++) {
    struct cand x = cands[i];
    uint32_t j = i;
    for (; j > 0 && cand_cmp(&cands[j - 1], &x) > 0; j--)
      cands[j] = cands[j - 1];
    cands[j] = x;
  }
  for (uint32_t j = 0; j < c->ngpus; j++) {
    struct place_share *s = &ch->shares[ch->nshares++];
    s->container = ci;
    s->gpu = cands[j].pos;
    s->memory = place_split_u64(c->memory, c->ngpus, j);
    s->compute = place_split_u32(c->compute, c->ngpus, j);
    u[s->gpu].mem = place_sat_add(u[s->gpu].mem, s->memory);
    u[s->gpu].compute = place_sat_add32(u[s->gpu].compute, s->compute);
    u[s->gpu].slices = place_sat_add32(u[s->gpu].slices, 1);
  }
  return true;
}

/* Places every container of pod on top of base (one usage per GPU), in the order the kubelet
 * starts them: the init containers in theirs, then the app containers. */
static bool place_all(const struct place_node *node, const struct place_pod *pod,
                      const struct usage *base, struct place_choice *ch, struct text *why) {
  struct usage run[K8S_MAX_GPUS], init[K8S_MAX_GPUS];

  ch->nshares = 0;
  /* run: base and the sidecars started so far. A sidecar stays in it for the pod's life; a
   * regular init container needs room beside those only, and ends before the next starts. */
  memcpy(run, base, node->ngpus * sizeof run[0]);
  for (uint32_t i = 0; i < pod->ncontainers; i++) {
    const struct place_container *c = &pod->containers[i];
    if (!c->init)
      continue;
    if (c->sidecar) {
      if (!place_container(node, pod->policy, c, i, run, ch, why))
        return false;
      continue;
    }
    memcpy(init, run, node->ngpus * sizeof init[0]);
    if (!place_container(node, pod->policy, c, i, init, ch, why))
      return false;
  }
  /* The app containers run beside every sidecar. */
  for (uint32_t i = 0; i < pod->ncontainers; i++)
    if (!pod->containers[i].init &&
        !place_container(node, pod->policy, &pod->containers[i], i, run, ch, why))
      return false;
  return true;
}

/* ---- usage of a placed pod ------------------------------------------------------------ */

static void usage_add(struct usage *u, const struct place_share *s) {
  u->mem = place_sat_add(u->mem, s->memory);
  u->compute = place_sat_add32(u->compute, s->compute);
  u->slices = place_sat_add32(u->slices, 1);
}

static void usage_max(struct usage *u, const struct usage *v) {
  if (v->mem > u->mem)
    u->mem = v->mem;
  if (v->compute > u->compute)
    u->compute = v->compute;
  if (v->slices > u->slices)
    u->slices = v->slices;
}

static void pod_usage(const struct place_node *node, const struct place_pod *pod,
                      const struct place_share *shares, uint32_t nshares, struct usage *ret) {
  struct usage side[K8S_MAX_GPUS], app[K8S_MAX_GPUS];
  /* The shares by container, in the containers' order whatever order they come in (a placement
   * makes them init containers first; an assignment read back, in its entries' order). */
  uint16_t first[K8S_MAX_CONTAINERS + 1] = {0}, at[K8S_MAX_CONTAINERS], by[PLACE_MAX_SHARES];
  uint32_t nc = pod->ncontainers < K8S_MAX_CONTAINERS ? pod->ncontainers : K8S_MAX_CONTAINERS;

  if (nshares > PLACE_MAX_SHARES)
    nshares = PLACE_MAX_SHARES;
  for (uint32_t i = 0; i < nshares; i++)
    if (shares[i].gpu < node->ngpus && shares[i].container < nc)
      first[shares[i].container + 1]++;
  for (uint32_t c = 0; c < nc; c++) {
    first[c + 1] = (uint16_t)(first[c + 1] + first[c]);
    at[c] = first[c];
  }
  for (uint32_t i = 0; i < nshares; i++)
    if (shares[i].gpu < node->ngpus && shares[i].container < nc)
      by[at[shares[i].container]++] = (uint16_t)i;

  memset(side, 0, node->ngpus * sizeof side[0]);
  memset(app, 0, node->ngpus * sizeof app[0]);
  memset(ret, 0, node->ngpus * sizeof ret[0]);
  for (uint32_t c = 0; c < nc; c++) {
    const struct place_container *pc = &pod->containers[c];
    for (uint32_t k = first[c]; k < first[c + 1]; k++) {
      const struct place_share *s = &shares[by[k]];
      if (!pc->init) {
        usage_add(&app[s->gpu], s);
      } else if (pc->sidecar) {
        usage_add(&side[s->gpu], s);
      } else {
        /* A regular init container's phase: its part beside the sidecars started before it. */
        struct usage phase = side[s->gpu];
        usage_add(&phase, s);
        usage_max(&ret[s->gpu], &phase);
      }
    }
  }
  for (uint32_t g = 0; g < node->ngpus; g++) {
    struct usage last = side[g];
    last.mem = place_sat_add(last.mem, app[g].mem);
    last.compute = place_sat_add32(last.compute, app[g].compute);
    last.slices = place_sat_add32(last.slices, app[g].slices);
    usage_max(&ret[g], &last);
  }
}

void place_apply(struct place_node *node, const struct place_pod *pod,
                 const struct place_share *shares, uint32_t nshares, int sign) {
  struct usage u[K8S_MAX_GPUS];

  pod_usage(node, pod, shares, nshares, u);
  for (uint32_t i = 0; i < node->ngpus; i++) {
    struct place_gpu *g = &node->gpus[i];
    if (sign > 0) {
      /* Saturating: parts that wrapped the counter would make a full GPU look empty. */
      g->mem_used = place_sat_add(g->mem_used, u[i].mem);
      g->compute_used = place_sat_add32(g->compute_used, u[i].compute);
      g->slices = place_sat_add32(g->slices, u[i].slices);
    } else {
      /* A pod removed twice would be a bug of the caller's bookkeeping;
       * clamp rather than wrap so one bug cannot block a GPU forever. */
      g->mem_used = g->mem_used >= u[i].mem ? g->mem_used - u[i].mem : 0;
      g->compute_used = g->compute_used >= u[i].compute ? g->compute_used - u[i].compute : 0;
      g->slices = g->slices >= u[i].slices ? g->slices - u[i].slices : 0;
    }
  }
}

/* ---- scores ------------------------------------------------------------------------------ */

static int round_div(uint64_t num, uint64_t den) {
  return den ? (int)((num * 2 + den) / (den * 2)) : 0;
}

static int clamp_score(int s) {
  return s < 0 ? 0 : s > PLACE_SCORE_MAX ? PLACE_SCORE_MAX : s;
}

/* binpack: 2..10 by how full the chosen GPUs end up when they all held slices
 * already; 1 when it opens a GPU on a node in use; 0 when it opens a node.
 * spread: 0..10 by how much of the node stays free. Fractions of memory and
 * compute count half each. */
static int score(const struct place_node *node, const struct place_pod *pod,
                 const struct usage *base, const struct place_choice *ch) {
  struct usage add[K8S_MAX_GPUS];
  uint64_t num = 0, den = 0;
  bool node_used = false, all_used = true;

  if (pod->policy == PLACE_FIRSTFIT)
    return PLACE_SCORE_MAX;
  pod_usage(node, pod, ch->shares, ch->nshares, add);
  for (uint32_t i = 0; i < node->ngpus; i++) {
    const struct place_gpu *g = &node->gpus[i];
    bool chosen = add[i].slices > 0;
    if (base[i].slices > 0)
      node_used = true;
    if (chosen && base[i].slices == 0)
      all_used = false;
    if (!g->healthy || g->memory == 0)
      continue;
    /* Parts per million of the GPU's memory and of its compute. */
    uint64_t mem_after = place_sat_add(base[i].mem, add[i].mem);
    uint64_t mem_ppm = (uint64_t)((double)mem_after / (double)g->memory * 1e6);
    uint64_t cpu_ppm = ((uint64_t)base[i].compute + add[i].compute) * 10000;
    if (mem_ppm > 1000000)
      mem_ppm = 1000000;
    if (cpu_ppm > 1000000)
      cpu_ppm = 1000000;
    if (pod->policy == PLACE_BINPACK) {
      if (chosen) {
        num += mem_ppm + cpu_ppm;
        den += 2000000;
      }
    } else {
      num += 2000000 - mem_ppm - cpu_ppm;
      den += 2000000;
    }
  }
  if (pod->policy == PLACE_SPREAD)
    return clamp_score(round_div(num * PLACE_SCORE_MAX, den));
  if (all_used)
    return clamp_score(2 + round_div(num * (PLACE_SCORE_MAX - 2), den));
  return node_used ? 1 : 0;
}

/* ---- a node's verdict --------------------------------------------------------------------- */

/* Whether pod would fit node with nothing else on it. For one container (the common
 * case) that is a count of the GPUs able to take one part; otherwise placed for real. */
static bool fits_empty(const struct place_node *node, const struct place_pod *pod,
                       struct usage *empty, struct place_choice *scratch) {
  if (pod->ncontainers == 1) {
    const struct place_container *c = &pod->containers[0];
    uint64_t mem = place_split_u64(c->memory, c->ngpus, 0);
    uint32_t compute = place_split_u32(c->compute, c->ngpus, 0), n = 0;
    for (uint32_t i = 0; i < node->ngpus; i++) {
      const struct place_gpu *g = &node->gpus[i];
      if (g->healthy && g->memory >= mem && compute <= GS_PERCENT_MAX && g->slots > 0)
        n++;
    }
    return n >= c->ngpus;
  }
  memset(empty, 0, node->ngpus * sizeof(*empty));
  return place_all(node, pod, empty, scratch, NULL);
}

void place_eval(const struct place_cfg *cfg, const struct place_node *node,
                const struct place_pod *pod, uint64_t now_ms, struct place_verdict *ret,
                struct place_choice *ret_choice) {
  struct usage base[K8S_MAX_GPUS], empty[K8S_MAX_GPUS];
  struct place_choice local, *ch = ret_choice ? ret_choice : &local;
  struct text why = {ret->reason, 0, ret->reason ? ret->reason_len : 0, ret->reason && ret->brief};

  ret->fits = false;
  ret->cause = PLACE_NO_ROOM;
  ret->unresolvable = true;
  ret->score = 0;
  if (why.cap)
    ret->reason[0] = 0;
  ch->nshares = 0;
  if (node->unusable) {
    ret->cause = PLACE_UNUSABLE;
    say(&why, "%s", node->unusable);
    return;
  }
  if (now_ms > node->heartbeat_ms && now_ms - node->heartbeat_ms > cfg->node_timeout_ms) {
    ret->cause = PLACE_STALE;
    say(&why, "gslice-node heartbeat is %llu s old (more than --node-timeout %llu s)",
        (unsigned long long)((now_ms - node->heartbeat_ms) / 1000),
        (unsigned long long)(cfg->node_timeout_ms / 1000));
    return;
  }
  if (node->ngpus > K8S_MAX_GPUS) {
    say(&why, "more than %d GPUs", K8S_MAX_GPUS);
    return;
  }
  for (uint32_t i = 0; i < node->ngpus; i++)
    base[i] =
        (struct usage){node->gpus[i].mem_used, node->gpus[i].compute_used, node->gpus[i].slices};
  if (place_all(node, pod, base, ch, NULL)) {
    ret->fits = true;
    ret->cause = PLACE_FITS;
    ret->unresolvable = false;
    ret->score = score(node, pod, base, ch);
    return;
  }
  /* The reason is the one of the node as it is; whether it is resolvable is
   * whether the pod would fit with no other pod on the node. */
  if (why.cap)
    place_all(node, pod, base, &local, &why);
  ret->unresolvable = !fits_empty(node, pod, empty, &local);
  ch->nshares = 0;
}
