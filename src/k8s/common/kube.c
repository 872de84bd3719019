/* The API server client (kube.h): settings from a kubeconfig or the pod's service
 * account, requests through a fresh libcurl handle each (any thread may call). */
#include "kube.h"
#include "errtext.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define FILE_MAX (1 << 20)         /* kubeconfig, token, certificate files */
#define BODY_MAX (256u << 20)      /* one answer: a list of thousands of nodes */
#define LINE_MAX_BYTES (16u << 20) /* one watch event */
#define CONNECT_TIMEOUT_MS 5000L
#define LIST_PAGE 500

struct kube {
  struct kube_config *cfg;
  long timeout_ms;
  atomic_int cancel;
};

/* ---- files and base64 ----------------------------------------------------------------- */

static int read_file(const char *path, char **ret, size_t *ret_len) {
  struct stat st;
  char *buf = NULL;
  size_t got = 0;
  int fd, rc;

  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (fstat(fd, &st) < 0) {
    rc = -errno;
    goto out;
  }
  if (!S_ISREG(st.st_mode) || st.st_size > FILE_MAX) {
    rc = -EFBIG;
    goto out;
  }
  buf = malloc((size_t)st.st_size + 1);
  if (!buf) {
    rc = -ENOMEM;
    goto out;
  }
  while (got < (size_t)st.st_size) {
    ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  buf[got] = 0;
  *ret = buf;
  if (ret_len)
    *ret_len = got;
  buf = NULL;
  rc = 0;
out:
  free(buf);
  close(fd);
  return rc;
}

static int b64val(int c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

/* Standard base64, padding optional, whitespace skipped (YAML folds long lines). */
static int b64_decode(const char *in, char **ret, size_t *ret_len) {
  size_t n = strlen(in), o = 0;
  char *out = malloc(n / 4 * 3 + 4);
  uint32_t acc = 0;
  int bits = 0, pad = 0;

  if (!out)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    int c = (unsigned char)in[i], v;
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    if (c == '=') {
      pad++;
      continue;
    }
    v = b64val(c);
    if (v < 0 || pad) {
      free(out);
      return -EINVAL;
    }
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (char)((acc >> bits) & 0xff);
    }
  }
  out[o] = 0;
  *ret = out;
  *ret_len = o;
  return 0;
}

/* ---- kubeconfig (YAML) ------------------------------------------------------------------ */

static yaml_node_t *ymap_get(yaml_document_t *doc, yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE)
    return NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    if (k && k->type == YAML_SCALAR_NODE && strcmp((char *)k->data.scalar.value, key) == 0)
      return yaml_document_get_node(doc, p->value);
  }
  return NULL;
}

static const char *ystr(yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The entry of a named list ("clusters", "users", "contexts") called name: its inner map. */
static yaml_node_t *ynamed(yaml_document_t *doc, yaml_node_t *root, const char *list,
                           const char *inner, const char *name) {
  yaml_node_t *seq = ymap_get(doc, root, list);
  if (!seq || seq->type != YAML_SEQUENCE_NODE)
    return NULL;
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
       it++) {
    yaml_node_t *e = yaml_document_get_node(doc, *it);
    const char *n = ystr(ymap_get(doc, e, "name"));
    if (n && strcmp(n, name) == 0)
      return ymap_get(doc, e, inner);
  }
  return NULL;
}

/* Reads field "<base>-data" (base64) or "<base>" (a path, relative to dir). */
static int pem_field(yaml_document_t *doc, yaml_node_t *map, const char *base, const char *dir,
                     char **ret, size_t *ret_len, char *err, size_t errlen) {
  char key[64], path[PATH_MAX + 64];
  const char *v;
  int rc;

  snprintf(key, sizeof key, "%s-data", base);
  if ((v = ystr(ymap_get(doc, map, key)))) {
    rc = b64_decode(v, ret, ret_len);
    if (rc == -EINVAL)
      return k8s_err(err, errlen, rc, "kubeconfig: %s is not base64", key);
    return rc;
  }
  if (!(v = ystr(ymap_get(doc, map, base))))
    return 0;
  if (v[0] == '/')
    snprintf(path, sizeof path, "%s", v);
  else
    snprintf(path, sizeof path, "%s/%s", dir, v);
  rc = read_file(path, ret, ret_len);
  if (rc < 0)
    return k8s_err(err, errlen, rc, "kubeconfig: %s %s: %s", base, path, strerror(-rc));
  return 0;
}

void kube_config_free(struct kube_config *c) {
  if (!c)
    return;
  free(c->server);
  free(c->token);
  free(c->token_file);
  free(c->ca);
  free(c->cert);
  free(c->key);
  free(c);
}

static int check_server(struct kube_config *c, char *err, size_t errlen) {
  size_t n;
  if (!c->server || (strncmp(c->server, "https://", 8) != 0 && strncmp(c->server, "http://", 7)))
    return k8s_err(err, errlen, -EINVAL,
                   "server \"%s\" must start with https:// (or http:// for a test server)",
                   c->server ? c->server : "");
  n = strlen(c->server);
  while (n > 0 && c->server[n - 1] == '/')
    c->server[--n] = 0; /* paths start with "/" */
  if ((c->cert == NULL) != (c->key == NULL))
    return k8s_err(err, errlen, -EINVAL,
                   "a client certificate needs its key and the other way round");
  return 0;
}

int kube_config_from_file(const char *path, struct kube_config **ret, char *err, size_t errlen) {
  yaml_parser_t parser;
  yaml_document_t doc;
  yaml_node_t *root, *ctx, *cluster, *user;
  struct kube_config *c = NULL;
  char *text = NULL, dir[PATH_MAX];
  const char *name, *v, *slash;
  size_t len;
  bool have_doc = false;
  int rc;

  rc = read_file(path, &text, &len);
  if (rc < 0)
    return k8s_err(err, errlen, rc, "kubeconfig %s: %s", path, strerror(-rc));
  slash = strrchr(path, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
  if (!yaml_parser_initialize(&parser)) {
    free(text);
    return -ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &doc)) {
    rc = k8s_err(err, errlen, -EINVAL, "kubeconfig %s: not YAML: %s at line %zu", path,
                 parser.problem ? parser.problem : "error", parser.problem_mark.line + 1);
    goto out;
  }
  have_doc = true;
  root = yaml_document_get_root_node(&doc);
  if (!root || root->type != YAML_MAPPING_NODE) {
    rc = k8s_err(err, errlen, -EINVAL,
                 "kubeconfig %s: expected a mapping with clusters, users and "
                 "contexts",
                 path);
    goto out;
  }
  name = ystr(ymap_get(&doc, root, "current-context"));
  if (!name || !*name) {
    rc = k8s_err(err, errlen, -EINVAL,
                 "kubeconfig %s: no current-context (kubectl config "
                 "use-context NAME)",
                 path);
    goto out;
  }
  ctx = ynamed(&doc, root, "contexts", "context", name);
  if (!ctx) {
    rc = k8s_err(err, errlen, -EINVAL, "kubeconfig %s: current-context \"%s\" is not in contexts",
                 path, name);
    goto out;
  }
  v = ystr(ymap_get(&doc, ctx, "cluster"));
  cluster = v ? ynamed(&doc, root, "clusters", "cluster", v) : NULL;
  if (!cluster) {
    rc = k8s_err(err, errlen, -EINVAL,
                 "kubeconfig %s: context \"%s\" names cluster \"%s\", which is "
                 "not in clusters",
                 path, name, v ? v : "");
    goto out;
  }
  v = ystr(ymap_get(&doc, ctx, "user"));
  user = v ? ynamed(&doc, root, "users", "user", v) : NULL;
  if (v && !user) {
    rc = k8s_err(err, errlen, -EINVAL,
                 "kubeconfig %s: context \"%s\" names user \"%s\", which is "
                 "not in users",
                 path, name, v);
    goto out;
  }
  c = calloc(1, sizeof(*c));
  if (!c) {
    rc = -ENOMEM;
    goto out;
  }
  v = ystr(ymap_get(&doc, cluster, "server"));
  if (!v || !(c->server = strdup(v))) {
    rc = v ? -ENOMEM : k8s_err(err, errlen, -EINVAL, "kubeconfig %s: cluster has no server", path);
    goto out;
  }
  v = ystr(ymap_get(&doc, cluster, "insecure-skip-tls-verify"));
  c->insecure = v && strcmp(v, "true") == 0;
  if ((rc =
           pem_field(&doc, cluster, "certificate-authority", dir, &c->ca, &c->ca_len, err, errlen)))
    goto out;
  if (user) {
    if (ymap_get(&doc, user, "exec") || ymap_get(&doc, user, "auth-provider")) {
      rc = k8s_err(err, errlen, -EINVAL,
                   "kubeconfig %s: user uses exec/auth-provider credentials, "
                   "which gslice does not run; give it a token or a client certificate",
                   path);
      goto out;
    }
    if ((v = ystr(ymap_get(&doc, user, "token"))) && !(c->token = strdup(v))) {
      rc = -ENOMEM;
      goto out;
    }
    if ((v = ystr(ymap_get(&doc, user, "tokenFile"))) && !c->token) {
      if (asprintf(&c->token_file, "%s%s%s", v[0] == '/' ? "" : dir, v[0] == '/' ? "" : "/", v) <
          0) {
        c->token_file = NULL;
        rc = -ENOMEM;
        goto out;
      }
    }
    if ((rc =
             pem_field(&doc, user, "client-certificate", dir, &c->cert, &c->cert_len, err, errlen)))
      goto out;
    if ((rc = pem_field(&doc, user, "client-key", dir, &c->key, &c->key_len, err, errlen)))
      goto out;
  }
  if ((rc = check_server(c, err, errlen)))
    goto out;
  *ret = c;
  c = NULL;
  rc = 0;
out:
  kube_config_free(c);
  if (have_doc)
    yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  free(text);
  return rc;
}

int kube_config_in_cluster(const char *sa_dir, struct kube_config **ret, char *err, size_t errlen) {
  const char *host = secure_getenv("KUBERNETES_SERVICE_HOST");
  const char *port = secure_getenv("KUBERNETES_SERVICE_PORT");
  struct kube_config *c;
  char path[PATH_MAX];
  int rc;

  if (!sa_dir)
    sa_dir = KUBE_SA_DIR;
  if (!host || !*host || !port || !*port)
    return k8s_err(err, errlen, -ENOENT,
                   "not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset): "
                   "give --kubeconfig FILE");
  c = calloc(1, sizeof(*c));
  if (!c)
    return -ENOMEM;
  /* An IPv6 service address needs brackets in a URL. */
  if (asprintf(&c->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port) <
      0) {
    c->server = NULL;
    rc = -ENOMEM;
    goto out;
  }
  snprintf(path, sizeof path, "%s/token", sa_dir);
  if (access(path, R_OK) < 0) {
    rc = k8s_err(err, errlen, -errno, "in-cluster: %s: %s (is a service account mounted?)", path,
                 strerror(errno));
    goto out;
  }
  if (!(c->token_file = strdup(path))) {
    rc = -ENOMEM;
    goto out;
  }
  snprintf(path, sizeof path, "%s/ca.crt", sa_dir);
  rc = read_file(path, &c->ca, &c->ca_len);
  if (rc < 0) {
    rc = k8s_err(err, errlen, rc, "in-cluster: %s: %s", path, strerror(-rc));
    goto out;
  }
  *ret = c;
  return 0;
out:
  kube_config_free(c);
  return rc;
}

/* ---- the connection ----------------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
}

int kube_open_config(struct kube_config *c, struct kube **ret) {
  struct kube *k = calloc(1, sizeof(*k));
  if (!k) {
    kube_config_free(c);
    return -ENOMEM;
  }
  pthread_once(&curl_once, curl_init_once);
  k->cfg = c;
  k->timeout_ms = 10000;
  atomic_init(&k->cancel, 0);
  *ret = k;
  return 0;
}

int kube_open(const char *kubeconfig, struct kube **ret, char *err, size_t errlen) {
  struct kube_config *c;
  int rc = kubeconfig ? kube_config_from_file(kubeconfig, &c, err, errlen)
                      : kube_config_in_cluster(NULL, &c, err, errlen);
  if (rc)
    return rc;
  return kube_open_config(c, ret);
}

void kube_close(struct kube *k) {
  if (!k)
    return;
  kube_config_free(k->cfg);
  free(k);
}

void kube_set_timeout(struct kube *k, long ms) {
  k->timeout_ms = ms;
}

void kube_cancel(struct kube *k) {
  atomic_store(&k->cancel, 1);
}

const char *kube_server(const struct kube *k) {
  return k->cfg->server;
}

struct buf {
  char *p;
  size_t len, cap;
  size_t max;
};

static int buf_add(struct buf *b, const char *data, size_t n) {
  if (b->len + n + 1 > b->max)
    return -EFBIG;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
      return -ENOMEM;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = 0;
  return 0;
}

static size_t body_write(char *data, size_t size, size_t n, void *user) {
  return buf_add(user, data, size * n) ? 0 : size * n;
}

static int progress_cb(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  struct kube *k = user;
  return atomic_load(&k->cancel) ? 1 : 0;
}

/* A handle set up for one request: URL, credentials, TLS, headers. */
static int setup(struct kube *k, const char *method, const char *path, const char *content_type,
                 CURL **ret, struct curl_slist **ret_headers, char *err, size_t errlen) {
  struct curl_slist *h = NULL, *t;
  char *url = NULL, *token = NULL, *hdr = NULL;
  CURL *c;
  int rc = -ENOMEM;

  c = curl_easy_init();
  if (!c)
    return -ENOMEM;
  if (asprintf(&url, "%s%s", k->cfg->server, path) < 0) {
    url = NULL;
    goto out;
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, k);
  if (k->cfg->ca) {
    struct curl_blob b = {k->cfg->ca, k->cfg->ca_len, CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &b);
  }
  if (k->cfg->cert) {
    struct curl_blob bc = {k->cfg->cert, k->cfg->cert_len, CURL_BLOB_COPY};
    struct curl_blob bk = {k->cfg->key, k->cfg->key_len, CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &bc);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &bk);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (k->cfg->insecure) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (k->cfg->token_file) {
    size_t n;
    int r = read_file(k->cfg->token_file, &token, &n);
    if (r < 0) {
      rc = k8s_err(err, errlen, r, "token file %s: %s", k->cfg->token_file, strerror(-r));
      goto out;
    }
    while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' '))
      token[--n] = 0;
  }
  if (token || k->cfg->token) {
    if (asprintf(&hdr, "Authorization: Bearer %s", token ? token : k->cfg->token) < 0) {
      hdr = NULL;
      goto out;
    }
    if (!(t = curl_slist_append(h, hdr)))
      goto out;
    h = t;
  }
  if (!(t = curl_slist_append(h, "Accept: application/json")))
    goto out;
  h = t;
  if (content_type) {
    free(hdr);
    if (asprintf(&hdr, "Content-Type: %s", content_type) < 0) {
      hdr = NULL;
      goto out;
    }
    if (!(t = curl_slist_append(h, hdr)))
      goto out;
    h = t;
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  *ret = c;
  *ret_headers = h;
  c = NULL;
  h = NULL;
  rc = 0;
out:
  if (token)
    explicit_bzero(token, strlen(token));
  if (hdr)
    explicit_bzero(hdr, strlen(hdr));
  free(token);
  free(hdr);
  free(url);
  curl_slist_free_all(h);
  if (c)
    curl_easy_cleanup(c);
  return rc;
}

static int curl_error(struct kube *k, CURLcode cc, const char *method, const char *path, char *err,
                      size_t errlen) {
  int rc;
  switch (cc) {
  case CURLE_OPERATION_TIMEDOUT: rc = -ETIMEDOUT; break;
  case CURLE_COULDNT_CONNECT: rc = -ECONNREFUSED; break;
  case CURLE_ABORTED_BY_CALLBACK: rc = -ECANCELED; break;
  case CURLE_OUT_OF_MEMORY: rc = -ENOMEM; break;
  default: rc = -EIO;
  }
  return k8s_err(err, errlen, rc, "%s %s%s: %s", method, k->cfg->server, path,
                 curl_easy_strerror(cc));
}

int kube_request(struct kube *k, const char *method, const char *path, const char *content_type,
                 const json_t *body, long *ret_status, json_t **ret_body, char *err,
                 size_t errlen) {
  struct buf resp = {.max = BODY_MAX};
  struct curl_slist *headers = NULL;
  char *data = NULL, *ctype = NULL;
  CURL *c = NULL;
  CURLcode cc;
  long status = 0;
  int rc;

  rc = setup(k, method, path, body ? (content_type ? content_type : "application/json") : NULL, &c,
             &headers, err, errlen);
  if (rc)
    return rc;
  if (body) {
    data = json_dumps(body, JSON_COMPACT);
    if (!data) {
      rc = -ENOMEM;
      goto out;
    }
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
  }
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, k->timeout_ms);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
  cc = curl_easy_perform(c);
  if (cc != CURLE_OK) {
    rc = curl_error(k, cc, method, path, err, errlen);
    goto out;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ctype);
  *ret_status = status;
  if (ret_body) {
    *ret_body = resp.len ? json_loadb(resp.p, resp.len, 0, NULL) : NULL;
    if (!*ret_body && status / 100 == 2 && resp.len) {
      rc = k8s_err(err, errlen, -EIO, "%s %s%s: answer (HTTP %ld) is not JSON", method,
                   k->cfg->server, path, status);
      goto out;
    }
  }
  rc = 0;
out:
  free(data);
  free(resp.p);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  return rc;
}

static int status_errno(long status) {
  if (status / 100 == 2)
    return 0;
  switch (status) {
  case 400:
  case 422: return -EINVAL;
  case 401:
  case 403: return -EACCES;
  case 404: return -ENOENT;
  case 409: return -EEXIST;
  case 410: return -ESTALE;
  case 429: return -EAGAIN;
  default: return -EIO;
  }
}

static int call(struct kube *k, const char *method, const char *path, const char *ctype,
                const json_t *body, json_t **ret_body, char *err, size_t errlen) {
  json_t *ans = NULL;
  long status = 0;
  int rc = kube_request(k, method, path, ctype, body, &status, &ans, err, errlen);
  if (rc)
    return rc;
  rc = status_errno(status);
  if (rc) {
    /* The API server explains a refusal in a Status object's message. */
    json_t *m = ans ? json_object_get(ans, "message") : NULL;
    k8s_err(err, errlen, rc, "%s %s: HTTP %ld: %s", method, path, status,
            json_is_string(m) ? json_string_value(m) : "(no message)");
    json_decref(ans);
    return rc;
  }
  if (ret_body)
    *ret_body = ans;
  else
    json_decref(ans);
  return 0;
}

int kube_get(struct kube *k, const char *path, json_t **ret_body, char *err, size_t errlen) {
  return call(k, "GET", path, NULL, NULL, ret_body, err, errlen);
}

int kube_post(struct kube *k, const char *path, const json_t *body, json_t **ret_body, char *err,
              size_t errlen) {
  return call(k, "POST", path, "application/json", body, ret_body, err, errlen);
}

int kube_merge_patch(struct kube *k, const char *path, const json_t *patch, json_t **ret_body,
                     char *err, size_t errlen) {
  return call(k, "PATCH", path, "application/merge-patch+json", patch, ret_body, err, errlen);
}

int kube_list_each(struct kube *k, const char *path, kube_item_cb cb, void *user, char **ret_rv,
                   char *err, size_t errlen) {
  json_t *page = NULL;
  char *cont = NULL, *rv = NULL, *p = NULL;
  int rc;

  for (;;) {
    json_t *list, *meta, *v;
    free(p);
    if (asprintf(&p, "%s%slimit=%d%s%s", path, strchr(path, '?') ? "&" : "?", LIST_PAGE,
                 cont ? "&continue=" : "", cont ? cont : "") < 0) {
      p = NULL;
      rc = -ENOMEM;
      goto out;
    }
    rc = kube_get(k, p, &page, err, errlen);
    if (rc)
      goto out;
    list = json_object_get(page, "items");
    meta = json_object_get(page, "metadata");
    if (!json_is_array(list) && !json_is_null(list) && list) {
      rc = k8s_err(err, errlen, -EIO, "GET %s: answer is not a list (no items)", p);
      goto out;
    }
    for (size_t i = 0; i < json_array_size(list); i++)
      if ((rc = cb(json_array_get(list, i), user)))
        goto out;
    free(rv);
    v = json_object_get(meta, "resourceVersion");
    rv = strdup(json_is_string(v) ? json_string_value(v) : "");
    if (cont)
      curl_free(cont);
    cont = NULL;
    v = json_object_get(meta, "continue");
    if (json_is_string(v) && json_string_length(v) > 0)
      cont = curl_easy_escape(NULL, json_string_value(v), 0);
    json_decref(page);
    page = NULL;
    if (!rv) {
      rc = -ENOMEM;
      goto out;
    }
    if (!cont)
      break;
  }
  *ret_rv = rv;
  rv = NULL;
  rc = 0;
out:
  json_decref(page);
  if (cont)
    curl_free(cont);
  free(rv);
  free(p);
  return rc;
}

static int collect(json_t *item, void *user) {
  return json_array_append(user, item) ? -ENOMEM : 0;
}

int kube_list(struct kube *k, const char *path, json_t **ret_items, char **ret_rv, char *err,
              size_t errlen) {
  json_t *items = json_array();
  int rc;

  if (!items)
    return -ENOMEM;
  rc = kube_list_each(k, path, collect, items, ret_rv, err, errlen);
  if (rc) {
    json_decref(items);
    return rc;
  }
  *ret_items = items;
  return 0;
}

/* ---- watch ------------------------------------------------------------------------------ */

struct watch {
  CURL *c;
  struct buf line;
  struct buf other; /* a non-200 answer's body */
  long status;
  kube_watch_cb cb;
  void *user;
  char **ret_rv;
  int rc; /* why the write callback stopped the transfer */
  char *err;
  size_t errlen;
};

static int watch_event(struct watch *w, const char *line, size_t len) {
  json_error_t je;
  json_t *ev = json_loadb(line, len, 0, &je), *obj, *type;
  const char *t, *rv;
  int rc = 0;

  if (!ev)
    return k8s_err(w->err, w->errlen, -EIO, "watch: event is not JSON: %s", je.text);
  type = json_object_get(ev, "type");
  obj = json_object_get(ev, "object");
  if (!json_is_string(type) || !json_is_object(obj)) {
    rc = k8s_err(w->err, w->errlen, -EIO, "watch: event without type and object");
    goto out;
  }
  t = json_string_value(type);
  if (strcmp(t, "ERROR") == 0) {
    json_t *code = json_object_get(obj, "code"), *msg = json_object_get(obj, "message");
    rc = json_integer_value(code) == 410 ? -ESTALE : -EIO;
    k8s_err(w->err, w->errlen, rc, "watch: ERROR %lld: %s", (long long)json_integer_value(code),
            json_is_string(msg) ? json_string_value(msg) : "(no message)");
    goto out;
  }
  if (strcmp(t, "ADDED") && strcmp(t, "MODIFIED") && strcmp(t, "DELETED") && strcmp(t, "BOOKMARK"))
    goto out; /* a type added later: nothing this client knows to do */
  rv = kube_meta_str(obj, "resourceVersion");
  if (rv && w->ret_rv) {
    char *n = strdup(rv);
    if (!n) {
      rc = -ENOMEM;
      goto out;
    }
    free(*w->ret_rv);
    *w->ret_rv = n;
  }
  rc = w->cb(t, obj, w->user);
out:
  json_decref(ev);
  return rc;
}

static size_t watch_write(char *data, size_t size, size_t n, void *user) {
  struct watch *w = user;
  size_t len = size * n, start = 0;

  if (!w->status)
    curl_easy_getinfo(w->c, CURLINFO_RESPONSE_CODE, &w->status);
  if (w->status != 200)
    return buf_add(&w->other, data, len) ? 0 : len;
  for (size_t i = 0; i < len; i++) {
    if (data[i] != '\n')
      continue;
    if (buf_add(&w->line, data + start, i - start)) {
      w->rc = -EFBIG;
      return 0;
    }
    start = i + 1;
    if (w->line.len) {
      w->rc = watch_event(w, w->line.p, w->line.len);
      w->line.len = 0;
      if (w->rc)
        return 0;
    }
  }
  if (start < len && buf_add(&w->line, data + start, len - start)) {
    w->rc = k8s_err(w->err, w->errlen, -EFBIG, "watch: one event is over %u bytes", LINE_MAX_BYTES);
    return 0;
  }
  return len;
}

int kube_watch(struct kube *k, const char *path, const char *rv, int timeout_s, kube_watch_cb cb,
               void *user, char **ret_rv, char *err, size_t errlen) {
  struct watch w = {.line = {.max = LINE_MAX_BYTES},
                    .other = {.max = 1 << 20},
                    .cb = cb,
                    .user = user,
                    .ret_rv = ret_rv,
                    .err = err,
                    .errlen = errlen};
  struct curl_slist *headers = NULL;
  char *p = NULL;
  CURLcode cc;
  int rc;

  if (asprintf(&p, "%s%swatch=1&allowWatchBookmarks=true&timeoutSeconds=%d%s%s", path,
               strchr(path, '?') ? "&" : "?", timeout_s, rv && *rv ? "&resourceVersion=" : "",
               rv && *rv ? rv : "") < 0)
    return -ENOMEM;
  rc = setup(k, "GET", p, NULL, &w.c, &headers, err, errlen);
  if (rc)
    goto out;
  curl_easy_setopt(w.c, CURLOPT_WRITEFUNCTION, watch_write);
  curl_easy_setopt(w.c, CURLOPT_WRITEDATA, &w);
  /* The server ends the stream at timeout_s; silence well past it is a dead peer. */
  curl_easy_setopt(w.c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(w.c, CURLOPT_LOW_SPEED_TIME, (long)timeout_s + 30);
  cc = curl_easy_perform(w.c);
  if (w.rc) {
    rc = w.rc;
    goto out;
  }
  if (cc != CURLE_OK) {
    rc = curl_error(k, cc, "GET", p, err, errlen);
    goto out;
  }
  if (w.status != 200) {
    json_t *st = w.other.len ? json_loadb(w.other.p, w.other.len, 0, NULL) : NULL;
    json_t *m = json_object_get(st, "message");
    rc = status_errno(w.status);
    if (!rc)
      rc = -EIO;
    k8s_err(err, errlen, rc, "watch %s: HTTP %ld: %s", path, w.status,
            json_is_string(m) ? json_string_value(m) : "(no message)");
    json_decref(st);
    goto out;
  }
  rc = 0;
out:
  free(w.line.p);
  free(w.other.p);
  curl_slist_free_all(headers);
  if (w.c)
    curl_easy_cleanup(w.c);
  free(p);
  if (atomic_load(&k->cancel) && rc != 0 && rc != -ESTALE)
    rc = -ECANCELED;
  return rc;
}

/* ---- objects ------------------------------------------------------------------------------ */

json_t *kube_json_get(const json_t *obj, const char *key) {
  const char *k;
  json_t *v = json_object_get(obj, key);
  if (v || !json_is_object(obj))
    return v;
  json_object_foreach((json_t *)obj, k, v) if (strcasecmp(k, key) == 0) return v;
  return NULL;
}

const char *kube_meta_str(const json_t *obj, const char *field) {
  json_t *v = json_object_get(json_object_get(obj, "metadata"), field);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

const char *kube_annotation(const json_t *obj, const char *key) {
  json_t *v =
      json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}
