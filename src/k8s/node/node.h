/* gslice-node: the kubelet device plugin for gslice.io/gpu, the slice of each container that
 * asked for one, and the node's GPU inventory for the scheduler (docs/kubernetes.md, "Node"). */
#pragma once
#include <limits.h>
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
#define NODE_SLICE_ENV "slice.env"

struct node_cfg {
  char kubelet_dir[PATH_MAX];
  char pod_resources[PATH_MAX]; /* the kubelet's PodResources socket */
  char kubeconfig[PATH_MAX];    /* "" : in-cluster */
  char node_name[NODE_NAME_MAX];
  char socket[PATH_MAX];    /* gsliced's */
  char state_dir[PATH_MAX]; /* gslice-node's records and per-container directories */
  char hook[PATH_MAX];      /* libgslice.so on the host */
  char nvidia_visible[64];  /* NVIDIA_VISIBLE_DEVICES given to containers, "" none */
  unsigned slots_per_gpu;
  bool no_api; /* --no-api-server: tests of the device plugin alone */
};

struct node_gpu {
  uint32_t index;
  char uuid[NODE_UUID_MAX];
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
};

struct rpc_server;
struct kube;

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
};

uint64_t node_now(void);
void node_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

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
int node_recs_load(struct node *n);
/* PreStartContainer: find the container of these slots, read its assignment, make its slice. */
int node_prestart(struct node *n, char **ids, size_t nids, char *err, size_t err_len);
/* Slices of containers the kubelet no longer lists (or whose pod is gone) are removed. */
void node_reconcile(struct node *n);
/* Allocate's per-container host directory for key. */
void node_alloc_dir(const struct node *n, const char *key, char *out, size_t len);

/* kube.c: the API server, through src/k8s/common */
int node_kube_init(struct node *n, char *err, size_t err_len);
/* The pod's gslice.io/assigned (malloc'd, NULL when absent), uid and phase. -ENOENT: no pod. */
int node_kube_pod(struct node *n, const char *ns, const char *name, char **ret_assigned, char *uid,
                  size_t uid_len, char *phase, size_t phase_len, char *err, size_t err_len);
/* Init containers run one by one, to success, before the others, and the kubelet hands their
 * slots on to the containers after them (PodResources lists only those): for slots PodResources
 * lists under `ctr`, the container starting is the pod's first init container with an entry in
 * the assignment that has not finished with exit 0, else ctr. prev: the container these slots
 * were last started for ("" none). The name goes into out. */
struct k8s_assigned;
int node_kube_which(struct node *n, const char *ns, const char *name, const struct k8s_assigned *as,
                    const char *ctr, const char *prev, char *out, size_t out_len, char *err,
                    size_t err_len);
/* Writes gslice.io/gpus on the node. */
int node_kube_heartbeat(struct node *n, char *err, size_t err_len);
