/* SPDX-License-Identifier: Apache-2.0 */
/* The API server client (kube.h): the connection, requests (any thread may call) through a
 * small pool of libcurl handles that keep their connection (HTTP/1.1 keep-alive) and TLS
 * session between requests, paged lists, watches (a handle of their own each), reading
 * objects. Where the settings come from (a kubeconfig, the pod's service account) is
 * kubeconfig.c's; this file only uses them. */
#include "kube.h"
#include "buf.h"
#include "errtext.h"
#include "kubeconfig.h"
#include "log.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define BODY_MAX (256u << 20)      /* one answer: a list of thousands of nodes */
#define LINE_MAX_BYTES (16u << 20) /* one watch event */
#define CONNECT_TIMEOUT_MS 5000L
#define LIST_PAGE 500
/* Handles kept between requests, each with its connection and TLS session: as many as threads
 * that call at once (gslice-node's DRA workers and batch threads, the extender's binds); a
 * connection idle longer than KUBE_IDLE_S is closed, not reused (API servers and balancers
 * close idle ones after 60 s or more). */
#define KUBE_POOL_MAX 8
#define KUBE_IDLE_S 30

struct kube {
  struct kube_config *cfg;
  long timeout_ms;
  atomic_int cancel;
  /* Handles between requests, each with its connection: the newest taken first, at most
   * KUBE_POOL_MAX kept, none idle past KUBE_IDLE_S. Under pool_mu. */
  pthread_mutex_t pool_mu;
  struct idle {
    CURL *c;
    uint64_t since; /* monotonic ns */
  } idle[KUBE_POOL_MAX];
  unsigned nidle;
  /* Kept connections found with bytes waiting before a request (handle_sound): closed. */
  atomic_uint_fast64_t out_of_step;
  atomic_bool out_of_step_said;
};

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
  atomic_init(&k->out_of_step, 0);
  atomic_init(&k->out_of_step_said, false);
  pthread_mutex_init(&k->pool_mu, NULL);
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
  while (k->nidle)
    curl_easy_cleanup(k->idle[--k->nidle].c);
  pthread_mutex_destroy(&k->pool_mu);
  kube_config_free(k->cfg);
  free(k);
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether c's kept HTTP/1.1 connection can carry the next request. Between two requests the
 * server has nothing to say: bytes waiting there are an answer no request asked for (a second
 * response, a proxy's stray one), which libcurl 7.88 would read as the next request's answer
 * (a POST taken reported failed, a GET answered with another's body). Such a connection is out
 * of step for good: closed (counted, said once), and the request goes on a fresh one; so does
 * every later request of k (kube_request): such an answer that comes after this look, while a
 * request waits for its own, would be read as that one's. One the server closed (its end of
 * stream, after a TLS close_notify or not) is closed uncounted.
 * HTTP/2 frames requests by stream and its servers send frames at any time (PING, SETTINGS,
 * GOAWAY): not checked. Called before curl_easy_reset, which forgets the version. */
static bool handle_sound(struct kube *k, CURL *c) {
  curl_socket_t s = CURL_SOCKET_BAD;
  long version = 0;
  char byte;

  if (curl_easy_getinfo(c, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK || s == CURL_SOCKET_BAD)
    return true; /* none kept: libcurl opens one */
  if (curl_easy_getinfo(c, CURLINFO_HTTP_VERSION, &version) == CURLE_OK &&
      version >= CURL_HTTP_VERSION_2_0)
    return true;
  struct pollfd p = {.fd = s, .events = POLLIN | POLLRDHUP};
  if (poll(&p, 1, 0) <= 0)
    return true; /* quiet: in step */
  ssize_t got = recv(s, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  bool closed = p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL);
  if (got < 0 && errno == EAGAIN && !closed)
    return true;
  if (got > 0 && !closed) {
    atomic_fetch_add(&k->out_of_step, 1);
    if (!atomic_exchange(&k->out_of_step_said, true))
      gs_log(GS_LOG_WARNING,
             "the API server %s sent bytes on a kept connection before any request (an answer "
             "nobody asked for: a server or proxy out of step): that connection is closed, and "
             "from now on every request goes on a fresh connection (counted, not said again)",
             k->cfg->server);
  }
  return false;
}

/* A handle for one request: the pool's newest (its options reset, its connection and TLS
 * session kept, unless it is out of step: handle_sound), or a new one; handles idle past
 * KUBE_IDLE_S are closed on the way. */
static CURL *handle_take(struct kube *k) {
  CURL *old[KUBE_POOL_MAX], *c = NULL;
  unsigned nold = 0, keep = 0;
  uint64_t now = mono_ns();

  pthread_mutex_lock(&k->pool_mu);
  for (unsigned i = 0; i < k->nidle; i++)
    if (now - k->idle[i].since > (uint64_t)KUBE_IDLE_S * 1000000000u)
      old[nold++] = k->idle[i].c;
    else
      k->idle[keep++] = k->idle[i];
  k->nidle = keep;
  if (k->nidle)
    c = k->idle[--k->nidle].c;
  pthread_mutex_unlock(&k->pool_mu);
  while (nold)
    curl_easy_cleanup(old[--nold]);
  if (c && !handle_sound(k, c)) {
    curl_easy_cleanup(c);
    c = NULL;
  }
  if (c)
    curl_easy_reset(c);
  return c ? c : curl_easy_init();
}

uint64_t kube_out_of_step(struct kube *k) {
  return atomic_load(&k->out_of_step);
}

/* c back to the pool after a request the server answered (reuse: its connection is sound),
 * else closed. */
static void handle_give(struct kube *k, CURL *c, bool reuse) {
  if (!c)
    return;
  pthread_mutex_lock(&k->pool_mu);
  if (reuse && k->nidle < KUBE_POOL_MAX) {
    k->idle[k->nidle++] = (struct idle){c, mono_ns()};
    c = NULL;
  }
  pthread_mutex_unlock(&k->pool_mu);
  if (c)
    curl_easy_cleanup(c);
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

static size_t body_write(char *data, size_t size, size_t n, void *user) {
  return gs_buf_add(user, data, size * n) ? 0 : size * n;
}

static int progress_cb(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  struct kube *k = user;
  return atomic_load(&k->cancel) ? 1 : 0;
}

/* The server's CA, the client certificate and key, and whether to check the server at all. */
static void setup_tls(CURL *c, const struct kube_config *cfg) {
  if (cfg->ca) {
    struct curl_blob b = {cfg->ca, cfg->ca_len, CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &b);
  }
  if (cfg->cert) {
    struct curl_blob bc = {cfg->cert, cfg->cert_len, CURL_BLOB_COPY};
    struct curl_blob bk = {cfg->key, cfg->key_len, CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &bc);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &bk);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (cfg->insecure) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
}

/* Appends "NAME: VALUE" to *h; the formatted line is wiped after (it may hold the token). */
static int add_header(struct curl_slist **h, const char *name, const char *value) {
  struct curl_slist *t;
  char *line;

  if (asprintf(&line, "%s: %s", name, value) < 0)
    return -ENOMEM;
  t = curl_slist_append(*h, line);
  explicit_bzero(line, strlen(line));
  free(line);
  if (!t)
    return -ENOMEM;
  *h = t;
  return 0;
}

/* The bearer token (a token file is read again each time: projected tokens rotate), Accept and
 * Content-Type. */
static int setup_headers(struct kube *k, const char *content_type, struct curl_slist **ret,
                         char *err, size_t errlen) {
  struct curl_slist *h = NULL;
  char *token = NULL, *bearer = NULL;
  size_t n;
  int rc;

  if (k->cfg->token_file) {
    rc = kube_read_file("token file", k->cfg->token_file, &token, &n, err, errlen);
    if (rc < 0)
      return rc;
    while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' '))
      token[--n] = 0;
  }
  rc = 0;
  if ((token || k->cfg->token) &&
      asprintf(&bearer, "Bearer %s", token ? token : k->cfg->token) < 0) {
    bearer = NULL;
    rc = -ENOMEM;
  }
  if (!rc && bearer)
    rc = add_header(&h, "Authorization", bearer);
  if (!rc)
    rc = add_header(&h, "Accept", "application/json");
  if (!rc && content_type)
    rc = add_header(&h, "Content-Type", content_type);
  /* No "Expect: 100-continue" wait before a body. */
  if (!rc && content_type) {
    struct curl_slist *t = curl_slist_append(h, "Expect:");
    if (t)
      h = t;
    else
      rc = -ENOMEM;
  }
  if (token)
    explicit_bzero(token, strlen(token));
  if (bearer)
    explicit_bzero(bearer, strlen(bearer));
  free(token);
  free(bearer);
  if (rc) {
    curl_slist_free_all(h);
    return rc;
  }
  *ret = h;
  return 0;
}

/* A handle set up for one request: URL, credentials, TLS, headers. pooled: from the pool
 * (handle_give it back), else a new one of its own (a watch: curl_easy_cleanup it). */
static int setup(struct kube *k, const char *method, const char *path, const char *content_type,
                 bool pooled, CURL **ret, struct curl_slist **ret_headers, char *err,
                 size_t errlen) {
  struct curl_slist *h = NULL;
  char *url = NULL;
  CURL *c;
  int rc;

  c = pooled ? handle_take(k) : curl_easy_init();
  if (!c)
    return -ENOMEM;
  if (asprintf(&url, "%s%s", k->cfg->server, path) < 0) {
    curl_easy_cleanup(c);
    return -ENOMEM;
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  free(url); /* libcurl keeps its own copy */
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, k);
  /* A kept connection idle longer is not reused (a server or balancer closes idle ones). */
  curl_easy_setopt(c, CURLOPT_MAXAGE_CONN, (long)KUBE_IDLE_S);
  setup_tls(c, k->cfg);
  rc = setup_headers(k, content_type, &h, err, errlen);
  if (rc) {
    curl_easy_cleanup(c);
    return rc;
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  *ret = c;
  *ret_headers = h;
  return 0;
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

/* A POST's body, given to libcurl from memory without a way back: libcurl sends a request again
 * (once, on a fresh connection) when a kept connection turned out closed before any answer, and
 * a POST is not safe to send twice (the server may have taken it before closing). Every other
 * method is (GET, PUT, merge PATCH, DELETE: idempotent) and goes as POSTFIELDS, which libcurl
 * sends again. */
struct once {
  const char *p;
  size_t len, off;
};

static size_t once_read(char *buf, size_t size, size_t n, void *user) {
  struct once *o = user;
  size_t m = o->len - o->off < size * n ? o->len - o->off : size * n;
  memcpy(buf, o->p + o->off, m);
  o->off += m;
  return m;
}

static int once_seek(void *user, curl_off_t off, int origin) {
  struct once *o = user;
  if (origin != SEEK_SET || off != 0 || o->off != 0)
    return CURL_SEEKFUNC_CANTSEEK;
  return CURL_SEEKFUNC_OK; /* nothing sent yet */
}

static void body_set(CURL *c, const char *method, const char *data, struct once *o) {
  if (strcmp(method, "POST")) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
    return;
  }
  *o = (struct once){data, strlen(data), 0};
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->len);
  curl_easy_setopt(c, CURLOPT_READFUNCTION, once_read);
  curl_easy_setopt(c, CURLOPT_READDATA, o);
  curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, once_seek);
  curl_easy_setopt(c, CURLOPT_SEEKDATA, o);
}

int kube_request(struct kube *k, const char *method, const char *path, const char *content_type,
                 const json_t *body, long *ret_status, json_t **ret_body, char *err,
                 size_t errlen) {
  struct once once;
  struct gs_buf resp = GS_BUF_INIT(BODY_MAX);
  struct curl_slist *headers = NULL;
  char *data = NULL;
  CURL *c = NULL;
  CURLcode cc = CURLE_FAILED_INIT;
  long status = 0;
  int rc;

  rc = setup(k, method, path, body ? (content_type ? content_type : "application/json") : NULL,
             true, &c, &headers, err, errlen);
  if (rc)
    return rc;
  if (body) {
    data = json_dumps(body, JSON_COMPACT);
    if (!data) {
      rc = -ENOMEM;
      goto out;
    }
    body_set(c, method, data, &once);
  }
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, k->timeout_ms);
  /* A server once out of step (handle_sound) keeps no connection of ours past its answer. */
  if (atomic_load(&k->out_of_step))
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
  cc = curl_easy_perform(c);
  if (cc != CURLE_OK && resp.err == -EFBIG) {
    rc = k8s_err(err, errlen, -EFBIG, "%s %s%s: answer is over %u MiB", method, k->cfg->server,
                 path, BODY_MAX >> 20);
    goto out;
  }
  if (cc == CURLE_SEND_FAIL_REWIND) {
    rc = k8s_err(err, errlen, -EIO,
                 "%s %s%s: the server closed the connection without answering (not sent again: "
                 "it may have been taken)",
                 method, k->cfg->server, path);
    goto out;
  }
  if (cc != CURLE_OK) {
    rc = curl_error(k, cc, method, path, err, errlen);
    goto out;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
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
  gs_buf_free(&resp);
  /* A refusal of a request with a body may have come before the server read it (a server should
   * then close the connection; not every one does, and the body's bytes would be read as the
   * next request): that connection is not used again. */
  handle_give(k, c, cc == CURLE_OK && (!body || status / 100 == 2));
  curl_slist_free_all(headers);
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

int kube_put(struct kube *k, const char *path, const json_t *body, json_t **ret_body, char *err,
             size_t errlen) {
  return call(k, "PUT", path, "application/json", body, ret_body, err, errlen);
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
  struct gs_buf line;
  struct gs_buf other; /* a non-200 answer's body */
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

/* The write callback's answer when an event did not fit its buffer: the transfer stops. */
static size_t watch_too_long(struct watch *w) {
  w->rc = w->line.err == -EFBIG ? k8s_err(w->err, w->errlen, -EFBIG,
                                          "watch: one event is over %u MiB", LINE_MAX_BYTES >> 20)
                                : w->line.err;
  return 0;
}

static size_t watch_write(char *data, size_t size, size_t n, void *user) {
  struct watch *w = user;
  size_t len = size * n, start = 0;

  if (!w->status)
    curl_easy_getinfo(w->c, CURLINFO_RESPONSE_CODE, &w->status);
  if (w->status != 200)
    return gs_buf_add(&w->other, data, len) ? 0 : len;
  for (size_t i = 0; i < len; i++) {
    if (data[i] != '\n')
      continue;
    if (gs_buf_add(&w->line, data + start, i - start))
      return watch_too_long(w);
    start = i + 1;
    if (w->line.len) {
      w->rc = watch_event(w, w->line.p, w->line.len);
      gs_buf_clear(&w->line);
      if (w->rc)
        return 0;
    }
  }
  if (start < len && gs_buf_add(&w->line, data + start, len - start))
    return watch_too_long(w);
  return len;
}

int kube_watch(struct kube *k, const char *path, const char *rv, int timeout_s, kube_watch_cb cb,
               void *user, char **ret_rv, char *err, size_t errlen) {
  struct watch w = {.line = GS_BUF_INIT(LINE_MAX_BYTES),
                    .other = GS_BUF_INIT(1 << 20),
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
  rc = setup(k, "GET", p, NULL, false, &w.c, &headers, err, errlen);
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
  gs_buf_free(&w.line);
  gs_buf_free(&w.other);
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
