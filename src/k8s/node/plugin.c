/* SPDX-License-Identifier: Apache-2.0 */
/* The DevicePlugin service (v1beta1): options, preferred allocation, Allocate, PreStartContainer;
 * ListAndWatch's message; registration with the kubelet. */
#include <errno.h>
#include <grpc/status.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"
#include "deviceplugin.pb-c.h"
#include "log.h"
#include "node.h"
#include "rpc.h"

#define M(name) "/v1beta1.DevicePlugin/" name

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int node_slots_join(char **ids, size_t n, char *out, size_t out_len, char *key, size_t key_len) {
  char *sorted[NODE_MAX_CONTAINER_SLOTS];
  size_t used = 0;

  if (n == 0 || n > NODE_MAX_CONTAINER_SLOTS)
    return -EINVAL;
  for (size_t i = 0; i < n; i++) {
    /* Our own ids only: letters, digits and '-', never a path. */
    size_t l = strlen(ids[i]);
    if (l == 0 || l >= NODE_SLOT_ID_MAX ||
        strspn(ids[i], "abcdefghijklmnopqrstuvwxyz0123456789-") != l)
      return -EINVAL;
    sorted[i] = ids[i];
  }
  qsort(sorted, n, sizeof(sorted[0]), cmp_str);
  out[0] = 0;
  for (size_t i = 0; i < n; i++) {
    int w = snprintf(out + used, out_len - used, "%s%s", i ? "," : "", sorted[i]);
    if (w < 0 || (size_t)w >= out_len - used)
      return -ENAMETOOLONG;
    used += (size_t)w;
  }
  snprintf(key, key_len, "%s", sorted[0]);
  return 0;
}

int node_plugin_devices(const struct node *n, uint8_t **ret, size_t *ret_len) {
  size_t total = (size_t)n->ngpus * n->cfg.slots_per_gpu;
  V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
  V1beta1__Device *devs = calloc(total ? total : 1, sizeof(*devs));
  V1beta1__Device **ptrs = calloc(total ? total : 1, sizeof(*ptrs));
  char *ids = calloc(total ? total : 1, NODE_SLOT_ID_MAX);
  int r = 0;

  if (!devs || !ptrs || !ids) {
    r = -ENOMEM;
    goto out;
  }
  for (uint32_t g = 0, k = 0; g < n->ngpus; g++)
    for (unsigned s = 0; s < n->cfg.slots_per_gpu; s++, k++) {
      V1beta1__Device d = V1BETA1__DEVICE__INIT;
      snprintf(ids + (size_t)k * NODE_SLOT_ID_MAX, NODE_SLOT_ID_MAX, "gpu%u-%u", n->gpus[g].index,
               s);
      d.id = ids + (size_t)k * NODE_SLOT_ID_MAX;
      /* gsliced away: no new slice could be made, so the kubelet must not place more here. */
      d.health = n->daemon_up ? "Healthy" : "Unhealthy";
      devs[k] = d;
      ptrs[k] = &devs[k];
    }
  resp.n_devices = total;
  resp.devices = ptrs;
  *ret_len = v1beta1__list_and_watch_response__get_packed_size(&resp);
  *ret = malloc(*ret_len ? *ret_len : 1);
  if (!*ret) {
    r = -ENOMEM;
    goto out;
  }
  v1beta1__list_and_watch_response__pack(&resp, *ret);
out:
  free(devs);
  free(ptrs);
  free(ids);
  return r;
}

int node_plugin_register(struct node *n, char *err, size_t err_len) {
  V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
  V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  char target[PATH_MAX + 32];
  uint8_t *buf, *reply = NULL;
  size_t len, reply_len = 0;

  opts.pre_start_required = 1;
  opts.get_preferred_allocation_available = 1;
  req.version = NODE_API_VERSION;
  req.endpoint = NODE_ENDPOINT;
  req.resource_name = NODE_RESOURCE;
  req.options = &opts;
  len = v1beta1__register_request__get_packed_size(&req);
  buf = malloc(len ? len : 1);
  if (!buf)
    return -ENOMEM;
  v1beta1__register_request__pack(&req, buf);
  snprintf(target, sizeof(target), "unix:%s/kubelet.sock", n->cfg.kubelet_dir);
  int r = rpc_call(target, "/v1beta1.Registration/Register", buf, len, 5000, &reply, &reply_len,
                   err, err_len);
  free(buf);
  free(reply);
  return r;
}

static int options(uint8_t **ret, size_t *ret_len) {
  V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  o.pre_start_required = 1;
  o.get_preferred_allocation_available = 1;
  *ret_len = v1beta1__device_plugin_options__get_packed_size(&o);
  *ret = malloc(*ret_len ? *ret_len : 1);
  if (!*ret)
    return GRPC_STATUS_RESOURCE_EXHAUSTED;
  v1beta1__device_plugin_options__pack(&o, *ret);
  return 0;
}

/* Slots carry no GPU of their own (the extender's assignment decides the GPU): prefer slots
 * spread over GPUs in order, the must-include ones first, so any choice is as good as any. */
static int preferred(const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len, char *err,
                     size_t err_len) {
  V1beta1__PreferredAllocationRequest *in =
      v1beta1__preferred_allocation_request__unpack(NULL, len, req);
  if (!in) {
    snprintf(err, err_len, "GetPreferredAllocation: malformed request");
    return GRPC_STATUS_INVALID_ARGUMENT;
  }
  size_t nc = in->n_container_requests;
  V1beta1__PreferredAllocationResponse out = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
  V1beta1__ContainerPreferredAllocationResponse *cr = calloc(nc ? nc : 1, sizeof(*cr));
  V1beta1__ContainerPreferredAllocationResponse **crp = calloc(nc ? nc : 1, sizeof(*crp));
  int st = 0;
  if (!cr || !crp) {
    st = GRPC_STATUS_RESOURCE_EXHAUSTED;
    goto out;
  }
  for (size_t i = 0; i < nc; i++) {
    V1beta1__ContainerPreferredAllocationRequest *c = in->container_requests[i];
    V1beta1__ContainerPreferredAllocationResponse r =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_RESPONSE__INIT;
    size_t want = c->allocation_size > 0 ? (size_t)c->allocation_size : 0, k = 0;
    r.deviceids = calloc(want ? want : 1, sizeof(char *));
    if (!r.deviceids) {
      st = GRPC_STATUS_RESOURCE_EXHAUSTED;
      goto out;
    }
    for (size_t j = 0; j < c->n_must_include_deviceids && k < want; j++)
      r.deviceids[k++] = c->must_include_deviceids[j];
    qsort(c->available_deviceids, c->n_available_deviceids, sizeof(char *), cmp_str);
    for (size_t j = 0; j < c->n_available_deviceids && k < want; j++) {
      bool dup = false;
      for (size_t m = 0; m < k; m++)
        dup |= !strcmp(r.deviceids[m], c->available_deviceids[j]);
      if (!dup)
        r.deviceids[k++] = c->available_deviceids[j];
    }
    r.n_deviceids = k;
    cr[i] = r;
    crp[i] = &cr[i];
  }
  out.n_container_responses = nc;
  out.container_responses = crp;
  *ret_len = v1beta1__preferred_allocation_response__get_packed_size(&out);
  *ret = malloc(*ret_len ? *ret_len : 1);
  if (!*ret)
    st = GRPC_STATUS_RESOURCE_EXHAUSTED;
  else
    v1beta1__preferred_allocation_response__pack(&out, *ret);
out:
  if (cr)
    for (size_t i = 0; i < nc; i++)
      free(cr[i].deviceids);
  free(cr);
  free(crp);
  v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
  return st;
}

/* One container's answer to Allocate, and the storage its message points into. */
enum { ALLOC_NENV = 7, ALLOC_NMNT = 5 };
struct alloc_ctr {
  V1beta1__ContainerAllocateResponse r;
  V1beta1__ContainerAllocateResponse__EnvsEntry env[ALLOC_NENV];
  V1beta1__ContainerAllocateResponse__EnvsEntry *envp[ALLOC_NENV];
  V1beta1__Mount mnt[ALLOC_NMNT];
  V1beta1__Mount *mntp[ALLOC_NMNT];
  V1beta1__CDIDevice cdi, *cdip;
  char cdi_name[sizeof(NODE_CDI_KIND_SLOT) + NODE_SLOT_ID_MAX + 1];
  char slots[NODE_MAX_CONTAINER_SLOTS * (NODE_SLOT_ID_MAX + 1)], key[NODE_SLOT_ID_MAX];
  char dir[PATH_MAX], region[PATH_MAX], sock[PATH_MAX + 64];
};

/* What every container's answer shares: the hook socket's directory and name, ld.so.preload. */
struct alloc_common {
  const char *sdir, *sbase;
  char preload[PATH_MAX + 32];
};

/* The container's environment and mounts, for the slots q asks for. */
static int alloc_container(const struct node *n, const struct alloc_common *k,
                           const V1beta1__ContainerAllocateRequest *q, struct alloc_ctr *t) {
  if (node_slots_join(q->devices_ids, q->n_devices_ids, t->slots, sizeof(t->slots), t->key,
                      sizeof(t->key)) < 0)
    return -EINVAL;
  node_alloc_dir(n, t->key, t->dir, sizeof(t->dir));
  node_alloc_region(n, t->key, t->region, sizeof(t->region));
  snprintf(t->sock, sizeof(t->sock), "%s/%s", NODE_CTR_DAEMON_DIR, k->sbase);
  const char *env[ALLOC_NENV][2] = {
      {"GSLICE_K8S_SLOTS", t->slots},
      {"GSLICE_K8S_DIR", NODE_CTR_SLICE_DIR},
      {"GSLICE_STATE_DIR", NODE_CTR_SLICE_DIR},
      {"GSLICE_SOCKET", t->sock},
      {"NVIDIA_VISIBLE_DEVICES", n->cfg.nvidia_visible},
      {"NVIDIA_DRIVER_CAPABILITIES", "compute,utility"},
      {NULL, NULL},
  };
  size_t ne = 0;
  for (size_t i = 0; env[i][0]; i++) {
    if (!strncmp(env[i][0], "NVIDIA_", 7) && !n->cfg.nvidia_visible[0])
      continue;
    V1beta1__ContainerAllocateResponse__EnvsEntry e =
        V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ENVS_ENTRY__INIT;
    e.key = (char *)env[i][0];
    e.value = (char *)env[i][1];
    t->env[ne] = e;
    t->envp[ne] = &t->env[ne];
    ne++;
  }
  /* The runtimes (containerd, CRI-O) mount in order of destination depth, so the region's
   * file mount goes over the placeholder once its read-only directory is there. */
  const struct {
    const char *ctr, *host;
    bool ro;
  } mnt[ALLOC_NMNT] = {
      {NODE_CTR_HOOK, n->cfg.hook, true},   {NODE_CTR_PRELOAD, k->preload, true},
      {NODE_CTR_DAEMON_DIR, k->sdir, true}, {NODE_CTR_SLICE_DIR, t->dir, true},
      {NODE_CTR_REGION, t->region, false},
  };
  for (size_t i = 0; i < ALLOC_NMNT; i++) {
    V1beta1__Mount m = V1BETA1__MOUNT__INIT;
    m.container_path = (char *)mnt[i].ctr;
    m.host_path = (char *)mnt[i].host;
    m.read_only = mnt[i].ro;
    t->mnt[i] = m;
    t->mntp[i] = &t->mnt[i];
  }
  V1beta1__ContainerAllocateResponse r = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
  r.n_envs = ne;
  r.envs = t->envp;
  r.n_mounts = ALLOC_NMNT;
  r.mounts = t->mntp;
  t->r = r;
  return 0;
}

/* --allocate-cdi: the same mounts and environment, and the GPUs' device nodes, as a CDI spec
 * (cdi.h) of one device named by the slots' key, written before the answer names it; the answer
 * has only its name (no envs, mounts or devices). The slots do not say which GPUs PreStartContainer
 * will give (the extender's assignment does): every GPU of the node is in it, as
 * NVIDIA_VISIBLE_DEVICES=all gives them in the answer without CDI. */
static int alloc_container_cdi(const struct node *n, struct alloc_ctr *t,
                               struct cdi_slice_storage *st, char *err, size_t err_len) {
  uint32_t all[GS_MAX_GPUS];
  char file[NODE_SLOT_ID_MAX + 32];
  struct cdi_device d = {t->key, {0}};
  int r;

  for (uint32_t i = 0; i < n->ngpus; i++)
    all[i] = n->gpus[i].index;
  if ((r = cdi_slice_edits(n, t->dir, t->region, t->slots, all, n->ngpus, st, &d.edits, err,
                           err_len)) < 0)
    return r;
  if ((r = cdi_slot_file(t->key, file, sizeof(file))) < 0 ||
      (r = cdi_qualified(NODE_CDI_KIND_SLOT, t->key, t->cdi_name, sizeof(t->cdi_name))) < 0) {
    snprintf(err, err_len, "CDI: slots %s make no CDI name", t->slots);
    return r;
  }
  if ((r = cdi_spec_write(n->cfg.cdi_dir, file, NODE_CDI_KIND_SLOT, &d, 1, NULL, err, err_len)) < 0)
    return r;
  V1beta1__CDIDevice c = V1BETA1__CDIDEVICE__INIT;
  c.name = t->cdi_name;
  t->cdi = c;
  t->cdip = &t->cdi;
  V1beta1__ContainerAllocateResponse resp = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
  resp.n_cdi_devices = 1;
  resp.cdi_devices = &t->cdip;
  t->r = resp;
  return 0;
}

/* What every container of gslice.io/gpu gets, whatever pod it turns out to be: the hook (and
 * /etc/ld.so.preload naming it), the directory of gsliced's hook socket, and its slice directory
 * with the region's file mount inside it, all read-only but the region: the host paths are links
 * in gslice-node's own 0700 alloc/ that PreStartContainer points at a fresh start directory and
 * at the slice's region before the runtime mounts them (docs/kubernetes.md, "Node"). */
static int allocate(struct node *n, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
                    char *err, size_t err_len) {
  V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, len, req);
  if (!in) {
    snprintf(err, err_len, "Allocate: malformed request");
    return GRPC_STATUS_INVALID_ARGUMENT;
  }
  size_t nc = in->n_container_requests;
  struct alloc_ctr *c = calloc(nc ? nc : 1, sizeof(*c));
  V1beta1__ContainerAllocateResponse **cp = calloc(nc ? nc : 1, sizeof(*cp));
  V1beta1__AllocateResponse out = V1BETA1__ALLOCATE_RESPONSE__INIT;
  char hook_sock[PATH_MAX], sockdir[PATH_MAX], sockbase[PATH_MAX];
  struct alloc_common k;
  /* Its edits' storage, one for all the containers (each spec is written before the next). */
  struct cdi_slice_storage *cs = n->cfg.allocate_cdi ? malloc(sizeof(*cs)) : NULL;
  int st = 0;

  if (!c || !cp || (n->cfg.allocate_cdi && !cs)) {
    st = GRPC_STATUS_RESOURCE_EXHAUSTED;
    goto out;
  }
  /* Containers reach gsliced only through its hook socket, which serves a slice's processes and
   * nothing more; its directory is gsliced's own, mounted read-only (no one in the container can
   * put a socket of its own there). */
  if (node_hook_socket(n, hook_sock, sizeof(hook_sock)) < 0) {
    snprintf(err, err_len, "Allocate: gsliced's socket path %s is too long", n->cfg.socket);
    st = GRPC_STATUS_INTERNAL;
    goto out;
  }
  /* dirname and basename may write into their argument: each gets its own copy, once. */
  snprintf(sockdir, sizeof(sockdir), "%s", hook_sock);
  snprintf(sockbase, sizeof(sockbase), "%s", hook_sock);
  k.sdir = dirname(sockdir);
  k.sbase = basename(sockbase);
  snprintf(k.preload, sizeof(k.preload), "%s/%s", n->cfg.state_dir, NODE_PRELOAD);
  for (size_t i = 0; i < nc; i++) {
    if (alloc_container(n, &k, in->container_requests[i], &c[i]) < 0) {
      snprintf(err, err_len, "Allocate: container %zu: %zu device ids, not ids of %s", i,
               in->container_requests[i]->n_devices_ids, NODE_RESOURCE);
      st = GRPC_STATUS_INVALID_ARGUMENT;
      goto out;
    }
    if (cs && alloc_container_cdi(n, &c[i], cs, err, err_len) < 0) {
      gs_log(GS_LOG_ERROR, "Allocate: slots %s: %s", c[i].slots, err);
      st = GRPC_STATUS_INTERNAL;
      goto out;
    }
    cp[i] = &c[i].r;
  }
  /* The slots are a new container's from now on: a record of them is an earlier container's. */
  for (size_t i = 0; i < nc; i++) {
    node_slots_allocated(n, c[i].key);
    if (cs)
      gs_log(GS_LOG_INFO, "Allocate: slots %s (directory %s), CDI device %s", c[i].slots, c[i].dir,
             c[i].cdi_name);
    else
      gs_log(GS_LOG_INFO, "Allocate: slots %s (directory %s)", c[i].slots, c[i].dir);
  }
  out.n_container_responses = nc;
  out.container_responses = cp;
  *ret_len = v1beta1__allocate_response__get_packed_size(&out);
  *ret = malloc(*ret_len ? *ret_len : 1);
  if (!*ret) {
    st = GRPC_STATUS_RESOURCE_EXHAUSTED;
    goto out;
  }
  v1beta1__allocate_response__pack(&out, *ret);
out:
  free(cs);
  free(c);
  free(cp);
  v1beta1__allocate_request__free_unpacked(in, NULL);
  return st;
}

static int prestart(struct node *n, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
                    char *err, size_t err_len) {
  V1beta1__PreStartContainerRequest *in =
      v1beta1__pre_start_container_request__unpack(NULL, len, req);
  V1beta1__PreStartContainerResponse out = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
  int st = 0;

  if (!in) {
    snprintf(err, err_len, "PreStartContainer: malformed request");
    return GRPC_STATUS_INVALID_ARGUMENT;
  }
  /* A container refused for good (no assignment, another node's, not the extender's) still
   * starts: it is told why at its first CUDA call, and runs nothing on the GPU. What may pass
   * (the API server, the kubelet's PodResources or gsliced not answering) is UNAVAILABLE: the
   * kubelet fails this start and tries again, and no container is refused on a guess. Only what
   * gslice-node itself cannot do (a request that is not ours, its directory unwritable) fails
   * the start otherwise. */
  int r = node_prestart(n, in->devices_ids, in->n_devices_ids, err, err_len);
  if (r < 0)
    st = r == -EINVAL   ? GRPC_STATUS_INVALID_ARGUMENT
         : r == -EAGAIN ? GRPC_STATUS_UNAVAILABLE
                        : GRPC_STATUS_INTERNAL;
  v1beta1__pre_start_container_request__free_unpacked(in, NULL);
  if (st)
    return st;
  *ret_len = v1beta1__pre_start_container_response__get_packed_size(&out);
  *ret = malloc(*ret_len ? *ret_len : 1);
  if (!*ret)
    return GRPC_STATUS_RESOURCE_EXHAUSTED;
  v1beta1__pre_start_container_response__pack(&out, *ret);
  return 0;
}

int node_plugin_unary(void *ctx, const char *method, const uint8_t *req, size_t len,
                      uint8_t **ret_reply, size_t *ret_len, char *err, size_t err_len) {
  struct node *n = ctx;

  if (!strcmp(method, M("GetDevicePluginOptions")))
    return options(ret_reply, ret_len);
  if (!strcmp(method, M("GetPreferredAllocation")))
    return preferred(req, len, ret_reply, ret_len, err, err_len);
  if (!strcmp(method, M("Allocate")))
    return allocate(n, req, len, ret_reply, ret_len, err, err_len);
  if (!strcmp(method, M("PreStartContainer")))
    return prestart(n, req, len, ret_reply, ret_len, err, err_len);
  snprintf(err, err_len, "gslice-node does not serve %s", method);
  return GRPC_STATUS_UNIMPLEMENTED;
}
