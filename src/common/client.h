/* SPDX-License-Identifier: Apache-2.0 */
/* The client side of the gsliced protocol: connect, say hello, and one call per request (CLI, hook,
 * status/top/set). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "status.h"

/* GSLICE_SOCKET when set, else the default. */
const char *gs_client_socket_path(void);

/* The hook socket of a daemon whose main socket is main_socket: <dirname>/hook/<basename>
 * (/run/gslice/gsliced.sock: /run/gslice/hook/gsliced.sock). gsliced listens there unless its
 * config (hook_socket) says otherwise, and gslice-node mounts that dir read-only into containers:
 * one function, so both agree (docs/protocol.md, "The hook socket"). Returns 0, -EINVAL (empty, or
 * ending in '/') or -ENAMETOOLONG (does not fit in len, or in a socket address). */
int gs_hook_socket_path(const char *main_socket, char *out, size_t len);

/* Connects (blocking, close-on-exec). Returns 0 and the fd, or -errno
 * (-ENOENT/-ECONNREFUSED: no daemon answers there). */
int gs_client_connect(const char *path, int *ret_fd);

/* Sends one message. Returns 0 or -errno. */
int gs_client_send(int fd, uint32_t type, uint32_t seq, const void *body, size_t len);

/* Receives one whole message into buf (cap bytes, 8-aligned) and decodes it;
 * timeout_ms < 0 waits forever. The timeout is for the message to begin: once a byte of it is
 * read, its rest is waited for GS_CLIENT_REST_MS more at least, and a stream cut inside a message
 * is -EPROTO (close it: its next byte is no header). Returns 0, -ETIMEDOUT (nothing read),
 * -ECONNRESET (closed), -EPROTO (malformed, or cut), -EMSGSIZE (larger than cap) or -errno. */
#define GS_CLIENT_REST_MS 1000
int gs_client_recv(int fd, void *buf, size_t cap, int timeout_ms, struct gs_msg *ret);

/* How long HELLO waits for its answer: the daemon answers it at once, so a longer silence is a
 * stopped (SIGSTOP) or wedged daemon, said to the user within this, not 10 s later. */
#define GS_CLIENT_HELLO_TIMEOUT_MS 3000

/* HELLO: the first message of every connection. role: enum gs_role;
 * slice_id 0 unless the caller belongs to a slice. The reply (HELLO_OK)
 * carries the slice's spec. Returns 0, -ENOENT (no such slice for this
 * user) or another -errno. */
int gs_client_hello(int fd, uint32_t role, uint32_t slice_id, struct gs_msg_hello_ok *ret);
/* The same, and a refusal's reason from the daemon (e.g. a per-user connection limit) is
 * copied into err (NUL-terminated; left empty when the daemon gave none). */
int gs_client_hello_err(int fd, uint32_t role, uint32_t slice_id, struct gs_msg_hello_ok *ret,
                        char *err, size_t err_len);
/* The same for a slice's process: nonce is the slice's (GSLICE_SLICE_NONCE), which the daemon
 * checks so that a process never joins another slice that got its id (docs/protocol.md);
 * -ESTALE when the daemon's slice of that id is not this one. */
int gs_client_hello_slice(int fd, uint32_t role, uint32_t slice_id, uint64_t nonce,
                          struct gs_msg_hello_ok *ret, char *err, size_t err_len);

/* Each call below sends one request and waits for its answer. On a refusal
 * the daemon's reason is copied into err (when not NULL) and the daemon's
 * -errno returned: -EINVAL (bad values), -EBUSY (over 100% of a GPU, memory
 * cap below use without force), -ENODEV (unknown GPU), -ENOENT (no such
 * slice, or not yours), -ENOSPC (too many slices). */
int gs_client_register(int fd, const struct gs_slice_spec *spec, struct gs_msg_registered *ret,
                       char *err, size_t err_len);
/* nonce: the slice's, from REGISTERED; a slice of that id with another nonce is not removed. */
/* The same with REGISTER flags (enum gs_register_flag); -EPROTONOSUPPORT when the daemon did
 * not honour them all (an older gsliced): the slice it made is removed again. */
int gs_client_register_flags(int fd, const struct gs_slice_spec *spec, uint32_t flags,
                             struct gs_msg_registered *ret, char *err, size_t err_len);
int gs_client_unregister(int fd, uint32_t slice_id, uint64_t nonce, char *err, size_t err_len);

/* The node snapshot. On success *ret owns a malloc'd slice array: free it
 * with gs_status_free. */
int gs_client_status(int fd, struct gs_status *ret);

/* Changes a live slice: `fields` (enum gs_set_field bits) say which of
 * values' compute_request, compute_limit, priority, weight, memory_cap apply.
 * Validated as `gslice run` is; persisted; takes effect at the slice's next
 * token and allocation. force: allow a memory cap below current use. */
int gs_client_set(int fd, uint32_t slice_id, uint32_t fields, const struct gs_slice_spec *values,
                  int force, char *err, size_t err_len);
