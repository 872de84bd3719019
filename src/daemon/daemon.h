/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's state, passed around as struct daemon *: config, loop, registry, GPUs and
 * connections. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "config.h"
#include "loop.h"
#include "proto.h"
#include "registry.h"
#include "sched.h"
#include "token.h"

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
 * (a node snapshot is the one expensive request), before the other connections get theirs. A
 * client writing STATUS without pause held the loop for as long as it wrote (another slice's
 * launch waited 4.2 s). */
#define CONN_TURN_MSGS 16u
/* Refused connections held open at once (daemon.refused); within main.c's FDS_RESERVED. */
#define REFUSED_MAX 16
/* HELLOs one connection may have refused (wrong nonce, no such slice): the last one's ERROR is
 * sent, then it is closed. A client that knows its slice says HELLO once; without a bound, one
 * connection could try nonces for the whole hello_timeout_ms, thousands a second. */
#define HELLO_REFUSED_MAX 3
/* Connections accepted from one listening socket per loop turn: a flood on the hook socket
 * must not keep the loop from the main socket's (and the other way round). */
#define ACCEPT_TURN_MAX 64

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
  struct daemon *d;
  struct conn *next, **pprev; /* in daemon.conns: unlinked in O(1) at close */
  /* In its slice's list (slice.conns) from HELLO until it closes or the slice is removed. */
  struct conn *slice_next, **slice_pprev;
};

struct daemon;

struct gpu {
  struct daemon *d;
  uint32_t index;
  char name[GS_NAME_MAX];
  char uuid[GS_UUID_MAX];
  uint8_t uuid_bin[16];
  bool has_uuid;
  uint64_t memory_total;
  uint64_t memory_used;
  struct sched s;   /* the policy's view of the token: holder, generation, validity */
  struct token tok; /* the mechanism's (token.h) */
};

struct nvml;

struct daemon {
  struct config cfg;
  char config_path[CONFIG_STR_MAX];
  struct loop *loop;
  int listen_fd;
  int listen_dir_fd;  /* the main socket's dir, checked (sock.c, open_socket_dir) */
  int hook_listen_fd; /* the hook socket (config hook_socket): hook-only connections */
  int hook_dir_fd;    /* its dir, the daemon's own */
  int spare_fd;       /* kept open to accept-and-close when out of file descriptors */
  bool said_nofile;
  uint64_t said_user_clients_at; /* last log of a max_clients_per_user refusal */
  uint64_t said_hook_pending_at; /* last log of a max_hook_pending_per_pidns refusal */
  uint64_t own_pidns;            /* the daemon's pid namespace (its inode), 0 until read */
  /* Connections refused over max_clients_per_user (or max_hook_pending_per_pidns), their ERROR
   * sent and their write side shut,
   * kept open a moment so the client's HELLO does not fail with EPIPE before it reads why. */
  struct {
    int fd;
    uint64_t at;
  } refused[REFUSED_MAX];
  uint32_t nrefused;
  int signal_fd;
  int lock_fd;
  struct registry reg;
  struct gpu gpus[GS_MAX_GPUS];
  uint32_t ngpus;
  struct conn *conns;
  uint32_t nconns;      /* on both sockets */
  uint32_t nhook_conns; /* of them, on the hook socket (max_hook_clients) */
  uint64_t started;
  uint64_t housekeeping_timer;
  size_t freed_since_trim; /* bytes of big buffers freed since the heap was last trimmed */
  struct nvml *nvml;
  struct gs_metrics *metrics;
};

/* The serving side, one job per file: sock.c (the listening socket, accepting), conn.c
 * (connections), requests.c (what a request does), token.c (the token flow of every GPU). */
/* sock.c */
/* The main socket (cfg.socket) in a dir of the daemon's own that no one else may write, made
 * through descriptors: 0, or -errno with the reason in why. */
int server_listen(struct daemon *d, char *why, size_t why_len);
/* The hook socket (cfg.hook_socket) in a dir of the daemon's own, made 0755 through descriptors:
 * 0, or -errno with the reason in why. */
int server_listen_hook(struct daemon *d, char *why, size_t why_len);
void server_close_all(struct daemon *d);
/* requests.c: applies new scheduler settings to every GPU (SIGHUP). */
void server_apply_sched_cfg(struct daemon *d);
/* requests.c: adds every registered slice to its GPUs' schedulers (after a restart). */
void server_adopt_slices(struct daemon *d);
/* requests.c: drops slices whose runner and processes are all gone; publishes metrics. */
void server_housekeeping(struct daemon *d);
void daemon_sched_cfg(const struct config *c, struct sched_cfg *ret);

/* snapshot.c: the node snapshot of STATUS and /metrics; memory caps via the slice's region. */
int daemon_snapshot(struct daemon *d, struct gs_status *ret);
/* Writes the slice's memory cap into its region (creating it). -EBADMSG once the slice broke
 * its region under the daemon (slice->region_broken). */
int daemon_apply_memory_cap(struct daemon *d, struct slice *s);
/* Memory the slice holds on a GPU, from its region (0 if none). */
uint64_t daemon_slice_memory_used(struct daemon *d, struct slice *s, uint32_t gpu);
/* Each second: caps still to write or read back, and every slice's region looked at (a file
 * grown past the region's size is cut back). */
void daemon_regions_housekeeping(struct daemon *d);

/* gpu.c: GPUs as NVML reports them (or cfg.gpus unnamed ones without it). */
int gpus_discover(struct daemon *d);
void gpus_refresh_memory(struct daemon *d);
void gpus_close(struct daemon *d);
/* What the device itself (NVML) says of GPU `gpu` beside the slices' accounting: its busy
 * ratio, and the processes on it `accounted` does not claim (pid: a slice's hooked process),
 * into gs's device_busy_ratio and unaccounted_* fields, device_known saying which NVML gave. */
void gpus_device_view(struct daemon *d, uint32_t gpu, bool (*accounted)(void *arg, pid_t pid),
                      void *arg, struct gs_gpu_status *gs);
