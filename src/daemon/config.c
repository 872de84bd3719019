/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's configuration table and its parsing (config.h); the reference is docs/config.md. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "fileio.h"
#include "kv.h"
#include "proto.h"
#include "sched.h"

/* A default given as a number elsewhere (sched.h), written as the table's text. */
#define DEF_(x) #x
#define DEF(x) DEF_(x)

#define U64(field, def, lo, hi, rt, help)                                                          \
  { #field, CONFIG_U64, def, offsetof(struct config, field), 0, lo, hi, rt, help }
#define STR(field, def, rt, help)                                                                  \
  {                                                                                                \
#field, CONFIG_STR, def, offsetof(struct config, field), sizeof(((struct config *)0)->field),  \
        0, 0, rt, help                                                                             \
  }
#define BOOL(field, def, rt, help)                                                                 \
  { #field, CONFIG_BOOL, def, offsetof(struct config, field), sizeof(bool), 0, 1, rt, help }

const struct config_entry config_table[] = {
    STR(socket, GS_DEFAULT_SOCKET, false,
        "Unix socket of the daemon (GSLICE_SOCKET overrides the default)"),
    STR(hook_socket, "", false,
        "Unix socket for container slices' hooks only (HELLO as a slice's hook with its nonce, "
        "then tokens), its dir mounted read-only into containers; default: <dir of "
        "socket>/hook/<name of socket>"),
    STR(state_dir, "", false,
        "slices, their state dirs, lock and log; default /var/lib/gslice as root, "
        "else ${XDG_RUNTIME_DIR:-/tmp}/gslice-UID"),
    STR(metrics, "off", false, "serve /metrics on HOST:PORT or PORT (loopback); off: none"),
    U64(window_ms, DEF(SCHED_DEFAULT_WINDOW_MS), 100, 60000, true,
        "sliding window of requests and fair share, ms"),
    U64(quantum_min_us, DEF(SCHED_DEFAULT_QUANTUM_MIN_US), 100, 1000000, true,
        "smallest quantum, us"),
    U64(quantum_max_us, DEF(SCHED_DEFAULT_QUANTUM_MAX_US), 100, 10000000, true,
        "largest quantum, us"),
    U64(quantum_init_us, DEF(SCHED_DEFAULT_QUANTUM_INIT_US), 100, 10000000, true,
        "quantum before a kernel length is reported, us"),
    U64(quantum_kernels, DEF(SCHED_DEFAULT_QUANTUM_KERNELS), 1, 1000, true,
        "a quantum is this many of the slice's kernels (as its hooks measure them)"),
    BOOL(lone_quantum, "true", true,
         "a slice alone on its GPU holds quantum_max (x its limit when hard-limited), taken back "
         "at the end of its usual quantum once another slice waits"),
    U64(release_timeout_ms, "1000", 10, 600000, true,
        "most a holder may take past expiry to close its burst before it is revoked (it gets "
        "one quantum, or two of its kernels when longer: no longer than its release charged), "
        "ms"),
    U64(charge_check_ms, "500", 0, 60000, true,
        "every this long, each slice's charges on a GPU are checked against the device time "
        "NVML's per-process samples give its processes, and what they ran beyond the tolerance "
        "is charged (docs/compute.md, \"The charge check\"); 0: off, else 100 at least, ms"),
    U64(hello_timeout_ms, "5000", 10, 600000, true,
        "a connection that has not said HELLO this long is closed, ms"),
    U64(hook_hello_timeout_ms, "1000", 10, 600000, true,
        "the same on the hook socket, whose clients (hooks) say HELLO as they connect, ms"),
    U64(max_clients, "1024", 4, 65536, false,
        "connections at once on the main socket (lowered to fit the open-file limit, said in "
        "the log)"),
    U64(max_hook_clients, "1024", 4, 65536, false,
        "connections at once on the hook socket (containers' processes), apart from "
        "max_clients: a flood there refuses none on the main socket"),
    U64(max_slices, "256", 1, 256, false, "slices at once"),
    U64(max_clients_per_user, "256", 1, 65536, true,
        "connections at once on the main socket from one uid, root included (the hook socket "
        "does not count uids: a container chooses its own)"),
    U64(max_hook_clients_per_slice, "64", 1, 16384, true,
        "connections at once on the hook socket that said HELLO as one slice's (one per hooked "
        "process); at most a quarter of max_hook_clients"),
    U64(max_hook_pending_per_pidns, "32", 1, 16384, true,
        "connections at once on the hook socket without HELLO yet from one pid namespace (a "
        "container; on the daemon's own, from one uid); at most a quarter of max_hook_clients"),
    U64(max_slices_per_user, "64", 1, 256, true, "slices at once owned by one uid, root included"),
    U64(max_compute_per_user, "50", 0, GS_PERCENT_MAX, true,
        "percent of a GPU one uid's slices may request in all; admins (root, the daemon's "
        "user, admin_group) are not bounded"),
    U64(max_memory_per_user, "0", 0, UINT64_MAX, true,
        "bytes of memory caps one uid's slices may hold on a GPU in all (a slice without a cap "
        "is then refused); 0: not bounded; admins are not bounded"),
    STR(admin_group, "", true,
        "group (name or gid) whose members may raise any slice's limits and run past the "
        "per-user bounds, as root and the daemon's user may; empty: none"),
    BOOL(user_slices, "true", true,
         "whether users other than admins may REGISTER slices (gslice run); false on Kubernetes "
         "nodes, where what is not the cluster's placement would be committed beside it"),
    U64(gpus, "0", 0, 16, false, "GPUs to schedule; 0: as many as NVML reports (1 without NVML)"),
};
const unsigned config_table_len = sizeof(config_table) / sizeof(config_table[0]);

static const struct config_entry *find(const char *name) {
  for (unsigned i = 0; i < config_table_len; i++)
    if (strcmp(config_table[i].name, name) == 0)
      return &config_table[i];
  return NULL;
}

static int set_entry(struct config *c, const struct config_entry *e, const char *value, char *why,
                     size_t why_len) {
  char *p = (char *)c + e->offset;

  if (e->type == CONFIG_STR) {
    if (strlen(value) >= e->size) {
      snprintf(why, why_len, "%s: longer than %zu bytes", e->name, e->size - 1);
      return -EINVAL;
    }
    memcpy(p, value, strlen(value) + 1);
    return 0;
  }
  if (e->type == CONFIG_BOOL) {
    bool b = !strcmp(value, "true");
    if (!b && strcmp(value, "false")) {
      snprintf(why, why_len, "%s: '%s' is not true or false", e->name, value);
      return -EINVAL;
    }
    memcpy(p, &b, sizeof(b));
    return 0;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(value, &end, 10);
  /* Digits first: strtoull takes " 4" and "+4" but not "4 "; both sides are refused alike. */
  if (value[0] < '0' || value[0] > '9' || errno || end == value || *end || v < e->min ||
      v > e->max) {
    snprintf(why, why_len, "%s: '%s' is not a number in %" PRIu64 "..%" PRIu64, e->name, value,
             e->min, e->max);
    return -EINVAL;
  }
  memcpy(p, &(uint64_t){v}, sizeof(uint64_t));
  return 0;
}

void config_defaults(struct config *ret) {
  char why[64];

  memset(ret, 0, sizeof(*ret));
  for (unsigned i = 0; i < config_table_len; i++)
    set_entry(ret, &config_table[i], config_table[i].def, why, sizeof(why));
  if (geteuid() == 0) {
    snprintf(ret->state_dir, sizeof(ret->state_dir), "/var/lib/gslice");
  } else {
    const char *rt = secure_getenv("XDG_RUNTIME_DIR");
    snprintf(ret->state_dir, sizeof(ret->state_dir), "%s/gslice-%u", rt && *rt ? rt : "/tmp",
             (unsigned)geteuid());
  }
  const char *sock = secure_getenv("GSLICE_SOCKET");
  if (sock && *sock && strlen(sock) < sizeof(ret->socket))
    snprintf(ret->socket, sizeof(ret->socket), "%s", sock);
}

int config_set(struct config *c, const char *name, const char *value, char *why, size_t why_len) {
  const struct config_entry *e = find(name);

  if (!e) {
    snprintf(why, why_len, "no setting named '%s' (gsliced --help lists them)", name);
    return -ENOENT;
  }
  return set_entry(c, e, value, why, why_len);
}

/* A config file is a few dozen lines a person wrote: anything this long is not one. */
#define CONFIG_FILE_MAX (1u << 20)
/* The longest line taken (without its newline): a longer one is an error, never read in pieces
 * whose tail would apply as a line of its own. */
#define CONFIG_LINE_MAX 510u

struct load {
  struct config *c;
  const char *path;
};

static int load_one(const char *key, const char *value, unsigned line, void *user, char *err,
                    size_t err_len) {
  const struct load *l = user;
  char sub[256];

  if (config_set(l->c, key, value, sub, sizeof(sub)) < 0) {
    snprintf(err, err_len, "%s:%u: %s", l->path, line, sub);
    return -EINVAL;
  }
  return 0;
}

/* The first line longer than CONFIG_LINE_MAX, 0 when none. */
static unsigned long_line(const char *text) {
  unsigned n = 1;

  for (const char *p = text;; n++) {
    size_t len = strcspn(p, "\n");
    if (len > CONFIG_LINE_MAX)
      return n;
    if (!p[len])
      return 0;
    p += len + 1;
  }
}

int config_load_file(struct config *c, const char *path, char *why, size_t why_len) {
  struct load l = {.c = c, .path = path};
  char *text = NULL;
  unsigned line;
  int r = gs_file_read(AT_FDCWD, path, GS_FILE_REGULAR, CONFIG_FILE_MAX, &text, NULL);

  /* A directory opens and reads as nothing: it would pass for an empty file. */
  if (r == -EINVAL) {
    snprintf(why, why_len, "%s is not a regular file: give the path of a config file", path);
    return r;
  }
  if (r < 0) {
    snprintf(why, why_len, "cannot read %s: %s", path,
             r == -EFBIG ? "larger than 1 MiB: not a config file" : strerror(-r));
    return r;
  }
  if ((line = long_line(text))) {
    snprintf(why, why_len, "%s:%u: line longer than %u bytes; shorten it", path, line,
             CONFIG_LINE_MAX);
    r = -EINVAL;
  } else if ((r = gs_kv_parse(text, '\n', GS_KV_FILE, load_one, &l, why, why_len)) == -EBADMSG) {
    /* kv.h says "line N: ..."; the file's own name goes first, as in every other error. */
    if (sscanf(why, "line %u", &line) != 1)
      line = 0;
    snprintf(why, why_len, "%s:%u: expected name = value", path, line);
  }
  free(text);
  return r < 0 ? -EINVAL : 0;
}

int config_admin_gid(const struct config *c, gid_t *ret_gid) {
  const struct group *g;
  char *end;
  unsigned long v;

  if (!c->admin_group[0])
    return -ENOENT;
  /* A name first; digits that name no group are a gid. */
  g = getgrnam(c->admin_group);
  if (g) {
    if (ret_gid)
      *ret_gid = g->gr_gid;
    return 0;
  }
  errno = 0;
  v = strtoul(c->admin_group, &end, 10);
  if (c->admin_group[0] < '0' || c->admin_group[0] > '9' || *end || errno || v > UINT32_MAX - 1)
    return -ENOENT;
  if (ret_gid)
    *ret_gid = (gid_t)v;
  return 0;
}

int config_derive(struct config *c, char *why, size_t why_len) {
  if (c->hook_socket[0])
    return 0;
  if (gs_hook_socket_path(c->socket, c->hook_socket, sizeof(c->hook_socket)) < 0) {
    c->hook_socket[0] = 0;
    snprintf(why, why_len,
             "hook_socket: <dir of socket>/hook/<name> of '%s' does not fit in a socket address "
             "(107 bytes); give a shorter socket, or hook_socket",
             c->socket);
    return -ENAMETOOLONG;
  }
  return 0;
}

int config_check(const struct config *c, char *why, size_t why_len) {
  if (c->quantum_min_us > c->quantum_max_us || c->quantum_init_us < c->quantum_min_us ||
      c->quantum_init_us > c->quantum_max_us) {
    snprintf(why, why_len, "need quantum_min_us <= quantum_init_us <= quantum_max_us");
    return -EINVAL;
  }
  if (c->charge_check_ms && c->charge_check_ms < 100) {
    snprintf(why, why_len,
             "charge_check_ms must be 0 (off) or 100 at least: NVML samples a process every "
             "~1/6 s, a shorter period sees its percent rounding more than the device time");
    return -EINVAL;
  }
  if (c->quantum_max_us > c->window_ms * 1000 / 4) {
    snprintf(why, why_len, "quantum_max_us must be at most a quarter of window_ms");
    return -EINVAL;
  }
  /* One container (its slice, its pid namespace) must never fill the hook socket alone. */
  if (c->max_hook_clients_per_slice > c->max_hook_clients / 4 ||
      c->max_hook_pending_per_pidns > c->max_hook_clients / 4) {
    snprintf(why, why_len,
             "max_hook_clients_per_slice (%" PRIu64 ") and max_hook_pending_per_pidns (%" PRIu64
             ") must each be at most a quarter of max_hook_clients (%" PRIu64
             "), so that one container cannot hold the hook socket's connections alone",
             c->max_hook_clients_per_slice, c->max_hook_pending_per_pidns, c->max_hook_clients);
    return -EINVAL;
  }
  if (c->admin_group[0] && config_admin_gid(c, NULL) < 0) {
    snprintf(why, why_len, "admin_group: no group named or numbered '%s'", c->admin_group);
    return -EINVAL;
  }
  if (!c->socket[0] || !c->state_dir[0]) {
    snprintf(why, why_len, "socket and state_dir must not be empty");
    return -EINVAL;
  }
  /* The hook socket's dir is mounted into containers: the main socket must not be in it. */
  const char *hs = strrchr(c->hook_socket, '/'), *ms = strrchr(c->socket, '/');
  size_t hd = hs ? (size_t)(hs - c->hook_socket) : 0, md = ms ? (size_t)(ms - c->socket) : 0;
  if (c->hook_socket[0] && hd == md && !strncmp(c->hook_socket, c->socket, hd)) {
    snprintf(why, why_len,
             "hook_socket must be in another directory than socket (that directory is mounted "
             "into containers)");
    return -EINVAL;
  }
  return 0;
}

void config_print(const struct config *c, FILE *out) {
  for (unsigned i = 0; i < config_table_len; i++) {
    const struct config_entry *e = &config_table[i];
    char val[CONFIG_STR_MAX + 32];
    if (!c)
      snprintf(val, sizeof(val), "%s", e->def);
    else if (e->type == CONFIG_STR)
      snprintf(val, sizeof(val), "%s", (const char *)c + e->offset);
    else if (e->type == CONFIG_BOOL)
      snprintf(val, sizeof(val), "%s",
               *(const bool *)(const void *)((const char *)c + e->offset) ? "true" : "false");
    else
      snprintf(val, sizeof(val), "%" PRIu64,
               *(const uint64_t *)(const void *)((const char *)c + e->offset));
    fprintf(out, "  %-26s %-6s %-26s %s%s\n", e->name,
            e->type == CONFIG_U64    ? "number"
            : e->type == CONFIG_BOOL ? "bool"
                                     : "string",
            val, e->help, e->runtime ? " [SIGHUP]" : "");
  }
}
