/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's configuration: one table (name, type, default, validator, runtime-changeable) read
 * by parsing, --help and --print-config. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CONFIG_STR_MAX 256

struct config {
  char socket[108];      /* sun_path size */
  char hook_socket[108]; /* "": gs_hook_socket_path(socket), set by config_derive */
  char state_dir[CONFIG_STR_MAX];
  char metrics[CONFIG_STR_MAX]; /* HOST:PORT of /metrics, "off": none */
  uint64_t window_ms;
  uint64_t quantum_min_us;
  uint64_t quantum_max_us;
  uint64_t quantum_init_us;
  uint64_t quantum_kernels;
  bool lone_quantum; /* a slice alone on its GPU holds quantum_max (sched_lone_quantum) */
  uint64_t release_timeout_ms;
  uint64_t charge_check_ms; /* the charge check's period (charge.c), 0: off */
  uint64_t hello_timeout_ms;
  uint64_t hook_hello_timeout_ms; /* the same on the hook socket: its clients say HELLO at once */
  uint64_t max_clients;           /* on the main socket */
  uint64_t max_hook_clients;      /* on the hook socket, apart from max_clients */
  uint64_t max_slices;
  uint64_t max_clients_per_user;       /* on the main socket: on the hook socket, uids are chosen */
  uint64_t max_hook_clients_per_slice; /* hook-socket connections of one slice, after HELLO */
  uint64_t max_hook_pending_per_pidns; /* hook-socket connections before HELLO per pid namespace */
  uint64_t max_slices_per_user;
  uint64_t max_compute_per_user; /* percent of a GPU committed (requests) by one non-admin uid */
  uint64_t max_memory_per_user;  /* bytes of memory caps on a GPU of one non-admin uid, 0: any */
  char admin_group[64];          /* group whose members may raise slices' limits; "": none */
  bool user_slices;              /* REGISTER from non-admins (false on Kubernetes nodes) */
  uint64_t gpus;                 /* 0: ask NVML */
};

enum config_type { CONFIG_U64, CONFIG_STR, CONFIG_BOOL };

struct config_entry {
  const char *name;
  enum config_type type;
  const char *def;
  size_t offset;
  size_t size;       /* of the string (or bool) field */
  uint64_t min, max; /* CONFIG_U64 bounds */
  bool runtime;      /* takes effect on SIGHUP without a restart */
  const char *help;
};

extern const struct config_entry config_table[];
extern const unsigned config_table_len;

/* Every entry at its default (state_dir and socket as the caller's identity implies). */
void config_defaults(struct config *ret);
/* Sets one entry from text. Returns 0, -ENOENT (no such name), -EINVAL (bad value),
 * with a reason in why. */
int config_set(struct config *c, const char *name, const char *value, char *why, size_t why_len);
/* Reads "name = value" lines (# comments). Returns 0 or -errno, reason in why. */
int config_load_file(struct config *c, const char *path, char *why, size_t why_len);
/* The gid admin_group names: 0 and *ret_gid (when not NULL), or -ENOENT (empty, or no such group).
 */
int config_admin_gid(const struct config *c, gid_t *ret_gid);
/* Settings whose default is made of others (hook_socket of socket), once all are read: 0, or
 * -ENAMETOOLONG with a reason in why. */
int config_derive(struct config *c, char *why, size_t why_len);
/* Cross-field checks (quantum bounds against the window). */
int config_check(const struct config *c, char *why, size_t why_len);
/* The table with each entry's value in c (or the default when c is NULL). */
void config_print(const struct config *c, FILE *out);
