/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's listening sockets, main and hook, each in a dir checked through descriptors:
 * accepting within each socket's bound (max_clients, max_hook_clients), max_clients_per_user on
 * the main socket and max_hook_pending_per_pidns on the hook socket,
 * the refused connections held open a moment, and closing connections idle past their HELLO
 * deadline. It does not read requests (conn.c). */
#pragma once
#include "daemon.h"

/* Closes connections without HELLO in time or whose replies piled up, and old refused ones. */
void sock_housekeeping(struct daemon *d);
/* A per-container bound of the hook socket (max_hook_clients_per_slice,
 * max_hook_pending_per_pidns) as applied: at most a quarter of max_hook_clients, at least 1. */
uint64_t sock_hook_bound(const struct daemon *d, uint64_t configured);
