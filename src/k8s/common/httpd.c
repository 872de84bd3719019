/* SPDX-License-Identifier: Apache-2.0 */
/* The Kubernetes programs' HTTP server (httpd.h). libmicrohttpd bounds connections in all and
 * per address; the rest is ours. A reaper thread cuts any connection whose request (headers
 * and body) or idle wait runs past the deadline: libmicrohttpd's own timeout is an idle one,
 * which a byte every second resets for ever. Bodies are charged to a budget in all and to a
 * share of it per address, as their bytes arrive: a peer that declares a large body and sends
 * a byte holds a byte, and one address filling its share leaves the rest to the others. The
 * reaper also looks at the certificate files now and then (tls_reload): a renewed pair is
 * served by a new libmicrohttpd daemon on the same listening socket, started before the old one
 * stops taking connections, so no caller sees a refusal. */
#include "httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
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
#include "size.h"

/* Last: it expects the system headers it builds on to be in already. */
#include <microhttpd.h>
#ifdef GSLICE_HAVE_GNUTLS
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#endif

#define CONNECTIONS 1024
#define PER_PEER 32
#define TIMEOUT_MS 10000
#define BODY_BUDGET (64u << 20)
/* The most a body's first buffer takes (gs_buf's starts smaller and doubles as bytes arrive),
 * and the room a peer must have before its body is read at all. */
#define FIRST_BUFFER (4u << 10)
/* After a request this large, memory goes back to the system (malloc_trim). */
#define TRIM_AFTER (1u << 20)
#define REAP_EVERY_MS 200
#define RELOAD_EVERY_MS 5000
#define PEM_MAX (1u << 20)
#define PEER_BUCKETS 256
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* An address with connections open or bytes of bodies held (IPv4 as v4-mapped IPv6). */
struct peer {
  struct peer *next;
  unsigned char addr[16];
  unsigned conns;
  size_t held;
};

/* A connection, from accept to close (libmicrohttpd's socket context). */
struct conn {
  struct conn *prev, *next;
  struct peer *peer;
  int fd;
  uint64_t since_ms; /* start of what the deadline counts: accept, or the last answer (atomic) */
  bool busy;         /* serve runs: the server's time, not the peer's (atomic) */
  bool cut;
};

/* What a certificate or key file is now: a renewal changes one of these (the kubelet swaps a
 * Secret volume's files by renaming a directory, so the inode changes). */
struct file_id {
  dev_t dev;
  ino_t ino;
  struct timespec mtime;
  off_t size;
};

struct httpd {
  struct httpd_cfg cfg; /* its strings the caller's, but for the certificate paths */
  struct MHD_Daemon *mhd;
  int fd; /* the listening socket, ours: each daemon serves a dup of it */
  bool v6;
  uint16_t port;
  char *cert, *key, *ca; /* PEM text */
  char *cert_path, *key_path;
  struct file_id cert_id, key_id; /* of the pair last tried */
  uint64_t reload_at_ms;
  pthread_mutex_t lock; /* conns, nconns, peers, body_held */
  struct conn *conns;
  unsigned nconns;
  struct peer *peers[PEER_BUCKETS];
  size_t body_held;
  uint64_t cut_deadline, refused_bodies; /* atomic */
  pthread_t reaper;
  bool reaper_started;
  pthread_mutex_t stop_lock;
  pthread_cond_t stop_cond;
  bool stopping;
};

/* A request that reads a body; the body's capacity is charged to its peer and to all from
 * before it is allocated until the request is done. */
struct req {
  struct gs_buf body;
  struct conn *c;
  struct peer *peer; /* c's, kept while it holds bytes (done may come after c is closed) */
  size_t max;        /* route's bound */
  size_t declared;   /* Content-Length, 0: none */
};

/* ---- [HOST:]PORT ---------------------------------------------------------------------- */

static const char *port_parse(const char *port, uint16_t *ret_port) {
  char *end;
  if (!*port)
    return "no port after ':'";
  if (port[0] < '0' || port[0] > '9')
    return "the port is not a number 0..65535";
  errno = 0;
  unsigned long p = strtoul(port, &end, 10);
  if (*end)
    return "the port is not a number 0..65535";
  if (errno || p > 65535)
    return "the port is over 65535";
  *ret_port = (uint16_t)p;
  return NULL;
}

int httpd_listen_parse(const char *text, char *host, size_t hostlen, uint16_t *ret_port, char *err,
                       size_t errlen) {
  const char *why = NULL, *port = text, *h = text, *end = NULL, *colon;
  uint16_t p = 0;

  if (!text || !*text) {
    why = "it is empty";
  } else if (text[0] == '[') {
    end = strchr(text, ']');
    why = !end            ? "no ']' after the IPv6 address"
          : end[1] != ':' ? "no :PORT after [ADDRESS]"
                          : NULL;
    h = text + 1;
    port = end ? end + 2 : "";
  } else if ((colon = strrchr(text, ':'))) {
    why = colon == text ? "no host before ':' (give the port alone for every address)"
          : memchr(text, ':', colon - text) ? "an IPv6 address goes in brackets: [::1]:PORT"
                                            : NULL;
    end = colon;
    port = colon + 1;
  }
  if (!why && end && (size_t)(end - h) >= hostlen)
    why = "the host is too long";
  if (!why)
    why = port_parse(port, &p);
  if (why) {
    if (err)
      snprintf(err, errlen, "\"%s\" is not [HOST:]PORT: %s", text ? text : "", why);
    return -EINVAL;
  }
  snprintf(host, hostlen, "%.*s", end ? (int)(end - h) : 0, h);
  *ret_port = p;
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

int httpd_listen_loopback(const char *text, char *err, size_t errlen) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  char host[256];
  uint16_t port;
  int rc, loop = 1;

  if (httpd_listen_parse(text, host, sizeof host, &port, err, errlen))
    return -EINVAL;
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

/* Our own socket: close-on-exec, the real errno when the port is taken, the port bound. */
static int open_listener(struct httpd *h, char *err, size_t errlen) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  char host[256], port[8], perr[320];
  const char *at = h->cfg.listen, *flag = h->cfg.flag;
  uint16_t p;
  int fd = -1, one = 1, rc;

  if (httpd_listen_parse(at, host, sizeof host, &p, perr, sizeof perr)) {
    snprintf(err, errlen, "%s %s", flag, perr);
    return -EINVAL;
  }
  snprintf(port, sizeof port, "%u", p);
  if (!host[0] && h->cfg.default_host)
    snprintf(host, sizeof host, "%s", h->cfg.default_host);
  if (!host[0])
    hints.ai_family = AF_INET;
  if ((rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai))) {
    snprintf(err, errlen, "%s %s: %s", flag, at, gai_strerror(rc));
    return -EINVAL;
  }
  fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  rc = fd < 0 ? -errno : 0;
  if (!rc && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one),
              bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0))
    rc = -errno;
  if (!rc && getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
    h->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                               : ((struct sockaddr_in6 *)&bound)->sin6_port);
  if (rc) {
    snprintf(err, errlen, "%s: cannot listen on %s: %s", flag, at, strerror(-rc));
    if (fd >= 0)
      close(fd);
  } else {
    h->fd = fd;
    h->v6 = ai->ai_family == AF_INET6;
  }
  freeaddrinfo(ai);
  return rc;
}

/* ---- peers and the bytes of bodies ---------------------------------------------------- */

static void peer_key(const struct sockaddr *sa, unsigned char key[16]) {
  memset(key, 0, 16);
  if (sa && sa->sa_family == AF_INET) {
    key[10] = key[11] = 0xff;
    memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
  } else if (sa && sa->sa_family == AF_INET6) {
    memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
  }
}

static unsigned peer_bucket(const unsigned char key[16]) {
  uint32_t x = 2166136261u; /* FNV-1a */
  for (int i = 0; i < 16; i++)
    x = (x ^ key[i]) * 16777619u;
  return x % PEER_BUCKETS;
}

/* The peer of key, made if new, with one more connection; NULL: no memory. Under lock. */
static struct peer *peer_join(struct httpd *h, const unsigned char key[16]) {
  struct peer **b = &h->peers[peer_bucket(key)], *p;
  for (p = *b; p && memcmp(p->addr, key, 16); p = p->next)
    ;
  if (!p && (p = calloc(1, sizeof(*p)))) {
    memcpy(p->addr, key, 16);
    p->next = *b;
    *b = p;
  }
  if (p)
    p->conns++;
  return p;
}

/* Freed once it has neither connections nor bytes. Under lock. */
static void peer_drop_if_idle(struct httpd *h, struct peer *p) {
  if (p->conns || p->held)
    return;
  struct peer **b = &h->peers[peer_bucket(p->addr)];
  while (*b != p)
    b = &(*b)->next;
  *b = p->next;
  free(p);
}

/* Whether n more bytes fit the budget and p's share. Under lock. */
static bool fits(const struct httpd *h, const struct peer *p, size_t n) {
  return h->body_held + n <= h->cfg.body_budget && p->held + n <= h->cfg.peer_budget;
}

/* Charges n bytes to p and to all (take), or only looks whether they would fit: false (nothing
 * charged, a refusal counted) past either bound. */
static bool charge(struct httpd *h, struct peer *p, size_t n, bool take) {
  pthread_mutex_lock(&h->lock);
  bool ok = fits(h, p, n);
  if (ok && take) {
    h->body_held += n;
    p->held += n;
  }
  pthread_mutex_unlock(&h->lock);
  if (!ok)
    __atomic_fetch_add(&h->refused_bodies, 1, __ATOMIC_RELAXED);
  return ok;
}

static void uncharge(struct httpd *h, struct peer *p, size_t n) {
  pthread_mutex_lock(&h->lock);
  h->body_held -= n;
  p->held -= n;
  peer_drop_if_idle(h, p);
  pthread_mutex_unlock(&h->lock);
}

/* Room for n more bytes of r's body: the buffer doubles (up to its declared length and the
 * route's bound), the growth charged before it is allocated. */
static bool body_room(struct httpd *h, struct req *r, size_t n) {
  size_t need = r->body.len + n + 1, old = r->body.cap, cap = old ? old : FIRST_BUFFER;
  if (need <= old)
    return true;
  while (cap < need)
    cap *= 2;
  if (r->declared && cap > r->declared + 1)
    cap = r->declared + 1 > need ? r->declared + 1 : need;
  if (cap > r->max + 1)
    cap = r->max + 1;
  if (!charge(h, r->peer, cap - old, true))
    return false;
  r->body.max = cap - 1; /* gs_buf grows to its bound + 1 at most */
  if (gs_buf_reserve(&r->body, n)) {
    uncharge(h, r->peer, cap - old);
    return false;
  }
  if (cap > r->body.cap)
    uncharge(h, r->peer, cap - r->body.cap); /* not taken */
  return true;
}

/* ---- replies -------------------------------------------------------------------------- */

static enum MHD_Result queue(struct MHD_Connection *mc, struct httpd_reply *rp) {
  if (!rp->status) {
    free(rp->body);
    return MHD_NO;
  }
  struct MHD_Response *r = MHD_create_response_from_buffer(
      rp->len, rp->body ? rp->body : "", rp->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
  if (!r) {
    free(rp->body);
    return MHD_NO;
  }
  if (rp->ctype)
    MHD_add_response_header(r, "Content-Type", rp->ctype);
  enum MHD_Result ret = MHD_queue_response(mc, rp->status, r);
  MHD_destroy_response(r);
  return ret;
}

void httpd_reply_text(struct httpd_reply *rp, unsigned status, const char *text) {
  *rp = (struct httpd_reply){status, strdup(text), strlen(text), "text/plain; charset=utf-8"};
  if (!rp->body)
    rp->status = 0;
}

void httpd_reply_json_error(struct httpd_reply *rp, unsigned status, const char *text) {
  struct gs_buf b = GS_BUF_INIT(0);
  gs_buf_puts(&b, "{\"Error\":");
  gs_buf_json_str(&b, text);
  gs_buf_putc(&b, '}');
  *rp = (struct httpd_reply){status, NULL, 0, "application/json"};
  if (!(rp->body = gs_buf_steal(&b, &rp->len, NULL)))
    rp->status = 0;
}

/* A refusal of the server's own, in the program's form. */
static enum MHD_Result refuse(struct httpd *h, struct MHD_Connection *mc, unsigned status,
                              const char *fmt, const char *arg) {
  struct gs_buf t = GS_BUF_INIT(0);
  struct httpd_reply rp;
  gs_buf_printf(&t, fmt, arg);
  gs_buf_putc(&t, '\n');
  char *text = gs_buf_steal(&t, NULL, NULL);
  if (!text)
    return MHD_NO;
  if (h->cfg.json_errors) {
    text[strlen(text) - 1] = 0;
    httpd_reply_json_error(&rp, status, text);
  } else {
    httpd_reply_text(&rp, status, text);
  }
  free(text);
  return queue(mc, &rp);
}

/* ---- requests ------------------------------------------------------------------------- */

static struct conn *conn_of(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

static void conn_busy(struct conn *c, bool busy) {
  if (!busy)
    __atomic_store_n(&c->since_ms, gs_mono_ms(), __ATOMIC_RELAXED);
  __atomic_store_n(&c->busy, busy, __ATOMIC_RELEASE);
}

#ifdef GSLICE_HAVE_GNUTLS
/* The handshake already refused a peer without a certificate of the client CA (see notify);
 * this says so again for each request, in case a libmicrohttpd ever skipped our hook. */
static bool peer_verified(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  unsigned status = 1, n = 0;
  if (!ci || !ci->tls_session)
    return false;
  gnutls_session_t ss = (gnutls_session_t)ci->tls_session;
  if (!gnutls_certificate_get_peers(ss, &n) || !n)
    return false;
  return gnutls_certificate_verify_peers2(ss, &status) == 0 && status == 0;
}
#endif

/* Headers in: route answers, or a body is to be read (its declared length judged first). */
static enum MHD_Result begin(struct httpd *h, struct MHD_Connection *mc, const char *url,
                             const char *method, void **req_cls) {
  struct conn *c = conn_of(mc);
  struct httpd_req rq = {method, url, "", 0};
  struct httpd_reply rp = {0};
  size_t max = 0;
  char size[32];

  if (!c || !c->peer)
    return MHD_NO; /* not tracked: it would escape the deadline and the budgets */
#ifdef GSLICE_HAVE_GNUTLS
  if (h->ca && !peer_verified(mc))
    return MHD_NO;
#endif
  if (!h->cfg.route(h->cfg.cls, &rq, &max, &rp))
    return queue(mc, &rp);
  const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
  unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0;
  gs_size_format(max, size, sizeof size);
  if (want > max)
    return refuse(h, mc, 413, "request body over %s", size);
  struct req *r = calloc(1, sizeof(*r));
  if (!r)
    return MHD_NO;
  gs_buf_init(&r->body, max);
  r->c = c;
  r->peer = c->peer;
  r->max = max;
  r->declared = want;
  *req_cls = r;
  /* Reserved whole, or only a first buffer's worth looked for: a peer whose share is full is
   * answered now rather than cut at its first byte. */
  size_t first = want && want < FIRST_BUFFER ? want + 1 : FIRST_BUFFER;
  if (h->cfg.reserve_declared && want ? !body_room(h, r, want) : !charge(h, c->peer, first, false))
    return refuse(h, mc, 503, "%s holds too many request bodies now", h->cfg.name);
  return MHD_YES;
}

/* A piece of the body. Past the bound (a chunked body, whose length was not declared) or past
 * the budgets, the connection is cut, not read to its end. */
static enum MHD_Result take(struct httpd *h, struct req *r, const char *data, size_t n) {
  if (r->body.len + n > r->max || !body_room(h, r, n))
    return MHD_NO;
  return gs_buf_add(&r->body, data, n) ? MHD_NO : MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *mc, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **req_cls) {
  struct httpd *h = cls;
  struct req *r = *req_cls;
  (void)version;

  if (!r)
    return begin(h, mc, url, method, req_cls);
  if (*data_size) {
    size_t n = *data_size;
    *data_size = 0;
    return take(h, r, data, n);
  }
  struct httpd_req rq = {method, url, r->body.p ? r->body.p : "", r->body.len};
  struct httpd_reply rp = {0};
  conn_busy(r->c, true);
  h->cfg.serve(h->cfg.cls, &rq, &rp);
  conn_busy(r->c, false);
  return queue(mc, &rp);
}

static void done(void *cls, struct MHD_Connection *mc, void **req_cls,
                 enum MHD_RequestTerminationCode toe) {
  struct httpd *h = cls;
  struct req *r = *req_cls;
  struct conn *c = conn_of(mc);
  (void)toe;
  if (c)
    conn_busy(c, false); /* the next request's time starts now */
  if (!r)
    return;
  bool trim = r->body.cap >= TRIM_AFTER;
  if (r->body.cap)
    uncharge(h, r->peer, r->body.cap);
  gs_buf_free(&r->body);
  free(r);
  *req_cls = NULL;
  /* Parsing and answering a large request took memory in this thread's arena; glibc keeps it
   * for the next one unless told. */
  if (trim)
    malloc_trim(0);
}

/* ---- connections ---------------------------------------------------------------------- */

#ifdef GSLICE_HAVE_GNUTLS
/* libmicrohttpd only asks for a client certificate (GNUTLS_CERT_REQUEST) and checks none:
 * require one, and have GnuTLS verify it against the client CA during the handshake, so an
 * unknown peer never gets as far as a request. */
static void require_client_cert(struct MHD_Connection *mc) {
  static gnutls_typed_vdata_st purpose = {GNUTLS_DT_KEY_PURPOSE_OID,
                                          (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0};
  const union MHD_ConnectionInfo *ti =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (ti && ti->tls_session) {
    gnutls_session_t ss = (gnutls_session_t)ti->tls_session;
    gnutls_certificate_server_set_request(ss, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert2(ss, &purpose, 1, 0);
  }
}
#endif

static void conn_started(struct httpd *h, struct MHD_Connection *mc, void **socket_context) {
  const union MHD_ConnectionInfo *fi =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  const union MHD_ConnectionInfo *ai =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  unsigned char key[16];
  struct conn *c;

#ifdef GSLICE_HAVE_GNUTLS
  if (h->ca)
    require_client_cert(mc);
#endif
  if (!fi || !(c = calloc(1, sizeof(*c)))) {
    if (fi) /* untracked, it would escape the deadline */
      shutdown(fi->connect_fd, SHUT_RDWR);
    return;
  }
  peer_key(ai ? ai->client_addr : NULL, key);
  c->fd = fi->connect_fd;
  c->since_ms = gs_mono_ms();
  pthread_mutex_lock(&h->lock);
  c->peer = peer_join(h, key);
  c->next = h->conns;
  if (h->conns)
    h->conns->prev = c;
  h->conns = c;
  h->nconns++;
  pthread_mutex_unlock(&h->lock);
  if (!c->peer) /* begin refuses its requests */
    shutdown(c->fd, SHUT_RDWR);
  *socket_context = c;
}

static void notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                   enum MHD_ConnectionNotificationCode code) {
  struct httpd *h = cls;
  struct conn *c = *socket_context;

  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    conn_started(h, mc, socket_context);
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && c) {
    /* Before libmicrohttpd closes the socket: the reaper never shuts down a reused fd. */
    pthread_mutex_lock(&h->lock);
    if (c->prev)
      c->prev->next = c->next;
    else
      h->conns = c->next;
    if (c->next)
      c->next->prev = c->prev;
    h->nconns--;
    if (c->peer) {
      c->peer->conns--;
      peer_drop_if_idle(h, c->peer);
    }
    pthread_mutex_unlock(&h->lock);
    free(c);
    *socket_context = NULL;
  }
}

/* libmicrohttpd's messages (a refused handshake, a peer over its limit): gs_log limits their
 * repeats, so a peer cannot fill the log. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  struct httpd *h = cls;
  char msg[512];
  if (!h->cfg.log)
    return;
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = 0;
  gs_log(GS_LOG_WARNING, "libmicrohttpd: %s", msg);
}

/* ---- the deadline, and the certificate's renewal --------------------------------------- */

static void reap(struct httpd *h, uint64_t now) {
  pthread_mutex_lock(&h->lock);
  for (struct conn *c = h->conns; c; c = c->next) {
    if (c->cut || __atomic_load_n(&c->busy, __ATOMIC_ACQUIRE))
      continue;
    uint64_t since = __atomic_load_n(&c->since_ms, __ATOMIC_RELAXED);
    if (now > since && now - since > h->cfg.timeout_ms) {
      /* Its thread sees end of file and closes; the fd is still ours (see notify). */
      shutdown(c->fd, SHUT_RDWR);
      c->cut = true;
      __atomic_fetch_add(&h->cut_deadline, 1, __ATOMIC_RELAXED);
    }
  }
  pthread_mutex_unlock(&h->lock);
}

static void reload(struct httpd *h); /* "TLS" below */

static void *reaper(void *arg) {
  struct httpd *h = arg;
  pthread_mutex_lock(&h->stop_lock);
  while (!h->stopping) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += REAP_EVERY_MS * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&h->stop_cond, &h->stop_lock, &ts);
    if (h->stopping)
      break;
    pthread_mutex_unlock(&h->stop_lock);
    uint64_t now = gs_mono_ms();
    reap(h, now);
    if (h->cfg.tls_reload && now >= h->reload_at_ms) {
      reload(h);
      h->reload_at_ms = now + RELOAD_EVERY_MS;
    }
    pthread_mutex_lock(&h->stop_lock);
  }
  pthread_mutex_unlock(&h->stop_lock);
  return NULL;
}

/* ---- TLS and the libmicrohttpd daemon -------------------------------------------------- */

static int read_pem(const char *flag, const char *path, char **ret, char *err, size_t errlen) {
  int rc = gs_file_read(AT_FDCWD, path, GS_FILE_REGULAR, PEM_MAX, ret, NULL);
  if (rc)
    snprintf(err, errlen, "%s %s: %s", flag, path,
             rc == -EFBIG    ? "over 1 MiB"
             : rc == -EINVAL ? "not a file"
                             : strerror(-rc));
  return rc ? -EINVAL : 0;
}

/* Whether GnuTLS takes cert and key as a pair (what libmicrohttpd would refuse at start). */
static bool pair_ok(const char *cert, const char *key) {
#ifdef GSLICE_HAVE_GNUTLS
  gnutls_certificate_credentials_t cred;
  gnutls_datum_t c = {(unsigned char *)cert, (unsigned)strlen(cert)};
  gnutls_datum_t k = {(unsigned char *)key, (unsigned)strlen(key)};
  if (gnutls_certificate_allocate_credentials(&cred) != GNUTLS_E_SUCCESS)
    return false;
  int rc = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM);
  gnutls_certificate_free_credentials(cred);
  return rc == GNUTLS_E_SUCCESS;
#else
  return cert && key;
#endif
}

/* A daemon serving a dup of the socket (libmicrohttpd closes its own when it stops), with
 * cert and key if TLS. */
static struct MHD_Daemon *start_mhd(struct httpd *h, const char *cert, const char *key) {
  const struct httpd_cfg *cfg = &h->cfg;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                   (h->v6 ? MHD_USE_IPv6 : 0) | (cert ? MHD_USE_TLS : 0) |
                   /* ITC: MHD_quiesce_daemon, when a renewed certificate takes over. */
                   (cfg->tls_reload ? MHD_USE_ITC : 0) |
                   /* poll, not select: descriptors past 1,023. */
                   (cfg->threads ? MHD_USE_EPOLL : MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL);
  struct MHD_OptionItem o[20];
  int n = 0;

  if (cert && !pair_ok(cert, key))
    return NULL;
  int fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return NULL;
  o[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, h};
  o[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, fd, NULL};
  o[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, cfg->connections, NULL};
  o[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->per_peer, NULL};
  o[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT,
                                   (intptr_t)((cfg->timeout_ms + 999) / 1000), NULL};
  o[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify, h};
  o[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)done, h};
  if (cfg->threads > 1)
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, cfg->threads, NULL};
  if (!cfg->threads && cfg->thread_stack)
    o[n++] =
        (struct MHD_OptionItem){MHD_OPTION_THREAD_STACK_SIZE, (intptr_t)cfg->thread_stack, NULL};
  if (cfg->connection_memory)
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                     (intptr_t)cfg->connection_memory, NULL};
  if (cert) {
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cert};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, TLS_PRIORITIES};
    if (h->ca)
      o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, h->ca};
  }
  o[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  return MHD_start_daemon(flags, 0, NULL, NULL, handle, h, MHD_OPTION_ARRAY, o, MHD_OPTION_END);
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
static int read_pair(struct httpd *h, char **ret_cert, char **ret_key, char *err, size_t errlen) {
  h->cert_id = file_id_of(h->cert_path);
  h->key_id = file_id_of(h->key_path);
  int rc = read_pem("--tls-cert", h->cert_path, ret_cert, err, errlen);
  if (!rc && (rc = read_pem("--tls-key", h->key_path, ret_key, err, errlen))) {
    free(*ret_cert);
    *ret_cert = NULL;
  }
  return rc;
}

/* A renewed pair of files: served by a new daemon on the same socket, and the old one stops
 * taking connections only once the new one does. A pair that cannot be read or served is
 * logged once (until the files change again), and the old one is kept. */
static void reload(struct httpd *h) {
  struct file_id c = file_id_of(h->cert_path), k = file_id_of(h->key_path);
  struct MHD_Daemon *d = NULL;
  char *cert = NULL, *key = NULL, err[512];

  if (file_id_eq(&c, &h->cert_id) && file_id_eq(&k, &h->key_id))
    return;
  if (read_pair(h, &cert, &key, err, sizeof err))
    gs_log(GS_LOG_WARNING, "%s; still serving the certificate read before", err);
  else if (!(d = start_mhd(h, cert, key)))
    gs_log(GS_LOG_WARNING,
           "the changed --tls-cert %s and --tls-key %s cannot be served (not a PEM certificate "
           "and its key?); still serving the certificate read before",
           h->cert_path, h->key_path);
  if (!d) {
    free(cert);
    free(key);
    return;
  }
  MHD_socket old_fd = MHD_quiesce_daemon(h->mhd); /* no more connections for it */
  MHD_stop_daemon(h->mhd);
  if (old_fd != MHD_INVALID_SOCKET)
    close(old_fd); /* its dup, left to us by the quiesce */
  h->mhd = d;
  free(h->cert);
  free(h->key);
  h->cert = cert;
  h->key = key;
  if (h->cfg.log)
    gs_log(GS_LOG_INFO, "serving the renewed certificate %s", h->cert_path);
}

/* ---- starting and stopping -------------------------------------------------------------- */

/* The TLS settings together, and what this build can serve. */
static int tls_check(const struct httpd_cfg *cfg, char *err, size_t errlen) {
  const char *why = NULL;
  bool gnutls = false;
#ifdef GSLICE_HAVE_GNUTLS
  gnutls = true;
#endif
  if (!cfg->tls_cert != !cfg->tls_key)
    why = "--tls-cert and --tls-key go together";
  else if (cfg->client_ca && !cfg->tls_cert)
    why = "--client-ca needs --tls-cert and --tls-key";
  else if (cfg->tls_reload && !cfg->tls_cert)
    why = "a certificate to reload needs --tls-cert and --tls-key";
  else if ((cfg->client_ca || cfg->tls_reload) && !gnutls)
    why = cfg->client_ca ? "--client-ca: this program was built without GnuTLS"
                         : "--tls-cert: this program was built without GnuTLS";
  else if (cfg->tls_cert && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    why = "--tls-cert: this libmicrohttpd was built without TLS";
  if (why)
    snprintf(err, errlen, "%s", why);
  return why ? -EINVAL : 0;
}

static void cfg_defaults(struct httpd_cfg *c) {
  c->connections = c->connections ? c->connections : CONNECTIONS;
  c->per_peer = c->per_peer ? c->per_peer : PER_PEER;
  c->timeout_ms = c->timeout_ms ? c->timeout_ms : TIMEOUT_MS;
  c->body_budget = c->body_budget ? c->body_budget : BODY_BUDGET;
  c->peer_budget = c->peer_budget ? c->peer_budget : c->body_budget / 4;
  c->name = c->name ? c->name : "gslice";
  c->flag = c->flag ? c->flag : "--listen";
}

static int start_all(struct httpd *h, char *err, size_t errlen) {
  const struct httpd_cfg *cfg = &h->cfg;
  int rc;

  if ((rc = tls_check(cfg, err, errlen)))
    return rc;
  if (cfg->tls_cert) {
    if (!(h->cert_path = strdup(cfg->tls_cert)) || !(h->key_path = strdup(cfg->tls_key)))
      return -ENOMEM;
    if ((rc = read_pair(h, &h->cert, &h->key, err, errlen)) ||
        (cfg->client_ca && (rc = read_pem("--client-ca", cfg->client_ca, &h->ca, err, errlen))))
      return rc;
  }
  if ((rc = open_listener(h, err, errlen)))
    return rc;
  if (!(h->mhd = start_mhd(h, h->cert, h->key))) {
    if (h->cert)
      snprintf(err, errlen,
               "cannot serve TLS on %s: is --tls-cert a PEM certificate, --tls-key its PEM "
               "private key%s?",
               cfg->listen, h->ca ? ", --client-ca PEM CA certificates" : "");
    else
      snprintf(err, errlen, "%s: cannot serve HTTP on %s", cfg->flag, cfg->listen);
    return -EINVAL;
  }
  if (pthread_create(&h->reaper, NULL, reaper, h) != 0) {
    snprintf(err, errlen, "cannot start a thread");
    return -EAGAIN;
  }
  h->reaper_started = true;
  return 0;
}

int httpd_start(const struct httpd_cfg *cfg, struct httpd **ret, char *err, size_t errlen) {
  struct httpd *h = calloc(1, sizeof(*h));
  pthread_condattr_t ca;
  int rc;

  if (!h)
    return -ENOMEM;
  h->cfg = *cfg;
  cfg_defaults(&h->cfg);
  h->fd = -1;
  h->reload_at_ms = gs_mono_ms() + RELOAD_EVERY_MS;
  pthread_mutex_init(&h->lock, NULL);
  pthread_mutex_init(&h->stop_lock, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->stop_cond, &ca);
  pthread_condattr_destroy(&ca);
  if ((rc = start_all(h, err, errlen))) {
    httpd_stop(h);
    return rc;
  }
  *ret = h;
  return 0;
}

uint16_t httpd_port(const struct httpd *h) {
  return h->port;
}

void httpd_stats(struct httpd *h, struct httpd_stats *ret) {
  pthread_mutex_lock(&h->lock);
  ret->connections = h->nconns;
  ret->body_bytes = h->body_held;
  pthread_mutex_unlock(&h->lock);
  ret->cut_deadline = __atomic_load_n(&h->cut_deadline, __ATOMIC_RELAXED);
  ret->refused_bodies = __atomic_load_n(&h->refused_bodies, __ATOMIC_RELAXED);
}

void httpd_stop(struct httpd *h) {
  if (!h)
    return;
  if (h->reaper_started) {
    pthread_mutex_lock(&h->stop_lock);
    h->stopping = true;
    pthread_cond_signal(&h->stop_cond);
    pthread_mutex_unlock(&h->stop_lock);
    pthread_join(h->reaper, NULL);
  }
  if (h->mhd)
    MHD_stop_daemon(h->mhd); /* and closes its dup of the socket */
  if (h->fd >= 0)
    close(h->fd);
  free(h->cert_path);
  free(h->key_path);
  free(h->cert);
  free(h->key);
  free(h->ca);
  pthread_mutex_destroy(&h->lock);
  pthread_mutex_destroy(&h->stop_lock);
  pthread_cond_destroy(&h->stop_cond);
  free(h);
}
