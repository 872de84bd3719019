/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's HTTP server (server.h): one thread per connection (kube-scheduler keeps a
 * few long-lived ones; /bind waits on the API server without holding up the others), two
 * listeners (the verbs; /metrics and the probes), and a reaper that cuts any connection
 * whose request (headers and body) or idle wait runs past the deadline: libmicrohttpd's own
 * timeout is an idle one, which a byte every few seconds resets for ever. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "event.h"
#include "log.h"
#include "prom.h"

/* Last: it expects the system headers it builds on to be in already. */
#include <microhttpd.h>
#ifdef GSLICE_HAVE_GNUTLS
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#endif

/* A request body: NodeNames of VERB_NODES_MAX names of up to 253 bytes (4.2 MB at most,
 * some 0.5 MB for 15,000 real names) and a Pod (the API server stores at most 1.5 MiB). */
#define BODY_MAX (8u << 20)
/* Bytes of request bodies held over all connections at once. */
#define BODY_BUDGET (64u << 20)
/* After a request this large, memory goes back to the system (malloc_trim). */
#define TRIM_AFTER (1u << 20)
/* Connections (each a thread on the verbs listener) over all peers, and per address: idle
 * sockets of a few hundred peers take neither the last thread nor a probe's turn. */
#define VERB_CONNECTIONS 1024
#define VERB_THREAD_STACK (1u << 20)
/* The probes share this listener with Prometheus: a pod that can reach it must not take every
 * slot from them. Many more slots than sources get (epoll: an idle socket costs a descriptor
 * and a small pool), so filling it takes 512 source addresses. */
#define METRICS_CONNECTIONS 2048
#define METRICS_PER_IP 4
#define METRICS_CONNECTION_MEMORY (16u << 10)
#define REQUEST_TIMEOUT_S 10
#define PER_IP_CONNECTIONS 32
#define REAP_EVERY_MS 200
#define PEM_MAX (1u << 20)

struct ext_server;

/* A connection, from accept to close (libmicrohttpd's socket context). */
struct conn {
  struct conn *prev, *next;
  struct listener *l;
  int fd;
  uint64_t since_ms; /* start of what the deadline counts: accept, or the last answer */
  bool busy;         /* the verb runs: our time, not the peer's */
  bool cut;
};

struct listener {
  struct ext_server *s;
  struct MHD_Daemon *mhd;
  uint16_t port;
  bool verbs;
  bool client_auth;
  pthread_mutex_t lock; /* conns, nconns */
  struct conn *conns;
  unsigned nconns;
};

/* gslice_extender_request_duration_seconds: each verb's time from its body read to its answer
 * made, 0.1 ms .. 10 s. Counts per bucket (not cumulative) and the sum, atomic. */
#define DUR_BUCKETS 16
static const double dur_bounds[DUR_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1,      2.5,     5,      10};
enum { VERB_FILTER, VERB_PRIORITIZE, VERB_BIND, VERB_KINDS };
struct duration {
  uint64_t bucket[DUR_BUCKETS + 1]; /* the last: over 10 s */
  uint64_t sum_ns;
};

struct ext_server {
  struct listener verbs, metrics;
  struct duration dur[VERB_KINDS];
  struct verbs *v;
  bool log;
  uint64_t timeout_ms;
  char *cert, *key, *ca;
  size_t body_held;                    /* atomic */
  uint64_t cut_deadline, refused_busy; /* atomic counters */
  pthread_t reaper;
  bool reaper_started;
  pthread_mutex_t stop_lock;
  pthread_cond_t stop_cond;
  bool stopping;
};

/* A request's body; its capacity counts in ext_server's body_held from before it is
 * allocated (body_grow) until the request is done. */
struct req {
  struct gs_buf body;
};

int ext_listen_parse(const char *text, char *host, size_t hostlen, uint16_t *ret_port) {
  const char *colon, *port;
  char *end;
  unsigned long p;

  if (!text || !*text)
    return -EINVAL;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (!close || close[1] != ':' || (size_t)(close - text - 1) >= hostlen)
      return -EINVAL;
    snprintf(host, hostlen, "%.*s", (int)(close - text - 1), text + 1);
    port = close + 2;
  } else if ((colon = strrchr(text, ':'))) {
    if ((size_t)(colon - text) >= hostlen || colon == text || memchr(text, ':', colon - text))
      return -EINVAL;
    snprintf(host, hostlen, "%.*s", (int)(colon - text), text);
    port = colon + 1;
  } else {
    snprintf(host, hostlen, "%s", "");
    port = text;
  }
  errno = 0;
  p = strtoul(port, &end, 10);
  if (!*port || *end || errno || p > 65535 || port[0] == '-' || port[0] == '+')
    return -EINVAL;
  *ret_port = (uint16_t)p;
  return 0;
}

static bool addr_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
  }
  return false;
}

int ext_listen_loopback(const char *text, char *err, size_t errlen) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  char host[256];
  uint16_t port;
  int rc, loop = 1;

  if (ext_listen_parse(text, host, sizeof host, &port)) {
    snprintf(err, errlen, "\"%s\" is not [HOST:]PORT", text);
    return -EINVAL;
  }
  if (!host[0])
    return 0; /* every IPv4 address */
  rc = getaddrinfo(host, "1", &hints, &ai);
  if (rc) {
    snprintf(err, errlen, "%s: %s", text, gai_strerror(rc));
    return -EINVAL;
  }
  for (struct addrinfo *i = ai; i; i = i->ai_next)
    loop &= addr_loopback(i->ai_addr);
  freeaddrinfo(ai);
  return loop;
}

/* ---- replies ----------------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *conn, int status, char *body, size_t len,
                             const char *ctype) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  enum MHD_Result ret;
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", ctype);
  ret = MHD_queue_response(conn, (unsigned)status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, int status, const char *text) {
  char *b = strdup(text);
  return b ? reply(conn, status, b, strlen(b), "text/plain; charset=utf-8") : MHD_NO;
}

static enum MHD_Result reply_json_error(struct MHD_Connection *conn, int status, const char *text) {
  struct gs_buf b = GS_BUF_INIT(0);
  size_t len;
  gs_buf_puts(&b, "{\"Error\":");
  gs_buf_json_str(&b, text);
  gs_buf_putc(&b, '}');
  char *body = gs_buf_steal(&b, &len, NULL);
  return body ? reply(conn, status, body, len, "application/json") : MHD_NO;
}

static unsigned listener_conns(struct listener *l) {
  pthread_mutex_lock(&l->lock);
  unsigned n = l->nconns;
  pthread_mutex_unlock(&l->lock);
  return n;
}

static void counter(struct gs_buf *b, const char *name, const char *help, const char *label,
                    const char *const *values, const uint64_t *n, size_t count) {
  gs_prom_family(b, name, "counter", help);
  for (size_t i = 0; i < count; i++)
    gs_prom_sample_u64(b, name, NULL, label ? (const char *const[]){label, values[i], NULL} : NULL,
                       n[i]);
}

/* Cumulative buckets, _sum and _count (the +Inf bucket) of each verb's durations. */
static void durations(struct ext_server *s, struct gs_buf *b) {
  static const char *const verbs[VERB_KINDS] = {"filter", "prioritize", "bind"};
  const char *name = "gslice_extender_request_duration_seconds";

  gs_prom_family(b, name, "histogram",
                 "Time each verb took, from its body read to its answer made, by verb.");
  for (int v = 0; v < VERB_KINDS; v++) {
    uint64_t cum = 0;
    for (int i = 0; i <= DUR_BUCKETS; i++) {
      char le[32] = "+Inf";
      if (i < DUR_BUCKETS)
        snprintf(le, sizeof(le), "%g", dur_bounds[i]);
      cum += __atomic_load_n(&s->dur[v].bucket[i], __ATOMIC_RELAXED);
      gs_prom_sample_u64(b, name, "_bucket",
                         (const char *const[]){"verb", verbs[v], "le", le, NULL}, cum);
    }
    const char *const *l = (const char *const[]){"verb", verbs[v], NULL};
    gs_prom_sample(b, name, "_sum", l, __atomic_load_n(&s->dur[v].sum_ns, __ATOMIC_RELAXED) / 1e9);
    gs_prom_sample_u64(b, name, "_count", l, cum);
  }
}

/* The server's and the verbs' figures, after the cluster view's. */
static void metrics(struct ext_server *s, struct gs_buf *b) {
  struct verb_stats st;
  struct cluster *c = verbs_cluster(s->v);

  verbs_stats_read(s->v, &st);
  cluster_metrics(c, b, gs_mono_ms());
  counter(b, "gslice_extender_requests_total", "Extender calls by verb.", "verb",
          (const char *const[]){"filter", "prioritize", "bind"},
          (const uint64_t[]){st.filter, st.prioritize, st.bind}, 3);
  durations(s, b);
  counter(b, "gslice_extender_bind_errors_total", "Binds answered with an Error.", NULL, NULL,
          &st.bind_errors, 1);
  counter(b, "gslice_extender_bind_refused_total",
          "Binds refused as not kube-scheduler's to ask (another UID or schedulerName, a node "
          "/filter did not pass).",
          NULL, NULL, &st.bind_refused, 1);
  counter(b, "gslice_extender_bind_repeated_total",
          "Binds whose Binding was already in place with the same assignment (409, counted as "
          "success).",
          NULL, NULL, &st.bind_conflicts_same, 1);
  counter(b, "gslice_extender_not_ready_total",
          "Filter or prioritize calls answered 503 before the first sync.", NULL, NULL,
          &st.not_ready, 1);
  counter(b, "gslice_extender_bad_requests_total", "Calls with a malformed body.", NULL, NULL,
          &st.bad_requests, 1);
  counter(b, "gslice_extender_connections_cut_total",
          "Connections closed for running past the request deadline (--request-timeout), or "
          "refused for the bytes of bodies held.",
          "reason", (const char *const[]){"deadline", "bodies"},
          (const uint64_t[]){__atomic_load_n(&s->cut_deadline, __ATOMIC_RELAXED),
                             __atomic_load_n(&s->refused_busy, __ATOMIC_RELAXED)},
          2);
  gs_prom_family(b, "gslice_extender_connections", "gauge", "Connections open now, by listener.");
  gs_prom_sample_u64(b, "gslice_extender_connections", NULL,
                     (const char *const[]){"listener", "verbs", NULL}, listener_conns(&s->verbs));
  gs_prom_sample_u64(b, "gslice_extender_connections", NULL,
                     (const char *const[]){"listener", "metrics", NULL},
                     listener_conns(&s->metrics));
  gs_prom_family(b, "gslice_extender_request_body_bytes", "gauge",
                 "Bytes held now for request bodies not yet answered (bounded in all).");
  gs_prom_sample_u64(b, "gslice_extender_request_body_bytes", NULL, NULL,
                     __atomic_load_n(&s->body_held, __ATOMIC_RELAXED));
  struct kube_events *ev = verbs_events(s->v);
  if (ev) {
    struct kube_event_stats es;
    kube_events_stats(ev, &es);
    counter(b, "gslice_extender_events_total",
            "GSliceAssigned Events by outcome: posted, failed (the API server refused or was "
            "not reached), repeated (the same within 10 min, not posted), dropped (queue full, "
            "or over the bound per minute).",
            "outcome",
            (const char *const[]){"posted", "failed", "repeated", "dropped_full", "dropped_rate"},
            (const uint64_t[]){es.posted, es.failed, es.repeated, es.dropped_full, es.dropped_rate},
            5);
  }
  gs_prom_family(b, "gslice_extender_ready", "gauge",
                 "Whether the first list of nodes and pods is done.");
  gs_prom_sample_u64(b, "gslice_extender_ready", NULL, NULL, cluster_synced(c) ? 1 : 0);
}

static struct conn *conn_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

static void conn_busy(struct conn *c, bool busy) {
  if (!c)
    return;
  if (!busy)
    __atomic_store_n(&c->since_ms, gs_mono_ms(), __ATOMIC_RELAXED);
  __atomic_store_n(&c->busy, busy, __ATOMIC_RELEASE);
}

#ifdef GSLICE_HAVE_GNUTLS
/* The handshake already refused a peer without a certificate of --client-ca (see notify);
 * this says so again for each request, in case a libmicrohttpd ever skipped our hook. */
static bool peer_verified(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  unsigned status = 1, n = 0;
  if (!ci || !ci->tls_session)
    return false;
  gnutls_session_t ss = (gnutls_session_t)ci->tls_session;
  if (!gnutls_certificate_get_peers(ss, &n) || !n)
    return false;
  return gnutls_certificate_verify_peers2(ss, &status) == 0 && status == 0;
}
#endif

/* ---- the two listeners' handlers ----------------------------------------------------------- */

static enum MHD_Result handle_metrics(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version, const char *upload,
                                      size_t *upload_size, void **req_cls) {
  struct listener *l = cls;
  char *body = NULL;
  size_t len = 0;
  (void)version;
  (void)upload;

  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_text(conn, 405, "method not allowed: this listener serves GET only\n");
  (void)upload_size;
  (void)req_cls;
  if (strcmp(url, "/livez") == 0)
    return reply_text(conn, 200, "ok\n");
  if (strcmp(url, "/healthz") == 0)
    return cluster_synced(verbs_cluster(l->s->v))
               ? reply_text(conn, 200, "ok\n")
               : reply_text(conn, 503,
                            "not ready: the first list of nodes and pods is not read yet\n");
  if (strcmp(url, "/metrics") == 0) {
    struct gs_buf b = GS_BUF_INIT(0);
    metrics(l->s, &b);
    body = gs_buf_steal(&b, &len, NULL);
    return body ? reply(conn, 200, body, len, "text/plain; version=0.0.4; charset=utf-8") : MHD_NO;
  }
  return reply_text(conn, 404, "not found: this listener serves GET /metrics, /healthz, /livez\n");
}

/* Room for n more bytes of r's body, the buffer growing to cap bytes at most: charged to the
 * bytes held for all bodies before it is allocated, and refused past BODY_BUDGET. */
static bool body_grow(struct ext_server *s, struct req *r, size_t n, size_t cap) {
  size_t old = r->body.cap;
  if (r->body.len + n + 1 <= old)
    return true;
  size_t held = __atomic_add_fetch(&s->body_held, cap - old, __ATOMIC_RELAXED);
  r->body.max = cap - 1; /* gs_buf grows to its bound + 1 at most */
  if (held > BODY_BUDGET || gs_buf_reserve(&r->body, n)) {
    __atomic_sub_fetch(&s->body_held, cap - old, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->refused_busy, 1, __ATOMIC_RELAXED);
    return false;
  }
  __atomic_sub_fetch(&s->body_held, cap - r->body.cap, __ATOMIC_RELAXED); /* not taken */
  return true;
}

static size_t body_max(const char *url) {
  return strcmp(url, "/bind") == 0 ? VERB_BIND_BODY_MAX : BODY_MAX;
}

/* A request's first call: its method, verb and declared length judged before a byte of the
 * body is read, and the body's buffer taken at once for the declared length. */
static enum MHD_Result verbs_begin(struct listener *l, struct MHD_Connection *conn, const char *url,
                                   const char *method, void **req_cls) {
  struct ext_server *s = l->s;
#ifdef GSLICE_HAVE_GNUTLS
  if (l->client_auth && !peer_verified(conn))
    return MHD_NO;
#endif
  if (strcmp(method, MHD_HTTP_METHOD_POST) != 0)
    return strcmp(url, "/healthz") == 0 || strcmp(url, "/metrics") == 0
               ? reply_text(conn, 404,
                            "not found: /healthz and /metrics are served on --metrics-listen\n")
               : reply_text(conn, 405,
                            "method not allowed: the verbs are POST /filter, "
                            "/prioritize and /bind\n");
  bool is_bind = strcmp(url, "/bind") == 0;
  if (!is_bind && strcmp(url, "/filter") != 0 && strcmp(url, "/prioritize") != 0)
    return reply_json_error(conn, 404, "not found: the verbs are /filter, /prioritize and /bind");
  size_t max = body_max(url);
  const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
  unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0;
  if (want > max)
    return reply_json_error(conn, 413,
                            is_bind ? "request body over 64 KiB" : "request body over 8 MiB");
  struct req *r = calloc(1, sizeof(*r));
  if (!r)
    return MHD_NO;
  gs_buf_init(&r->body, max);
  *req_cls = r;
  if (want && !body_grow(s, r, want, want + 1))
    return reply_json_error(conn, 503, "gslice-extender holds too many request bodies now");
  return MHD_YES;
}

/* A piece of the body: appended, doubling the buffer up to the verb's bound. */
static enum MHD_Result verbs_upload(struct ext_server *s, struct req *r, const char *url,
                                    const char *upload, size_t n) {
  size_t max = body_max(url), cap = r->body.cap ? r->body.cap : 65536;
  if (r->body.len + n > max)
    return MHD_NO; /* a chunked body past the bound: cut, not read to its end */
  while (cap < r->body.len + n + 1)
    cap *= 2;
  if (cap > max + 1)
    cap = max + 1;
  if (!body_grow(s, r, n, cap) || gs_buf_add(&r->body, upload, n))
    return MHD_NO;
  return MHD_YES;
}

static void duration_add(struct duration *d, uint64_t ns) {
  int i = 0;
  while (i < DUR_BUCKETS && (double)ns > dur_bounds[i] * 1e9)
    i++;
  __atomic_add_fetch(&d->bucket[i], 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&d->sum_ns, ns, __ATOMIC_RELAXED);
}

static enum MHD_Result handle_verbs(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version, const char *upload,
                                    size_t *upload_size, void **req_cls) {
  struct listener *l = cls;
  struct ext_server *s = l->s;
  struct req *r = *req_cls;
  char *body = NULL;
  size_t len = 0;
  int status;
  (void)version;

  if (!r)
    return verbs_begin(l, conn, url, method, req_cls);
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    return verbs_upload(s, r, url, upload, n);
  }
  struct conn *c = conn_of(conn);
  conn_busy(c, true);
  uint64_t t0 = gs_mono_ns(), now = t0 / 1000000;
  const char *b = r->body.p ? r->body.p : "";
  int verb = !strcmp(url, "/filter")       ? VERB_FILTER
             : !strcmp(url, "/prioritize") ? VERB_PRIORITIZE
                                           : VERB_BIND;
  if (verb == VERB_FILTER)
    status = verb_filter(s->v, b, r->body.len, now, &body, &len);
  else if (verb == VERB_PRIORITIZE)
    status = verb_prioritize(s->v, b, r->body.len, now, &body, &len);
  else
    status = verb_bind(s->v, b, r->body.len, now, &body, &len);
  duration_add(&s->dur[verb], gs_mono_ns() - t0);
  conn_busy(c, false);
  if (!body)
    return MHD_NO;
  return reply(conn, status, body, len, "application/json");
}

static void done(void *cls, struct MHD_Connection *conn, void **req_cls,
                 enum MHD_RequestTerminationCode toe) {
  struct listener *l = cls;
  struct req *r = *req_cls;
  (void)toe;
  conn_busy(conn_of(conn), false); /* the next request's time starts now */
  if (r) {
    bool trim = r->body.cap >= TRIM_AFTER;
    __atomic_sub_fetch(&l->s->body_held, r->body.cap, __ATOMIC_RELAXED);
    gs_buf_free(&r->body);
    free(r);
    *req_cls = NULL;
    /* Parsing and answering a large request took memory in this thread's arena; glibc
     * keeps it for the next one unless told. */
    if (trim)
      malloc_trim(0);
  }
}

static void notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                   enum MHD_ConnectionNotificationCode code) {
  struct listener *l = cls;
  struct conn *c = *socket_context;

  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
#ifdef GSLICE_HAVE_GNUTLS
    if (l->client_auth) {
      /* libmicrohttpd only asks for a client certificate (GNUTLS_CERT_REQUEST) and checks
       * none: require one, and have GnuTLS verify it against --client-ca during the
       * handshake, so an unknown peer never gets as far as a request. */
      static gnutls_typed_vdata_st purpose = {GNUTLS_DT_KEY_PURPOSE_OID,
                                              (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0};
      const union MHD_ConnectionInfo *ti =
          MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
      if (ti && ti->tls_session) {
        gnutls_session_t ss = (gnutls_session_t)ti->tls_session;
        gnutls_certificate_server_set_request(ss, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_cert2(ss, &purpose, 1, 0);
      }
    }
#endif
    c = calloc(1, sizeof(*c));
    if (!c) {
      if (ci)
        shutdown(ci->connect_fd, SHUT_RDWR);
      return;
    }
    c->l = l;
    c->fd = ci ? ci->connect_fd : -1;
    c->since_ms = gs_mono_ms();
    pthread_mutex_lock(&l->lock);
    c->next = l->conns;
    if (l->conns)
      l->conns->prev = c;
    l->conns = c;
    l->nconns++;
    pthread_mutex_unlock(&l->lock);
    *socket_context = c;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && c) {
    /* Before libmicrohttpd closes the socket: the reaper never shuts down a reused fd. */
    pthread_mutex_lock(&l->lock);
    if (c->prev)
      c->prev->next = c->next;
    else
      l->conns = c->next;
    if (c->next)
      c->next->prev = c->prev;
    l->nconns--;
    pthread_mutex_unlock(&l->lock);
    free(c);
    *socket_context = NULL;
  }
}

/* libmicrohttpd's messages (a refused handshake, a peer over its limit): gs_log limits their
 * repeats, so a peer cannot fill the log. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  struct ext_server *s = cls;
  char msg[512];
  if (!s->log)
    return;
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = 0;
  gs_log(GS_LOG_WARNING, "libmicrohttpd: %s", msg);
}

/* ---- the deadline ------------------------------------------------------------------------- */

static void reap(struct ext_server *s, struct listener *l, uint64_t now) {
  if (!l->mhd)
    return;
  pthread_mutex_lock(&l->lock);
  for (struct conn *c = l->conns; c; c = c->next) {
    if (c->cut || c->fd < 0 || __atomic_load_n(&c->busy, __ATOMIC_ACQUIRE))
      continue;
    uint64_t since = __atomic_load_n(&c->since_ms, __ATOMIC_RELAXED);
    if (now > since && now - since > s->timeout_ms) {
      /* Its thread sees end of file and closes; the fd is still ours (see notify). */
      shutdown(c->fd, SHUT_RDWR);
      c->cut = true;
      __atomic_fetch_add(&s->cut_deadline, 1, __ATOMIC_RELAXED);
    }
  }
  pthread_mutex_unlock(&l->lock);
}

static void *reaper(void *arg) {
  struct ext_server *s = arg;
  pthread_mutex_lock(&s->stop_lock);
  while (!s->stopping) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += REAP_EVERY_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->stop_cond, &s->stop_lock, &ts);
    if (s->stopping)
      break;
    pthread_mutex_unlock(&s->stop_lock);
    uint64_t now = gs_mono_ms();
    reap(s, &s->verbs, now);
    reap(s, &s->metrics, now);
    pthread_mutex_lock(&s->stop_lock);
  }
  pthread_mutex_unlock(&s->stop_lock);
  return NULL;
}

/* ---- starting ------------------------------------------------------------------------------ */

static int read_pem(const char *flag, const char *path, char **ret, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  const char *why = NULL;
  char *p = NULL;

  if (fd < 0 || fstat(fd, &st) < 0)
    why = strerror(errno);
  else if (!S_ISREG(st.st_mode))
    why = "not a file";
  else if (st.st_size > PEM_MAX)
    why = "over 1 MiB";
  else if (!(p = malloc((size_t)st.st_size + 1)))
    why = strerror(ENOMEM);
  else if (read(fd, p, (size_t)st.st_size) != st.st_size)
    why = "cannot be read whole";
  if (fd >= 0)
    close(fd);
  if (why) {
    snprintf(err, errlen, "%s %s: %s", flag, path, why);
    free(p);
    return -EINVAL;
  }
  p[st.st_size] = 0;
  *ret = p;
  return 0;
}

static int open_listener(const char *flag, const char *text, int *ret_fd, int *ret_family,
                         uint16_t *ret_port, char *err, size_t errlen) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  char host[256], port[8];
  uint16_t p;
  int fd = -1, one = 1, rc;

  if (ext_listen_parse(text, host, sizeof host, &p)) {
    snprintf(err, errlen, "%s \"%s\" is not [HOST:]PORT (e.g. 8765 or 127.0.0.1:8765)", flag, text);
    return -EINVAL;
  }
  snprintf(port, sizeof port, "%u", p);
  if (!host[0])
    hints.ai_family = AF_INET;
  rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
  if (rc) {
    snprintf(err, errlen, "%s %s: %s", flag, text, gai_strerror(rc));
    return -EINVAL;
  }
  /* Our own socket: close-on-exec, and the real errno when the port is taken. */
  fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    rc = -errno;
    goto fail;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
    rc = -errno;
    goto fail;
  }
  if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
    *ret_port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                                 : ((struct sockaddr_in6 *)&bound)->sin6_port);
  *ret_family = ai->ai_family;
  *ret_fd = fd;
  freeaddrinfo(ai);
  return 0;
fail:
  snprintf(err, errlen, "cannot listen on %s: %s", text, strerror(-rc));
  if (fd >= 0)
    close(fd);
  freeaddrinfo(ai);
  return rc;
}

static int start_listener(struct ext_server *s, struct listener *l, const char *flag,
                          const char *text, bool verbs, unsigned per_ip, char *err, size_t errlen) {
  struct MHD_OptionItem opts[16];
  /* The verbs get a thread per connection (/bind waits on the API server); /metrics and the
   * probes answer from memory at once, so one epoll thread serves them all and idle sockets
   * cost it a descriptor each, never a turn. poll, not select: descriptors past 1,023. */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                   (verbs ? MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL : MHD_USE_EPOLL);
  int fd = -1, family = AF_INET, rc, n = 0;

  l->s = s;
  l->verbs = verbs;
  pthread_mutex_init(&l->lock, NULL);
  rc = open_listener(flag, text, &fd, &family, &l->port, err, errlen);
  if (rc)
    return rc;
  if (family == AF_INET6)
    flags |= MHD_USE_IPv6;
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, s};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, fd, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                      verbs ? VERB_CONNECTIONS : METRICS_CONNECTIONS, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                      verbs ? (intptr_t)per_ip : METRICS_PER_IP, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT,
                                      (intptr_t)(s->timeout_ms / 1000), NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify, l};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)done, l};
  if (verbs)
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_STACK_SIZE, VERB_THREAD_STACK, NULL};
  else
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                        METRICS_CONNECTION_MEMORY, NULL};
  if (verbs && s->cert) {
    flags |= MHD_USE_TLS;
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->key};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->cert};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                        "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"};
    if (s->ca) {
      opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, s->ca};
      l->client_auth = true;
    }
  }
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  /* The union of handler types: libmicrohttpd's own prototype for the access handler. */
  l->mhd = MHD_start_daemon(flags, 0, NULL, NULL, verbs ? handle_verbs : handle_metrics, l,
                            MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
  if (!l->mhd) {
    close(fd);
    if (verbs && s->cert)
      snprintf(err, errlen,
               "cannot serve TLS on %s: is --tls-cert a PEM certificate, --tls-key its PEM "
               "private key%s?",
               text, s->ca ? ", --client-ca PEM CA certificates" : "");
    else
      snprintf(err, errlen, "cannot serve HTTP on %s", text);
    return -EINVAL;
  }
  return 0;
}

/* The settings together: TLS files in pairs, what this build can serve, loopback unless said
 * otherwise. */
static int cfg_check(const struct ext_server_cfg *cfg, char *err, size_t errlen) {
  if (!cfg->tls_cert != !cfg->tls_key) {
    snprintf(err, errlen, "--tls-cert and --tls-key go together");
    return -EINVAL;
  }
  if (cfg->client_ca && !cfg->tls_cert) {
    snprintf(err, errlen, "--client-ca needs --tls-cert and --tls-key");
    return -EINVAL;
  }
#ifndef GSLICE_HAVE_GNUTLS
  if (cfg->client_ca) {
    snprintf(err, errlen, "--client-ca: this gslice-extender was built without GnuTLS");
    return -EINVAL;
  }
#endif
  if (cfg->tls_cert && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    snprintf(err, errlen, "--tls-cert: this libmicrohttpd was built without TLS");
    return -EINVAL;
  }
  if (!cfg->client_ca && !cfg->insecure_listen) {
    int loop = ext_listen_loopback(cfg->listen, err, errlen);
    if (loop < 0)
      return loop;
    if (loop == 0) {
      snprintf(err, errlen,
               "refusing to serve the verbs on %s to any peer that connects: give --tls-cert, "
               "--tls-key and --client-ca (kube-scheduler's client certificate), listen on "
               "loopback (a sidecar of kube-scheduler), or say --insecure-listen",
               cfg->listen);
      return -EPERM;
    }
  }
  return 0;
}

int ext_server_start(const struct ext_server_cfg *cfg, struct ext_server **ret, char *err,
                     size_t errlen) {
  struct ext_server *s = calloc(1, sizeof(*s));
  int rc;

  if (!s)
    return -ENOMEM;
  s->v = cfg->verbs;
  s->log = cfg->log;
  s->timeout_ms = 1000ull * (cfg->request_timeout_s ? cfg->request_timeout_s : REQUEST_TIMEOUT_S);
  pthread_mutex_init(&s->stop_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->stop_cond, &ca);
  pthread_condattr_destroy(&ca);

  if ((rc = cfg_check(cfg, err, errlen)))
    goto fail;
  if ((cfg->tls_cert && (rc = read_pem("--tls-cert", cfg->tls_cert, &s->cert, err, errlen))) ||
      (cfg->tls_key && (rc = read_pem("--tls-key", cfg->tls_key, &s->key, err, errlen))) ||
      (cfg->client_ca && (rc = read_pem("--client-ca", cfg->client_ca, &s->ca, err, errlen))))
    goto fail;
  rc = start_listener(s, &s->verbs, "--listen", cfg->listen, true,
                      cfg->per_ip_connections ? cfg->per_ip_connections : PER_IP_CONNECTIONS, err,
                      errlen);
  if (rc)
    goto fail;
  if (cfg->metrics_listen) {
    rc = start_listener(s, &s->metrics, "--metrics-listen", cfg->metrics_listen, false, 0, err,
                        errlen);
    if (rc)
      goto fail;
  }
  if (pthread_create(&s->reaper, NULL, reaper, s) != 0) {
    snprintf(err, errlen, "cannot start a thread");
    rc = -EAGAIN;
    goto fail;
  }
  s->reaper_started = true;
  *ret = s;
  return 0;
fail:
  ext_server_stop(s);
  return rc;
}

uint16_t ext_server_port(const struct ext_server *s) {
  return s->verbs.port;
}

uint16_t ext_server_metrics_port(const struct ext_server *s) {
  return s->metrics.mhd ? s->metrics.port : 0;
}

void ext_server_stop(struct ext_server *s) {
  if (!s)
    return;
  if (s->reaper_started) {
    pthread_mutex_lock(&s->stop_lock);
    s->stopping = true;
    pthread_cond_signal(&s->stop_cond);
    pthread_mutex_unlock(&s->stop_lock);
    pthread_join(s->reaper, NULL);
  }
  if (s->verbs.mhd)
    MHD_stop_daemon(s->verbs.mhd);
  if (s->metrics.mhd)
    MHD_stop_daemon(s->metrics.mhd);
  free(s->cert);
  free(s->key);
  free(s->ca);
  free(s);
}
