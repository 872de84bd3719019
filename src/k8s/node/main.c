/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node: command line and the main loop — gsliced's GPUs, the plugin's server and its
 * registration (again after a kubelet or gsliced restart) — and the threads beside it: the
 * plugin's serving thread and worker (rpc.c), housekeeping (cleanup of slices), the pod cache
 * and the inventory heartbeat (pods.c, kube.c). None of the kubelet's calls waits on the API
 * server: they read the pod cache. With --mode dra: the DRA plugin's two servers (dra.c), the
 * same gsliced inventory feeding its health stream, and the ResourceSlice's publisher thread. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "dra.h"
#include "dra_api.h"
#include "health.h"
#include "log.h"
#include "node.h"
#include "rpc.h"
#include "sign.h"

#define RECONCILE_NS 2000000000ull
#define INVENTORY_NS 1000000000ull

static volatile sig_atomic_t stop_sig;
/* --signing-key, as given (parsed arguments): loaded in main. */
static const char *key_paths[K8S_SIGN_MAX_KEYS];
static size_t nkey_paths;

static void on_stop(int sig) {
  stop_sig = sig;
}

uint64_t node_now(void) {
  return gs_mono_ns();
}

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: gslice-node [--kubelet-dir DIR] [--slots-per-gpu N] [--kubeconfig FILE]\n"
      "                   [--node-name NAME] [--socket PATH] [--state-dir DIR] [--hook FILE]\n"
      "                   [--pod-resources-socket PATH] [--nvidia-visible-devices VALUE]\n"
      "                   [--lease-namespace NS] [--no-api-server] [--health-listen [HOST:]PORT]\n"
      "                   [--signing-key FILE [--signing-key FILE]] [--mode device-plugin|dra]\n"
      "                   [--plugins-registry DIR] [--plugin-dir DIR] [--cdi-dir DIR]\n"
      "                   [--allocate-cdi] [--dra-workers N]\n"
      "  --kubelet-dir        the kubelet's device plugin directory\n"
      "                       (default /var/lib/kubelet/device-plugins)\n"
      "  --slots-per-gpu      gslice.io/gpu slots advertised per GPU, the most slices one GPU\n"
      "                       takes (default 16)\n"
      "  --kubeconfig         API server access (default: in-cluster service account)\n"
      "  --node-name          this node (default: $NODE_NAME)\n"
      "  --socket             gsliced's socket (default $GSLICE_SOCKET or %s)\n"
      "  --state-dir          gslice-node's records and per-container directories, made\n"
      "                       0700 when missing (default /var/lib/gslice/k8s)\n"
      "  --daemon-state-dir   gsliced's state directory: slice directories only below it\n"
      "                       (default " NODE_DAEMON_STATE_DEFAULT ")\n"
      "  --hook               libgslice.so on this host (default ../lib/libgslice.so from here)\n"
      "  --pod-resources-socket  the kubelet's PodResources API\n"
      "                       (default /var/lib/kubelet/pod-resources/kubelet.sock)\n"
      "  --nvidia-visible-devices  NVIDIA_VISIBLE_DEVICES for containers (default all; \"\"\n"
      "                       to leave it to the runtime)\n"
      "  --lease-namespace    the namespace of the node's liveness Lease " NODE_LEASE_PREFIX
      "<node>,\n"
      "                       renewed every 10 s (default " NODE_LEASE_NAMESPACE ")\n"
      "  --no-api-server      no API server: no inventory, every container is refused\n"
      "  --health-listen [HOST:]PORT  GET /healthz and /readyz (200 once registered with\n"
      "                       the kubelet and the pod cache synced, else 503) and /metrics\n"
      "                       (the Events posted); no host: 127.0.0.1 (default: off)\n"
      "  --signing-key FILE   a key that verifies gslice.io/assigned-signature (the Secret\n"
      "                       gslice-extender signs with); twice while a rotation is under\n"
      "                       way. Default /etc/gslice/signing/key, and\n"
      "                       /etc/gslice/signing/previous when it exists. Needed unless\n"
      "                       --no-api-server\n"
      "  --mode               device-plugin (default: gslice.io/gpu slots, placed by\n"
      "                       gslice-extender) or dra (the kubelet plugin of DRA driver\n"
      "                       " NODE_DRA_DRIVER ", placed by kube-scheduler); one mode per node\n"
      "  --plugins-registry   dra: the kubelet's plugin registration directory, where\n"
      "                       " NODE_DRA_REG_SOCK " goes (default " NODE_DRA_REGISTRY_DEFAULT ")\n"
      "  --plugin-dir         dra: where the service socket " NODE_DRA_SOCK " goes\n"
      "                       (default " NODE_DRA_PLUGIN_DIR_DEFAULT ")\n"
      "  --cdi-dir            the CDI specs gslice-node writes (default " NODE_CDI_DIR_DEFAULT ")\n"
      "  --allocate-cdi       device-plugin: Allocate answers CDI device names (specs in\n"
      "                       --cdi-dir) instead of mounts, for runtimes with CDI on\n"
      "  --dra-workers N      dra: the kubelet's NodePrepareResources/NodeUnprepareResources\n"
      "                       calls served at once, 1..%d (default %d): a slow one holds up\n"
      "                       only its own\n",
      GS_DEFAULT_SOCKET, RPC_MAX_WORKERS, NODE_DRA_WORKERS_DEFAULT);
}

/* The command line: one table of flags, each naming what it sets. */
enum flag_kind {
  FLAG_PATH,   /* a value of 1.. characters into a node_cfg field */
  FLAG_VALUE,  /* a value of 0.. characters (--nvidia-visible-devices "") */
  FLAG_COUNT,  /* 1..size into an unsigned node_cfg field at off */
  FLAG_NO_API, /* --no-api-server */
  FLAG_KEY,    /* --signing-key, at most K8S_SIGN_MAX_KEYS */
  FLAG_MODE,   /* --mode device-plugin|dra */
  FLAG_CDI,    /* --allocate-cdi */
  FLAG_HELP,
};
#define CFG(field) offsetof(struct node_cfg, field), sizeof(((struct node_cfg *)0)->field)
static const struct flag {
  const char *name;
  enum flag_kind kind;
  size_t off, size; /* FLAG_COUNT: size is the most it takes */
} flags[] = {
    {"kubelet-dir", FLAG_PATH, CFG(kubelet_dir)},
    {"slots-per-gpu", FLAG_COUNT, offsetof(struct node_cfg, slots_per_gpu), NODE_MAX_SLOTS_PER_GPU},
    {"kubeconfig", FLAG_PATH, CFG(kubeconfig)},
    {"node-name", FLAG_PATH, CFG(node_name)},
    {"socket", FLAG_PATH, CFG(socket)},
    {"state-dir", FLAG_PATH, CFG(state_dir)},
    {"hook", FLAG_PATH, CFG(hook)},
    {"pod-resources-socket", FLAG_PATH, CFG(pod_resources)},
    {"nvidia-visible-devices", FLAG_VALUE, CFG(nvidia_visible)},
    {"lease-namespace", FLAG_PATH, CFG(lease_namespace)},
    {"health-listen", FLAG_PATH, CFG(health_listen)},
    {"no-api-server", FLAG_NO_API, 0, 0},
    {"daemon-state-dir", FLAG_PATH, CFG(daemon_state)},
    {"signing-key", FLAG_KEY, 0, 0},
    {"mode", FLAG_MODE, 0, 0},
    {"plugins-registry", FLAG_PATH, CFG(plugins_registry)},
    {"plugin-dir", FLAG_PATH, CFG(plugin_dir)},
    {"cdi-dir", FLAG_PATH, CFG(cdi_dir)},
    {"allocate-cdi", FLAG_CDI, 0, 0},
    {"dra-workers", FLAG_COUNT, offsetof(struct node_cfg, dra_workers), RPC_MAX_WORKERS},
    {"help", FLAG_HELP, 0, 0},
};
#undef CFG
#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

/* Sets what flag f says from value v: 0, 1 (--help: exit 0) or 2 (a usage error, said). */
static int flag_set(const struct flag *f, const char *v, struct node_cfg *c) {
  char *dst = (char *)c + f->off, *end;

  switch (f->kind) {
  case FLAG_PATH:
    if (strlen(v) >= f->size || !*v) {
      fprintf(stderr, "gslice-node: --%s wants a value of 1..%zu characters\n", f->name,
              f->size - 1);
      return 2;
    }
    memcpy(dst, v, strlen(v) + 1);
    return 0;
  case FLAG_VALUE:
    if (strlen(v) >= f->size) {
      fprintf(stderr, "gslice-node: --%s is too long\n", f->name);
      return 2;
    }
    memcpy(dst, v, strlen(v) + 1);
    return 0;
  case FLAG_COUNT: {
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || end == v || v[0] == '-' || n < 1 || n > f->size) {
      fprintf(stderr, "gslice-node: --%s wants 1..%zu, not \"%s\"\n", f->name, f->size, v);
      return 2;
    }
    *(unsigned *)(void *)dst = (unsigned)n;
    return 0;
  }
  case FLAG_NO_API: c->no_api = true; return 0;
  case FLAG_KEY:
    if (nkey_paths == K8S_SIGN_MAX_KEYS) {
      fprintf(stderr, "gslice-node: at most two --signing-key (the new key, then the old)\n");
      return 2;
    }
    key_paths[nkey_paths++] = v;
    return 0;
  case FLAG_MODE:
    if (strcmp(v, "device-plugin") && strcmp(v, "dra")) {
      fprintf(stderr, "gslice-node: --mode wants device-plugin or dra, not \"%s\"\n", v);
      return 2;
    }
    c->dra = !strcmp(v, "dra");
    return 0;
  case FLAG_CDI: c->allocate_cdi = true; return 0;
  case FLAG_HELP: usage(stdout); return 1;
  }
  return 2;
}

static void cfg_defaults(struct node_cfg *c) {
  const char *env_node = secure_getenv("NODE_NAME");
  char self[PATH_MAX];

  memset(c, 0, sizeof(*c));
  snprintf(c->kubelet_dir, sizeof(c->kubelet_dir), "/var/lib/kubelet/device-plugins");
  snprintf(c->pod_resources, sizeof(c->pod_resources),
           "/var/lib/kubelet/pod-resources/kubelet.sock");
  snprintf(c->socket, sizeof(c->socket), "%s", gs_client_socket_path());
  snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/gslice/k8s");
  snprintf(c->daemon_state, sizeof(c->daemon_state), "%s", NODE_DAEMON_STATE_DEFAULT);
  snprintf(c->nvidia_visible, sizeof(c->nvidia_visible), "all");
  snprintf(c->lease_namespace, sizeof(c->lease_namespace), "%s", NODE_LEASE_NAMESPACE);
  snprintf(c->plugins_registry, sizeof(c->plugins_registry), "%s", NODE_DRA_REGISTRY_DEFAULT);
  snprintf(c->plugin_dir, sizeof(c->plugin_dir), "%s", NODE_DRA_PLUGIN_DIR_DEFAULT);
  snprintf(c->cdi_dir, sizeof(c->cdi_dir), "%s", NODE_CDI_DIR_DEFAULT);
  if (env_node)
    snprintf(c->node_name, sizeof(c->node_name), "%s", env_node);
  c->slots_per_gpu = 16;
  c->dra_workers = NODE_DRA_WORKERS_DEFAULT;
  ssize_t l = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (l > 0) {
    self[l] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
      *slash = 0;
    snprintf(c->hook, sizeof(c->hook), "%.*s/../lib/libgslice.so", (int)(sizeof(c->hook) - 32),
             self);
  }
}

/* --mode dra: the kubelet's plugin registry there, and the plugin's own directory or the one it
 * is made in; absolute, since the kubelet is given the service socket's path. 0 or 2. */
static int cfg_check_dra(const struct node_cfg *c) {
  char parent[PATH_MAX];
  struct stat st;

  if (stat(c->plugins_registry, &st) < 0 || !S_ISDIR(st.st_mode) || c->plugins_registry[0] != '/') {
    fprintf(stderr,
            "gslice-node: --plugins-registry %s is not an absolute path to a directory (the "
            "kubelet's plugins_registry, mounted from the host)\n",
            c->plugins_registry);
    return 2;
  }
  snprintf(parent, sizeof(parent), "%s", c->plugin_dir);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent)
    *slash = 0;
  if (c->plugin_dir[0] != '/' || stat(parent, &st) < 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr,
            "gslice-node: --plugin-dir %s is not an absolute path in a directory that is there "
            "(the kubelet's plugins directory, mounted from the host)\n",
            c->plugin_dir);
    return 2;
  }
  if (c->cdi_dir[0] != '/') {
    fprintf(stderr, "gslice-node: --cdi-dir %s is not an absolute path\n", c->cdi_dir);
    return 2;
  }
  if (c->allocate_cdi) {
    fprintf(stderr, "gslice-node: --allocate-cdi is of --mode device-plugin (DRA always answers "
                    "CDI devices)\n");
    return 2;
  }
  return 0;
}

/* What the flags give together: a node name, the hook there, absolute directories. 0 or 2. */
static int cfg_check(struct node_cfg *c) {
  char real[PATH_MAX];
  struct stat st;

  if (!c->node_name[0] && !c->no_api) {
    fprintf(stderr, "gslice-node: no node name: set NODE_NAME (the DaemonSet passes "
                    "spec.nodeName) or give --node-name\n");
    return 2;
  }
  size_t nsl = strlen(c->lease_namespace);
  if (nsl > 63 || strspn(c->lease_namespace, "abcdefghijklmnopqrstuvwxyz0123456789-") != nsl) {
    fprintf(stderr, "gslice-node: --lease-namespace \"%s\" is not a namespace name\n",
            c->lease_namespace);
    return 2;
  }
  if (!realpath(c->hook, real) || access(real, R_OK) < 0) {
    fprintf(stderr, "gslice-node: the hook %s is not there: give --hook /path/to/libgslice.so\n",
            c->hook);
    return 2;
  }
  snprintf(c->hook, sizeof(c->hook), "%s", real);
  /* Paths given to the kubelet as mount sources, and compared with what gsliced says, are
   * absolute: a relative one is taken from the directory gslice-node starts in. */
  char *dirs[] = {c->state_dir, c->daemon_state};
  for (size_t i = 0; i < 2; i++) {
    char cwd[PATH_MAX], abs[2 * PATH_MAX];
    if (dirs[i][0] == '/')
      continue;
    int al = getcwd(cwd, sizeof(cwd)) ? snprintf(abs, sizeof(abs), "%s/%s", cwd, dirs[i]) : -1;
    if (al < 0 || al >= PATH_MAX) {
      fprintf(stderr, "gslice-node: cannot make %s an absolute path\n", dirs[i]);
      return 2;
    }
    memcpy(dirs[i], abs, (size_t)al + 1);
  }
  if (c->dra)
    return cfg_check_dra(c);
  if (stat(c->kubelet_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr,
            "gslice-node: --kubelet-dir %s is not a directory (the kubelet's "
            "device-plugins directory, mounted from the host)\n",
            c->kubelet_dir);
    return 2;
  }
  return 0;
}

/* 0, 1 (--help: exit 0) or 2 (a usage error, said). */
static int parse_args(int argc, char **argv, struct node_cfg *c) {
  struct option opts[NFLAGS + 1];
  int o, r;

  for (size_t i = 0; i < NFLAGS; i++)
    opts[i] = (struct option){flags[i].name,
                              flags[i].kind == FLAG_NO_API || flags[i].kind == FLAG_HELP ||
                                      flags[i].kind == FLAG_CDI
                                  ? no_argument
                                  : required_argument,
                              NULL, 256 + (int)i};
  opts[NFLAGS] = (struct option){NULL, 0, NULL, 0};
  cfg_defaults(c);
  optind = 1;
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (o == 'h') {
      usage(stdout);
      return 1;
    }
    if (o < 256 || o >= 256 + (int)NFLAGS) {
      usage(stderr);
      return 2;
    }
    if ((r = flag_set(&flags[o - 256], optarg, c)))
      return r;
  }
  if (optind < argc) {
    fprintf(stderr, "gslice-node: unexpected argument \"%s\" (see --help)\n", argv[optind]);
    return 2;
  }
  return cfg_check(c);
}

/* ---- gsliced ---- */

static void daemon_down(struct node *n, const char *why) {
  if (n->dfd >= 0)
    close(n->dfd);
  n->dfd = -1;
  if (n->daemon_up)
    gs_log(GS_LOG_WARNING, "gsliced on %s is gone (%s): slots are Unhealthy until it is back",
           n->cfg.socket, why);
  pthread_mutex_lock(&n->lock);
  n->daemon_up = false;
  pthread_mutex_unlock(&n->lock);
}

/* Returns 1 when the GPUs or their health changed (publish again), 2 when gsliced came back. */
static int inventory(struct node *n) {
  struct gs_status st;
  int r, changed = 0;

  if (n->dfd < 0) {
    int fd;
    /* Only a gsliced of root or our own user is believed (node_daemon_connect). */
    if (node_daemon_connect(n, &fd) < 0)
      return 0;
    n->dfd = fd;
  }
  r = gs_client_status(n->dfd, &st);
  if (r < 0) {
    bool was = n->daemon_up;
    daemon_down(n, strerror(-r));
    return was ? 1 : 0;
  }
  /* gsliced was asked without the lock (dfd is this thread's): only the update holds it. */
  pthread_mutex_lock(&n->lock);
  if (st.ngpus != n->ngpus)
    changed = 1;
  n->ngpus = st.ngpus > GS_MAX_GPUS ? GS_MAX_GPUS : st.ngpus;
  for (uint32_t i = 0; i < n->ngpus; i++) {
    struct node_gpu g = {.index = st.gpus[i].index, .memory = st.gpus[i].memory_total_bytes};
    snprintf(g.uuid, sizeof(g.uuid), "%s", st.gpus[i].uuid);
    snprintf(g.name, sizeof(g.name), "%s", st.gpus[i].name);
    if (memcmp(&g, &n->gpus[i], sizeof(g)))
      changed = 1;
    n->gpus[i] = g;
  }
  bool was = n->daemon_up;
  n->daemon_up = true;
  pthread_mutex_unlock(&n->lock);
  gs_status_free(&st);
  if (!was) {
    gs_log(GS_LOG_INFO, "gsliced on %s answers: %u GPU(s)", n->cfg.socket, n->ngpus);
    return 2;
  }
  return changed;
}

static void publish(struct node *n) {
  uint8_t *msg;
  size_t len;
  if (!n->srv)
    return;
  pthread_mutex_lock(&n->lock);
  int r = node_plugin_devices(n, &msg, &len);
  pthread_mutex_unlock(&n->lock);
  if (r < 0)
    return;
  rpc_server_publish(n->srv, msg, len);
  free(msg);
}

/* ---- the kubelet ---- */

#define M_PRESTART "/v1beta1.DevicePlugin/PreStartContainer"

/* The plugin's calls. GetDevicePluginOptions and GetPreferredAllocation read only the
 * configuration; Allocate and PreStartContainer touch the records, under the lock, which no one
 * holds across API server I/O (what they need of pods is the cache's). PreStartContainer runs
 * on the server's worker: it may wait for the kubelet's PodResources, gsliced, or a pod the
 * watch has not brought yet (the lock is let go meanwhile), and the kubelet's other calls do
 * not wait behind it. */
static int serve_unary(void *ctx, const char *method, const uint8_t *req, size_t len,
                       uint8_t **ret_reply, size_t *ret_len, char *err, size_t err_len) {
  struct node *n = ctx;
  bool locked = !strcmp(method, M_PRESTART) || !strcmp(method, "/v1beta1.DevicePlugin/Allocate");
  if (locked)
    pthread_mutex_lock(&n->lock);
  int st = node_plugin_unary(ctx, method, req, len, ret_reply, ret_len, err, err_len);
  if (locked)
    pthread_mutex_unlock(&n->lock);
  return st;
}

static void server_restart(struct node *n, const char *why) {
  char path[PATH_MAX + 32], err[512];

  if (n->srv) {
    gs_log(GS_LOG_INFO, "restarting the plugin server: %s", why);
    rpc_server_stop(n->srv);
    n->srv = NULL;
  }
  __atomic_store_n(&n->registered, false, __ATOMIC_RELAXED);
  snprintf(path, sizeof(path), "%s/%s", n->cfg.kubelet_dir, NODE_ENDPOINT);
  if (rpc_server_start(path, "/v1beta1.DevicePlugin/ListAndWatch", M_PRESTART, serve_unary, n,
                       &n->srv, err, sizeof(err)) < 0) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return;
  }
  publish(n);
}

static void kubelet_check(struct node *n) {
  char path[PATH_MAX + 32], err[512];
  struct stat st, own;

  snprintf(path, sizeof(path), "%s/%s", n->cfg.kubelet_dir, NODE_ENDPOINT);
  /* The kubelet removes every socket in its directory when it starts: ours gone is a restart. */
  if (!n->srv || lstat(path, &own) < 0) {
    server_restart(n, "its socket was removed (kubelet restart)");
    if (!n->srv)
      return;
  }
  snprintf(path, sizeof(path), "%s/kubelet.sock", n->cfg.kubelet_dir);
  if (lstat(path, &st) < 0) {
    if (n->registered)
      gs_log(GS_LOG_WARNING, "%s is gone: the kubelet stopped; registering again when it is back",
             path);
    __atomic_store_n(&n->registered, false, __ATOMIC_RELAXED);
    return;
  }
  if (n->registered && (st.st_ino != n->kubelet_ino || st.st_dev != n->kubelet_dev)) {
    server_restart(n, "kubelet.sock was made anew (kubelet restart)");
    if (!n->srv)
      return;
  }
  if (n->registered || node_now() < n->register_at)
    return;
  int r = node_plugin_register(n, err, sizeof(err));
  if (r < 0) {
    /* A kubelet that just made its socket may not answer yet: soon again, said once a while. */
    if (n->register_fails++ % 25 == 0)
      gs_log(GS_LOG_WARNING, "cannot register with the kubelet: %s (trying again every 200 ms)",
             err);
    n->register_at = node_now() + 200000000ull;
    return;
  }
  __atomic_store_n(&n->registered, true, __ATOMIC_RELAXED); /* read by /readyz */
  n->register_fails = 0;
  n->kubelet_ino = st.st_ino;
  n->kubelet_dev = st.st_dev;
  gs_log(GS_LOG_INFO, "registered %s with the kubelet (%u GPU(s) x %u slots, %s)", NODE_RESOURCE,
         n->ngpus, n->cfg.slots_per_gpu, n->daemon_up ? "healthy" : "unhealthy: no gsliced");
}

/* ---- housekeeping: slices of containers gone, on a thread of its own so that many of them
 * hold up neither registration nor calls (beyond the lock, taken per pass) ---- */

struct housekeeping {
  struct node *n;
  pthread_t thread;
  pthread_cond_t wake; /* with n->lock */
  bool stop;
};

static void *housekeeping_run(void *arg) {
  struct housekeeping *h = arg;
  struct node *n = h->n;

  pthread_mutex_lock(&n->lock);
  while (!h->stop) {
    node_reconcile(n);
    gs_log_flush();
    uint64_t at = node_now() + RECONCILE_NS;
    struct timespec ts = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
    while (!h->stop && node_now() < at)
      pthread_cond_timedwait(&h->wake, &n->lock, &ts);
  }
  pthread_mutex_unlock(&n->lock);
  return NULL;
}

static int housekeeping_start(struct node *n, struct housekeeping *h) {
  pthread_condattr_t ca;
  h->n = n;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->wake, &ca);
  pthread_condattr_destroy(&ca);
  return -pthread_create(&h->thread, NULL, housekeeping_run, h);
}

static void housekeeping_stop(struct housekeeping *h) {
  pthread_mutex_lock(&h->n->lock);
  h->stop = true;
  pthread_cond_broadcast(&h->wake);
  pthread_mutex_unlock(&h->n->lock);
  pthread_join(h->thread, NULL);
}

/* Only assignments gslice-extender signed are honoured: no key, no slices. */
static int keys_load(struct node *n) {
  static struct k8s_keys keys;
  char err[512];

  if ((n->cfg.no_api || n->cfg.dra) && !nkey_paths)
    return 0; /* DRA: kube-scheduler places claims, nothing is signed */
  if (k8s_keys_load(key_paths, nkey_paths, &keys, err, sizeof(err))) {
    gs_log(GS_LOG_ERROR,
           "%s: assignments are signed by gslice-extender: mount its signing Secret at "
           "/etc/gslice/signing (deploy/gslice-node.yaml) or give --signing-key FILE",
           err);
    return -EINVAL;
  }
  n->keys = &keys;
  return 0;
}

static void process_init(struct node *n) {
  pthread_mutexattr_t ma;
  struct sigaction sa = {.sa_handler = on_stop};

  n->dfd = -1;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&n->lock, &ma);
  pthread_mutexattr_destroy(&ma);
  signal(SIGPIPE, SIG_IGN);
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

/* ---- --mode dra: the ResourceSlice published on a thread of its own (the API server may be
 * slow; the kubelet's calls and gsliced's health never wait on it), and claims gone from the
 * API server unprepared (dra_gc) ---- */

#define DRA_PUBLISH_NS 10000000000ull
#define DRA_GC_NS 60000000000ull

struct dra_publisher {
  struct node *n;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t wake;
  bool stop, kick, started;
};
static struct dra_publisher publisher;

static void *dra_publish_run(void *arg) {
  struct dra_publisher *p = arg;
  json_t *cache = NULL;
  char err[512], last[512] = "";

  uint64_t next_gc = 0;

  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    p->kick = false;
    pthread_mutex_unlock(&p->mu);
    int r = p->n->cfg.no_api ? 0 : dra_publish(p->n, &cache, err, sizeof(err));
    /* Only while the API server serves resource.k8s.io/v1 (the slice was just published): a
     * 404 from one that does not is no claim's absence. */
    if (r == 0 && node_now() >= next_gc) {
      dra_gc(p->n);
      next_gc = node_now() + DRA_GC_NS;
    }
    /* Said once until it works again: the next try is 10 s away anyway. */
    if (r < 0 && strcmp(err, last))
      gs_log(GS_LOG_WARNING, "cannot publish the node's ResourceSlice: %s (trying every 10 s)",
             err);
    snprintf(last, sizeof(last), "%s", r < 0 ? err : "");
    gs_log_flush();
    uint64_t at = node_now() + DRA_PUBLISH_NS;
    struct timespec ts = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
    pthread_mutex_lock(&p->mu);
    while (!p->stop && !p->kick && node_now() < at)
      pthread_cond_timedwait(&p->wake, &p->mu, &ts);
  }
  pthread_mutex_unlock(&p->mu);
  json_decref(cache);
  return NULL;
}

static void dra_publish_kick(void) {
  if (!publisher.started)
    return;
  pthread_mutex_lock(&publisher.mu);
  publisher.kick = true;
  pthread_cond_broadcast(&publisher.wake);
  pthread_mutex_unlock(&publisher.mu);
}

static int node_start_dra(struct node *n) {
  pthread_condattr_t ca;
  char err[512];

  gs_log(GS_LOG_INFO,
         "starting: node %s, DRA driver " NODE_DRA_DRIVER ", plugins registry %s, "
         "plugin dir %s, CDI dir %s, gsliced %s",
         n->cfg.node_name[0] ? n->cfg.node_name : "(none)", n->cfg.plugins_registry,
         n->cfg.plugin_dir, n->cfg.cdi_dir, n->cfg.socket);
  inventory(n);
  if (dra_start(n, err, sizeof(err)) < 0) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return -1;
  }
  publisher.n = n;
  pthread_mutex_init(&publisher.mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&publisher.wake, &ca);
  pthread_condattr_destroy(&ca);
  int r = pthread_create(&publisher.thread, NULL, dra_publish_run, &publisher);
  if (r != 0) {
    gs_log(GS_LOG_ERROR, "cannot start a thread: %s", strerror(r));
    return -1;
  }
  publisher.started = true;
  return 0;
}

static void dra_publisher_stop(struct node *n) {
  char err[512];
  if (!publisher.started)
    return;
  pthread_mutex_lock(&publisher.mu);
  publisher.stop = true;
  pthread_cond_broadcast(&publisher.wake);
  pthread_mutex_unlock(&publisher.mu);
  pthread_join(publisher.thread, NULL);
  publisher.started = false;
  /* A clean stop takes the node's devices off the scheduler's list at once (the kubelet would
   * 30 s after we stop answering); prepared claims keep their slices. */
  if (!n->cfg.no_api && dra_unpublish(n, err, sizeof(err)) < 0)
    gs_log(GS_LOG_WARNING, "cannot delete the node's ResourceSlice: %s", err);
}

/* --mode dra until a signal: gsliced's GPUs and health (the stream and the ResourceSlice), the
 * sockets, the claims' slices reconciled with gsliced. */
static void dra_loop(struct node *n) {
  uint64_t next_inv = 0, next_health = 0;

  while (!stop_sig) {
    uint64_t now = node_now();
    bool back = false;
    if (now >= next_inv) {
      int c = inventory(n);
      back = c == 2;
      if (c) {
        dra_health_publish(n);
        dra_publish_kick(); /* a GPU whose gsliced is gone is not offered */
        next_health = now + DRA_PUBLISH_NS;
      }
      next_inv = now + (n->daemon_up ? INVENTORY_NS : INVENTORY_NS / 5);
    }
    if (now >= next_health) {
      dra_health_publish(n);
      next_health = now + DRA_PUBLISH_NS;
    }
    dra_tick(n, back);
    /* The kubelet wipes its node's ResourceSlices when it starts, then registers us again. */
    if (dra_registered_event(n))
      dra_publish_kick();
    usleep(100000);
  }
}

/* The state directory, the API server, the records, gsliced's GPUs and the threads. */
static int node_start(struct node *n, struct housekeeping *hk) {
  char err[512];
  int r;

  if (node_state_open(n, err, sizeof(err)) < 0) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return -1;
  }
  rpc_global_init();
  if (!n->cfg.no_api && node_kube_init(n, err, sizeof(err)) < 0) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return -1;
  }
  if (n->cfg.dra)
    return node_start_dra(n);
  r = node_recs_load(n);
  if (r < 0)
    gs_log(GS_LOG_WARNING, "cannot read all records in %s/records: %s", n->cfg.state_dir,
           strerror(-r));
  gs_log(GS_LOG_INFO,
         "starting: node %s, kubelet dir %s, gsliced %s, %u slots per GPU, %u record(s)",
         n->cfg.node_name[0] ? n->cfg.node_name : "(none)", n->cfg.kubelet_dir, n->cfg.socket,
         n->cfg.slots_per_gpu, n->nrecs);
  inventory(n);
  if (!n->cfg.no_api && node_kube_start(n, err, sizeof(err)) < 0) {
    gs_log(GS_LOG_ERROR, "%s", err);
    return -1;
  }
  if ((r = housekeeping_start(n, hk)) < 0) {
    gs_log(GS_LOG_ERROR, "cannot start a thread: %s", strerror(-r));
    return -1;
  }
  return 0;
}

/* Until a signal: gsliced's GPUs published, crash leftovers reconciled, the kubelet checked. */
static void main_loop(struct node *n) {
  uint64_t next_inv = 0;

  while (!stop_sig) {
    uint64_t now = node_now();
    if (now >= next_inv) {
      int c = inventory(n);
      if (c == 2 && n->registered) {
        /* A gsliced restart may bring other GPUs: the kubelet hears of them from scratch. */
        server_restart(n, "gsliced restarted");
      } else if (c) {
        publish(n);
      }
      next_inv = now + (n->daemon_up ? INVENTORY_NS : INVENTORY_NS / 5);
    }
    /* Slices a crash left without a record: once gsliced answers after the start. */
    if (n->daemon_up && !n->daemon_reconciled) {
      pthread_mutex_lock(&n->lock); /* the records: housekeeping and the plugin's too */
      node_recs_reconcile_daemon(n);
      pthread_mutex_unlock(&n->lock);
    }
    kubelet_check(n);
    usleep(100000);
  }
}

int main(int argc, char **argv) {
  static struct node n;
  static struct housekeeping hk;
  struct node_health *health = NULL;
  char path[PATH_MAX + 32];

  gs_log_open("gslice-node", GS_LOG_INFO);
  int r = parse_args(argc, argv, &n.cfg);
  if (r)
    return r == 1 ? 0 : r;
  if (keys_load(&n) < 0)
    return 1;
  process_init(&n);
  if (node_start(&n, &hk) < 0)
    return 1;
  if (n.cfg.health_listen[0] &&
      !(health = node_health_start(&n, n.cfg.health_listen, path, sizeof(path)))) {
    gs_log(GS_LOG_ERROR, "%s", path);
    return 1;
  }
  if (n.cfg.dra) {
    dra_loop(&n);
    gs_log(GS_LOG_INFO,
           "stopping (signal %d); prepared claims keep their slices for the next "
           "gslice-node",
           (int)stop_sig);
    node_health_stop(health);
    dra_publisher_stop(&n); /* first: its thread reads the claims dra_stop frees */
    dra_stop(&n);
    gs_log_flush();
    return 0;
  }
  main_loop(&n);
  gs_log(GS_LOG_INFO, "stopping (signal %d); slices stay with gsliced for the next gslice-node",
         (int)stop_sig);
  node_health_stop(health);
  if (n.srv)
    rpc_server_stop(n.srv);
  housekeeping_stop(&hk);
  node_kube_stop(&n);
  snprintf(path, sizeof(path), "%s/%s", n.cfg.kubelet_dir, NODE_ENDPOINT);
  unlink(path);
  gs_log_flush();
  return 0;
}
