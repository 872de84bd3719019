/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the wire protocol (common/proto.c): round trips, framing, and garbage. */
#include <errno.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"
#include "test.h"

static unsigned char buf[GS_PROTO_MAX_MSG] __attribute__((aligned(16)));

static void test_round_trip(void) {
  struct gs_msg_register reg = {0};
  struct gs_msg m;
  size_t len = 0, want = 0;

  snprintf(reg.spec.name, sizeof(reg.spec.name), "train");
  reg.spec.gpu_mask = 1;
  reg.spec.compute_request = 30;
  reg.spec.compute_limit = 60;
  reg.spec.weight = 2;
  reg.spec.memory_cap = 1ull << 30;
  reg.runner_pid = 42;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_REGISTER, 7, &reg, sizeof(reg), &len), 0);
  CHECK_EQ_U64(len, sizeof(struct gs_msg_hdr) + sizeof(reg));
  CHECK_EQ_INT(gs_msg_peek(buf, 3, &want), -EAGAIN);
  CHECK_EQ_INT(gs_msg_peek(buf, len, &want), 0);
  CHECK_EQ_U64(want, len);
  /* The framing loop: a part waits for more bytes, a message too big for the reader's buffer is
   * refused however much of it came, and a handled message leaves what followed it. */
  CHECK_EQ_INT(gs_msg_frame(buf, len - 1, sizeof(buf), &want), -EAGAIN);
  CHECK_EQ_INT(gs_msg_frame(buf, 3, sizeof(buf), &want), -EAGAIN);
  CHECK_EQ_INT(gs_msg_frame(buf, len - 1, len - 1, &want), -EPROTO);
  want = 0;
  CHECK_EQ_INT(gs_msg_frame(buf, len, len, &want), 0);
  CHECK_EQ_U64(want, len);
  unsigned char two[1024];
  size_t held = 2 * len;
  CHECK(held <= sizeof(two));
  memset(two, 0, len);
  memcpy(two + len, buf, len);
  gs_msg_consume(two, &held, len);
  CHECK_EQ_U64(held, len);
  CHECK_EQ_INT(memcmp(two, buf, len), 0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), 0);
  CHECK_EQ_U64(m.hdr.type, GS_MSG_REGISTER);
  CHECK_EQ_U64(m.hdr.seq, 7);
  CHECK_STR(m.u.reg.spec.name, "train");
  CHECK_EQ_U64(m.u.reg.spec.memory_cap, 1ull << 30);
  CHECK_STR(gs_msg_type_name(GS_MSG_TOKEN_GRANT), "TOKEN_GRANT");
  CHECK_STR(gs_msg_type_name(999), "?");
}

static void test_status_reply(void) {
  static unsigned char body[sizeof(struct gs_msg_status_reply) + 3 * sizeof(struct gs_slice_status)]
      __attribute__((aligned(16)));
  struct gs_msg_status_reply *r = (void *)body;
  struct gs_slice_status *sl = (void *)(body + sizeof(*r));
  struct gs_msg m;
  size_t len;

  memset(body, 0, sizeof(body));
  r->ngpus = 1;
  r->nslices = 3;
  sl[2].id = 9;
  snprintf(sl[2].name, sizeof(sl[2].name), "x");
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_STATUS_REPLY, 1, body, sizeof(body), &len),
               0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), 0);
  CHECK_EQ_U64(m.u.status_reply.nslices, 3);
  CHECK_EQ_U64(m.status_slices[2].id, 9);
  /* nslices that does not match the length is refused both ways. */
  r->nslices = 4;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_STATUS_REPLY, 1, body, sizeof(body), &len),
               -EINVAL);
  ((struct gs_msg_status_reply *)(buf + sizeof(struct gs_msg_hdr)))->nslices = 4;
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), -EPROTO);
}

static void test_refusals(void) {
  struct gs_msg_token_release rel = {.gpu = 0, .generation = 1, .used_ns = 5, .launches = 1};
  struct gs_msg_hdr h;
  struct gs_msg m;
  size_t len, want;

  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_TOKEN_RELEASE, 1, &rel, sizeof(rel), &len),
               0);
  memcpy(&h, buf, sizeof(h));
  /* Bad magic, version, type, length: each is -EPROTO. */
  buf[0] ^= 1;
  CHECK_EQ_INT(gs_msg_peek(buf, len, &want), -EPROTO);
  buf[0] ^= 1;
  ((struct gs_msg_hdr *)buf)->version = GS_PROTO_VERSION + 1;
  CHECK_EQ_INT(gs_msg_peek(buf, len, &want), -EPROTO);
  memcpy(buf, &h, sizeof(h));
  ((struct gs_msg_hdr *)buf)->type = 0;
  CHECK_EQ_INT(gs_msg_peek(buf, len, &want), -EPROTO);
  ((struct gs_msg_hdr *)buf)->type = GS_MSG_TYPE_END;
  CHECK_EQ_INT(gs_msg_peek(buf, len, &want), -EPROTO);
  memcpy(buf, &h, sizeof(h));
  ((struct gs_msg_hdr *)buf)->length = (uint32_t)len + 1;
  CHECK_EQ_INT(gs_msg_peek(buf, len, &want), -EPROTO);
  ((struct gs_msg_hdr *)buf)->length = 0xffffffffu;
  CHECK_EQ_INT(gs_msg_peek(buf, len, &want), -EPROTO);
  memcpy(buf, &h, sizeof(h));
  CHECK_EQ_INT(gs_msg_decode(buf, len - 1, &m), -EPROTO);
  /* Values out of range. */
  rel.gpu = GS_MAX_GPUS;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_TOKEN_RELEASE, 1, &rel, sizeof(rel), &len),
               0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), -EPROTO);
  /* Release flags: the handoff's PENDING or CHARGE, one at a time, nothing else. */
  rel.gpu = 0;
  for (uint32_t f = 0; f < 8; f++) {
    rel.flags = f;
    CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_TOKEN_RELEASE, 1, &rel, sizeof(rel), &len),
                 0);
    CHECK_EQ_INT(gs_msg_decode(buf, len, &m),
                 f == 0 || f == GS_RELEASE_PENDING || f == GS_RELEASE_CHARGE ? 0 : -EPROTO);
  }
  rel.flags = 0;
  /* The kernel length travels as it is; a kernel of over an hour is refused as a burst is. */
  rel.kernel_ns = 3600ull * 1000000000;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_TOKEN_RELEASE, 1, &rel, sizeof(rel), &len),
               0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), 0);
  CHECK_EQ_U64(m.u.token_release.kernel_ns, 3600ull * 1000000000);
  rel.kernel_ns++;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_TOKEN_RELEASE, 1, &rel, sizeof(rel), &len),
               0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), -EPROTO);
  rel.kernel_ns = 0;
  struct gs_msg_register reg = {0};
  reg.spec.compute_request = 50;
  reg.spec.compute_limit = 40;
  reg.spec.weight = 1;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_REGISTER, 1, &reg, sizeof(reg), &len), 0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), -EPROTO);
  reg.spec.compute_limit = 50;
  memset(reg.spec.name, 'a', sizeof(reg.spec.name)); /* unterminated */
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_REGISTER, 1, &reg, sizeof(reg), &len), 0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), -EPROTO);
  char why[64];
  reg.spec.name[0] = 0;
  reg.spec.weight = 0;
  CHECK_EQ_INT(gs_slice_spec_check(&reg.spec, why, sizeof(why)), -EINVAL);
  CHECK_STR(why, "weight must be 1..1000");
  /* REGISTER flags: the known ones pass, an unknown bit is malformed. */
  reg.spec.weight = 1;
  reg.flags = GS_REGISTER_HELD | GS_REGISTER_ANY_UID;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_REGISTER, 1, &reg, sizeof(reg), &len), 0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), 0);
  CHECK_EQ_U64(m.u.reg.flags, GS_REGISTER_HELD | GS_REGISTER_ANY_UID);
  reg.flags = 1u << 7;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_REGISTER, 1, &reg, sizeof(reg), &len), 0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), -EPROTO);
  reg.flags = 0;
  /* Per-GPU requests and caps (protocol 8): only for GPUs of the mask, with their per_gpu bit,
   * a request within the limit; SET's arrays within range. */
  reg.spec.gpu_mask = 3;
  reg.spec.per_gpu = GS_SPEC_GPU_REQUEST | GS_SPEC_GPU_MEMORY;
  reg.spec.gpu_compute_request[0] = 16;
  reg.spec.gpu_compute_request[1] = 15;
  reg.spec.gpu_memory_cap[1] = 1ull << 30;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_REGISTER, 1, &reg, sizeof(reg), &len), 0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), 0);
  CHECK_EQ_U64(m.u.reg.spec.gpu_compute_request[1], 15);
  CHECK_EQ_U64(gs_spec_request(&m.u.reg.spec, 1), 15);
  CHECK_EQ_U64(gs_spec_memory_cap(&m.u.reg.spec, 0), 0);
  gs_spec_normalize(&m.u.reg.spec);
  CHECK_EQ_U64(m.u.reg.spec.compute_request, 16);
  CHECK_EQ_U64(m.u.reg.spec.memory_cap, 0); /* GPU 0 has no cap */
  reg.spec.gpu_compute_request[2] = 1;      /* outside the mask */
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_REGISTER, 1, &reg, sizeof(reg), &len), 0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), -EPROTO);
  reg.spec.gpu_compute_request[2] = 0;
  reg.spec.gpu_compute_request[1] = 51; /* over the limit of 50 */
  CHECK_EQ_INT(gs_slice_spec_check(&reg.spec, why, sizeof(why)), -EINVAL);
  reg.spec.gpu_compute_request[1] = 15;
  reg.spec.per_gpu = GS_SPEC_GPU_REQUEST; /* a cap without its bit */
  CHECK_EQ_INT(gs_slice_spec_check(&reg.spec, why, sizeof(why)), -EINVAL);
  reg.spec.per_gpu = 1u << 5;
  CHECK_EQ_INT(gs_slice_spec_check(&reg.spec, why, sizeof(why)), -EINVAL);
  struct gs_msg_set st = {.slice_id = 1, .fields = GS_SET_REQUEST};
  st.spec.per_gpu = GS_SPEC_GPU_REQUEST;
  st.spec.gpu_compute_request[1] = 101;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_SET, 1, &st, sizeof(st), &len), 0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), -EPROTO);
  st.spec.gpu_compute_request[1] = 100;
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_SET, 1, &st, sizeof(st), &len), 0);
  CHECK_EQ_INT(gs_msg_decode(buf, len, &m), 0);
  memset(&reg.spec, 0, sizeof(reg.spec));
  reg.spec.compute_limit = 50;
  reg.spec.weight = 0;
  /* Encoding refuses the wrong body size and a small buffer. */
  CHECK_EQ_INT(gs_msg_encode(buf, sizeof(buf), GS_MSG_REGISTER, 1, &reg, 3, &len), -EINVAL);
  CHECK_EQ_INT(gs_msg_encode(buf, 20, GS_MSG_REGISTER, 1, &reg, sizeof(reg), &len), -ENOBUFS);
}

/* Random bytes and random corruptions of valid messages: decode never
 * crashes (the sanitizer build watches) and never accepts a wrong length. */
static void test_fuzz(void) {
  uint64_t x = 88172645463325252ull;
  struct gs_msg m;
  size_t want;
  int accepted = 0;

  for (int i = 0; i < 200000; i++) {
    size_t n;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (i % 2) {
      struct gs_msg_set set = {.slice_id = 1, .fields = GS_SET_WEIGHT};
      set.spec.weight = 2;
      gs_msg_encode(buf, sizeof(buf), GS_MSG_SET, 1, &set, sizeof(set), &n);
      buf[x % n] ^= (unsigned char)(1u << ((x >> 8) % 8));
      if (x & (1ull << 40))
        buf[(x >> 16) % n] = (unsigned char)(x >> 24);
    } else {
      n = 16 + x % 300;
      for (size_t j = 0; j < n; j++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[j] = (unsigned char)x;
      }
      if (x & 1) { /* a valid header over garbage */
        struct gs_msg_hdr h = {GS_PROTO_MAGIC, GS_PROTO_VERSION, (uint16_t)(1 + x % 14), 0, 0};
        h.length = (uint32_t)(16 + gs_msg_body_size(h.type));
        memcpy(buf, &h, sizeof(h));
        if (n < h.length)
          n = h.length;
      }
    }
    if (gs_msg_decode(buf, n, &m) == 0) {
      accepted++;
      CHECK(gs_msg_peek(buf, n, &want) == 0 && want == n);
    }
  }
  CHECK(accepted > 0);
  printf("fuzz: %d of 200000 accepted\n", accepted);
}

/* gs_client_recv's timeout is for a message to begin: one whose header came in time and whose
 * body comes after the timeout is read whole, and the next message after it too. It returned
 * -ETIMEDOUT with the header consumed, and the next call read the body as a header (a forger
 * reading its grants with 100 ms timeouts lost its stream and got no grant again). */
static void test_recv_cut(void) {
  static uint64_t in[1024];
  unsigned char out[256];
  struct gs_msg_token_grant g = {.gpu = 0, .generation = 7, .quantum_ns = 5};
  struct gs_msg m;
  size_t n = 0;
  int sv[2];

  CHECK(gs_msg_encode(out, sizeof(out), GS_MSG_TOKEN_GRANT, 3, &g, sizeof(g), &n) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    /* The header now, the body 150 ms later (past the reader's 50 ms), then a whole second. */
    ssize_t w = write(sv[1], out, sizeof(struct gs_msg_hdr));
    usleep(150000);
    w += write(sv[1], out + sizeof(struct gs_msg_hdr), n - sizeof(struct gs_msg_hdr));
    w += write(sv[1], out, n);
    _exit(w == (ssize_t)(2 * n) ? 0 : 1);
  }
  usleep(20000); /* the header is in */
  CHECK_EQ_INT(gs_client_recv(sv[0], in, sizeof(in), 50, &m), 0);
  CHECK_EQ_INT((int)m.hdr.type, GS_MSG_TOKEN_GRANT);
  CHECK_EQ_INT((int)m.u.token_grant.generation, 7);
  CHECK_EQ_INT(gs_client_recv(sv[0], in, sizeof(in), 1000, &m), 0);
  CHECK_EQ_INT((int)m.u.token_grant.generation, 7);
  /* Nothing more: a timeout that read nothing. */
  CHECK_EQ_INT(gs_client_recv(sv[0], in, sizeof(in), 20, &m), -ETIMEDOUT);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(sv[0]);
  close(sv[1]);
}

int main(void) {
  test_recv_cut();
  test_round_trip();
  test_status_reply();
  test_refusals();
  test_fuzz();
  return test_done();
}
