/* The extender verbs (verbs.h): parse with jansson, answer with a plain writer (a filter
 * over 5,000 nodes writes 5,000 names; a JSON tree for that costs more than placement). */
#include "verbs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "annot.h"
#include "podspec.h"

#define BIND_TIMEOUT_MS 10000
/* Failing nodes up to which each gets its per-GPU figures (docs/kubernetes.md). */
#define VERB_DETAIL_MAX 64

static void count(uint64_t *v) {
  __atomic_fetch_add(v, 1, __ATOMIC_RELAXED);
}

/* ---- a growing text buffer with JSON string escaping ------------------------------------ */

struct out {
  char *p;
  size_t len, cap;
  bool oom;
};

static void put(struct out *o, const char *s, size_t n) {
  if (o->oom)
    return;
  if (o->len + n + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + n + 1)
      cap *= 2;
    char *p = realloc(o->p, cap);
    if (!p) {
      o->oom = true;
      return;
    }
    o->p = p;
    o->cap = cap;
  }
  memcpy(o->p + o->len, s, n);
  o->len += n;
  o->p[o->len] = 0;
}

static void puts_(struct out *o, const char *s) {
  put(o, s, strlen(s));
}

static void putf(struct out *o, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0)
    put(o, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void put_str(struct out *o, const char *s) {
  put(o, "\"", 1);
  for (const char *run = s;; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch && ch >= 0x20 && ch != '"' && ch != '\\')
      continue;
    put(o, run, (size_t)(s - run));
    if (!ch)
      break;
    if (ch == '"' || ch == '\\') {
      char e[2] = {'\\', (char)ch};
      put(o, e, 2);
    } else {
      putf(o, "\\u%04x", ch);
    }
    run = s + 1;
  }
  put(o, "\"", 1);
}

static int finish(struct out *o, int status, char **ret_body, size_t *ret_len) {
  if (o->oom) {
    free(o->p);
    static const char oom[] = "{\"Error\":\"gslice-extender is out of memory\"}";
    *ret_body = strdup(oom);
    *ret_len = *ret_body ? sizeof oom - 1 : 0;
    return 500;
  }
  *ret_body = o->p;
  *ret_len = o->len;
  return status;
}

static int error_body(int status, const char *key, const char *msg, char **ret_body,
                      size_t *ret_len) {
  struct out o = {0};
  puts_(&o, "{");
  put_str(&o, key);
  puts_(&o, ":");
  put_str(&o, msg);
  puts_(&o, "}");
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
 * the top level takes the names in place (node names are DNS names: no escapes) and
 * gives only the Pod to jansson. Anything it does not expect, or malformed, returns
 * -EAGAIN: the full parser then decides (and says what is wrong). */
struct scan {
  const char *p, *end;
};

static void ws(struct scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
    s->p++;
}

/* A string without escapes: [*ret, *ret + *ret_len). */
static bool plain_string(struct scan *s, const char **ret, size_t *ret_len) {
  const char *q;
  if (s->p >= s->end || *s->p != '"')
    return false;
  for (q = s->p + 1; q < s->end && *q != '"'; q++)
    if (*q == '\\' || (unsigned char)*q < 0x20)
      return false;
  if (q >= s->end)
    return false;
  *ret = s->p + 1;
  *ret_len = (size_t)(q - s->p - 1);
  s->p = q + 1;
  return true;
}

/* Skips one value of any kind (strings may have escapes); false when it is cut short. */
static bool skip_value(struct scan *s) {
  int depth = 0;
  ws(s);
  do {
    if (s->p >= s->end)
      return false;
    char ch = *s->p;
    if (ch == '"') {
      for (s->p++; s->p < s->end && *s->p != '"'; s->p++)
        if (*s->p == '\\')
          s->p++;
      if (s->p >= s->end)
        return false;
      s->p++;
    } else if (ch == '{' || ch == '[') {
      depth++;
      s->p++;
    } else if (ch == '}' || ch == ']') {
      if (--depth < 0)
        return false;
      s->p++;
    } else {
      s->p++;
    }
  } while (depth > 0 || (s->p < s->end && !strchr(",}] \n\r\t", *s->p) && s->p[-1] != '"' &&
                         s->p[-1] != '}' && s->p[-1] != ']'));
  return true;
}

static int args_fast(const char *body, size_t len, struct args *a) {
  struct scan s = {body, body + len};
  const char *pod = NULL, *pod_end = NULL, *names = NULL, *names_end = NULL;
  json_error_t je;

  ws(&s);
  if (s.p >= s.end || *s.p++ != '{')
    return -EAGAIN;
  for (;;) {
    const char *key, *v;
    size_t klen;
    ws(&s);
    if (s.p < s.end && *s.p == '}')
      break;
    if (!plain_string(&s, &key, &klen))
      return -EAGAIN;
    ws(&s);
    if (s.p >= s.end || *s.p++ != ':')
      return -EAGAIN;
    ws(&s);
    v = s.p;
    if (!skip_value(&s))
      return -EAGAIN;
    if (klen == 3 && strncasecmp(key, "pod", 3) == 0) {
      pod = v;
      pod_end = s.p;
    } else if (klen == 9 && strncasecmp(key, "nodenames", 9) == 0) {
      names = v;
      names_end = s.p;
    } else if (klen == 5 && strncasecmp(key, "nodes", 5) == 0) {
      if (s.p - v != 4 || strncmp(v, "null", 4) != 0)
        return -EAGAIN; /* whole Node objects: the full parser's job */
    }
    ws(&s);
    if (s.p < s.end && *s.p == ',') {
      s.p++;
      continue;
    }
    if (s.p < s.end && *s.p == '}')
      break;
    return -EAGAIN;
  }
  s.p++;
  ws(&s);
  if (s.p != s.end || !pod || !names || *names != '[')
    return -EAGAIN;
  /* The names: count, then copy each behind a NUL of its own. */
  size_t n = 0;
  for (const char *q = names; q < names_end; q++)
    n += *q == '"';
  n /= 2;
  a->names = calloc(n ? n : 1, sizeof(*a->names));
  a->namebuf = malloc((size_t)(names_end - names) + 1);
  if (!a->names || !a->namebuf)
    return -ENOMEM;
  struct scan ns = {names + 1, names_end};
  char *out = a->namebuf;
  ws(&ns);
  if (ns.p < ns.end && *ns.p == ']') {
    ns.p++;
  } else {
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
      if (ns.p < ns.end && *ns.p == ',') {
        ns.p++;
        continue;
      }
      if (ns.p < ns.end && *ns.p == ']') {
        ns.p++;
        break;
      }
      return -EAGAIN;
    }
  }
  ws(&ns);
  if (ns.p != ns.end)
    return -EAGAIN;
  a->root = json_loadb(pod, (size_t)(pod_end - pod), 0, &je);
  if (!json_is_object(a->root))
    return -EAGAIN;
  a->pod = a->root;
  a->by_name = true;
  return 0;
}

static int args_read(const char *body, size_t len, struct args *a, char *err, size_t errlen) {
  json_error_t je;
  json_t *names, *nodes, *items;
  int rc;

  memset(a, 0, sizeof(*a));
  rc = args_fast(body, len, a);
  if (rc == 0 || rc == -ENOMEM) {
    if (rc == 0)
      snprintf(a->id, sizeof a->id, "%s/%s",
               kube_meta_str(a->pod, "namespace") ? kube_meta_str(a->pod, "namespace") : "default",
               kube_meta_str(a->pod, "name") ? kube_meta_str(a->pod, "name") : "?");
    return rc;
  }
  args_free(a);
  memset(a, 0, sizeof(*a));
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
  snprintf(a->id, sizeof a->id, "%s/%s",
           kube_meta_str(a->pod, "namespace") ? kube_meta_str(a->pod, "namespace") : "default",
           kube_meta_str(a->pod, "name") ? kube_meta_str(a->pod, "name") : "?");
  names = kube_json_get(a->root, "NodeNames");
  nodes = kube_json_get(a->root, "Nodes");
  if (json_is_array(names)) {
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
  items = json_is_object(nodes) ? kube_json_get(nodes, "Items") : NULL;
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

/* ---- /filter and /prioritize ----------------------------------------------------------------- */

enum verb { FILTER, PRIORITIZE };

static int eval_verb(enum verb verb, struct cluster *c, const char *body, size_t len,
                     uint64_t now_ms, FILE *log, struct verb_stats *st, char **ret_body,
                     size_t *ret_len) {
  struct args a;
  struct place_pod req = {0};
  struct place_verdict *v = NULL;
  const void **nodes = NULL;
  int *scores = NULL;
  struct out o = {0};
  char err[PLACE_REASON_MAX];
  int rc, status = 200;

  count(verb == FILTER ? &st->filter : &st->prioritize);
  if (!cluster_synced(c)) {
    count(&st->not_ready);
    return error_body(503, "Error",
                      "gslice-extender has not read the cluster's nodes and pods yet; "
                      "kube-scheduler retries",
                      ret_body, ret_len);
  }
  rc = args_read(body, len, &a, err, sizeof err);
  if (rc) {
    args_free(&a);
    count(&st->bad_requests);
    if (log)
      fprintf(log, "gslice-extender: %s: %s\n", verb == FILTER ? "filter" : "prioritize", err);
    return error_body(rc == -ENOMEM ? 500 : 400, "Error", err, ret_body, ret_len);
  }
  rc = cluster_request(c, a.pod, &req, err, sizeof err);
  if (rc < 0 && log)
    fprintf(log, "gslice-extender: pod %s: %s\n", a.id, err);
  const char *uid = kube_meta_str(a.pod, "uid");
  if (rc == 0) {
    v = malloc((a.n ? a.n : 1) * sizeof(*v));
    nodes = malloc((a.n ? a.n : 1) * sizeof(*nodes));
    scores = malloc((a.n ? a.n : 1) * sizeof(*scores));
    if (!v || !nodes || !scores) {
      free(v);
      free(nodes);
      free(scores);
      args_free(&a);
      podspec_request_free(&req);
      return error_body(500, "Error", "out of memory", ret_body, ret_len);
    }
    if (verb == PRIORITIZE && cluster_memo_get(c, uid, a.names, a.n, now_ms, scores)) {
      for (size_t i = 0; i < a.n; i++)
        v[i] = (struct place_verdict){.fits = true, .score = scores[i]};
    } else {
      cluster_eval(c, &req, a.names, a.n, now_ms, v, nodes);
      if (verb == FILTER)
        cluster_memo_put(c, uid, nodes, v, a.n, now_ms);
    }
  }

  /* Room for a typical answer at once: a name and a reason per node. */
  o.cap = 256 + a.n * (verb == FILTER ? 320 : 48);
  o.p = malloc(o.cap);
  if (!o.p)
    o.cap = 0;
  else
    o.p[0] = 0;

  if (verb == PRIORITIZE) {
    /* HostPriorityList: every node asked about, 0 where the pod does not fit. */
    puts_(&o, "[");
    for (size_t i = 0; i < a.n; i++) {
      puts_(&o, i ? ",{\"Host\":" : "{\"Host\":");
      put_str(&o, a.names[i]);
      putf(&o, ",\"Score\":%d}", rc == 0 && v[i].fits ? v[i].score : 0);
    }
    puts_(&o, "]");
    goto out;
  }

  /* ExtenderFilterResult. A pod asking for no gslice GPU passes everywhere; a
   * malformed one fails everywhere, for a reason no preemption changes. */
  bool first = true;
  if (a.by_name) {
    puts_(&o, "{\"NodeNames\":[");
    for (size_t i = 0; i < a.n; i++) {
      if (rc < 0 || (rc == 0 && !v[i].fits))
        continue;
      if (!first)
        puts_(&o, ",");
      put_str(&o, a.names[i]);
      first = false;
    }
    puts_(&o, "],\"Nodes\":null");
  } else {
    puts_(&o, "{\"NodeNames\":null,\"Nodes\":{\"apiVersion\":\"v1\",\"kind\":\"NodeList\","
              "\"metadata\":{},\"items\":[");
    for (size_t i = 0; i < a.n; i++) {
      if (rc < 0 || (rc == 0 && !v[i].fits))
        continue;
      char *t = json_dumps(a.node_objs[i], JSON_COMPACT);
      if (!first)
        puts_(&o, ",");
      if (t)
        puts_(&o, t);
      else
        o.oom = true;
      free(t);
      first = false;
    }
    puts_(&o, "]}");
  }
  /* Per-GPU figures while few nodes fail; past that, the same words for every node
   * short of room, which kube-scheduler's message counts as one reason. */
  size_t nfailed = 0;
  for (size_t i = 0; rc == 0 && i < a.n; i++)
    nfailed += !v[i].fits;
  bool brief = nfailed > VERB_DETAIL_MAX;
  char same[2 * PLACE_REASON_MAX];
  size_t same_len = 0;
  for (int pass = 0; pass < 2; pass++) {
    /* FailedNodes: room taken by other pods (preemption may help);
     * FailedAndUnresolvableNodes: it cannot fit there at all. */
    puts_(&o, pass == 0 ? ",\"FailedNodes\":{" : "},\"FailedAndUnresolvableNodes\":{");
    first = true;
    for (size_t i = 0; i < a.n; i++) {
      if (rc > 0 || (rc < 0 && pass == 0) ||
          (rc == 0 && (v[i].fits || v[i].unresolvable != (pass == 1))))
        continue;
      if (!first)
        puts_(&o, ",");
      put_str(&o, a.names[i]);
      puts_(&o, ":");
      if (rc < 0) {
        char msg[PLACE_REASON_MAX + 2 * K8S_NAME_MAX + 32];
        snprintf(msg, sizeof msg, "gslice: pod %s: %s", a.id, err);
        put_str(&o, msg);
      } else if (brief && req.ncontainers == 1 && v[i].cause == PLACE_NO_ROOM) {
        /* One container, brief: every node short of room says the same; write it once
         * and copy its JSON text. */
        if (!same_len) {
          struct out one = {0};
          char msg[PLACE_REASON_MAX + 16] = "gslice: ";
          cluster_explain(c, &req, nodes[i], now_ms, true, msg + 8, sizeof msg - 8);
          put_str(&one, msg);
          if (one.oom || one.len >= sizeof same) {
            o.oom = true;
            free(one.p);
            break;
          }
          memcpy(same, one.p, one.len);
          same_len = one.len;
          free(one.p);
        }
        put(&o, same, same_len);
      } else {
        /* Reasons are written only for the nodes that fail, after the verdicts. */
        char msg[PLACE_REASON_MAX + 16] = "gslice: ";
        cluster_explain(c, &req, nodes[i], now_ms, brief, msg + 8, sizeof msg - 8);
        put_str(&o, msg);
      }
      first = false;
    }
  }
  puts_(&o, "},\"Error\":\"\"}");
out:
  free(v);
  free(nodes);
  free(scores);
  podspec_request_free(&req);
  args_free(&a);
  return finish(&o, status, ret_body, ret_len);
}

int verb_filter(struct cluster *c, const char *body, size_t len, uint64_t now_ms, FILE *log,
                struct verb_stats *st, char **ret_body, size_t *ret_len) {
  return eval_verb(FILTER, c, body, len, now_ms, log, st, ret_body, ret_len);
}

int verb_prioritize(struct cluster *c, const char *body, size_t len, uint64_t now_ms, FILE *log,
                    struct verb_stats *st, char **ret_body, size_t *ret_len) {
  return eval_verb(PRIORITIZE, c, body, len, now_ms, log, st, ret_body, ret_len);
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

int verb_bind(struct cluster *c, struct kube *k, const char *body, size_t len, uint64_t now_ms,
              FILE *log, struct verb_stats *st, char **ret_body, size_t *ret_len) {
  json_error_t je;
  json_t *root = json_loadb(body, len, 0, &je), *pod = NULL, *binding = NULL;
  const char *name, *ns, *uid, *node;
  struct pod_id id;
  struct place_pod req = {0};
  struct k8s_assigned a = {0};
  char err[PLACE_REASON_MAX + 256] = "", path[3 * K8S_NAME_MAX], *text = NULL;
  void *lock = NULL;
  bool reserved = false;
  int rc, status = 200;

  count(&st->bind);
  if (!root || !json_is_object(root)) {
    snprintf(err, sizeof err, "ExtenderBindingArgs is not a JSON object%s%s", root ? "" : ": ",
             root ? "" : je.text);
    status = 400;
    goto out;
  }
  name = arg_str(root, "PodName");
  ns = arg_str(root, "PodNamespace");
  uid = arg_str(root, "PodUID");
  node = arg_str(root, "Node");
  if (!name || !*name || !ns || !*ns || !node || !*node || strlen(name) >= K8S_NAME_MAX ||
      strlen(ns) >= K8S_NAME_MAX || strlen(node) >= K8S_NAME_MAX) {
    snprintf(err, sizeof err, "ExtenderBindingArgs needs PodName, PodNamespace and Node");
    status = 400;
    goto out;
  }
  if (!k) {
    snprintf(err, sizeof err, "this gslice-extender has no API server to bind with");
    goto out;
  }
  snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
  lock = cluster_node_lock(c, node);
  if (!lock) {
    snprintf(err, sizeof err, "node %s is not known to gslice-extender", node);
    goto out;
  }
  rc = cluster_pending_request(c, ns, name, &id, &req, err, sizeof err);
  if (rc == -ENOENT) {
    /* The watch has not shown us the pod yet: ask for it. */
    rc = kube_get(k, path, &pod, err, sizeof err);
    if (!rc && !(rc = podspec_id(pod, &id, err, sizeof err)))
      rc = cluster_request(c, pod, &req, err, sizeof err);
  }
  if (rc) {
    if (rc > 0)
      snprintf(err, sizeof err, "pod %s/%s asks for no %s: nothing for gslice to bind", ns, name,
               K8S_RES_GPU);
    goto out;
  }
  if (uid && *uid && id.uid[0] && strcmp(uid, id.uid) != 0) {
    snprintf(err, sizeof err, "pod %s/%s has uid %s, not %s: it was replaced", ns, name, id.uid,
             uid);
    goto out;
  }
  rc = cluster_reserve(c, &id, &req, node, now_ms, &a, err, sizeof err);
  if (rc)
    goto out;
  reserved = true;
  if (k8s_assigned_encode(&a, &text)) {
    snprintf(err, sizeof err, "cannot encode the assignment");
    goto out;
  }
  /* The annotation travels in the Binding: the API server copies a Binding's
   * annotations onto the pod in the same write that sets spec.nodeName, so
   * no pod is ever bound without its GPUs. */
  binding = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s, s:s, s:s}}", "apiVersion",
                      "v1", "kind", "Binding", "metadata", "name", name, "namespace", ns, "uid",
                      uid && *uid ? uid : id.uid, "annotations", K8S_ANNOT_ASSIGNED, text, "target",
                      "apiVersion", "v1", "kind", "Node", "name", node);
  if (!binding) {
    snprintf(err, sizeof err, "out of memory");
    goto out;
  }
  if ((!uid || !*uid) && !id.uid[0])
    json_object_del(json_object_get(binding, "metadata"), "uid");
  char bpath[3 * K8S_NAME_MAX + 16];
  snprintf(bpath, sizeof bpath, "%s/binding", path);
  rc = kube_post(k, bpath, binding, NULL, err, sizeof err);
  if (rc == -EEXIST) {
    if (bound_as(k, path, node, &a, err, sizeof err)) {
      count(&st->bind_conflicts_same);
      rc = 0; /* an earlier try of this binding got through */
    }
  }
  if (rc)
    goto out;
  err[0] = 0;
  reserved = false; /* held as assumed until the watch shows the pod bound */
  if (log)
    fprintf(log, "gslice-extender: bound %s/%s to %s: %s\n", ns, name, node, text);
out:
  if (reserved)
    cluster_unreserve(c, &id);
  cluster_node_unlock(lock);
  if (err[0]) {
    count(&st->bind_errors);
    if (log)
      fprintf(log, "gslice-extender: bind %s/%s: %s\n", arg_str(root, "PodNamespace") ?: "?",
              arg_str(root, "PodName") ?: "?", err);
  }
  k8s_assigned_free(&a);
  podspec_request_free(&req);
  free(text);
  json_decref(binding);
  json_decref(pod);
  json_decref(root);
  return error_body(status, "Error", err, ret_body, ret_len);
}
