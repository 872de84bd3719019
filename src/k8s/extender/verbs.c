/* SPDX-License-Identifier: Apache-2.0 */
/* The extender verbs (verbs.h): parse with jansson (or a checked scan, for NodeNames), answer
 * by appending to a gs_buf (a filter over 5,000 nodes writes 5,000 names; a JSON tree for that
 * costs more than placement). */
#include "verbs.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "annot.h"
#include "buf.h"
#include "event.h"
#include "jsonbound.h"
#include "log.h"
#include "podspec.h"
#include "sign.h"
#include "size.h"
#include "smap.h"

/* Failing nodes up to which each gets its per-GPU figures (docs/kubernetes.md). */
#define VERB_DETAIL_MAX 64
/* The passes /filter remembers for /bind: at most so many bytes of bitmaps (a pod
 * filtered over 15,000 nodes takes 1.9 KB), and so many node names numbered (past
 * that, e.g. after years of autoscaled nodes, everything is forgotten and numbered
 * again: binds in flight then fail once and kube-scheduler filters again). */
#define PASS_BYTES_MAX (64u << 20)
#define PASS_NAMES_MAX (1u << 20)

/* A pod's last filter: bit i set when the node numbered i passed. */
struct pass {
  struct pass *prev, *next; /* oldest first */
  uint64_t at_ms;
  size_t nwords;
  char uid[POD_UID_MAX];
  uint64_t bits[];
};

struct verbs {
  struct verbs_cfg cfg;
  struct verb_stats stats;
  pthread_mutex_t pass_lock; /* covers what follows */
  struct smap names;         /* node name -> its number + 1 */
  uint32_t nnames;
  struct smap passes; /* pod UID -> struct pass */
  struct pass *oldest, *newest;
  size_t pass_bytes;
  /* The last list of names, in order, with their numbers + 1 (0: none yet): kube-scheduler
   * sends the same list call after call, and a name in its old place then costs a compare
   * instead of a lookup. */
  char *last_buf;
  const char **last;
  uint32_t *last_num;
  size_t nlast;
};

int verbs_new(const struct verbs_cfg *cfg, struct verbs **ret) {
  struct verbs *v = calloc(1, sizeof(*v));
  if (!v)
    return -ENOMEM;
  v->cfg = *cfg;
  pthread_mutex_init(&v->pass_lock, NULL);
  *ret = v;
  return 0;
}

static void pass_drop(struct verbs *v, struct pass *p) {
  if (p->prev)
    p->prev->next = p->next;
  else
    v->oldest = p->next;
  if (p->next)
    p->next->prev = p->prev;
  else
    v->newest = p->prev;
  smap_del(&v->passes, p->uid);
  v->pass_bytes -= sizeof(*p) + p->nwords * sizeof(p->bits[0]);
  free(p);
}

static void last_forget(struct verbs *v) {
  free(v->last_buf);
  free(v->last);
  free(v->last_num);
  v->last_buf = NULL;
  v->last = NULL;
  v->last_num = NULL;
  v->nlast = 0;
}

/* names become the last list; num[j] is the number of the j-th name that passed. */
static void last_keep(struct verbs *v, const char *const *names,
                      const struct place_verdict *verdicts, size_t n, const uint32_t *num) {
  size_t bytes = 0;
  last_forget(v);
  for (size_t i = 0; i < n; i++)
    bytes += strlen(names[i]) + 1;
  v->last_buf = malloc(bytes ? bytes : 1);
  v->last = malloc((n ? n : 1) * sizeof(*v->last));
  v->last_num = calloc(n ? n : 1, sizeof(*v->last_num));
  if (!v->last_buf || !v->last || !v->last_num) {
    last_forget(v);
    return;
  }
  char *p = v->last_buf;
  for (size_t i = 0, j = 0; i < n; i++) {
    size_t len = strlen(names[i]) + 1;
    memcpy(p, names[i], len);
    v->last[i] = p;
    p += len;
    if (verdicts[i].fits)
      v->last_num[i] = num[j++] + 1;
  }
  v->nlast = n;
}

static void pass_forget_all(struct verbs *v) {
  while (v->oldest)
    pass_drop(v, v->oldest);
  smap_clear(&v->names);
  v->nnames = 0;
  last_forget(v);
}

void verbs_free(struct verbs *v) {
  if (!v)
    return;
  pass_forget_all(v);
  smap_clear(&v->passes);
  pthread_mutex_destroy(&v->pass_lock);
  free(v);
}

struct kube_events *verbs_events(struct verbs *v) {
  return v->cfg.events;
}

struct cluster *verbs_cluster(struct verbs *v) {
  return v->cfg.cluster;
}

static void pass_expire(struct verbs *v, uint64_t now_ms) {
  while (v->oldest && v->oldest->at_ms + VERB_PASS_TTL_MS < now_ms)
    pass_drop(v, v->oldest);
}

/* Remembers that /filter passed names[i] (where fits[i]) for pod uid at now_ms. */
static void pass_put(struct verbs *v, const char *uid, const char *const *names,
                     const struct place_verdict *verdicts, size_t n, uint64_t now_ms) {
  uint32_t *num = NULL, top = 0;
  struct pass *p, *old;
  size_t npassed = 0;

  if (!uid || !*uid || strlen(uid) >= POD_UID_MAX)
    return;
  pthread_mutex_lock(&v->pass_lock);
  pass_expire(v, now_ms);
  if ((old = smap_get(&v->passes, uid)))
    pass_drop(v, old);
  for (size_t i = 0; i < n; i++)
    npassed += verdicts[i].fits;
  if (!npassed || !(num = malloc(npassed * sizeof(*num))))
    goto out;
  if (v->nnames + npassed > PASS_NAMES_MAX)
    pass_forget_all(v);
  bool same = n == v->nlast;
  for (size_t i = 0, j = 0; i < n; i++) {
    if (!verdicts[i].fits)
      continue;
    bool here = i < v->nlast && strcmp(v->last[i], names[i]) == 0;
    uintptr_t got = here ? v->last_num[i] : 0;
    if (!got)
      got = (uintptr_t)smap_get(&v->names, names[i]);
    if (!got) {
      if (smap_put(&v->names, names[i], (void *)(uintptr_t)(v->nnames + 1)))
        goto out; /* out of memory: this pod's binds are refused, and say so */
      got = ++v->nnames;
    }
    if (here)
      v->last_num[i] = (uint32_t)got;
    same &= here;
    num[j] = (uint32_t)(got - 1);
    if (num[j] > top)
      top = num[j];
    j++;
  }
  if (!same)
    last_keep(v, names, verdicts, n, num);
  size_t nwords = top / 64 + 1, size = sizeof(*p) + nwords * sizeof(p->bits[0]);
  if (!(p = calloc(1, size)))
    goto out;
  if (smap_put(&v->passes, uid, p)) {
    free(p);
    goto out;
  }
  snprintf(p->uid, sizeof p->uid, "%s", uid);
  p->at_ms = now_ms;
  p->nwords = nwords;
  for (size_t j = 0; j < npassed; j++)
    p->bits[num[j] / 64] |= 1ull << (num[j] % 64);
  p->prev = v->newest;
  if (v->newest)
    v->newest->next = p;
  else
    v->oldest = p;
  v->newest = p;
  v->pass_bytes += size;
  while (v->pass_bytes > PASS_BYTES_MAX && v->oldest != p)
    pass_drop(v, v->oldest);
out:
  pthread_mutex_unlock(&v->pass_lock);
  free(num);
}

/* Whether /filter passed node for pod uid within VERB_PASS_TTL_MS. */
static bool pass_check(struct verbs *v, const char *uid, const char *node, uint64_t now_ms) {
  bool ok = false;
  pthread_mutex_lock(&v->pass_lock);
  pass_expire(v, now_ms);
  struct pass *p = smap_get(&v->passes, uid);
  uintptr_t got = (uintptr_t)smap_get(&v->names, node);
  if (p && got && (got - 1) / 64 < p->nwords)
    ok = p->bits[(got - 1) / 64] >> ((got - 1) % 64) & 1;
  pthread_mutex_unlock(&v->pass_lock);
  return ok;
}

static void count(uint64_t *v) {
  __atomic_fetch_add(v, 1, __ATOMIC_RELAXED);
}

void verbs_stats_read(struct verbs *v, struct verb_stats *ret) {
  const struct verb_stats *st = &v->stats;
  *ret = (struct verb_stats){
      .filter = __atomic_load_n(&st->filter, __ATOMIC_RELAXED),
      .prioritize = __atomic_load_n(&st->prioritize, __ATOMIC_RELAXED),
      .bind = __atomic_load_n(&st->bind, __ATOMIC_RELAXED),
      .bind_errors = __atomic_load_n(&st->bind_errors, __ATOMIC_RELAXED),
      .bind_conflicts_same = __atomic_load_n(&st->bind_conflicts_same, __ATOMIC_RELAXED),
      .not_ready = __atomic_load_n(&st->not_ready, __ATOMIC_RELAXED),
      .bad_requests = __atomic_load_n(&st->bad_requests, __ATOMIC_RELAXED),
      .bind_refused = __atomic_load_n(&st->bind_refused, __ATOMIC_RELAXED),
  };
}

/* ---- answers ------------------------------------------------------------------------------ */

/* The answer's body, or the Error that replaces it when it could not be written whole. */
static int finish(struct gs_buf *o, int status, char **ret_body, size_t *ret_len) {
  static const char oom[] = "{\"Error\":\"gslice-extender is out of memory\"}";
  static const char big[] = "{\"Error\":\"gslice-extender's answer would be over 32 MiB: "
                            "ask about fewer nodes\"}";
  int err = 0;
  *ret_body = gs_buf_steal(o, ret_len, &err);
  if (*ret_body)
    return status;
  *ret_body = strdup(err == -EFBIG ? big : oom);
  *ret_len = *ret_body ? strlen(*ret_body) : 0;
  return 500;
}

static int error_body(int status, const char *msg, char **ret_body, size_t *ret_len) {
  struct gs_buf o = GS_BUF_INIT(VERB_ANSWER_MAX);
  gs_buf_puts(&o, "{\"Error\":");
  gs_buf_json_str(&o, msg);
  gs_buf_putc(&o, '}');
  return finish(&o, status, ret_body, ret_len);
}

/* ---- ExtenderArgs ------------------------------------------------------------------------- */

struct args {
  char *namebuf; /* the fast path's copy of the names */
  json_t *root;
  json_t *pod;
  const char **names;
  json_t **node_objs; /* Nodes mode (not nodeCacheCapable): the objects, to answer with */
  size_t n;
  bool by_name;
  bool plain_names; /* the fast path's: printable ASCII without '"' or '\\' */
  size_t weight;    /* of the trees' budget (tree_take), given back by eval_free */
  char id[2 * K8S_NAME_MAX + 2];
};

static void args_free(struct args *a) {
  free(a->namebuf);
  free(a->names);
  free(a->node_objs);
  json_decref(a->root);
}

/* The fast path of ExtenderArgs: kube-scheduler sends every node's name in NodeNames
 * (5,000 strings), and a JSON tree of them costs more than placing the pod. A scan of
 * the top level checks the text against JSON's grammar (RFC 8259), takes the names in
 * place (node names are DNS names: plain ASCII, no escapes) and gives only the Pod to
 * jansson. Anything it does not expect, malformed or beyond what it checks (deep nesting,
 * long numbers) returns -EAGAIN: the full parser then decides, and says what is wrong, so
 * both paths take and refuse the same texts. */
struct scan {
  const char *p, *end;
};

/* Deeper values are left to the full parser (jansson's own bound is 2048). */
#define SCAN_DEPTH_MAX 64
/* Longer numbers (which jansson may find out of range) are left to the full parser too. */
#define SCAN_NUMBER_MAX 24

static void ws(struct scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
    s->p++;
}

static bool take(struct scan *s, char ch) {
  if (s->p >= s->end || *s->p != ch)
    return false;
  s->p++;
  return true;
}

/* A string of printable ASCII without escapes: [*ret, *ret + *ret_len). */
static bool plain_string(struct scan *s, const char **ret, size_t *ret_len) {
  const char *q;
  if (s->p >= s->end || *s->p != '"')
    return false;
  for (q = s->p + 1; q < s->end && *q != '"'; q++)
    if (*q == '\\' || (unsigned char)*q < 0x20 || (unsigned char)*q >= 0x80)
      return false;
  if (q >= s->end)
    return false;
  *ret = s->p + 1;
  *ret_len = (size_t)(q - s->p - 1);
  s->p = q + 1;
  return true;
}

/* The length of the UTF-8 sequence at p (shortest form, no surrogates), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t n) {
  unsigned char lo = 0x80, hi = 0xbf;
  size_t len;
  if (p[0] >= 0xc2 && p[0] <= 0xdf)
    len = 2;
  else if (p[0] >= 0xe0 && p[0] <= 0xef)
    len = 3, lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
  else if (p[0] >= 0xf0 && p[0] <= 0xf4)
    len = 4, lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
  else
    return 0;
  if (n < len || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < len; i++)
    if (p[i] < 0x80 || p[i] > 0xbf)
      return 0;
  return len;
}

/* Four hex digits after "\u": their value, or -1. */
static long hex4(struct scan *s) {
  long v = 0;
  if (s->end - s->p < 4)
    return -1;
  for (int i = 0; i < 4; i++, s->p++) {
    char ch = *s->p;
    int d = ch >= '0' && ch <= '9'   ? ch - '0'
            : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
            : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                     : -1;
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

/* One escape after the backslash; "\u0000" and unpaired surrogates are refused as jansson
 * refuses them. */
static bool skip_escape(struct scan *s) {
  if (s->p >= s->end)
    return false;
  char ch = *s->p++;
  if (strchr("\"\\/bfnrt", ch))
    return ch != 0;
  if (ch != 'u')
    return false;
  long u = hex4(s);
  if (u <= 0 || (u >= 0xdc00 && u <= 0xdfff))
    return false;
  if (u < 0xd800 || u > 0xdbff)
    return true;
  if (!take(s, '\\') || !take(s, 'u'))
    return false;
  u = hex4(s);
  return u >= 0xdc00 && u <= 0xdfff;
}

static bool skip_string(struct scan *s) {
  if (!take(s, '"'))
    return false;
  while (s->p < s->end) {
    unsigned char ch = (unsigned char)*s->p;
    if (ch == '"') {
      s->p++;
      return true;
    }
    if (ch < 0x20)
      return false;
    if (ch == '\\') {
      s->p++;
      if (!skip_escape(s))
        return false;
    } else if (ch < 0x80) {
      s->p++;
    } else {
      size_t len = utf8_seq((const unsigned char *)s->p, (size_t)(s->end - s->p));
      if (!len)
        return false;
      s->p += len;
    }
  }
  return false;
}

static bool skip_digits(struct scan *s) {
  const char *start = s->p;
  while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
    s->p++;
  return s->p > start;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool skip_number(struct scan *s) {
  const char *start = s->p;
  take(s, '-');
  if (take(s, '0')) {
    if (s->p < s->end && *s->p >= '0' && *s->p <= '9')
      return false;
  } else if (!skip_digits(s)) {
    return false;
  }
  if (take(s, '.') && !skip_digits(s))
    return false;
  if (take(s, 'e') || take(s, 'E')) {
    if (!take(s, '+'))
      take(s, '-');
    if (!skip_digits(s))
      return false;
  }
  return s->p - start <= SCAN_NUMBER_MAX;
}

static bool skip_word(struct scan *s, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
    return false;
  s->p += n;
  return true;
}

static bool skip_value(struct scan *s, int depth);

/* The members of an object or array, after its opening: (string ':')? value, comma-separated. */
static bool skip_members(struct scan *s, int depth, bool object) {
  char close = object ? '}' : ']';
  ws(s);
  if (take(s, close))
    return true;
  for (;;) {
    ws(s);
    if (object) {
      if (!skip_string(s))
        return false;
      ws(s);
      if (!take(s, ':'))
        return false;
    }
    if (!skip_value(s, depth + 1))
      return false;
    ws(s);
    if (take(s, close))
      return true;
    if (!take(s, ','))
      return false;
  }
}

/* Skips one JSON value, checked against the grammar; false when it is not one (or is too
 * deep to check here). */
static bool skip_value(struct scan *s, int depth) {
  ws(s);
  if (s->p >= s->end || depth > SCAN_DEPTH_MAX)
    return false;
  switch (*s->p) {
  case '"': return skip_string(s);
  case '{': s->p++; return skip_members(s, depth, true);
  case '[': s->p++; return skip_members(s, depth, false);
  case 't': return skip_word(s, "true");
  case 'f': return skip_word(s, "false");
  case 'n': return skip_word(s, "null");
  default: return skip_number(s);
  }
}

struct spans {
  const char *pod, *pod_end, *names, *names_end;
};

/* The top-level object: where its Pod and NodeNames are. Whole Nodes, or a key twice (in any
 * case), are the full parser's. */
static int args_scan(struct scan *s, struct spans *ret) {
  struct spans sp = {0};
  ws(s);
  if (!take(s, '{'))
    return -EAGAIN;
  ws(s);
  for (bool first = true; first || !take(s, '}'); first = false) {
    const char *key, *v;
    size_t klen;
    if (!first && !take(s, ','))
      return -EAGAIN;
    ws(s);
    if (!plain_string(s, &key, &klen))
      return -EAGAIN;
    ws(s);
    if (!take(s, ':'))
      return -EAGAIN;
    ws(s);
    v = s->p;
    if (!skip_value(s, 1))
      return -EAGAIN;
    if (klen == 3 && strncasecmp(key, "pod", 3) == 0) {
      if (sp.pod)
        return -EAGAIN;
      sp.pod = v;
      sp.pod_end = s->p;
    } else if (klen == 9 && strncasecmp(key, "nodenames", 9) == 0) {
      if (sp.names)
        return -EAGAIN;
      sp.names = v;
      sp.names_end = s->p;
    } else if (klen == 5 && strncasecmp(key, "nodes", 5) == 0) {
      if (s->p - v != 4 || strncmp(v, "null", 4) != 0)
        return -EAGAIN;
    }
    ws(s);
    if (first && take(s, '}'))
      break;
  }
  ws(s);
  if (s->p != s->end || !sp.pod || !sp.names || *sp.names != '[')
    return -EAGAIN;
  *ret = sp;
  return 0;
}

/* The names of a NodeNames array (already checked as JSON), each copied behind a NUL of
 * its own. */
static int args_take_names(const char *names, const char *names_end, struct args *a) {
  size_t n = 0;
  for (const char *q = names; q < names_end; q++)
    n += *q == '"';
  n /= 2;
  if (n > VERB_NODES_MAX)
    return -E2BIG;
  a->names = calloc(n ? n : 1, sizeof(*a->names));
  a->namebuf = malloc((size_t)(names_end - names) + 1);
  if (!a->names || !a->namebuf)
    return -ENOMEM;
  struct scan ns = {names + 1, names_end};
  char *out = a->namebuf;
  ws(&ns);
  if (take(&ns, ']'))
    return 0;
  for (;;) {
    const char *str;
    size_t slen;
    ws(&ns);
    if (!plain_string(&ns, &str, &slen) || a->n >= n)
      return -EAGAIN;
    memcpy(out, str, slen);
    out[slen] = 0;
    a->names[a->n++] = out;
    out += slen + 1;
    ws(&ns);
    if (take(&ns, ']'))
      return 0;
    if (!take(&ns, ','))
      return -EAGAIN;
  }
}

static int args_fast(const char *body, size_t len, struct args *a) {
  struct scan s = {body, body + len};
  struct spans sp;
  int rc = args_scan(&s, &sp);
  if (!rc)
    rc = args_take_names(sp.names, sp.names_end, a);
  if (rc)
    return rc;
  a->root = json_loadb(sp.pod, (size_t)(sp.pod_end - sp.pod), 0, NULL);
  if (!json_is_object(a->root))
    return -EAGAIN;
  a->pod = a->root;
  a->by_name = true;
  a->plain_names = true;
  return 0;
}

/* What jansson may be given to build a tree of (jsonbound.h), counted before it is: a tree
 * costs far more than its text (230 bytes for the 3 of "{},"), and 8 MiB of empty objects
 * would take 610 MB. The largest real requests (measured, docs/kubernetes.md "Limits"):
 * 8 MiB of whole Nodes (not nodeCacheCapable: 421 to 503 Nodes of a GPU node pool with their
 * labels, conditions, images and managedFields) hold up to 509,053 values, 175,050 objects
 * and arrays and 12 levels (a tree of 61-66 MB); NodeNames of 15,000 nodes 15,026 values (the
 * names are taken in place, only the Pod is a tree); the largest Pod gslice-webhook admits
 * 131,072 values. So the bytes stay the bound of every real request (with 2x and 1.5x to
 * spare), and a flood of empty objects costs about what 8 MiB of real Nodes do (60 MB). */
#define ARGS_JSON_VALUES_MAX 1048576u
#define ARGS_JSON_CONTAINERS_MAX 262144u
#define ARGS_JSON_DEPTH_MAX 64u
/* An ExtenderBindingArgs is four names (9 values in one object). */
#define BIND_JSON_VALUES_MAX 1024u
#define BIND_JSON_CONTAINERS_MAX 64u
#define BIND_JSON_DEPTH_MAX 8u

/* 0 when text is within the bounds; -E2BIG with err naming the bound passed and the bounds
 * (what is the JSON text of a "what"). */
static int json_bounded(const char *what, const char *text, size_t len, size_t values,
                        size_t containers, size_t depth, struct jsonbound *ret_seen, char *err,
                        size_t errlen) {
  const struct jsonbound max = {.values = values, .containers = containers, .depth = depth};
  char why[160];
  if (!jsonbound_check(text, len, &max, ret_seen, why, sizeof why))
    return 0;
  snprintf(err, errlen,
           "%s: %s; gslice-extender reads at most %zu JSON values, %zu objects and arrays "
           "and %zu levels of nesting in one (8 MiB of whole Nodes, or NodeNames of %u and a "
           "Pod, fit within)",
           what, why, values, containers, depth, VERB_NODES_MAX);
  return -E2BIG;
}

/* The trees of ExtenderArgs held at once, over all calls: each call's bound alone leaves
 * 64 MiB of bodies (a thread each) to be trees of 120 MB apiece. A call weighs what its tree
 * may cost by its counts (jansson 2.14: some 64 bytes a value, 192 more an object or array;
 * 8 MiB of real Nodes weigh 66 MB, NodeNames of 15,000 nodes 1 MB) and waits, up to
 * TREE_WAIT_MS, while the calls in flight and it would pass TREE_BUDGET; a call alone always
 * goes. Calls over TREE_SMALL share TREE_BUDGET less TREE_SMALL_ROOM: however many large ones
 * wait, the small ones (kube-scheduler's NodeNames with a Pod: 1-15 MB) keep that room, and
 * kube-scheduler makes one call at a time (one scheduling cycle). */
#define TREE_BUDGET ((size_t)160 << 20)
#define TREE_SMALL_ROOM ((size_t)32 << 20)
#define TREE_SMALL ((size_t)16 << 20)
#define TREE_WAIT_MS 5000
static struct {
  pthread_mutex_t mu;
  pthread_cond_t freed;
  size_t held;
} trees = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static size_t tree_weight(const struct jsonbound *n) {
  return n->values * 64 + n->containers * 192;
}

/* Takes w of the budget: 0, or -EBUSY with err saying so after TREE_WAIT_MS. */
static int tree_take(size_t w, char *err, size_t errlen) {
  struct timespec until;
  int rc = 0;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += TREE_WAIT_MS / 1000;
  pthread_mutex_lock(&trees.mu);
  size_t room = w > TREE_SMALL ? TREE_BUDGET - TREE_SMALL_ROOM : TREE_BUDGET;
  while (rc == 0 && trees.held && trees.held + w > room)
    rc = pthread_cond_timedwait(&trees.freed, &trees.mu, &until);
  if (rc == 0)
    trees.held += w;
  size_t held = trees.held;
  pthread_mutex_unlock(&trees.mu);
  if (rc == 0)
    return 0;
  snprintf(err, errlen,
           "gslice-extender is reading %zu MiB of other requests now and this one would take "
           "%zu MiB more, over the %zu MiB it reads at once (waited %d s); kube-scheduler "
           "retries",
           held >> 20, w >> 20, room >> 20, TREE_WAIT_MS / 1000);
  return -EBUSY;
}

static void tree_give(size_t w) {
  if (!w)
    return;
  pthread_mutex_lock(&trees.mu);
  trees.held -= w;
  pthread_cond_broadcast(&trees.freed);
  pthread_mutex_unlock(&trees.mu);
}

/* The full parser's NodeNames: a list of strings. */
static int args_full_names(const json_t *names, struct args *a, char *err, size_t errlen) {
  a->by_name = true;
  a->n = json_array_size(names);
  a->names = calloc(a->n ? a->n : 1, sizeof(*a->names));
  if (!a->names)
    return -ENOMEM;
  for (size_t i = 0; i < a->n; i++) {
    a->names[i] = json_string_value(json_array_get(names, i));
    if (!a->names[i]) {
      snprintf(err, errlen, "NodeNames[%zu] is not a string", i);
      return -EINVAL;
    }
  }
  return 0;
}

/* The full parser's Nodes.items: whole Node objects (not nodeCacheCapable). */
static int args_full_nodes(const json_t *items, struct args *a, char *err, size_t errlen) {
  a->n = json_array_size(items);
  a->names = calloc(a->n ? a->n : 1, sizeof(*a->names));
  a->node_objs = calloc(a->n ? a->n : 1, sizeof(*a->node_objs));
  if (!a->names || !a->node_objs)
    return -ENOMEM;
  for (size_t i = 0; i < a->n; i++) {
    a->node_objs[i] = json_array_get(items, i);
    a->names[i] = kube_meta_str(a->node_objs[i], "name");
    if (!a->names[i]) {
      snprintf(err, errlen, "Nodes.items[%zu] has no metadata.name", i);
      return -EINVAL;
    }
  }
  return 0;
}

/* ExtenderArgs through jansson, with what is wrong in words. */
static int args_full(const char *body, size_t len, struct args *a, char *err, size_t errlen) {
  json_error_t je;
  a->root = json_loadb(body, len, 0, &je);
  if (!a->root || !json_is_object(a->root)) {
    snprintf(err, errlen, "ExtenderArgs is not a JSON object: %s",
             a->root ? "another JSON value" : je.text);
    return -EINVAL;
  }
  a->pod = kube_json_get(a->root, "Pod");
  if (!json_is_object(a->pod)) {
    snprintf(err, errlen, "ExtenderArgs has no Pod object");
    return -EINVAL;
  }
  json_t *names = kube_json_get(a->root, "NodeNames");
  json_t *nodes = kube_json_get(a->root, "Nodes");
  json_t *items = json_is_object(nodes) ? kube_json_get(nodes, "Items") : NULL;
  if (json_array_size(names) > VERB_NODES_MAX || json_array_size(items) > VERB_NODES_MAX) {
    snprintf(err, errlen, "%s has over %u nodes", json_is_array(names) ? "NodeNames" : "Nodes",
             VERB_NODES_MAX);
    return -E2BIG;
  }
  if (json_is_array(names))
    return args_full_names(names, a, err, errlen);
  if (!json_is_array(items) && !json_is_null(names) && names) {
    snprintf(err, errlen, "NodeNames must be a list of node names");
    return -EINVAL;
  }
  if (!json_is_array(items)) {
    snprintf(err, errlen,
             "ExtenderArgs has neither NodeNames (nodeCacheCapable: true) nor "
             "Nodes.items");
    return -EINVAL;
  }
  return args_full_nodes(items, a, err, errlen);
}

static int args_read(const char *body, size_t len, struct args *a, char *err, size_t errlen) {
  struct jsonbound seen;
  int rc;

  memset(a, 0, sizeof(*a));
  if ((rc = json_bounded("ExtenderArgs", body, len, ARGS_JSON_VALUES_MAX, ARGS_JSON_CONTAINERS_MAX,
                         ARGS_JSON_DEPTH_MAX, &seen, err, errlen)) ||
      (rc = tree_take(tree_weight(&seen), err, errlen)))
    return rc;
  a->weight = tree_weight(&seen);
  rc = args_fast(body, len, a);
  if (rc == -E2BIG)
    snprintf(err, errlen, "NodeNames has over %u names", VERB_NODES_MAX);
  else if (rc == -ENOMEM)
    snprintf(err, errlen, "out of memory");
  if (rc == -EAGAIN) {
    size_t w = a->weight;
    args_free(a);
    memset(a, 0, sizeof(*a));
    a->weight = w;
    rc = args_full(body, len, a, err, errlen);
  }
  if (a->pod) {
    const char *ns = kube_meta_str(a->pod, "namespace"), *name = kube_meta_str(a->pod, "name");
    snprintf(a->id, sizeof a->id, "%s/%s", ns ? ns : "default", name ? name : "?");
  }
  return rc;
}

/* ---- /filter and /prioritize ----------------------------------------------------------------- */

enum verb { FILTER, PRIORITIZE };

/* One call of /filter or /prioritize: what it asked, and what placement said. */
struct eval {
  enum verb verb;
  struct args a;
  struct place_pod req;
  int req_rc; /* cluster_request's: 0, > 0 asks for no gslice GPU, < 0 malformed */
  char err[PLACE_REASON_MAX];
  struct place_verdict *v;
  const void **nodes;
  int *scores;
};

static void eval_free(struct eval *e) {
  free(e->v);
  free(e->nodes);
  free(e->scores);
  podspec_request_free(&e->req);
  args_free(&e->a);
  tree_give(e->a.weight);
}

/* The verdict of each node asked about (when the pod asks for gslice GPUs): from the memo
 * for a /prioritize right after its /filter, else placed now. */
static int eval_decide(struct verbs *vs, struct eval *e, uint64_t now_ms) {
  struct cluster *c = vs->cfg.cluster;
  size_t n = e->a.n ? e->a.n : 1;
  const char *uid = kube_meta_str(e->a.pod, "uid");

  e->v = malloc(n * sizeof(*e->v));
  e->nodes = malloc(n * sizeof(*e->nodes));
  e->scores = malloc(n * sizeof(*e->scores));
  if (!e->v || !e->nodes || !e->scores)
    return -ENOMEM;
  if (e->verb == PRIORITIZE && cluster_memo_get(c, uid, e->a.names, e->a.n, now_ms, e->scores)) {
    for (size_t i = 0; i < e->a.n; i++)
      e->v[i] = (struct place_verdict){.fits = true, .score = e->scores[i]};
    return 0;
  }
  cluster_eval(c, &e->req, e->a.names, e->a.n, now_ms, e->v, e->nodes);
  if (e->verb == FILTER) {
    cluster_memo_put(c, uid, e->nodes, e->v, e->a.n, now_ms);
    pass_put(vs, uid, e->a.names, e->v, e->a.n, now_ms);
  }
  return 0;
}

/* Whether node i passes: a pod asking for no gslice GPU passes everywhere, a malformed one
 * nowhere. */
static bool eval_passes(const struct eval *e, size_t i) {
  return e->req_rc > 0 || (e->req_rc == 0 && e->v[i].fits);
}

/* Node i's name as a JSON string: the fast path's need no escaping (and are most of what a
 * filter writes), the full parser's are escaped. */
static void put_name(struct gs_buf *o, const struct args *a, size_t i) {
  if (!a->plain_names) {
    gs_buf_json_str(o, a->names[i]);
    return;
  }
  gs_buf_putc(o, '"');
  gs_buf_puts(o, a->names[i]);
  gs_buf_putc(o, '"');
}

/* HostPriorityList: every node asked about, 0 where the pod does not fit. */
static void answer_prioritize(const struct eval *e, struct gs_buf *o) {
  gs_buf_putc(o, '[');
  for (size_t i = 0; i < e->a.n; i++) {
    gs_buf_puts(o, i ? ",{\"Host\":" : "{\"Host\":");
    put_name(o, &e->a, i);
    /* 0..10 whatever placement says: kube-scheduler refuses the whole list for one score
     * outside (and a hostile pod must not make one). */
    int score = e->req_rc == 0 && e->v[i].fits ? e->v[i].score : 0;
    gs_buf_printf(o, ",\"Score\":%d}", score < 0 ? 0 : score > 10 ? 10 : score);
  }
  gs_buf_putc(o, ']');
}

/* ExtenderFilterResult's NodeNames or Nodes: the nodes that pass. */
static void answer_passed(const struct eval *e, struct gs_buf *o) {
  bool first = true;
  if (e->a.by_name) {
    gs_buf_puts(o, "{\"NodeNames\":[");
    for (size_t i = 0; i < e->a.n; i++) {
      if (!eval_passes(e, i))
        continue;
      if (!first)
        gs_buf_putc(o, ',');
      put_name(o, &e->a, i);
      first = false;
    }
    gs_buf_puts(o, "],\"Nodes\":null");
    return;
  }
  gs_buf_puts(o, "{\"NodeNames\":null,\"Nodes\":{\"apiVersion\":\"v1\",\"kind\":\"NodeList\","
                 "\"metadata\":{},\"items\":[");
  for (size_t i = 0; i < e->a.n; i++) {
    if (!eval_passes(e, i))
      continue;
    char *t = json_dumps(e->a.node_objs[i], JSON_COMPACT);
    if (!first)
      gs_buf_putc(o, ',');
    if (t)
      gs_buf_puts(o, t);
    else if (!o->err)
      o->err = -ENOMEM;
    free(t);
    first = false;
  }
  gs_buf_puts(o, "]}");
}

/* Why node i fails, as a JSON string. Brief, with one container, every node short of room
 * says the same: written once into *same and its JSON text copied. */
static void answer_reason(struct verbs *vs, const struct eval *e, size_t i, bool brief,
                          uint64_t now_ms, struct gs_buf *same, struct gs_buf *o) {
  char msg[PLACE_REASON_MAX + 2 * K8S_NAME_MAX + 32] = "gslice: ";
  const size_t off = sizeof "gslice: " - 1;
  if (e->req_rc < 0) {
    snprintf(msg, sizeof msg, "gslice: pod %s: %s", e->a.id, e->err);
    gs_buf_json_str(o, msg);
    return;
  }
  bool once = brief && e->req.ncontainers == 1 && e->v[i].cause == PLACE_NO_ROOM;
  if (once && same->len) {
    gs_buf_add(o, same->p, same->len);
    return;
  }
  cluster_explain(vs->cfg.cluster, &e->req, e->nodes[i], now_ms, brief, msg + off,
                  sizeof msg - off);
  if (once) {
    gs_buf_json_str(same, msg);
    gs_buf_add(o, same->p, same->len);
  } else {
    gs_buf_json_str(o, msg);
  }
}

/* ExtenderFilterResult: the nodes that pass, then FailedNodes (room taken by other pods:
 * preemption may help) and FailedAndUnresolvableNodes (it cannot fit there at all). Reasons
 * are written only for the nodes that fail, after the verdicts: per-GPU figures while few
 * fail, past that the same words for every node short of room, which kube-scheduler's
 * message counts as one reason. */
static void answer_filter(struct verbs *vs, const struct eval *e, uint64_t now_ms,
                          struct gs_buf *o) {
  struct gs_buf same = GS_BUF_INIT(0);
  size_t nfailed = 0;

  answer_passed(e, o);
  for (size_t i = 0; e->req_rc == 0 && i < e->a.n; i++)
    nfailed += !e->v[i].fits;
  bool brief = nfailed > VERB_DETAIL_MAX;
  for (int unresolvable = 0; unresolvable < 2; unresolvable++) {
    bool first = true;
    gs_buf_puts(o, unresolvable ? "},\"FailedAndUnresolvableNodes\":{" : ",\"FailedNodes\":{");
    for (size_t i = 0; i < e->a.n; i++) {
      if (e->req_rc > 0 || (e->req_rc < 0 && !unresolvable) ||
          (e->req_rc == 0 && (e->v[i].fits || e->v[i].unresolvable != unresolvable)))
        continue;
      if (!first)
        gs_buf_putc(o, ',');
      put_name(o, &e->a, i);
      gs_buf_putc(o, ':');
      answer_reason(vs, e, i, brief, now_ms, &same, o);
      first = false;
    }
  }
  gs_buf_puts(o, "},\"Error\":\"\"}");
  if (same.err && !o->err)
    o->err = same.err;
  gs_buf_free(&same);
}

static int eval_verb(enum verb verb, struct verbs *vs, const char *body, size_t len,
                     uint64_t now_ms, char **ret_body, size_t *ret_len) {
  struct verb_stats *st = &vs->stats;
  struct eval e = {.verb = verb};
  const char *what = verb == FILTER ? "filter" : "prioritize";
  int rc;

  count(verb == FILTER ? &st->filter : &st->prioritize);
  if (!cluster_synced(vs->cfg.cluster)) {
    count(&st->not_ready);
    return error_body(503,
                      "gslice-extender has not read the cluster's nodes and pods yet; "
                      "kube-scheduler retries",
                      ret_body, ret_len);
  }
  rc = args_read(body, len, &e.a, e.err, sizeof e.err);
  if (rc) {
    if (rc != -EBUSY)
      count(&st->bad_requests);
    if (vs->cfg.log)
      gs_log(GS_LOG_WARNING, "%s: %s", what, e.err);
    eval_free(&e);
    return error_body(rc == -ENOMEM ? 500 : rc == -EBUSY ? 503 : 400, e.err, ret_body, ret_len);
  }
  e.req_rc = cluster_request(vs->cfg.cluster, e.a.pod, &e.req, e.err, sizeof e.err);
  if (e.req_rc < 0 && vs->cfg.log)
    gs_log(GS_LOG_WARNING, "pod %s: %s", e.a.id, e.err);
  if (e.req_rc == 0 && eval_decide(vs, &e, now_ms)) {
    eval_free(&e);
    return error_body(500, "out of memory", ret_body, ret_len);
  }
  /* Room for a typical answer at once: a name and a reason per node. */
  struct gs_buf o = GS_BUF_INIT(VERB_ANSWER_MAX);
  gs_buf_reserve(&o, 256 + e.a.n * (verb == FILTER ? 320 : 48));
  gs_buf_clear(&o); /* a failed reservation is tried again as the answer grows */
  if (verb == PRIORITIZE)
    answer_prioritize(&e, &o);
  else
    answer_filter(vs, &e, now_ms, &o);
  eval_free(&e);
  return finish(&o, 200, ret_body, ret_len);
}

int verb_filter(struct verbs *v, const char *body, size_t len, uint64_t now_ms, char **ret_body,
                size_t *ret_len) {
  return eval_verb(FILTER, v, body, len, now_ms, ret_body, ret_len);
}

int verb_prioritize(struct verbs *v, const char *body, size_t len, uint64_t now_ms, char **ret_body,
                    size_t *ret_len) {
  return eval_verb(PRIORITIZE, v, body, len, now_ms, ret_body, ret_len);
}

/* ---- /bind ------------------------------------------------------------------------------------
 */

static const char *arg_str(const json_t *root, const char *key) {
  return json_string_value(kube_json_get(root, key));
}

/* Whether the pod as the API server has it now is bound to node with assignment a
 * (then a 409 on our Binding means an earlier try of ours got through). */
static bool bound_as(struct kube *k, const char *path, const char *node,
                     const struct k8s_assigned *a, char *err, size_t errlen) {
  json_t *pod = NULL;
  struct k8s_assigned got;
  bool same = false;
  const char *text, *on;

  if (kube_get(k, path, &pod, err, errlen))
    return false;
  on = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
  text = kube_annotation(pod, K8S_ANNOT_ASSIGNED);
  if (on && strcmp(on, node) == 0 && text && !k8s_assigned_decode(text, &got, NULL, 0)) {
    same = k8s_assigned_equal(&got, a);
    k8s_assigned_free(&got);
  }
  if (!same)
    snprintf(err, errlen, "the pod is already bound to node %s%s", on ? on : "?",
             on && strcmp(on, node) == 0 ? " with another GPU assignment" : "");
  json_decref(pod);
  return same;
}

/* Whether the node's labels meet the pod's spec.nodeSelector (the one node-affinity rule
 * /bind checks itself; required affinity terms and taints are kube-scheduler's, and a node
 * it did not pass to /filter is refused anyway). */
static bool selector_met(struct kube *k, const json_t *pod, const char *node, char *err,
                         size_t errlen) {
  const json_t *sel = json_object_get(json_object_get(pod, "spec"), "nodeSelector");
  json_t *obj = NULL, *val;
  const char *key;
  char path[K8S_NAME_MAX + 32];
  bool ok = true;

  if (!json_is_object(sel) || !json_object_size(sel))
    return true;
  snprintf(path, sizeof path, "/api/v1/nodes/%s", node);
  if (kube_get(k, path, &obj, err, errlen))
    return false;
  const json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
  json_object_foreach((json_t *)sel, key, val) {
    const char *want = json_string_value(val);
    const char *have = json_string_value(json_object_get(labels, key));
    if (!want || !have || strcmp(want, have) != 0) {
      snprintf(err, errlen, "node %s does not have the label %s=%s its nodeSelector asks for", node,
               key, want ? want : "?");
      ok = false;
      break;
    }
  }
  json_decref(obj);
  return ok;
}

/* A DNS subdomain as Kubernetes names pods, namespaces and nodes: nothing that could
 * change the API path it is put in. */
static bool name_ok(const char *s) {
  if (!*s || strlen(s) >= K8S_NAME_MAX)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
      return false;
  return true;
}

static bool scheduler_ours(const struct verbs *v, const char *name) {
  if (!v->cfg.nscheduler_names)
    return strcmp(name, "default-scheduler") == 0;
  for (size_t i = 0; i < v->cfg.nscheduler_names; i++)
    if (strcmp(name, v->cfg.scheduler_names[i]) == 0)
      return true;
  return false;
}

/* One /bind: what it asked, and the pod as the API server has it. */
struct bind {
  json_t *root;
  const char *name, *ns, *uid, *node;
  char path[3 * K8S_NAME_MAX];
  json_t *pod;
  struct pod_id id;
  struct place_pod req;
  struct k8s_assigned a;
  char *text; /* the assignment's annotation */
};

static void bind_free(struct bind *b) {
  k8s_assigned_free(&b->a);
  podspec_request_free(&b->req);
  free(b->text);
  json_decref(b->pod);
  json_decref(b->root);
}

/* ExtenderBindingArgs: four names, each a Kubernetes name. -EINVAL when not. */
static int bind_decode(const char *body, size_t len, struct bind *b, char *err, size_t errlen) {
  json_error_t je;
  if (len > VERB_BIND_BODY_MAX) {
    snprintf(err, errlen, "ExtenderBindingArgs over %u bytes", VERB_BIND_BODY_MAX);
    return -EINVAL;
  }
  if (json_bounded("ExtenderBindingArgs", body, len, BIND_JSON_VALUES_MAX, BIND_JSON_CONTAINERS_MAX,
                   BIND_JSON_DEPTH_MAX, NULL, err, errlen))
    return -EINVAL;
  b->root = json_loadb(body, len, 0, &je);
  if (!b->root || !json_is_object(b->root)) {
    snprintf(err, errlen, "ExtenderBindingArgs is not a JSON object%s%s", b->root ? "" : ": ",
             b->root ? "" : je.text);
    return -EINVAL;
  }
  b->name = arg_str(b->root, "PodName");
  b->ns = arg_str(b->root, "PodNamespace");
  b->uid = arg_str(b->root, "PodUID");
  b->node = arg_str(b->root, "Node");
  if (!b->name || !*b->name || !b->ns || !*b->ns || !b->uid || !*b->uid || !b->node || !*b->node ||
      strlen(b->uid) >= POD_UID_MAX) {
    snprintf(err, errlen, "ExtenderBindingArgs needs PodName, PodNamespace, PodUID and Node");
    return -EINVAL;
  }
  if (!name_ok(b->name) || !name_ok(b->ns) || !name_ok(b->node)) {
    snprintf(err, errlen,
             "ExtenderBindingArgs: PodName, PodNamespace and Node must be "
             "Kubernetes names (a-z, 0-9, '-', '.')");
    return -EINVAL;
  }
  snprintf(b->path, sizeof b->path, "/api/v1/namespaces/%s/pods/%s", b->ns, b->name);
  return 0;
}

/* Whoever calls, the pod is judged as the API server has it now (a caller's word is only
 * the names): the UID kube-scheduler saw, a scheduler of ours, and a node our /filter passed
 * for that UID moments ago. -EPERM: not a bind kube-scheduler can have asked for. */
static int bind_judge(struct verbs *v, struct bind *b, uint64_t now_ms, char *err, size_t errlen) {
  struct kube *k = v->cfg.kube;
  int rc;

  if (!k) {
    snprintf(err, errlen, "this gslice-extender has no API server to bind with");
    return -ENOTCONN;
  }
  if ((rc = kube_get(k, b->path, &b->pod, err, errlen)) ||
      (rc = podspec_id(b->pod, &b->id, err, errlen)))
    return rc;
  if (strcmp(b->uid, b->id.uid) != 0) {
    snprintf(err, errlen, "pod %s/%s has uid %s, not %s: it was replaced", b->ns, b->name,
             b->id.uid, b->uid);
    return -EPERM;
  }
  const char *sched =
      json_string_value(json_object_get(json_object_get(b->pod, "spec"), "schedulerName"));
  if (!sched || !*sched)
    sched = "default-scheduler";
  if (!scheduler_ours(v, sched)) {
    snprintf(
        err, errlen,
        "pod %s/%s is for scheduler %s, not one this gslice-extender serves (--scheduler-name)",
        b->ns, b->name, sched);
    return -EPERM;
  }
  if (b->id.node[0] && strcmp(b->id.node, b->node) != 0) {
    snprintf(err, errlen, "the pod is already bound to node %s", b->id.node);
    return -EEXIST;
  }
  if (!pass_check(v, b->uid, b->node, now_ms)) {
    snprintf(err, errlen,
             "node %s did not pass gslice-extender's /filter for pod %s/%s (uid %s) in the last "
             "%u s: not a bind kube-scheduler asked for",
             b->node, b->ns, b->name, b->uid, VERB_PASS_TTL_MS / 1000);
    return -EPERM;
  }
  if (!selector_met(k, b->pod, b->node, err, errlen))
    return -EPERM;
  return 0;
}

/* The Binding, with the assignment signed for this pod's uid and node over the annotation's
 * exact bytes (sign.h): what gslice-node and the cluster view check before they honour it.
 * The API server copies a Binding's annotations onto the pod in the same write that sets
 * spec.nodeName, so no pod is ever bound without its GPUs. */
static json_t *binding_new(struct cluster *c, const struct bind *b, char *err, size_t errlen) {
  char sig[K8S_SIG_MAX] = "";
  if (cluster_keys(c) &&
      k8s_assigned_sign(cluster_keys(c), b->uid, b->node, b->text, sig, sizeof sig)) {
    snprintf(err, errlen, "cannot sign the assignment");
    return NULL;
  }
  json_t *binding = json_pack(
      "{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s, s:s, s:s}}", "apiVersion", "v1", "kind",
      "Binding", "metadata", "name", b->name, "namespace", b->ns, "uid", b->uid, "annotations",
      K8S_ANNOT_ASSIGNED, b->text, "target", "apiVersion", "v1", "kind", "Node", "name", b->node);
  if (!binding ||
      (sig[0] &&
       json_object_set_new(json_object_get(json_object_get(binding, "metadata"), "annotations"),
                           K8S_ANNOT_ASSIGNED_SIG, json_string(sig)))) {
    json_decref(binding);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  return binding;
}

/* Reserves the pod's GPUs on the node and posts the Binding; on success they stay held as
 * assumed until the watch shows the pod bound. Under the node's bind lock. */
static int bind_commit(struct verbs *v, struct bind *b, uint64_t now_ms, char *err, size_t errlen) {
  struct cluster *c = v->cfg.cluster;
  char bpath[sizeof b->path + 16];
  json_t *binding;
  int rc;

  if ((rc = cluster_request(c, b->pod, &b->req, err, errlen))) {
    if (rc > 0)
      snprintf(err, errlen, "pod %s/%s asks for no %s: nothing for gslice to bind", b->ns, b->name,
               K8S_RES_GPU);
    return rc > 0 ? -ENODATA : rc;
  }
  if ((rc = cluster_reserve(c, &b->id, &b->req, b->node, now_ms, &b->a, err, errlen)))
    return rc;
  if ((rc = k8s_assigned_encode(&b->a, &b->text))) {
    snprintf(err, errlen, "cannot encode the assignment");
  } else if (!(binding = binding_new(c, b, err, errlen))) {
    rc = -ENOMEM;
  } else {
    snprintf(bpath, sizeof bpath, "%s/binding", b->path);
    rc = kube_post(v->cfg.kube, bpath, binding, NULL, err, errlen);
    json_decref(binding);
    if (rc == -EEXIST && bound_as(v->cfg.kube, b->path, b->node, &b->a, err, errlen)) {
      count(&v->stats.bind_conflicts_same);
      rc = 0; /* an earlier try of this binding got through */
    }
  }
  if (rc)
    cluster_unreserve(c, &b->id);
  return rc;
}

/* "assigned to node N: container c GPU 0 (GPU-...) 4GiB 30% (limit 50%); ...", cut to fit. */
static void assigned_message(const struct bind *b, char *out, size_t len) {
  size_t at = 0;
  int l = snprintf(out, len, "assigned to node %s:", b->node);
  at = l > 0 && (size_t)l < len ? (size_t)l : len - 1;
  for (uint32_t i = 0; i < b->a.ncontainers && at + 1 < len; i++) {
    const struct k8s_assigned_container *ac = &b->a.containers[i];
    l = snprintf(out + at, len - at, "%s %scontainer %s", i ? ";" : "", ac->init ? "init " : "",
                 ac->name);
    at += l > 0 && (size_t)l < len - at ? (size_t)l : len - at - 1;
    for (uint32_t j = 0; j < ac->ngpus && at + 1 < len; j++) {
      char mem[32];
      gs_size_format(ac->gpus[j].memory, mem, sizeof mem);
      l = snprintf(out + at, len - at, "%s GPU %u (%s) %s %u%%", j ? "," : "", ac->gpus[j].index,
                   ac->gpus[j].uuid, mem, ac->gpus[j].compute);
      at += l > 0 && (size_t)l < len - at ? (size_t)l : len - at - 1;
    }
    if (at + 1 < len) {
      l = snprintf(out + at, len - at, " (limit %u%%)", ac->compute_limit);
      at += l > 0 && (size_t)l < len - at ? (size_t)l : len - at - 1;
    }
  }
}

static void bound_event(struct verbs *v, const struct bind *b) {
  char msg[KUBE_EVENT_MESSAGE_MAX];
  if (!v->cfg.events)
    return;
  assigned_message(b, msg, sizeof msg);
  kube_events_add(v->cfg.events, "Normal", VERB_EVENT_ASSIGNED, b->ns, b->name, b->uid, msg,
                  time(NULL));
}

int verb_bind(struct verbs *v, const char *body, size_t len, uint64_t now_ms, char **ret_body,
              size_t *ret_len) {
  struct verb_stats *st = &v->stats;
  struct bind b = {0};
  char err[PLACE_REASON_MAX + 256] = "";
  int rc, status = 200;

  count(&st->bind);
  rc = bind_decode(body, len, &b, err, sizeof err);
  if (rc) {
    status = 400;
  } else if ((rc = bind_judge(v, &b, now_ms, err, sizeof err)) == -EPERM) {
    status = 403;
    count(&st->bind_refused);
  } else if (!rc) {
    void *lock = cluster_node_lock(v->cfg.cluster, b.node);
    if (!lock) {
      snprintf(err, sizeof err, "node %s is not known to gslice-extender", b.node);
      rc = -ENOENT;
    } else {
      rc = bind_commit(v, &b, now_ms, err, sizeof err);
      cluster_node_unlock(lock);
    }
  }
  /* The outcome is rc's: a step that failed without words still fails. */
  if (rc) {
    if (!err[0])
      snprintf(err, sizeof err, "cannot bind: %s", strerror(-rc));
    count(&st->bind_errors);
    if (v->cfg.log)
      gs_log(GS_LOG_WARNING, "bind %s/%s: %s", b.ns ? b.ns : "?", b.name ? b.name : "?", err);
  } else {
    if (v->cfg.log)
      gs_log(GS_LOG_INFO, "bound %s/%s to %s: %s", b.ns, b.name, b.node, b.text);
    bound_event(v, &b);
  }
  bind_free(&b);
  return error_body(status, rc ? err : "", ret_body, ret_len);
}
