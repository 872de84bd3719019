/* SPDX-License-Identifier: Apache-2.0 */
/* Client side of the gsliced protocol (client.h): blocking calls over one Unix-socket connection.
 */
#include "client.h"
#include "clock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

const char *gs_client_socket_path(void) {
  const char *p = secure_getenv("GSLICE_SOCKET");
  return p && *p ? p : GS_DEFAULT_SOCKET;
}

int gs_hook_socket_path(const char *main_socket, char *out, size_t len) {
  const char *slash = strrchr(main_socket, '/'), *base = slash ? slash + 1 : main_socket;
  size_t dir = slash ? (size_t)(slash - main_socket) + 1 : 0; /* with its '/' */
  struct sockaddr_un a;
  int n;

  if (!*base)
    return -EINVAL;
  n = snprintf(out, len, "%.*shook/%s", (int)dir, main_socket, base);
  if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof(a.sun_path))
    return -ENAMETOOLONG;
  return 0;
}

int gs_client_connect(const char *path, int *ret_fd) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  int fd, r;

  if (strlen(path) >= sizeof(a.sun_path))
    return -ENAMETOOLONG;
  memcpy(a.sun_path, path, strlen(path) + 1);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  while (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
    if (errno == EINTR)
      continue;
    r = -errno;
    close(fd);
    return r;
  }
  *ret_fd = fd;
  return 0;
}

int gs_client_send(int fd, uint32_t type, uint32_t seq, const void *body, size_t len) {
  unsigned char small[512], *buf = small;
  size_t n, off = 0;
  int r;

  if (len + sizeof(struct gs_msg_hdr) > sizeof(small))
    return -EMSGSIZE;
  r = gs_msg_encode(buf, sizeof(small), type, seq, body, len, &n);
  if (r < 0)
    return r;
  while (off < n) {
    ssize_t w = send(fd, buf + off, n - off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    off += (size_t)w;
  }
  return 0;
}

/* Waits until fd has something to read or deadline (ms) passes: 0 or -ETIMEDOUT, -errno. */
static int wait_readable(int fd, uint64_t deadline) {
  for (;;) {
    uint64_t now = gs_mono_ms();
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (now >= deadline)
      return -ETIMEDOUT;
    int r = poll(&pfd, 1, (int)(deadline - now));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -errno;
    return r == 0 ? -ETIMEDOUT : 0;
  }
}

/* Reads exactly len bytes by the deadline (UINT64_MAX: none). */
static int read_full(int fd, unsigned char *p, size_t len, uint64_t deadline) {
  size_t got = 0;

  while (got < len) {
    int r = deadline == UINT64_MAX ? 0 : wait_readable(fd, deadline);
    if (r < 0)
      return r;
    ssize_t n = recv(fd, p + got, len - got, 0);
    if (n == 0)
      return -ECONNRESET;
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    got += (size_t)n;
  }
  return 0;
}

int gs_client_recv(int fd, void *buf, size_t cap, int timeout_ms, struct gs_msg *ret) {
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : gs_mono_ms() + (uint64_t)timeout_ms;
  size_t len;
  int r;

  if (cap < sizeof(struct gs_msg_hdr))
    return -EMSGSIZE;
  /* The timeout is for a message to begin. Once its first byte is read the rest is read whatever
   * the timeout (GS_CLIENT_REST_MS more at least): a -ETIMEDOUT mid-message left the stream cut
   * inside it, and every later read took the rest for a header. A caller reading its grants with
   * 100 ms timeouts, kept from a CPU between the header and the body, saw no grant again (3 in
   * 5 s after its first revoke, the daemon waiting for its release). */
  if (deadline != UINT64_MAX && (r = wait_readable(fd, deadline)) < 0)
    return r;
  uint64_t rest = deadline == UINT64_MAX ? UINT64_MAX : gs_mono_ms() + GS_CLIENT_REST_MS;
  if (rest < deadline)
    rest = deadline;
  r = read_full(fd, buf, sizeof(struct gs_msg_hdr), rest);
  if (r < 0)
    return r == -ETIMEDOUT ? -EPROTO : r;
  r = gs_msg_peek(buf, sizeof(struct gs_msg_hdr), &len);
  if (r < 0)
    return -EPROTO;
  if (len > cap)
    return -EMSGSIZE;
  r = read_full(fd, (unsigned char *)buf + sizeof(struct gs_msg_hdr),
                len - sizeof(struct gs_msg_hdr), rest);
  if (r < 0)
    return r == -ETIMEDOUT ? -EPROTO : r;
  return gs_msg_decode(buf, len, ret);
}

/* One request, one answer. A 10 s timeout keeps a wedged daemon from
 * hanging a CLI forever (HELLO: GS_CLIENT_HELLO_TIMEOUT_MS). */
static int call_within(int fd, uint32_t type, const void *body, size_t len, void *buf, size_t cap,
                       int timeout_ms, struct gs_msg *ret, char *err, size_t err_len) {
  struct gs_msg m;
  int r;

  r = gs_client_send(fd, type, 1, body, len);
  if (r < 0)
    return r;
  r = gs_client_recv(fd, buf, cap, timeout_ms, &m);
  if (r < 0)
    return r;
  if (m.hdr.type == GS_MSG_ERROR) {
    if (err && err_len) {
      size_t n = strnlen(m.u.error.text, sizeof(m.u.error.text));
      if (n >= err_len)
        n = err_len - 1;
      memcpy(err, m.u.error.text, n);
      err[n] = 0;
    }
    /* A negative errno; anything else from a daemon is not one (the caller would read an
     * answer that never came). */
    return m.u.error.code < 0 ? m.u.error.code : -EPROTO;
  }
  *ret = m;
  return 0;
}

static int call(int fd, uint32_t type, const void *body, size_t len, void *buf, size_t cap,
                struct gs_msg *ret, char *err, size_t err_len) {
  return call_within(fd, type, body, len, buf, cap, 10000, ret, err, err_len);
}

/* A call whose answer is a plain OK. */
static int call_ok(int fd, uint32_t type, const void *body, size_t len, char *err, size_t err_len) {
  uint64_t buf[64];
  struct gs_msg m;
  int r = call(fd, type, body, len, buf, sizeof(buf), &m, err, err_len);

  if (r < 0)
    return r;
  return m.hdr.type == GS_MSG_OK ? 0 : -EPROTO;
}

int gs_client_hello(int fd, uint32_t role, uint32_t slice_id, struct gs_msg_hello_ok *ret) {
  return gs_client_hello_err(fd, role, slice_id, ret, NULL, 0);
}

int gs_client_hello_err(int fd, uint32_t role, uint32_t slice_id, struct gs_msg_hello_ok *ret,
                        char *err, size_t err_len) {
  return gs_client_hello_slice(fd, role, slice_id, 0, ret, err, err_len);
}

int gs_client_hello_slice(int fd, uint32_t role, uint32_t slice_id, uint64_t nonce,
                          struct gs_msg_hello_ok *ret, char *err, size_t err_len) {
  struct gs_msg_hello h = {
      .role = role, .slice_id = slice_id, .pid = (int32_t)getpid(), .slice_nonce = nonce};
  uint64_t buf[64];
  struct gs_msg m;
  /* The daemon answers HELLO at once: a silence is a stopped or wedged daemon, said soon. */
  int r = call_within(fd, GS_MSG_HELLO, &h, sizeof(h), buf, sizeof(buf), GS_CLIENT_HELLO_TIMEOUT_MS,
                      &m, err, err_len);

  if (r < 0)
    return r;
  if (m.hdr.type != GS_MSG_HELLO_OK)
    return -EPROTO;
  if (ret)
    *ret = m.u.hello_ok;
  return 0;
}

int gs_client_register(int fd, const struct gs_slice_spec *spec, struct gs_msg_registered *ret,
                       char *err, size_t err_len) {
  return gs_client_register_flags(fd, spec, 0, ret, err, err_len);
}

int gs_client_register_flags(int fd, const struct gs_slice_spec *spec, uint32_t flags,
                             struct gs_msg_registered *ret, char *err, size_t err_len) {
  struct gs_msg_register reg = {.spec = *spec, .runner_pid = (int32_t)getpid(), .flags = flags};
  uint64_t buf[64];
  struct gs_msg m;
  int r = call(fd, GS_MSG_REGISTER, &reg, sizeof(reg), buf, sizeof(buf), &m, err, err_len);

  if (r < 0)
    return r;
  if (m.hdr.type != GS_MSG_REGISTERED)
    return -EPROTO;
  if ((m.u.registered.flags & flags) != flags) {
    gs_client_unregister(fd, m.u.registered.slice_id, m.u.registered.slice_nonce, NULL, 0);
    if (err && err_len)
      snprintf(err, err_len,
               "gsliced does not keep slices for Kubernetes (REGISTER flags 0x%x "
               "not honoured): upgrade gsliced to this gslice's version",
               flags);
    return -EPROTONOSUPPORT;
  }
  *ret = m.u.registered;
  return 0;
}

int gs_client_unregister(int fd, uint32_t slice_id, uint64_t nonce, char *err, size_t err_len) {
  struct gs_msg_unregister u = {.slice_id = slice_id, .slice_nonce = nonce};
  return call_ok(fd, GS_MSG_UNREGISTER, &u, sizeof(u), err, err_len);
}

int gs_client_set(int fd, uint32_t slice_id, uint32_t fields, const struct gs_slice_spec *values,
                  int force, char *err, size_t err_len) {
  struct gs_msg_set s = {
      .slice_id = slice_id, .fields = fields, .force = force ? 1 : 0, .spec = *values};
  return call_ok(fd, GS_MSG_SET, &s, sizeof(s), err, err_len);
}

int gs_client_status(int fd, struct gs_status *ret) {
  struct gs_msg_status q = {0};
  struct gs_status st = {0};
  struct gs_msg m;
  void *buf = malloc(GS_PROTO_MAX_MSG);
  int r;

  if (!buf)
    return -ENOMEM;
  r = call(fd, GS_MSG_STATUS, &q, sizeof(q), buf, GS_PROTO_MAX_MSG, &m, NULL, 0);
  if (r == 0 && m.hdr.type != GS_MSG_STATUS_REPLY)
    r = -EPROTO;
  if (r == 0) {
    st.time_ns = m.u.status_reply.time_ns;
    st.ngpus = m.u.status_reply.ngpus;
    memcpy(st.gpus, m.u.status_reply.gpus, sizeof(st.gpus));
    st.nslices = m.u.status_reply.nslices;
    if (st.nslices) {
      st.slices = malloc((size_t)st.nslices * sizeof(*st.slices));
      if (!st.slices)
        r = -ENOMEM;
      else
        memcpy(st.slices, m.status_slices, (size_t)st.nslices * sizeof(*st.slices));
    }
  }
  free(buf);
  if (r == 0)
    *ret = st;
  return r;
}
