/* The daemon's listening sockets, main and hook, each in a dir checked through descriptors:
 * accepting within each socket's bound (max_clients, max_hook_clients) and max_clients_per_user,
 * the refused connections held open a moment, and closing connections idle past their HELLO
 * deadline. It does not read requests (conn.c). */
#pragma once
#include "daemon.h"

/* Closes connections without HELLO in time or whose replies piled up, and old refused ones. */
void sock_housekeeping(struct daemon *d);
