/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's requests: HELLO, REGISTER, UNREGISTER, SET, STATUS, PING (token requests go to
 * token.c), and putting the registry's slices on the GPUs' schedulers. It does not read or write
 * sockets itself (conn.c) nor hold the token (token.c). */
#pragma once
#include <stdbool.h>

#include "daemon.h"

/* Handles one decoded message of c. Returns false when c must close (out of protocol). */
bool requests_handle(struct daemon *d, struct conn *c, const struct gs_msg *m);
/* Takes slice id off the GPUs and out of the registry, and saves the registry. */
void requests_remove_slice(struct daemon *d, uint32_t id);
