/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node: the kubelet device plugin for gslice.io/gpu, the slice of each container that
 * asked for one, and the node's GPU inventory for the scheduler (docs/kubernetes.md, "Node");
 * or, with --mode dra, the kubelet plugin of DRA driver gslice.io, one slice per prepared claim
 * (dra.h). */
#pragma once
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "status.h"

#define NODE_RESOURCE "gslice.io/gpu"
#define NODE_API_VERSION "v1beta1"
#define NODE_ENDPOINT "gslice.sock"
#define NODE_MAX_SLOTS_PER_GPU 256
#define NODE_MAX_CONTAINER_SLOTS 64
#define NODE_SLOT_ID_MAX 32
#define NODE_UUID_MAX 96
#define NODE_NAME_MAX 256
/* Inside the container: where Allocate's mounts put things. */
#define NODE_CTR_HOOK "/usr/local/lib/gslice/libgslice.so"
#define NODE_CTR_SLICE_DIR "/run/gslice/slice"
#define NODE_CTR_DAEMON_DIR "/run/gslice/daemon"
#define NODE_CTR_PRELOAD "/etc/ld.so.preload"
/* In gslice-node's state directory: the file mounted as NODE_CTR_PRELOAD. */
#define NODE_PRELOAD "ld.so.preload"
/* In a start directory: the slice's id, nonce, caps and GPUs for the hook (src/hook/k8s.c). */
#define NODE_SLICE_ENV "slice.env"
/* The slice's memory region inside the container: a file mount of gsliced's region over the
 * empty placeholder PreStartContainer leaves in the (read-only) slice directory. */
#define NODE_CTR_REGION NODE_CTR_SLICE_DIR "/memory.region"
#define NODE_REGION_FILE "memory.region"
#define NODE_DAEMON_STATE_DEFAULT "/var/lib/gslice"
/* The node's liveness Lease (coordination.k8s.io/v1): NODE_LEASE_PREFIX<node name> in
 * --lease-namespace, renewed every heartbeat, held for NODE_LEASE_DURATION_S. */
#define NODE_LEASE_PREFIX "gslice-node-"
#define NODE_LEASE_NAMESPACE "gslice-system"
#define NODE_LEASE_DURATION_S 40
/* --mode dra: driver name, sockets and CDI kind (../shared/K8S.md, "Dynamic Resource
 * Allocation"). */
#define NODE_DRA_DRIVER "gslice.io"
#define NODE_DRA_REG_SOCK "gslice.io-reg.sock"
#define NODE_DRA_SOCK "dra.sock"
/* --dra-workers: the kubelet's DRA calls served at once (one slow claim holds up only its own). */
#define NODE_DRA_WORKERS_DEFAULT 4
#define NODE_DRA_REGISTRY_DEFAULT "/var/lib/kubelet/plugins_registry"
#define NODE_DRA_PLUGIN_DIR_DEFAULT "/var/lib/kubelet/plugins/gslice.io"
#define NODE_CDI_DIR_DEFAULT "/var/run/cdi"
#define NODE_CDI_KIND_CLAIM "gslice.io/claim"
#define NODE_CDI_KIND_SLOT "gslice.io/slot"
/* The Event reason of a container refused its GPU. */
#define NODE_EVENT_REFUSED "GSliceRefused"

struct node_cfg {
  char kubelet_dir[PATH_MAX];
  char pod_resources[PATH_MAX]; /* the kubelet's PodResources socket */
  char kubeconfig[PATH_MAX];    /* "" : in-cluster */
  char node_name[NODE_NAME_MAX];
  char socket[PATH_MAX];               /* gsliced's */
  char state_dir[PATH_MAX];            /* gslice-node's records and per-container directories */
  char hook[PATH_MAX];                 /* libgslice.so on the host */
  char daemon_state[PATH_MAX];         /* gsliced's state root: slice directories only below it */
  char nvidia_visible[64];             /* NVIDIA_VISIBLE_DEVICES given to containers, "" none */
  char lease_namespace[NODE_NAME_MAX]; /* the liveness Lease's namespace */
  char health_listen[280];             /* --health-listen [HOST:]PORT, "" : no probes */
  /* --mode dra (docs/kubernetes.md, "DRA"): the kubelet plugin of driver gslice.io, its
   * registration socket in plugins_registry, its service socket in plugin_dir. */
  char plugins_registry[PATH_MAX]; /* --plugins-registry: registration socket NODE_DRA_REG_SOCK */
  char plugin_dir[PATH_MAX];       /* --plugin-dir: service socket NODE_DRA_SOCK */
  char cdi_dir[PATH_MAX];          /* --cdi-dir: the CDI specs gslice-node writes */
  unsigned slots_per_gpu;
  unsigned dra_workers; /* --dra-workers: the DRA service's worker threads (rpc.h) */
  bool no_api;          /* --no-api-server: tests of the device plugin alone */
  bool dra;             /* --mode dra (default: device-plugin) */
  bool allocate_cdi;    /* --allocate-cdi: Allocate answers CDI device names, not mounts */
};

struct node_gpu {
  uint32_t index;
  char uuid[NODE_UUID_MAX];
  char name[GS_NAME_MAX]; /* the product name gsliced reports ("" : none) */
  uint64_t memory;
};

/* One container's slice, as gslice-node recorded it (state_dir/records/<key>). */
struct node_rec {
  char key[NODE_SLOT_ID_MAX];
  char slots[NODE_MAX_CONTAINER_SLOTS * (NODE_SLOT_ID_MAX + 1)]; /* sorted, comma separated */
  char ns[NODE_NAME_MAX], pod[NODE_NAME_MAX], container[NODE_NAME_MAX], pod_uid[64];
  uint32_t slice_id; /* 0: refused (its directory holds the error) */
  uint64_t nonce;    /* the slice's, from REGISTERED: unregisters that slice and no other */
  uint64_t checked;  /* monotonic ns of the last API server look at its pod */
  /* Written before REGISTER (pending), so that a slice made just before a crash is known by
   * its unique name and removed at the next start (node_recs_reconcile_daemon). */
  bool pending;
  bool superseded;     /* Allocate gave its slots out again: the next start is a new container's */
  char name[64];       /* the slice's name in gsliced: "k8s.<seq>.<ns>.<pod>.<ctr>", cut to 63 */
  char start[64];      /* its current start directory, state_dir/starts/<start> */
  char slice_dir[256]; /* REGISTERED.state_dir */
  char memory[512], devices[1024]; /* slice.env's GSLICE_MEMORY_LIMIT, CUDA_VISIBLE_DEVICES */
  uint32_t compute_limit;
};

struct rpc_server;
struct kube;
struct kube_events;
struct k8s_keys;

struct node {
  struct node_cfg cfg;
  /* gsliced */
  int dfd;
  bool daemon_up;
  uint32_t ngpus;
  struct node_gpu gpus[GS_MAX_GPUS];
  /* kubelet */
  struct rpc_server *srv;
  bool registered;
  dev_t kubelet_dev;
  ino_t kubelet_ino;
  uint64_t register_at; /* next try, monotonic ns */
  unsigned register_fails;
  /* records */
  uint32_t nrecs;
  struct node_rec *recs[1024];
  /* API server */
  struct kube *kube;
  /* Threads (main.c): the main loop (gsliced, registration, ListAndWatch), the plugin's serving
   * thread (rpc.c: GetDevicePluginOptions, GetPreferredAllocation, Allocate), its worker
   * (PreStartContainer), housekeeping (node_reconcile), the pod cache's list + watch (pods.c)
   * and the heartbeat (kube.c). `lock` (error-checking) guards what more than one of them
   * touches: the records, the GPUs, daemon_up and the pod cache; Allocate, PreStartContainer
   * and node_reconcile run with it held. It is never held across API server I/O. */
  pthread_mutex_t lock;
  struct node_pods *pods;
  struct node_api *api;
  /* Events on pods (GSliceRefused), posted by the heartbeat thread; NULL without an API server.
   * Its own lock: added to with n->lock held or not. */
  struct kube_events *events;
  /* gslice-node's state directory and its subdirectories, opened once (node_state_open):
   * everything it writes for containers goes through these. */
  int state_fd, records_fd, alloc_fd, starts_fd;
  int claims_fd;          /* --mode dra: the prepared claims' records (dra.c) */
  uint64_t start_seq;     /* the last start directory's number */
  bool daemon_untrusted;  /* said once: gsliced's socket is served by another user */
  bool daemon_reconciled; /* node_recs_reconcile_daemon has run once since the start */
  /* The keys that verify gslice.io/assigned-signature (--signing-key); NULL: none loaded. */
  const struct k8s_keys *keys;
  /* --mode dra: its servers and prepared claims (dra.c); NULL in device-plugin mode. */
  struct node_dra *dra;
};

uint64_t node_now(void);

/* plugin.c: the DevicePlugin service */
int node_plugin_unary(void *ctx, const char *method, const uint8_t *req, size_t len,
                      uint8_t **ret_reply, size_t *ret_len, char *err, size_t err_len);
/* The ListAndWatch message for the slots now (health from gsliced). */
int node_plugin_devices(const struct node *n, uint8_t **ret, size_t *ret_len);
/* Register with the kubelet: 0 or -errno with the reason in err. */
int node_plugin_register(struct node *n, char *err, size_t err_len);

/* slots: "gpu<i>-<k>" ids, sorted copy joined with commas; the key is the first. */
int node_slots_join(char **ids, size_t n, char *out, size_t out_len, char *key, size_t key_len);

/* slices.c */
/* Makes (0700) and opens the state directory and its records/, alloc/, starts/, claims/;
 * writes ld.so.preload. 0 or -errno with err. */
int node_state_open(struct node *n, char *err, size_t err_len);
int node_recs_load(struct node *n);
/* At start: held slices gslice-node made (named k8s.*) with no record, or only a pending one,
 * are unregistered; pending records go. 0, or -errno when gsliced cannot be asked (again later). */
int node_recs_reconcile_daemon(struct node *n);
/* Allocate gave these slots out (a new container): their record is superseded. */
void node_slots_allocated(struct node *n, const char *key);
/* Connects to gsliced and says HELLO, only when the peer is root or gslice-node's own user
 * (SO_PEERCRED): anyone else answering there is not believed (logged once). */
int node_daemon_connect(struct node *n, int *ret_fd);
/* The hook socket's path (gsliced's socket for a slice's processes, gs_hook_socket_path). */
int node_hook_socket(const struct node *n, char *out, size_t len);
/* PreStartContainer: find the container of these slots, read its assignment, make its slice. */
int node_prestart(struct node *n, char **ids, size_t nids, char *err, size_t err_len);
/* Slices of containers the kubelet no longer lists (or whose pod is gone) are removed. */
void node_reconcile(struct node *n);
/* What both modes make a slice with (the device plugin per container, DRA per claim):
 * REGISTER of a held, any-user slice (connecting first when *fd < 0: a failed connect leaves it
 * < 0); 0, or -errno with gsliced's refusal in derr (empty: no answer). */
struct gs_slice_spec;
struct gs_msg_registered;
int node_slice_register(struct node *n, const struct gs_slice_spec *spec, int *fd,
                        struct gs_msg_registered *reg, char *derr, size_t derr_len);
/* The memory region of the slice whose directory gsliced named (REGISTERED.state_dir), checked
 * to be gsliced's own: its canonical path into region, or -errno with why. */
int node_slice_region(struct node *n, const char *dir, char *region, size_t len, char *why,
                      size_t why_len);
/* slice.env's text: what the hook reads from the slice directory. */
void node_slice_env(uint32_t slice_id, uint64_t nonce, const char *memory, uint32_t compute_limit,
                    const char *devices, char *out, size_t len);
/* A fresh start directory for key (starts/<key>.<seq>: slice.env holding env, the region's
 * placeholder), alloc/<key> pointing at it and alloc/<key>.region at region (NULL: the
 * placeholder); key's older start directories go. Its name into start. 0 or -errno. */
int node_start_dir_make(struct node *n, const char *key, const char *env, const char *region,
                        char *start, size_t start_len);
/* A number no earlier start directory or slice name of this state dir has (wall clock us). */
uint64_t node_next_seq(struct node *n);
/* alloc/<key>, alloc/<key>.region and every start directory of key, gone. */
void node_start_dirs_remove(struct node *n, const char *key);
/* Allocate's per-container host paths for key: the slice directory (a link to the current start
 * directory) and the region (a link to the slice's memory region, or to the placeholder). */
void node_alloc_dir(const struct node *n, const char *key, char *out, size_t len);
void node_alloc_region(const struct node *n, const char *key, char *out, size_t len);

/* record.c: a record's text, one KEY=VALUE line a field; at most NODE_REC_MAX bytes. */
#define NODE_REC_MAX 8192
/* The text of r (malloc'd): 0 or -errno. */
int node_rec_format(const struct node_rec *r, char **ret, size_t *ret_len);
/* Fills r from text (modified in place): 0, or -EBADMSG when a line is not KEY=VALUE, a field is
 * given twice or does not fit, a number is malformed, or a required field is missing. Unknown
 * fields are skipped. r->key is left alone (the file's name). */
int node_rec_parse(char *text, struct node_rec *r);
/* The same for any record: a table of its fields (at most 32), each a key, a type, where it
 * lies in the struct and its size, and whether it is required. */
enum node_kv_type { REC_STR, REC_U32, REC_BOOL, REC_NONCE };
struct node_kv_field {
  const char *key;
  enum node_kv_type type;
  size_t off, size;
  bool required;
};
int node_kv_format(const struct node_kv_field *fields, size_t nfields, const void *r, size_t max,
                   char **ret, size_t *ret_len);
int node_kv_parse(const struct node_kv_field *fields, size_t nfields, char *text, void *r);

/* kube.c: the API server, through src/k8s/common */
int node_kube_init(struct node *n, char *err, size_t err_len);
/* The pod's gslice.io/assigned (malloc'd, NULL when absent), uid and phase, from the pod cache
 * without waiting (node_pods_get's answers: -ENOENT no pod, -EAGAIN not known now). */
int node_kube_pod(struct node *n, const char *ns, const char *name, char **ret_assigned, char *uid,
                  size_t uid_len, char *phase, size_t phase_len, char *err, size_t err_len);
/* Regular init containers run one by one, to success, before the others, and the kubelet hands
 * their slots on to the containers after them (PodResources lists only those, and sidecars —
 * init containers with restartPolicy Always — under their own names): for slots PodResources
 * lists under `ctr`, the container starting is the first regular init container before ctr with
 * an entry in the assignment that has not finished with exit 0, else ctr; a sidecar is never
 * the one starting on another container's slots. prev: the container these slots were last
 * started for ("" none). The name goes into out. */
struct k8s_assigned;
int node_kube_which(struct node *n, const char *ns, const char *name, const struct k8s_assigned *as,
                    const char *ctr, const char *prev, char *out, size_t out_len, char *err,
                    size_t err_len);
/* Writes gslice.io/gpus on the node (takes n->lock for the copy: call without it). */
int node_kube_heartbeat(struct node *n, char *err, size_t err_len);
/* A GSliceRefused Event (type Warning) on the container's pod saying why, queued for the
 * heartbeat thread: no I/O, never waits (n->lock held or not). Repeats within a window and
 * a storm are left out (event.h). */
void node_kube_refused(struct node *n, const struct node_rec *r, const char *why);
/* The heartbeat thread and the pod cache (node_pods_start); node_kube_stop ends both. */
int node_kube_start(struct node *n, char *err, size_t err_len);
void node_kube_stop(struct node *n);

/* lease.c: renews (creating when missing) the node's Lease; *cache holds the Lease last read or
 * written (json_decref it at the end). 0 or -errno with err. */
int node_lease_renew(struct node *n, json_t **cache, char *err, size_t err_len);
/* NODE_LEASE_PREFIX<node>: 0, or -ENAMETOOLONG over 253 characters. */
int node_lease_name(const struct node *n, char *out, size_t len);
/* Now as the API's MicroTime ("2026-12-01T10:00:00.123456Z"); out >= 28 bytes. */
void node_micro_time(char *out, size_t len);

/* ---- pods.c: this node's pods (list + watch, fieldSelector spec.nodeName=<node>) ---- */
/* How long PreStartContainer waits for a pod the watch has not brought yet. */
#define NODE_POD_WAIT_MS 2000
/* How long an init container's end may lag in the pod's status (node_kube_which). */
#define NODE_INIT_LAG_MS 3000
int node_pods_start(struct node *n, char *err, size_t err_len);
/* After every thread that reads the cache has stopped. */
void node_pods_stop(struct node *n);
/* With n->lock held (it is released while waiting: look up records again afterwards). A new
 * reference to the cached pod (json_decref it; never modify it): 0; -ENOENT when the cache is
 * synced and has no such pod after waiting up to wait_ms (0: no wait; node_reconcile's); -EAGAIN
 * when the cache is not synced (the API server unreachable, slow to list, silent too long) or
 * left that pod out (too many): a transient answer, the kubelet is to retry (UNAVAILABLE);
 * -ENOTCONN without an API server (--no-api-server). err says why. */
int node_pods_get(struct node *n, const char *ns, const char *name, int wait_ms, json_t **ret_pod,
                  char *err, size_t err_len);
/* With n->lock held: until the cache changes from generation *gen (node_pods_gen) or wait_ms
 * pass; 0 (changed, *gen updated) or -ETIMEDOUT. */
uint64_t node_pods_gen(struct node *n);
int node_pods_wait(struct node *n, uint64_t *gen, int wait_ms);
/* Without n->lock held (taken here): the cache has a whole list and heard from the server of
 * late (what node_pods_get needs to answer). */
bool node_pods_synced(struct node *n);
