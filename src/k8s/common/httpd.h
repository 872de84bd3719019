/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP server of gslice's Kubernetes programs (gslice-extender, gslice-webhook,
 * gslice-node's probes), on libmicrohttpd: the [HOST:]PORT of a listener, TLS (a client
 * certificate required if asked, a renewed pair served without a restart if asked), and the
 * bounds every peer is held to: connections per address and in all, a deadline for a request's
 * headers and body (and an idle wait), and the bytes of bodies held, in all and per address,
 * charged as they arrive. A program gives two callbacks: route (headers in: answer now, or read
 * a body of up to so many bytes) and serve (the whole body in). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct httpd;

/* Parses "[HOST:]PORT": HOST an IPv4 address or a name, "[v6]" for IPv6; PORT 0..65535 (0: any
 * free one). Without HOST, host is "" (the caller's default). 0, or -EINVAL with err saying
 * what is wrong (err may be NULL). */
int httpd_listen_parse(const char *text, char *host, size_t hostlen, uint16_t *ret_port, char *err,
                       size_t errlen);

/* Whether every address "[HOST:]PORT" names is a loopback one (127/8, ::1): 1, 0, or -EINVAL
 * with err saying why it cannot be told. No HOST: 0 (every IPv4 address). */
int httpd_listen_loopback(const char *text, char *err, size_t errlen);

/* A request as the callbacks see it: body and len only in serve. */
struct httpd_req {
  const char *method, *url;
  const char *body; /* NUL-terminated; "" when none */
  size_t len;
};

/* An answer: body is malloc'd and taken (NULL with status 0: the connection is closed
 * unanswered); ctype a string that outlives the call. */
struct httpd_reply {
  unsigned status;
  char *body;
  size_t len;
  const char *ctype;
};

/* Headers in: fill rp and return 0 to answer now (a body is not read), or return 1 with
 * *ret_body_max set to read a body of up to that many bytes, then serve. */
typedef int httpd_route_fn(void *cls, const struct httpd_req *rq, size_t *ret_body_max,
                           struct httpd_reply *rp);
/* The whole body in: fill rp. The request's time here is the server's, not the peer's: the
 * deadline does not count it. */
typedef void httpd_serve_fn(void *cls, const struct httpd_req *rq, struct httpd_reply *rp);

struct httpd_cfg {
  const char *name;         /* the program, in refusals: "gslice-webhook" */
  const char *flag;         /* the flag that gave listen, in errors: "--listen" */
  const char *listen;       /* "[HOST:]PORT" */
  const char *default_host; /* HOST left out: NULL, every IPv4 address */
  /* PEM files (flags --tls-cert, --tls-key, --client-ca in errors). With cert and key, TLS;
   * with client_ca too, only peers with a certificate that CA signed (refused in the
   * handshake; needs GnuTLS). tls_reload: the files are looked at every 5 s and a changed pair
   * is served by a new libmicrohttpd daemon on the same socket (needs GnuTLS). */
  const char *tls_cert, *tls_key, *client_ca;
  bool tls_reload;
  unsigned threads;     /* 0: a thread per connection (a serve may wait); N: N epoll threads */
  unsigned connections; /* in all; 0: 1024 */
  unsigned per_peer;    /* connections per address; 0: 32 */
  unsigned timeout_ms;  /* to send headers and body, or wait idle; 0: 10 s */
  size_t body_budget;   /* bytes of bodies held in all; 0: 64 MiB */
  size_t peer_budget;   /* of those, per address; 0: a quarter of body_budget */
  /* Charge a body's declared length when its headers arrive (answered 503 at once when it does
   * not fit) instead of its bytes as they arrive: for peers that authenticate, where a request
   * taken is better finished than cut half-way. */
  bool reserve_declared;
  size_t connection_memory; /* libmicrohttpd's per connection; 0: its default (32 KiB) */
  size_t thread_stack;      /* threads == 0; 0: the system's default */
  bool json_errors;         /* refusals as {"Error":"..."} (else text/plain) */
  bool log;                 /* gs_log libmicrohttpd's messages and the certificate reloads */
  httpd_route_fn *route;
  httpd_serve_fn *serve;
  void *cls;
};

struct httpd_stats {
  uint64_t connections;    /* open now */
  uint64_t body_bytes;     /* held now for bodies not yet served */
  uint64_t cut_deadline;   /* connections cut for running past timeout_ms */
  uint64_t refused_bodies; /* requests refused or cut for the bytes of bodies (all, or peer's) */
};

/* 0, or a negative errno with err saying what (a taken port: -EADDRINUSE; a bad address,
 * certificate or key: -EINVAL). */
int httpd_start(const struct httpd_cfg *cfg, struct httpd **ret, char *err, size_t errlen);
uint16_t httpd_port(const struct httpd *h);
void httpd_stats(struct httpd *h, struct httpd_stats *ret);
/* Stops serving (open connections are closed) and frees h; NULL: nothing. */
void httpd_stop(struct httpd *h);

/* rp as status and a copy of text (text/plain), or a JSON {"Error":text} (application/json,
 * gslice-extender's form); without memory, status 0 (the connection is closed unanswered). */
void httpd_reply_text(struct httpd_reply *rp, unsigned status, const char *text);
void httpd_reply_json_error(struct httpd_reply *rp, unsigned status, const char *text);
