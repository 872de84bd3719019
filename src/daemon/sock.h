/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's listening sockets, main and hook, each in a dir checked through descriptors:
 * accepting within each socket's bound (max_clients, max_hook_clients), max_clients_per_user on
 * the main socket and max_hook_pending_per_pidns on the hook socket, the refused connections
 * held open a moment, and closing connections idle past their HELLO deadline. It makes
 * connections (conn.h) and reads none of their requests. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Refused connections held open at once (struct sock.refused); within main.c's FDS_RESERVED. */
#define REFUSED_MAX 16
/* Connections accepted from one listening socket per loop turn: a flood on the hook socket
 * must not keep the loop from the main socket's (and the other way round). */
#define ACCEPT_TURN_MAX 64

struct daemon;

/* The listening sockets' state (struct daemon.sock); sock.c alone writes it. */
struct sock {
  int listen_fd;
  int listen_dir_fd;  /* the main socket's dir, checked (open_socket_dir) */
  int hook_listen_fd; /* the hook socket (config hook_socket): hook-only connections */
  int hook_dir_fd;    /* its dir, the daemon's own */
  int spare_fd;       /* kept open to accept-and-close when out of file descriptors */
  bool said_nofile;
  uint64_t said_user_clients_at; /* last log of a max_clients_per_user refusal */
  uint64_t said_hook_pending_at; /* last log of a max_hook_pending_per_pidns refusal */
  uint64_t own_pidns;            /* the daemon's pid namespace (its inode), 0 until read */
  /* Connections refused over max_clients_per_user (or max_hook_pending_per_pidns), their ERROR
   * sent and their write side shut, kept open a moment so the client's HELLO does not fail with
   * EPIPE before it reads why. */
  struct {
    int fd;
    uint64_t at;
  } refused[REFUSED_MAX];
  uint32_t nrefused;
};

/* Every descriptor closed (-1): before sock_listen. */
void sock_init(struct sock *s);
/* The main socket (cfg.socket) in a dir of the daemon's own that no one else may write, made
 * through descriptors: 0, or -errno with the reason in why. */
int sock_listen(struct daemon *d, char *why, size_t why_len);
/* The hook socket (cfg.hook_socket) in a dir of the daemon's own, made 0755 through descriptors:
 * 0, or -errno with the reason in why. */
int sock_listen_hook(struct daemon *d, char *why, size_t why_len);
/* Closes every connection and both sockets (unlinked through their dirs). */
void sock_close_all(struct daemon *d);
/* Closes connections without HELLO in time or whose replies piled up, and old refused ones. */
void sock_housekeeping(struct daemon *d);
/* A per-container bound of the hook socket (max_hook_clients_per_slice,
 * max_hook_pending_per_pidns) as applied: at most a quarter of max_hook_clients, at least 1. */
uint64_t sock_hook_bound(const struct daemon *d, uint64_t configured);
