/* SPDX-License-Identifier: Apache-2.0 */
/* A client connection of gsliced: owns its buffers (bounded in and out), its share of a loop turn
 * and its close. What a message means is the layer above's (requests.c), reached through the
 * struct conn_ops it sets; conn.c calls nothing above it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "loop.h"
#include "proto.h"
#include "token_state.h"

/* A client sends only small messages; anything longer is hostile. */
#define CONN_IN_MAX 512
/* A reader that lets this much pile up is dropped (status replies are ~700 KiB at most). The
 * daemon takes no request of a connection while a reply to it waits (conn_serve), so only what
 * the daemon pushes unasked (grants, revokes) could come near. */
#define CONN_OUT_MAX (4u << 20)
/* An output buffer larger than this is freed once drained: a STATUS reply's worth stays with
 * each connection otherwise, forever. */
#define CONN_OUT_KEEP (16u << 10)
/* One connection's share of a loop turn: so many requests handled, one of them at most a STATUS
 * (a node snapshot is the one expensive request), before the other connections get theirs: a
 * client writing STATUS without pause must not hold the loop for as long as it writes. */
#define CONN_TURN_MSGS 16u
/* HELLOs one connection may have refused (wrong nonce, no such slice): the last one's ERROR is
 * sent, then it is closed. A client that knows its slice says HELLO once; without a bound, one
 * connection could try nonces for the whole hello_timeout_ms, thousands a second. */
#define HELLO_REFUSED_MAX 3

struct conn;
struct slice;

/* What the layer above does with a connection (requests.c sets them once, at start). */
struct conn_ops {
  /* One decoded message of c: false when c must close (out of protocol). */
  bool (*handle)(void *data, struct conn *c, const struct gs_msg *m);
  /* c is closing, already out of its slice's list: what it held is let go (token.c). */
  void (*gone)(void *data, struct conn *c);
};

/* Every connection of the daemon, on both sockets. */
struct conns {
  struct loop *loop;
  const struct conn_ops *ops;
  void *data; /* the ops' */
  struct conn *head;
  uint32_t n;              /* on both sockets */
  uint32_t nhook;          /* of them, on the hook socket (max_hook_clients) */
  size_t freed_since_trim; /* bytes of big buffers freed since the heap was last trimmed */
};

struct conn {
  int fd;
  pid_t pid;
  uint64_t start; /* the peer's start time at accept: its pid, if reused later, is not it */
  uid_t uid;
  gid_t gid;
  bool hello;
  bool hook_only;       /* accepted on the hook socket: a container slice's hook, nothing more */
  uint64_t pidns;       /* hook socket: the peer's pid namespace (its inode) at accept; 0 unknown */
  bool dropped;         /* its replies piled up unread: closed at the next chance */
  uint64_t accepted_at; /* for the HELLO deadline */
  uint32_t role;        /* enum gs_role, after HELLO */
  uint32_t slice_id;    /* 0: not a slice's process */
  struct token_conn tok; /* its part in the GPUs' tokens (token.h) */
  unsigned char in[CONN_IN_MAX];
  size_t inlen;
  struct gs_buf out;       /* at most CONN_OUT_MAX (conn_send) */
  uint64_t resume_timer;   /* requests left over from its turn: handled at the next one */
  uint32_t hellos_refused; /* HELLOs refused on it: the HELLO_REFUSED_MAX-th closes it */
  struct conns *set;
  struct conn *next, **pprev; /* in set->head: unlinked in O(1) at close */
  /* In its slice's list (slice.conns) from HELLO until it closes or the slice is removed. */
  struct conn *slice_next, **slice_pprev;
};

/* A connection on fd (accepted, non-blocking), watched by the loop and in set's list; the caller
 * fills in its peer's identity. NULL when out of memory or the loop refuses fd (fd then stays
 * the caller's to close). */
struct conn *conn_new(struct conns *set, int fd, bool hook_only);
/* Queues one message; a client that does not read is marked dropped (closed by the caller's
 * caller where that is safe), not buffered forever. */
int conn_send(struct conn *c, uint32_t type, uint32_t seq, const void *body, size_t len);
void conn_send_error(struct conn *c, uint32_t seq, int code, const char *text);
void conn_send_ok(struct conn *c, uint32_t seq);
/* Links c into s's list of connections (HELLO as s's). */
void conn_join_slice(struct conn *c, struct slice *s);
/* s is being removed: its connections leave its list (they stay open, under no slice). */
void conn_slice_gone(struct slice *s);
/* Unlinks, closes and frees c; why, if not NULL, is logged. */
void conn_close(struct conn *c, const char *why);
/* Handles what c sent within its share of one loop turn. Returns false when c was closed. */
bool conn_serve(struct conn *c);
