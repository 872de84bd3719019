/* SPDX-License-Identifier: Apache-2.0 */
/* A client connection of gsliced: owns its buffers (bounded in and out), its share of a loop turn
 * and its close. It does not decide what a request means (requests.c) nor touch the token beyond
 * telling token.c that a connection is gone. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"

/* Queues one message; a client that does not read is marked dropped (closed by the caller's
 * caller where that is safe), not buffered forever. */
int conn_send(struct daemon *d, struct conn *c, uint32_t type, uint32_t seq, const void *body,
              size_t len);
void conn_send_error(struct daemon *d, struct conn *c, uint32_t seq, int code, const char *text);
void conn_send_ok(struct daemon *d, struct conn *c, uint32_t seq);
/* Links c into s's list of connections (HELLO as s's). */
void conn_join_slice(struct conn *c, struct slice *s);
/* s is being removed: its connections leave its list (they stay open, under no slice). */
void conn_slice_gone(struct slice *s);
/* Unlinks, closes and frees c; why, if not NULL, is logged. */
void conn_close(struct daemon *d, struct conn *c, const char *why);
/* Handles what c sent within its share of one loop turn. Returns false when c was closed. */
bool conn_serve(struct daemon *d, struct conn *c);
/* The loop's callback for a connection's fd, c its data. */
void conn_cb(struct loop *l, int fd, uint32_t events, void *data);
