/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile clients of gsliced: each misbehaves in one way and must see its connection closed
 * (or its request refused), while a well-behaved client is served before and after. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"

static const char *path;
static int failures;

static int conn(void) {
  int fd;
  if (gs_client_connect(path, &fd) < 0) {
    fprintf(stderr, "cannot connect to %s\n", path);
    exit(1);
  }
  return fd;
}

static void raw(int fd, const void *p, size_t n) {
  if (send(fd, p, n, MSG_NOSIGNAL) < 0) {
    /* Closed already: that is what we expect anyway. */
  }
}

/* The daemon closes fd within 3 s (reads drain whatever it sent first). */
static void expect_closed(int fd, const char *what) {
  char buf[4096];
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 3000) <= 0) {
      fprintf(stderr, "FAIL: %s: connection still open\n", what);
      failures++;
      break;
    }
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      break;
  }
  close(fd);
  printf("ok: %s: closed\n", what);
}

static void hdr(int fd, uint32_t magic, uint16_t version, uint16_t type, uint32_t length) {
  struct gs_msg_hdr h = {magic, version, type, length, 0};
  raw(fd, &h, sizeof(h));
}

static void good_client(const char *when) {
  int fd = conn();
  struct gs_status st;
  if (gs_client_hello(fd, GS_ROLE_CLI, 0, NULL) < 0 || gs_client_status(fd, &st) < 0) {
    fprintf(stderr, "FAIL: a good client is not served %s\n", when);
    failures++;
  } else {
    printf("ok: good client served %s (%u slices)\n", when, st.nslices);
    gs_status_free(&st);
  }
  close(fd);
}

int main(int argc, char **argv) {
  int fd;
  unsigned char junk[64];

  if (argc != 2) {
    fprintf(stderr, "usage: daemon_badclient SOCKET\n");
    return 2;
  }
  path = argv[1];
  good_client("before");

  fd = conn();
  for (size_t i = 0; i < sizeof(junk); i++)
    junk[i] = (unsigned char)(i * 37 + 11);
  raw(fd, junk, sizeof(junk));
  expect_closed(fd, "random bytes");

  fd = conn();
  hdr(fd, GS_PROTO_MAGIC, GS_PROTO_VERSION + 1, GS_MSG_HELLO, 32);
  expect_closed(fd, "another protocol version");

  fd = conn();
  hdr(fd, GS_PROTO_MAGIC, GS_PROTO_VERSION, GS_MSG_HELLO, 1u << 30);
  expect_closed(fd, "a 1 GiB length");

  fd = conn();
  hdr(fd, GS_PROTO_MAGIC, GS_PROTO_VERSION, 999, 16);
  expect_closed(fd, "an unknown type");

  fd = conn();
  struct gs_msg_token_request q = {0};
  gs_client_send(fd, GS_MSG_TOKEN_REQUEST, 1, &q, sizeof(q));
  expect_closed(fd, "a request before hello");

  fd = conn();
  gs_client_hello(fd, GS_ROLE_CLI, 0, NULL);
  gs_client_send(fd, GS_MSG_TOKEN_REQUEST, 1, &q, sizeof(q));
  expect_closed(fd, "a token request from a CLI");

  fd = conn();
  gs_client_hello(fd, GS_ROLE_CLI, 0, NULL);
  struct gs_msg_hello h = {.role = GS_ROLE_CLI};
  gs_client_send(fd, GS_MSG_HELLO, 1, &h, sizeof(h));
  expect_closed(fd, "hello twice");

  fd = conn();
  struct gs_msg_register reg = {0};
  reg.spec.compute_limit = 100;
  reg.spec.weight = 0; /* invalid */
  gs_client_hello(fd, GS_ROLE_CLI, 0, NULL);
  gs_client_send(fd, GS_MSG_REGISTER, 1, &reg, sizeof(reg));
  expect_closed(fd, "a register that fails validation");

  fd = conn();
  gs_client_hello(fd, GS_ROLE_CLI, 0, NULL);
  hdr(fd, GS_PROTO_MAGIC, GS_PROTO_VERSION, GS_MSG_STATUS_REPLY,
      (uint32_t)(sizeof(struct gs_msg_hdr) + sizeof(struct gs_msg_status_reply)));
  raw(fd, junk, sizeof(junk));
  expect_closed(fd, "a message only the daemon sends");

  /* Refused, not closed: a hello for a slice that does not exist. */
  fd = conn();
  int r = gs_client_hello(fd, GS_ROLE_HOOK, 424242, NULL);
  if (r != -ENOENT) {
    fprintf(stderr, "FAIL: hello for a missing slice: %d\n", r);
    failures++;
  } else {
    printf("ok: hello for a missing slice refused\n");
  }
  close(fd);

  /* Half a message, then gone. */
  fd = conn();
  hdr(fd, GS_PROTO_MAGIC, GS_PROTO_VERSION, GS_MSG_HELLO, 32);
  close(fd);

  /* A client that asks and never reads: dropped once its replies pile up. */
  fd = conn();
  gs_client_hello(fd, GS_ROLE_CLI, 0, NULL);
  struct gs_msg_status st = {0};
  for (int i = 0; i < 20000; i++) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, 2000) <= 0 || (p.revents & (POLLHUP | POLLERR)))
      break;
    if (gs_client_send(fd, GS_MSG_STATUS, 1, &st, sizeof(st)) < 0)
      break;
  }
  expect_closed(fd, "a client that never reads");

  /* Many idle connections do not lock others out (the limit is far above). */
  int many[64];
  for (int i = 0; i < 64; i++)
    many[i] = conn();
  good_client("with 64 idle connections");
  for (int i = 0; i < 64; i++)
    close(many[i]);

  good_client("after");
  return failures ? 1 : 0;
}
