/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's requests: HELLO, REGISTER, UNREGISTER, SET, STATUS, PING (token requests go to
 * token.c), and putting the registry's slices on the GPUs' schedulers. It does not read or write
 * sockets itself (conn.c) nor hold the token (token.c); conn.c reaches it through the
 * struct conn_ops requests_attach sets. */
#pragma once
#include <stdint.h>

struct daemon;

/* d's connections hand their messages and their close to this module (call once the loop is
 * made, before the sockets listen). */
void requests_attach(struct daemon *d);
/* Adds every registered slice to its GPUs' schedulers and writes its memory cap (at start, after
 * a restart). */
void requests_adopt_slices(struct daemon *d);
/* Takes slice id off the GPUs and out of the registry, and saves the registry. */
void requests_remove_slice(struct daemon *d, uint32_t id);
