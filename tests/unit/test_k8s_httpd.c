/* SPDX-License-Identifier: Apache-2.0 */
/* The Kubernetes programs' HTTP server (src/k8s/common/httpd.c): [HOST:]PORT read with a
 * reason for each refusal, and a real server on loopback held to its bounds: connections per
 * address and in all, the deadline however a peer drips its bytes, and the bytes of bodies
 * charged as they arrive, in all and per address (peers are 127.0.0.2.. as source addresses;
 * skipped where they cannot be bound). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "httpd.h"
#include "test.h"

static void parse_ok(const char *text, const char *host, unsigned port) {
  char h[64] = "x", err[256] = "";
  uint16_t p = 1;
  CHECK_EQ_INT(httpd_listen_parse(text, h, sizeof h, &p, err, sizeof err), 0);
  CHECK_STR(h, host);
  CHECK_EQ_U64(p, port);
}

static void parse_bad(const char *text, size_t hostlen, const char *why) {
  char h[64] = "kept", err[256] = "";
  uint16_t p = 7;
  CHECK_EQ_INT(httpd_listen_parse(text, h, hostlen, &p, err, sizeof err), -EINVAL);
  if (!strstr(err, why) || !strstr(err, "is not [HOST:]PORT"))
    fprintf(stderr, "\"%s\": \"%s\" does not say \"%s\"\n", text, err, why);
  CHECK(strstr(err, why) != NULL);
  CHECK_STR(h, "kept");
  CHECK_EQ_U64(p, 7);
}

static void test_parse(void) {
  parse_ok("8443", "", 8443);
  parse_ok("0", "", 0);
  parse_ok("127.0.0.1:8765", "127.0.0.1", 8765);
  parse_ok("gslice-webhook.gslice-system.svc:443", "gslice-webhook.gslice-system.svc", 443);
  parse_ok("[::1]:9401", "::1", 9401);
  parse_ok("[fe80::1%eth0]:65535", "fe80::1%eth0", 65535);
  parse_bad("", 64, "empty");
  parse_bad("70000", 64, "over 65535");
  parse_bad("127.0.0.1:99999999999999999999", 64, "over 65535");
  parse_bad("a:b:c", 64, "in brackets");
  parse_bad("::1:8443", 64, "in brackets");
  parse_bad(":8443", 64, "no host before");
  parse_bad("[::1]", 64, "no :PORT");
  parse_bad("[::1]8443", 64, "no :PORT");
  parse_bad("[::1:8443", 64, "no ']'");
  parse_bad("host:", 64, "no port");
  parse_bad("host:-1", 64, "not a number");
  parse_bad("host:+1", 64, "not a number");
  parse_bad("host:80a", 64, "not a number");
  parse_bad("host: 80", 64, "not a number");
  parse_bad("a-long-host-name:80", 8, "too long");
  char err[256];
  CHECK_EQ_INT(httpd_listen_loopback("127.0.0.2:1", err, sizeof err), 1);
  CHECK_EQ_INT(httpd_listen_loopback("[::1]:1", err, sizeof err), 1);
  CHECK_EQ_INT(httpd_listen_loopback("8443", err, sizeof err), 0);
  CHECK_EQ_INT(httpd_listen_loopback("10.1.2.3:1", err, sizeof err), 0);
  CHECK_EQ_INT(httpd_listen_loopback("a:b:c", err, sizeof err), -EINVAL);
}

/* ---- a server ------------------------------------------------------------------------- */

static int route(void *cls, const struct httpd_req *rq, size_t *ret_max, struct httpd_reply *rp) {
  (void)cls;
  if (!strcmp(rq->url, "/ok"))
    return httpd_reply_text(rp, 200, "ok\n"), 0;
  if (strcmp(rq->url, "/echo") || strcmp(rq->method, "POST"))
    return httpd_reply_text(rp, 404, "no\n"), 0;
  *ret_max = 32 << 10;
  return 1;
}

static void serve(void *cls, const struct httpd_req *rq, struct httpd_reply *rp) {
  char text[64];
  (void)cls;
  snprintf(text, sizeof text, "%zu bytes\n", rq->len);
  httpd_reply_text(rp, 200, text);
}

/* A connection from 127.0.0.<from>; -1 when that address cannot be bound here. */
static int dial(unsigned from, uint16_t port) {
  struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  src.sin_addr.s_addr = htonl(0x7f000000u | from);
  dst.sin_addr.s_addr = htonl(0x7f000001u);
  dst.sin_port = htons(port);
  if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof src) < 0 ||
      connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return fd;
}

/* Whether the server closed fd within ms (or answered: what it said goes in buf). */
static bool closed_within(int fd, int ms, char *buf, size_t len) {
  struct pollfd p = {fd, POLLIN, 0};
  size_t got = 0;
  uint64_t end = gs_mono_ms() + (uint64_t)ms;
  while (gs_mono_ms() < end && poll(&p, 1, (int)(end - gs_mono_ms())) > 0) {
    ssize_t n = recv(fd, buf ? buf + got : (char[256]){0}, buf ? len - 1 - got : 256, 0);
    if (n <= 0)
      return true;
    if (buf) {
      got += (size_t)n;
      buf[got] = 0;
    }
  }
  return false;
}

/* The status of a request from 127.0.0.<from> declaring a body of `declared` bytes and sending
 * `sent` of them (0: no answer within 3 s). */
static int ask(unsigned from, uint16_t port, const char *method, const char *url, size_t declared,
               size_t sent) {
  char head[256], answer[512] = "";
  static char zeros[40 << 10];
  int fd = dial(from, port), status = 0;
  if (fd < 0)
    return 0;
  int n = snprintf(head, sizeof head,
                   "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
                   method, url, declared);
  if (send(fd, head, (size_t)n, MSG_NOSIGNAL) == n &&
      (!sent || send(fd, zeros, sent, MSG_NOSIGNAL) == (ssize_t)sent)) {
    closed_within(fd, 3000, answer, sizeof answer);
    sscanf(answer, "HTTP/1.1 %d", &status);
  }
  close(fd);
  return status;
}

/* A body declared as `declared` bytes, of which `sent` are sent, then held. */
static int hold(unsigned from, uint16_t port, size_t declared, size_t sent) {
  char head[256];
  static char zeros[40 << 10];
  int fd = dial(from, port);
  int n = snprintf(head, sizeof head,
                   "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", declared);
  if (fd >= 0) {
    send(fd, head, (size_t)n, MSG_NOSIGNAL);
    send(fd, zeros, sent, MSG_NOSIGNAL);
  }
  return fd;
}

static void settle(struct httpd *h, uint64_t conns) {
  struct httpd_stats st;
  for (int i = 0; i < 200; i++) {
    httpd_stats(h, &st);
    if (st.connections == conns)
      return;
    usleep(10000);
  }
}

/* The bytes of bodies held once they reach want (3 s at most: a busy host reads late). */
static uint64_t bytes_at(struct httpd *h, uint64_t want) {
  struct httpd_stats st;
  for (int i = 0; i < 300; i++) {
    httpd_stats(h, &st);
    if (st.body_bytes == want)
      break;
    usleep(10000);
  }
  return st.body_bytes;
}

static void closeall(int *fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

/* 3 per address, 6 in all: a fourth from one address is closed at once, another address is
 * still served beside the first; a seventh in all is not served until one of the six goes. */
static void test_connections(struct httpd *h, uint16_t port) {
  const char *get = "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n";
  char answer[256] = "";
  int fds[8];
  for (int i = 0; i < 4; i++)
    fds[i] = dial(2, port);
  CHECK(!closed_within(fds[0], 300, NULL, 0));
  CHECK(!closed_within(fds[1], 20, NULL, 0));
  CHECK(!closed_within(fds[2], 20, NULL, 0));
  CHECK(closed_within(fds[3], 1000, NULL, 0));
  CHECK_EQ_INT(ask(1, port, "GET", "/ok", 0, 0), 200);
  close(fds[3]);
  for (int i = 3; i < 6; i++)
    fds[i] = dial(3, port);
  settle(h, 6);
  fds[6] = dial(4, port);
  send(fds[6], get, strlen(get), MSG_NOSIGNAL);
  closed_within(fds[6], 500, answer, sizeof answer);
  CHECK(strstr(answer, "200") == NULL);
  close(fds[0]);
  answer[0] = 0;
  closed_within(fds[6], 1000, answer, sizeof answer);
  CHECK(strstr(answer, "HTTP/1.1 200") != NULL); /* queued, then served: or closed, then */
  closeall(fds + 1, 6);
  settle(h, 0);
}

/* A header byte every 100 ms: cut at the 600 ms deadline all the same. */
static void test_deadline(struct httpd *h, uint16_t port) {
  struct httpd_stats st;
  const char *req = "GET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  int fd = dial(2, port);
  uint64_t t0 = gs_mono_ms(), cut = 0;
  httpd_stats(h, &st);
  uint64_t before = st.cut_deadline;
  for (size_t i = 0; req[i] && !cut; i++) {
    if (send(fd, req + i, 1, MSG_NOSIGNAL) != 1 || closed_within(fd, 100, NULL, 0))
      cut = gs_mono_ms() - t0;
  }
  if (!cut)
    fprintf(stderr, "a peer dripping its headers was never cut\n");
  CHECK(cut >= 500 && cut <= 2500);
  httpd_stats(h, &st);
  CHECK_EQ_U64(st.cut_deadline, before + 1);
  close(fd);
  settle(h, 0);
}

/* Bodies: 64 KiB per address, 120 KiB in all. Declaring 30,000 bytes and sending 1 holds a
 * first buffer, not 30,000; two near-whole bodies fill an address's share (a third is cut when
 * its bytes pass it), another address is served; two addresses fill it all (503 at once, but
 * for what reads no body). */
static void test_bodies(struct httpd *h, uint16_t port) {
  struct httpd_stats st;
  int fds[8];
  for (int i = 0; i < 3; i++)
    fds[i] = hold(2, port, 30000, 1);
  for (int i = 0; i < 300 && (httpd_stats(h, &st), st.body_bytes == 0); i++)
    usleep(10000);
  usleep(100000);
  httpd_stats(h, &st);
  CHECK(st.body_bytes > 0 && st.body_bytes <= 3 * 4096); /* a first buffer each */
  closeall(fds, 3);
  settle(h, 0);

  fds[0] = hold(2, port, 30001, 30000);
  fds[1] = hold(2, port, 30001, 30000);
  CHECK_EQ_U64(bytes_at(h, 2 * 30002), 2 * 30002);
  httpd_stats(h, &st);
  uint64_t refused = st.refused_bodies;
  fds[2] = hold(2, port, 30001, 30000);
  CHECK(closed_within(fds[2], 1000, NULL, 0));
  httpd_stats(h, &st);
  CHECK_EQ_U64(st.refused_bodies, refused + 1);
  CHECK_EQ_U64(st.body_bytes, 2 * 30002);
  close(fds[2]);
  CHECK_EQ_INT(ask(1, port, "POST", "/echo", 20000, 20000), 200); /* another address */
  fds[2] = hold(3, port, 30001, 30000);
  fds[3] = hold(3, port, 30001, 30000);
  CHECK_EQ_U64(bytes_at(h, 4 * 30002), 4 * 30002);
  CHECK_EQ_INT(ask(1, port, "POST", "/echo", 20000, 20000), 503);
  CHECK_EQ_INT(ask(1, port, "GET", "/ok", 0, 0), 200);
  closeall(fds, 4);
  settle(h, 0);
  CHECK_EQ_U64(bytes_at(h, 0), 0);
  CHECK_EQ_INT(ask(1, port, "POST", "/echo", 20000, 20000), 200);
}

/* reserve_declared: the declared length held from the headers on; past the budget, 503. */
static void test_reserve(void) {
  struct httpd_cfg cfg = {.name = "t",
                          .listen = "127.0.0.1:0",
                          .threads = 1,
                          .per_peer = 8,
                          .body_budget = 64 << 10,
                          .peer_budget = 64 << 10,
                          .reserve_declared = true,
                          .route = route,
                          .serve = serve};
  struct httpd *h = NULL;
  char err[256];
  CHECK_EQ_INT(httpd_start(&cfg, &h, err, sizeof err), 0);
  if (!h)
    return;
  int a = hold(2, httpd_port(h), 30000, 1), b = hold(2, httpd_port(h), 30000, 1);
  CHECK_EQ_U64(bytes_at(h, 2 * 30001), 2 * 30001);
  CHECK_EQ_INT(ask(2, httpd_port(h), "POST", "/echo", 30000, 0), 503);
  close(a);
  close(b);
  httpd_stop(h);
}

static void test_server(void) {
  struct httpd_cfg cfg = {.name = "t",
                          .flag = "--listen",
                          .listen = "127.0.0.1:0",
                          .threads = 1,
                          .connections = 6,
                          .per_peer = 3,
                          .timeout_ms = 10000,
                          .body_budget = 120 << 10,
                          .peer_budget = 64 << 10,
                          .route = route,
                          .serve = serve};
  struct httpd *h = NULL;
  char err[256];
  int probe = dial(2, 1);
  if (probe < 0 && errno == EADDRNOTAVAIL) {
    printf("SKIP: 127.0.0.2 cannot be bound here\n");
    exit(77);
  }
  if (probe >= 0)
    close(probe);
  CHECK_EQ_INT(httpd_start(&cfg, &h, err, sizeof err), 0);
  if (!h) {
    fprintf(stderr, "%s\n", err);
    return;
  }
  uint16_t port = httpd_port(h);
  CHECK_EQ_INT(ask(1, port, "GET", "/ok", 0, 0), 200);
  CHECK_EQ_INT(ask(1, port, "POST", "/echo", 40 << 10, 0), 413);
  test_connections(h, port);
  test_bodies(h, port);
  httpd_stop(h);
  cfg.timeout_ms = 600;
  CHECK_EQ_INT(httpd_start(&cfg, &h, err, sizeof err), 0);
  if (h) {
    test_deadline(h, httpd_port(h));
    httpd_stop(h);
  }

  cfg.listen = "127.0.0.1:x";
  CHECK_EQ_INT(httpd_start(&cfg, &h, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "--listen \"127.0.0.1:x\" is not [HOST:]PORT") != NULL);
  cfg.listen = "127.0.0.1:0";
  cfg.tls_cert = "/nonexistent.pem";
  CHECK_EQ_INT(httpd_start(&cfg, &h, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "--tls-cert and --tls-key go together") != NULL);
}

int main(void) {
  test_parse();
  test_server();
  test_reserve();
  return test_done();
}
