/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-webhook's HTTPS server (serve.h). A few epoll threads serve every connection: an
 * answer is computed from the body alone, at once, so no request waits on another. A reaper
 * cuts a connection whose request (headers and body) or idle wait runs past the deadline:
 * libmicrohttpd's own timeout is an idle one, which a byte every few seconds resets. The same
 * thread looks at the certificate files now and then: a renewed pair (cert-manager's, through
 * the Secret volume) is served by a new libmicrohttpd daemon on the same listening socket,
 * started before the old one stops taking connections, so no caller sees a refusal. */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "fileio.h"
#include "log.h"
#include "server.h" /* gslice-extender's: ext_listen_parse, one reading of [HOST:]PORT */

/* Last: it expects the system headers it builds on to be in already. */
#include <gnutls/gnutls.h>
#include <microhttpd.h>

/* Bytes of request bodies held over all connections at once. */
#define BODY_BUDGET (64u << 20)
#define CONNECTIONS 1024
#define PER_IP_CONNECTIONS 32
#define THREADS 4
#define REQUEST_TIMEOUT_S 10
#define REAP_EVERY_MS 200
#define RELOAD_EVERY_MS 5000
#define PEM_MAX (1u << 20)

/* A connection, from accept to close (libmicrohttpd's socket context). */
struct conn {
  struct conn *prev, *next;
  int fd;
  uint64_t since_ms; /* accept, or the end of its last request (atomic) */
  bool cut;
};

/* What a certificate or key file is now: a renewal changes one of these (the kubelet swaps
 * a Secret volume's files by renaming a directory, so the inode changes). */
struct file_id {
  dev_t dev;
  ino_t ino;
  struct timespec mtime;
  off_t size;
};

struct wh_server {
  struct MHD_Daemon *mhd;
  int fd; /* the listening socket, ours: each daemon serves a dup of it */
  bool v6;
  uint16_t port;
  unsigned per_ip;
  char *cert_path, *key_path;
  struct file_id cert_id, key_id; /* of the pair last tried */
  uint64_t reload_at_ms;
  const struct wh_cfg *review;
  bool log;
  uint64_t timeout_ms;
  char *cert, *key;
  size_t body_held;     /* atomic */
  pthread_mutex_t lock; /* conns */
  struct conn *conns;
  pthread_t reaper;
  bool reaper_started;
  pthread_mutex_t stop_lock;
  pthread_cond_t stop_cond;
  bool stopping;
};

/* A POST /mutate's body; its capacity is charged to body_held until the request is done. */
struct req {
  struct gs_buf body;
  size_t charged;
};

/* ---- replies ------------------------------------------------------------------------------ */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, char *body, size_t len,
                             const char *ctype) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  enum MHD_Result ret;
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", ctype);
  ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *text) {
  struct gs_buf b = GS_BUF_INIT(0);
  size_t len;
  gs_buf_printf(&b, "%s\n", text);
  char *body = gs_buf_steal(&b, &len, NULL);
  return body ? reply(conn, status, body, len, "text/plain; charset=utf-8") : MHD_NO;
}

/* ---- requests ----------------------------------------------------------------------------- */

/* The first call of a request: method, path and declared length judged before a byte of the
 * body is read; the body's buffer charged at once for the declared length. */
static enum MHD_Result begin(struct wh_server *s, struct MHD_Connection *conn, const char *url,
                             const char *method, void **req_cls) {
  bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (strcmp(url, "/healthz") == 0)
    return get ? reply_text(conn, 200, "ok") : reply_text(conn, 405, "/healthz is GET only");
  if (strcmp(url, "/mutate") != 0)
    return reply_text(conn, 404, "not found: gslice-webhook serves POST /mutate, GET /healthz");
  if (strcmp(method, MHD_HTTP_METHOD_POST) != 0)
    return reply_text(conn, 405, "method not allowed: /mutate is POST only");
  const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
  unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0;
  if (want > WH_BODY_MAX)
    return reply_text(conn, 413, "request body over 4 MiB");
  struct req *r = calloc(1, sizeof(*r));
  if (!r)
    return MHD_NO;
  gs_buf_init(&r->body, WH_BODY_MAX);
  *req_cls = r;
  r->charged = want ? want + 1 : 64u << 10;
  if (__atomic_add_fetch(&s->body_held, r->charged, __ATOMIC_RELAXED) > BODY_BUDGET)
    return reply_text(conn, 503, "gslice-webhook holds too many request bodies now");
  if (gs_buf_reserve(&r->body, r->charged - 1))
    return MHD_NO;
  return MHD_YES;
}

/* A piece of the body. Past the bound (a chunked body, whose length was not declared) the
 * connection is cut, not read to its end. */
static enum MHD_Result upload(struct wh_server *s, struct req *r, const char *data, size_t n) {
  if (r->body.len + n > WH_BODY_MAX)
    return MHD_NO;
  if (r->body.len + n + 1 > r->charged) {
    size_t more = r->body.len + n + 1 - r->charged;
    more = more < r->charged ? r->charged : more; /* doubling */
    if (r->charged + more > WH_BODY_MAX + 1)
      more = WH_BODY_MAX + 1 - r->charged;
    if (__atomic_add_fetch(&s->body_held, more, __ATOMIC_RELAXED) > BODY_BUDGET) {
      __atomic_sub_fetch(&s->body_held, more, __ATOMIC_RELAXED);
      return MHD_NO;
    }
    r->charged += more;
  }
  return gs_buf_add(&r->body, data, n) ? MHD_NO : MHD_YES;
}

static enum MHD_Result mutate(struct wh_server *s, struct MHD_Connection *conn, struct req *r) {
  char err[K8S_ERR_MAX * 2];
  enum wh_verdict v;
  char *out = NULL;
  size_t len = 0;
  int rc = wh_review(r->body.p ? r->body.p : "", r->body.len, s->review, &out, &len, &v, err,
                     sizeof err);
  if (rc == -ENOMEM)
    return reply_text(conn, 500, "out of memory");
  if (rc) {
    if (s->log)
      gs_log(GS_LOG_WARNING, "a malformed AdmissionReview: %s", err);
    return reply_text(conn, 400, err);
  }
  if (s->log && v == WH_DENIED)
    gs_log(GS_LOG_INFO, "denied a pod: %s", err);
  return reply(conn, 200, out, len, "application/json");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **req_cls) {
  struct wh_server *s = cls;
  struct req *r = *req_cls;
  (void)version;

  if (!r)
    return begin(s, conn, url, method, req_cls);
  if (*data_size) {
    size_t n = *data_size;
    *data_size = 0;
    return upload(s, r, data, n);
  }
  return mutate(s, conn, r);
}

static struct conn *conn_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

static void done(void *cls, struct MHD_Connection *conn, void **req_cls,
                 enum MHD_RequestTerminationCode toe) {
  struct wh_server *s = cls;
  struct req *r = *req_cls;
  struct conn *c = conn_of(conn);
  (void)toe;
  if (c) /* the next request's time starts now */
    __atomic_store_n(&c->since_ms, gs_mono_ms(), __ATOMIC_RELAXED);
  if (r) {
    __atomic_sub_fetch(&s->body_held, r->charged, __ATOMIC_RELAXED);
    gs_buf_free(&r->body);
    free(r);
    *req_cls = NULL;
  }
}

static void notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                   enum MHD_ConnectionNotificationCode code) {
  struct wh_server *s = cls;
  struct conn *c = *socket_context;

  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || !(c = calloc(1, sizeof(*c)))) {
      if (ci) /* untracked, it would escape the deadline */
        shutdown(ci->connect_fd, SHUT_RDWR);
      return;
    }
    c->fd = ci->connect_fd;
    c->since_ms = gs_mono_ms();
    pthread_mutex_lock(&s->lock);
    c->next = s->conns;
    if (s->conns)
      s->conns->prev = c;
    s->conns = c;
    pthread_mutex_unlock(&s->lock);
    *socket_context = c;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && c) {
    /* Before libmicrohttpd closes the socket: the reaper never shuts down a reused fd. */
    pthread_mutex_lock(&s->lock);
    if (c->prev)
      c->prev->next = c->next;
    else
      s->conns = c->next;
    if (c->next)
      c->next->prev = c->prev;
    pthread_mutex_unlock(&s->lock);
    free(c);
    *socket_context = NULL;
  }
}

/* libmicrohttpd's messages (a refused handshake, a peer over its limit): gs_log limits their
 * repeats, so a peer cannot fill the log. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  struct wh_server *s = cls;
  char msg[512];
  if (!s->log)
    return;
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = 0;
  gs_log(GS_LOG_WARNING, "libmicrohttpd: %s", msg);
}

/* ---- the deadline ------------------------------------------------------------------------- */

static void reap(struct wh_server *s, uint64_t now) {
  pthread_mutex_lock(&s->lock);
  for (struct conn *c = s->conns; c; c = c->next) {
    uint64_t since = __atomic_load_n(&c->since_ms, __ATOMIC_RELAXED);
    if (!c->cut && now > since && now - since > s->timeout_ms) {
      /* Its thread sees end of file and closes; the fd is still ours (see notify). */
      shutdown(c->fd, SHUT_RDWR);
      c->cut = true;
    }
  }
  pthread_mutex_unlock(&s->lock);
}

static void reload(struct wh_server *s); /* "starting" below */

static void *reaper(void *arg) {
  struct wh_server *s = arg;
  pthread_mutex_lock(&s->stop_lock);
  while (!s->stopping) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += REAP_EVERY_MS * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&s->stop_cond, &s->stop_lock, &ts);
    if (s->stopping)
      break;
    pthread_mutex_unlock(&s->stop_lock);
    uint64_t now = gs_mono_ms();
    reap(s, now);
    if (now >= s->reload_at_ms) {
      reload(s);
      s->reload_at_ms = now + RELOAD_EVERY_MS;
    }
    pthread_mutex_lock(&s->stop_lock);
  }
  pthread_mutex_unlock(&s->stop_lock);
  return NULL;
}

/* ---- starting ----------------------------------------------------------------------------- */

static int read_pem(const char *flag, const char *path, char **ret, char *err, size_t errlen) {
  int rc = gs_file_read(AT_FDCWD, path, GS_FILE_REGULAR, PEM_MAX, ret, NULL);
  if (rc)
    snprintf(err, errlen, "%s %s: %s", flag, path,
             rc == -EFBIG    ? "over 1 MiB"
             : rc == -EINVAL ? "not a file"
                             : strerror(-rc));
  return rc ? -EINVAL : 0;
}

/* Our own socket: close-on-exec, the real errno when the port is taken, the port bound. */
static int open_listener(const char *text, int *ret_fd, bool *ret_v6, uint16_t *ret_port, char *err,
                         size_t errlen) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  char host[256], port[8];
  uint16_t p;
  int fd = -1, one = 1, rc;

  if (ext_listen_parse(text, host, sizeof host, &p)) {
    snprintf(err, errlen, "--listen \"%s\" is not [HOST:]PORT (e.g. 8443 or 127.0.0.1:8443)", text);
    return -EINVAL;
  }
  snprintf(port, sizeof port, "%u", p);
  if (!host[0])
    hints.ai_family = AF_INET;
  if ((rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai))) {
    snprintf(err, errlen, "--listen %s: %s", text, gai_strerror(rc));
    return -EINVAL;
  }
  fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  rc = fd < 0 ? -errno : 0;
  if (!rc && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one),
              bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0))
    rc = -errno;
  if (!rc && getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
    *ret_port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                                 : ((struct sockaddr_in6 *)&bound)->sin6_port);
  if (rc) {
    snprintf(err, errlen, "cannot listen on %s: %s", text, strerror(-rc));
    if (fd >= 0)
      close(fd);
  } else {
    *ret_fd = fd;
    *ret_v6 = ai->ai_family == AF_INET6;
  }
  freeaddrinfo(ai);
  return rc;
}

/* Whether GnuTLS takes cert and key as a pair (what libmicrohttpd would refuse at start). */
static bool pair_ok(const char *cert, const char *key) {
  gnutls_certificate_credentials_t cred;
  gnutls_datum_t c = {(unsigned char *)cert, (unsigned)strlen(cert)};
  gnutls_datum_t k = {(unsigned char *)key, (unsigned)strlen(key)};
  if (gnutls_certificate_allocate_credentials(&cred) != GNUTLS_E_SUCCESS)
    return false;
  int rc = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM);
  gnutls_certificate_free_credentials(cred);
  return rc == GNUTLS_E_SUCCESS;
}

/* A daemon serving a dup of the socket: libmicrohttpd closes its own when it stops (or fails
 * to start), never ours. */
static struct MHD_Daemon *start_mhd(struct wh_server *s, const char *cert, const char *key) {
  /* ITC: MHD_quiesce_daemon, when a renewed certificate takes over. */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                   MHD_USE_TLS | MHD_USE_ITC | (s->v6 ? MHD_USE_IPv6 : 0);
  int fd = pair_ok(cert, key) ? fcntl(s->fd, F_DUPFD_CLOEXEC, 0) : -1;
  if (fd < 0)
    return NULL;
  struct MHD_OptionItem opts[] = {
      {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, s},
      {MHD_OPTION_LISTEN_SOCKET, fd, NULL},
      {MHD_OPTION_THREAD_POOL_SIZE, THREADS, NULL},
      {MHD_OPTION_CONNECTION_LIMIT, CONNECTIONS, NULL},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->per_ip, NULL},
      {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)(s->timeout_ms / 1000), NULL},
      {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify, s},
      {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)done, s},
      {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key},
      {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cert},
      {MHD_OPTION_HTTPS_PRIORITIES, 0, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
      {MHD_OPTION_END, 0, NULL},
  };
  return MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}

static struct file_id file_id_of(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return (struct file_id){0};
  return (struct file_id){st.st_dev, st.st_ino, st.st_mtim, st.st_size};
}

static bool file_id_eq(const struct file_id *a, const struct file_id *b) {
  return a->dev == b->dev && a->ino == b->ino && a->mtime.tv_sec == b->mtime.tv_sec &&
         a->mtime.tv_nsec == b->mtime.tv_nsec && a->size == b->size;
}

/* The certificate and key read, and their files' identities as they were before. */
static int read_pair(struct wh_server *s, char **ret_cert, char **ret_key, char *err,
                     size_t errlen) {
  s->cert_id = file_id_of(s->cert_path);
  s->key_id = file_id_of(s->key_path);
  int rc = read_pem("--tls-cert", s->cert_path, ret_cert, err, errlen);
  if (!rc && (rc = read_pem("--tls-key", s->key_path, ret_key, err, errlen))) {
    free(*ret_cert);
    *ret_cert = NULL;
  }
  return rc;
}

/* A renewed pair of files: served by a new daemon on the same socket, and the old one stops
 * taking connections only once the new one does. A pair that cannot be read or served is
 * logged once (until the files change again), and the old one is kept. */
static void reload(struct wh_server *s) {
  struct file_id c = file_id_of(s->cert_path), k = file_id_of(s->key_path);
  struct MHD_Daemon *d = NULL;
  char *cert = NULL, *key = NULL, err[512];

  if (file_id_eq(&c, &s->cert_id) && file_id_eq(&k, &s->key_id))
    return;
  if (read_pair(s, &cert, &key, err, sizeof err))
    gs_log(GS_LOG_WARNING, "%s; still serving the certificate read before", err);
  else if (!(d = start_mhd(s, cert, key)))
    gs_log(GS_LOG_WARNING,
           "the changed --tls-cert %s and --tls-key %s cannot be served (not a PEM certificate "
           "and its key?); still serving the certificate read before",
           s->cert_path, s->key_path);
  if (!d) {
    free(cert);
    free(key);
    return;
  }
  MHD_socket old_fd = MHD_quiesce_daemon(s->mhd); /* no more connections for it */
  MHD_stop_daemon(s->mhd);
  if (old_fd != MHD_INVALID_SOCKET)
    close(old_fd); /* its dup, left to us by the quiesce */
  s->mhd = d;
  free(s->cert);
  free(s->key);
  s->cert = cert;
  s->key = key;
  gs_log(GS_LOG_INFO, "serving the renewed certificate %s", s->cert_path);
}

int wh_server_start(const struct wh_server_cfg *cfg, struct wh_server **ret, char *err,
                    size_t errlen) {
  struct wh_server *s = calloc(1, sizeof(*s));
  pthread_condattr_t ca;
  int rc;

  if (!s)
    return -ENOMEM;
  s->fd = -1;
  s->review = cfg->review;
  s->log = cfg->log;
  s->timeout_ms = 1000ull * (cfg->request_timeout_s ? cfg->request_timeout_s : REQUEST_TIMEOUT_S);
  s->per_ip = cfg->per_ip_connections ? cfg->per_ip_connections : PER_IP_CONNECTIONS;
  s->reload_at_ms = gs_mono_ms() + RELOAD_EVERY_MS;
  pthread_mutex_init(&s->lock, NULL);
  pthread_mutex_init(&s->stop_lock, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->stop_cond, &ca);
  pthread_condattr_destroy(&ca);

  if (!cfg->tls_cert || !cfg->tls_key) {
    snprintf(err, errlen,
             "--tls-cert and --tls-key are required: the API server calls "
             "admission webhooks over HTTPS only");
    rc = -EINVAL;
  } else if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    snprintf(err, errlen, "this libmicrohttpd was built without TLS");
    rc = -EINVAL;
  } else if (!(s->cert_path = strdup(cfg->tls_cert)) || !(s->key_path = strdup(cfg->tls_key))) {
    rc = -ENOMEM;
  } else if (!(rc = read_pair(s, &s->cert, &s->key, err, errlen)) &&
             !(rc = open_listener(cfg->listen, &s->fd, &s->v6, &s->port, err, errlen)) &&
             !(s->mhd = start_mhd(s, s->cert, s->key))) {
    snprintf(err, errlen,
             "cannot serve TLS on %s: is --tls-cert a PEM certificate, --tls-key its PEM "
             "private key?",
             cfg->listen);
    rc = -EINVAL;
  }
  if (!rc && pthread_create(&s->reaper, NULL, reaper, s) != 0) {
    snprintf(err, errlen, "cannot start a thread");
    rc = -EAGAIN;
  }
  if (rc) {
    wh_server_stop(s);
    return rc;
  }
  s->reaper_started = true;
  *ret = s;
  return 0;
}

uint16_t wh_server_port(const struct wh_server *s) {
  return s->port;
}

void wh_server_stop(struct wh_server *s) {
  if (!s)
    return;
  if (s->reaper_started) {
    pthread_mutex_lock(&s->stop_lock);
    s->stopping = true;
    pthread_cond_signal(&s->stop_cond);
    pthread_mutex_unlock(&s->stop_lock);
    pthread_join(s->reaper, NULL);
  }
  if (s->mhd)
    MHD_stop_daemon(s->mhd); /* and closes its dup of the socket */
  if (s->fd >= 0)
    close(s->fd);
  free(s->cert_path);
  free(s->key_path);
  free(s->cert);
  free(s->key);
  free(s);
}
