/* One slice per container: PreStartContainer finds the container its slots were given to
 * (the kubelet's PodResources List), reads its pod's gslice.io/assigned and makes the slice in
 * gsliced; the records of what was made survive gslice-node restarts (state_dir/records), the
 * slices themselves live in gsliced (held: not tied to gslice-node's life); a slice goes when
 * the kubelet no longer lists its container, or the API server says its pod is gone or done. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "annot.h"
#include "client.h"
#include "node.h"
#include "podresources.pb-c.h"
#include "rpc.h"

#define POD_CHECK_NS 10000000000ull

void node_alloc_dir(const struct node *n, const char *key, char *out, size_t len) {
  snprintf(out, len, "%s/alloc/%s", n->cfg.state_dir, key);
}

static void rec_path(const struct node *n, const char *key, char *out, size_t len) {
  snprintf(out, len, "%s/records/%s", n->cfg.state_dir, key);
}

static int write_atomic(const char *path, const char *text) {
  char tmp[PATH_MAX + 16];
  int fd, r = 0;
  size_t len = strlen(text);

  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return -errno;
  if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0)
    r = errno ? -errno : -EIO;
  close(fd);
  if (r == 0 && rename(tmp, path) < 0)
    r = -errno;
  if (r < 0)
    unlink(tmp);
  return r;
}

static int rec_save(const struct node *n, const struct node_rec *r) {
  char path[PATH_MAX + 64], text[4096];
  rec_path(n, r->key, path, sizeof(path));
  snprintf(text, sizeof(text),
           "slots=%s\nnamespace=%s\npod=%s\ncontainer=%s\nuid=%s\nslice=%" PRIu32
           "\nnonce=%016" PRIx64 "\n",
           r->slots, r->ns, r->pod, r->container, r->pod_uid, r->slice_id, r->nonce);
  return write_atomic(path, text);
}

static int rec_parse(char *text, struct node_rec *r) {
  char *save = NULL;
  int seen = 0;
  for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(l, '=');
    if (!eq)
      return -EBADMSG;
    *eq++ = 0;
#define F(k, dst)                                                                                  \
  if (!strcmp(l, k)) {                                                                             \
    if (strlen(eq) >= sizeof(dst))                                                                 \
      return -EBADMSG;                                                                             \
    snprintf(dst, sizeof(dst), "%s", eq);                                                          \
    seen++;                                                                                        \
    continue;                                                                                      \
  }
    F("slots", r->slots)
    F("namespace", r->ns)
    F("pod", r->pod)
    F("container", r->container)
    F("uid", r->pod_uid)
#undef F
    if (!strcmp(l, "nonce")) {
      char *end;
      r->nonce = strtoull(eq, &end, 16);
      if (*end || !*eq)
        return -EBADMSG;
      seen++;
      continue;
    }
    if (!strcmp(l, "slice")) {
      char *end;
      unsigned long v = strtoul(eq, &end, 10);
      if (*end || v > UINT32_MAX)
        return -EBADMSG;
      r->slice_id = (uint32_t)v;
      seen++;
    }
  }
  return seen == 7 ? 0 : -EBADMSG;
}

int node_recs_load(struct node *n) {
  char dir[PATH_MAX + 16], path[PATH_MAX + 300], text[4096];
  struct dirent *e;
  int ret = 0;

  snprintf(dir, sizeof(dir), "%s/records", n->cfg.state_dir);
  DIR *d = opendir(dir);
  if (!d)
    return -errno;
  while ((e = readdir(d)) && n->nrecs < sizeof(n->recs) / sizeof(n->recs[0])) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= NODE_SLOT_ID_MAX || strchr(e->d_name, '.'))
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t len = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
    if (fd >= 0)
      close(fd);
    struct node_rec *r = calloc(1, sizeof(*r));
    if (!r)
      break;
    snprintf(r->key, sizeof(r->key), "%s", e->d_name);
    if (len < 0 || (text[len] = 0, rec_parse(text, r) < 0)) {
      node_log("warn", "record %s is unreadable or corrupt: ignored (left in place)", path);
      free(r);
      ret = -EBADMSG;
      continue;
    }
    n->recs[n->nrecs++] = r;
  }
  closedir(d);
  return ret;
}

static struct node_rec *rec_find(struct node *n, const char *key, uint32_t *ret_i) {
  for (uint32_t i = 0; i < n->nrecs; i++)
    if (!strcmp(n->recs[i]->key, key)) {
      if (ret_i)
        *ret_i = i;
      return n->recs[i];
    }
  return NULL;
}

static int daemon_conn(struct node *n, int *ret_fd) {
  int fd, r = gs_client_connect(n->cfg.socket, &fd);
  if (r < 0)
    return r;
  r = gs_client_hello(fd, GS_ROLE_CLI, 0, NULL);
  if (r < 0) {
    close(fd);
    return r;
  }
  *ret_fd = fd;
  return 0;
}

/* Takes a record's slice and directory away; the record too. */
static void rec_remove(struct node *n, uint32_t i, const char *why) {
  struct node_rec *r = n->recs[i];
  char path[PATH_MAX + 64], err[GS_PROTO_TEXT_MAX] = "";
  int fd;

  if (r->slice_id) {
    int e = daemon_conn(n, &fd);
    if (e == 0) {
      e = gs_client_unregister(fd, r->slice_id, r->nonce, err, sizeof(err));
      close(fd);
    }
    if (e < 0 && e != -ENOENT) {
      node_log("warn", "cannot remove slice %u of %s/%s/%s yet: %s (trying again)", r->slice_id,
               r->ns, r->pod, r->container, err[0] ? err : strerror(-e));
      return;
    }
  }
  node_alloc_dir(n, r->key, path, sizeof(path));
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      unlink(path);
    } else {
      char f[PATH_MAX + 80];
      snprintf(f, sizeof(f), "%s/slice.env", path);
      unlink(f);
      rmdir(path);
    }
  }
  rec_path(n, r->key, path, sizeof(path));
  unlink(path);
  /* Said once it is done: the record and the container's directory are gone by then (a reader
   * of the log that looked at once found the record still there). */
  node_log("info", "slice %u of %s/%s container %s (slots %s) removed: %s", r->slice_id, r->ns,
           r->pod, r->container, r->slots, why);
  free(r);
  n->recs[i] = n->recs[--n->nrecs];
}

/* ---- PodResources ---- */

static int pod_resources(struct node *n, V1__ListPodResourcesResponse **ret, char *err,
                         size_t err_len) {
  V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
  uint8_t buf[16], *reply = NULL;
  size_t len = v1__list_pod_resources_request__pack(&req, buf), reply_len = 0;
  char target[PATH_MAX + 8];

  snprintf(target, sizeof(target), "unix:%s", n->cfg.pod_resources);
  int r = rpc_call(target, "/v1.PodResourcesLister/List", buf, len, 5000, &reply, &reply_len, err,
                   err_len);
  if (r < 0)
    return r;
  *ret = v1__list_pod_resources_response__unpack(NULL, reply_len, reply);
  free(reply);
  if (!*ret) {
    snprintf(err, err_len, "PodResources List: malformed reply");
    return -EPROTO;
  }
  return 0;
}

/* The container holding exactly these slots of gslice.io/gpu (the kubelet's record). */
static int find_container(V1__ListPodResourcesResponse *l, const char *slots, const char **ns,
                          const char **pod, const char **ctr) {
  for (size_t p = 0; p < l->n_pod_resources; p++)
    for (size_t c = 0; c < l->pod_resources[p]->n_containers; c++) {
      V1__ContainerResources *cr = l->pod_resources[p]->containers[c];
      for (size_t d = 0; d < cr->n_devices; d++) {
        V1__ContainerDevices *dev = cr->devices[d];
        char joined[sizeof(((struct node_rec *)0)->slots)], key[NODE_SLOT_ID_MAX];
        if (strcmp(dev->resource_name, NODE_RESOURCE) ||
            node_slots_join(dev->device_ids, dev->n_device_ids, joined, sizeof(joined), key,
                            sizeof(key)) < 0 ||
            strcmp(joined, slots))
          continue;
        *ns = l->pod_resources[p]->namespace_;
        *pod = l->pod_resources[p]->name;
        *ctr = cr->name;
        return 0;
      }
    }
  return -ENOENT;
}

/* ---- the slice ---- */

static void slice_name(char *out, size_t len, const char *ns, const char *pod, const char *ctr) {
  char raw[3 * NODE_NAME_MAX];
  size_t i;
  snprintf(raw, sizeof(raw), "%s.%s.%s", ns, pod, ctr);
  for (i = 0; raw[i] && i + 1 < len && i < 63; i++) {
    char ch = raw[i];
    out[i] = ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-')
                 ? ch
                 : '_';
  }
  out[i] = 0;
}

/* From the assignment's entry for this container: the spec, and slice.env's lines. */
static int make_spec(struct node *n, const struct k8s_assigned_container *a,
                     struct gs_slice_spec *spec, char *env, size_t env_len, char *err,
                     size_t err_len) {
  char mem[512] = "", cvd[1024] = "";
  uint32_t order[GS_MAX_GPUS], k = 0;

  if (a->ngpus == 0 || a->ngpus > GS_MAX_GPUS) {
    snprintf(err, err_len, "its assignment names %u GPUs", a->ngpus);
    return -EINVAL;
  }
  spec->compute_limit = a->compute_limit ? a->compute_limit : 100;
  spec->weight = a->weight ? a->weight : 1;
  spec->priority = a->priority == K8S_PRIO_HIGH  ? GS_PRIORITY_HIGH
                   : a->priority == K8S_PRIO_LOW ? GS_PRIORITY_LOW
                                                 : GS_PRIORITY_NORMAL;
  for (uint32_t i = 0; i < a->ngpus; i++) {
    const struct k8s_assigned_gpu *g = &a->gpus[i];
    uint32_t idx = UINT32_MAX;
    /* The uuid is what the extender saw in our inventory; the index may differ after a reboot. */
    for (uint32_t j = 0; j < n->ngpus; j++)
      if (!strcmp(n->gpus[j].uuid, g->uuid))
        idx = n->gpus[j].index;
    if (idx == UINT32_MAX || idx >= GS_MAX_GPUS) {
      snprintf(err, err_len, "its assignment names GPU %s, which this node does not have", g->uuid);
      return -ENODEV;
    }
    if (spec->gpu_mask & (1u << idx)) {
      snprintf(err, err_len, "its assignment names GPU %s twice", g->uuid);
      return -EINVAL;
    }
    spec->gpu_mask |= 1u << idx;
    if (g->compute > spec->compute_request)
      spec->compute_request = g->compute;
    if (g->memory > spec->memory_cap)
      spec->memory_cap = g->memory;
  }
  if (spec->compute_limit < spec->compute_request)
    spec->compute_limit = spec->compute_request;
  /* CUDA ordinal k is the k-th GPU of the mask, in index order (as gsliced maps tokens). */
  for (uint32_t idx = 0; idx < GS_MAX_GPUS; idx++)
    if (spec->gpu_mask & (1u << idx))
      order[k++] = idx;
  for (uint32_t o = 0; o < k; o++)
    for (uint32_t i = 0; i < a->ngpus; i++) {
      const struct k8s_assigned_gpu *g = &a->gpus[i];
      bool here = false;
      for (uint32_t j = 0; j < n->ngpus; j++)
        here |= n->gpus[j].index == order[o] && !strcmp(n->gpus[j].uuid, g->uuid);
      if (!here)
        continue;
      size_t ml = strlen(mem), cl = strlen(cvd);
      snprintf(mem + ml, sizeof(mem) - ml, "%s%u=%" PRIu64, ml ? "," : "", o, g->memory);
      snprintf(cvd + cl, sizeof(cvd) - cl, "%s%s", cl ? "," : "", g->uuid);
    }
  snprintf(env, env_len,
           "GSLICE_MEMORY_LIMIT=%s\nGSLICE_COMPUTE_LIMIT=%u\nCUDA_VISIBLE_DEVICES=%s\n", mem,
           spec->compute_limit, cvd);
  return 0;
}

/* The container's directory says why it has no slice; gslice-node's log too. */
static int refuse(struct node *n, struct node_rec *r, const char *why) {
  char dir[PATH_MAX + 64], f[PATH_MAX + 80], text[1024];
  struct stat st;

  node_log("error", "container %s/%s/%s (slots %s) gets no GPU: %s", r->ns[0] ? r->ns : "?",
           r->pod[0] ? r->pod : "?", r->container[0] ? r->container : "?", r->slots, why);
  node_alloc_dir(n, r->key, dir, sizeof(dir));
  if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
    unlink(dir);
  if (mkdir(dir, 0755) < 0 && errno != EEXIST)
    return -errno;
  snprintf(f, sizeof(f), "%s/slice.env", dir);
  snprintf(text, sizeof(text), "GSLICE_K8S_ERROR=%.900s\n", why);
  for (char *p = text; *p && p[1]; p++)
    if (*p == '\n')
      *p = ' ';
  int e = write_atomic(f, text);
  if (e < 0)
    return e;
  r->slice_id = 0;
  r->nonce = 0;
  return rec_save(n, r);
}

int node_prestart(struct node *n, char **ids, size_t nids, char *err, size_t err_len) {
  struct node_rec *r = calloc(1, sizeof(*r));
  V1__ListPodResourcesResponse *pl = NULL;
  struct k8s_assigned as = {0};
  bool have_as = false;
  char why[1024], perr[512] = "", *assigned = NULL, phase[32] = "";
  const char *ns = NULL, *pod = NULL, *ctr = NULL;
  int e, ret = 0, fd = -1;

  if (!r)
    return -ENOMEM;
  if (node_slots_join(ids, nids, r->slots, sizeof(r->slots), r->key, sizeof(r->key)) < 0) {
    snprintf(err, err_len, "PreStartContainer: %zu device ids, not ids of %s", nids, NODE_RESOURCE);
    free(r);
    return -EINVAL;
  }
  /* The kubelet records an allocation when Allocate returns, so by PreStartContainer its
   * PodResources lists the container with these slots. */
  e = pod_resources(n, &pl, perr, sizeof(perr));
  if (e < 0) {
    snprintf(why, sizeof(why), "the kubelet's PodResources API did not answer: %s", perr);
    goto refused;
  }
  if (find_container(pl, r->slots, &ns, &pod, &ctr) < 0) {
    snprintf(why, sizeof(why), "the kubelet's PodResources lists no container with slots %.512s",
             r->slots);
    goto refused;
  }
  snprintf(r->ns, sizeof(r->ns), "%s", ns);
  snprintf(r->pod, sizeof(r->pod), "%s", pod);
  snprintf(r->container, sizeof(r->container), "%s", ctr);
  /* A container restarting, or a slot given to a new pod: the old slice goes first. */
  uint32_t old_i;
  struct node_rec *old = rec_find(n, r->key, &old_i);
  char prev[NODE_NAME_MAX] = "";
  if (old && !strcmp(old->ns, ns) && !strcmp(old->pod, pod))
    snprintf(prev, sizeof(prev), "%s", old->container);
  if (old) {
    rec_remove(n, old_i, "its slots start a container again");
    if (rec_find(n, r->key, NULL)) {
      snprintf(err, err_len, "the previous slice of slots %s cannot be removed yet (gsliced?)",
               r->slots);
      ret = -EBUSY;
      goto out;
    }
  }
  if (n->cfg.no_api) {
    snprintf(why, sizeof(why), "gslice-node runs without an API server (--no-api-server)");
    goto refused;
  }
  e = node_kube_pod(n, ns, pod, &assigned, r->pod_uid, sizeof(r->pod_uid), phase, sizeof(phase),
                    perr, sizeof(perr));
  if (e < 0) {
    snprintf(why, sizeof(why), "cannot read pod %s/%s from the API server: %s", ns, pod, perr);
    goto refused;
  }
  if (!assigned) {
    snprintf(why, sizeof(why),
             "pod %s/%s has no gslice.io/assigned annotation (was it scheduled through "
             "gslice-extender? its scheduler must be one that uses the extender)",
             ns, pod);
    goto refused;
  }
  e = k8s_assigned_decode(assigned, &as, perr, sizeof(perr));
  if (e < 0) {
    snprintf(why, sizeof(why), "pod %s/%s: gslice.io/assigned is %s: %s", ns, pod,
             e == -EPROTONOSUPPORT ? "of a newer version than this gslice-node reads" : "malformed",
             perr);
    goto refused;
  }
  have_as = true;
  if (strcmp(as.node, n->cfg.node_name)) {
    snprintf(why, sizeof(why), "pod %s/%s is assigned to node %s, not this node %s", ns, pod,
             as.node, n->cfg.node_name);
    goto refused;
  }
  char which[NODE_NAME_MAX];
  e = node_kube_which(n, ns, pod, &as, ctr, prev, which, sizeof(which), perr, sizeof(perr));
  if (e < 0) {
    snprintf(why, sizeof(why), "cannot read pod %s/%s from the API server: %s", ns, pod, perr);
    goto refused;
  }
  if (strcmp(which, ctr)) {
    node_log("info", "slots %s of %s/%s: listed under container %s, started for init container %s",
             r->slots, ns, pod, ctr, which);
    snprintf(r->container, sizeof(r->container), "%s", which);
    ctr = r->container;
  }
  const struct k8s_assigned_container *ac = NULL;
  for (uint32_t i = 0; i < as.ncontainers; i++)
    if (!strcmp(as.containers[i].name, ctr))
      ac = &as.containers[i];
  if (!ac) {
    snprintf(why, sizeof(why), "pod %s/%s: gslice.io/assigned has no entry for container %s", ns,
             pod, ctr);
    goto refused;
  }
  struct gs_slice_spec spec = {0};
  char env[2048], perr2[512];
  e = make_spec(n, ac, &spec, env, sizeof(env), perr2, sizeof(perr2));
  if (e < 0) {
    snprintf(why, sizeof(why), "pod %s/%s container %s: %s", ns, pod, ctr, perr2);
    goto refused;
  }
  slice_name(spec.name, sizeof(spec.name), ns, pod, ctr);
  struct gs_msg_registered reg;
  char derr[GS_PROTO_TEXT_MAX] = "";
  if (n->nrecs >= sizeof(n->recs) / sizeof(n->recs[0])) {
    snprintf(err, err_len, "gslice-node holds %u containers' slices, its most", n->nrecs);
    ret = -ENOSPC;
    goto out;
  }
  e = daemon_conn(n, &fd);
  if (e == 0)
    e = gs_client_register_flags(fd, &spec, GS_REGISTER_HELD | GS_REGISTER_ANY_UID, &reg, derr,
                                 sizeof(derr));
  if (e < 0) {
    snprintf(why, sizeof(why), "gsliced refused the slice of %s/%s container %s: %s", ns, pod, ctr,
             derr[0] ? derr : strerror(-e));
    goto refused;
  }
  r->slice_id = reg.slice_id;
  r->nonce = reg.slice_nonce;
  /* slice.env in the slice's own dir (gsliced's, holding its memory region); the container's
   * directory is a link to it, made before the runtime mounts it. */
  char f[GS_PROTO_PATH_MAX + 32], text[2200], dir[PATH_MAX + 64], tmp[PATH_MAX + 80];
  snprintf(f, sizeof(f), "%s/slice.env", reg.state_dir);
  snprintf(text, sizeof(text), "GSLICE_SLICE=%" PRIu32 "\nGSLICE_SLICE_NONCE=%016" PRIx64 "\n%s",
           reg.slice_id, reg.slice_nonce, env);
  node_alloc_dir(n, r->key, dir, sizeof(dir));
  snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
  unlink(tmp);
  struct stat st;
  if (lstat(dir, &st) == 0 && !S_ISLNK(st.st_mode)) {
    char ef[PATH_MAX + 80];
    snprintf(ef, sizeof(ef), "%s/slice.env", dir);
    unlink(ef);
    rmdir(dir);
  }
  if ((e = write_atomic(f, text)) < 0 || (symlink(reg.state_dir, tmp) < 0 && (e = -errno)) ||
      (rename(tmp, dir) < 0 && (e = -errno)) || (e = rec_save(n, r)) < 0) {
    snprintf(err, err_len, "cannot write the container's directory %s: %s", dir, strerror(-e));
    gs_client_unregister(fd, reg.slice_id, reg.slice_nonce, NULL, 0);
    ret = e;
    goto out;
  }
  node_log("info",
           "slice %" PRIu32 " for %s/%s container %s (slots %s): gpus 0x%x memory %" PRIu64
           " compute %u%%..%u%% priority %d weight %u",
           reg.slice_id, ns, pod, ctr, r->slots, spec.gpu_mask, spec.memory_cap,
           spec.compute_request, spec.compute_limit, spec.priority, spec.weight);
  n->recs[n->nrecs++] = r;
  r->checked = node_now();
  r = NULL;
  goto out;
refused:
  for (uint32_t oi; rec_find(n, r->key, &oi);) {
    uint32_t before = n->nrecs;
    rec_remove(n, oi, "its slots start a container again");
    if (n->nrecs == before)
      break;
  }
  if (!r->container[0] && nids)
    snprintf(r->container, sizeof(r->container), "?");
  e = refuse(n, r, why);
  if (e < 0) {
    snprintf(err, err_len, "cannot write the container's directory: %s", strerror(-e));
    ret = e;
  } else if (n->nrecs < sizeof(n->recs) / sizeof(n->recs[0])) {
    n->recs[n->nrecs++] = r;
    r->checked = node_now();
    r = NULL;
  }
out:
  if (fd >= 0)
    close(fd);
  if (have_as)
    k8s_assigned_free(&as);
  free(assigned);
  if (pl)
    v1__list_pod_resources_response__free_unpacked(pl, NULL);
  free(r);
  return ret;
}

void node_reconcile(struct node *n) {
  V1__ListPodResourcesResponse *pl = NULL;
  char err[512];

  if (n->nrecs == 0)
    return;
  /* No answer (the kubelet restarting): nothing is removed on a guess. */
  if (pod_resources(n, &pl, err, sizeof(err)) < 0)
    return;
  for (uint32_t i = 0; i < n->nrecs; i++) {
    struct node_rec *r = n->recs[i];
    const char *ns, *pod, *ctr;
    /* Slots are the pod's while any of its containers holds them: an init container's are
     * listed under the container they are handed on to. */
    if (find_container(pl, r->slots, &ns, &pod, &ctr) < 0 || strcmp(ns, r->ns) ||
        strcmp(pod, r->pod)) {
      if (strcmp(r->container, "?") == 0 && find_container(pl, r->slots, &ns, &pod, &ctr) == 0)
        continue;
      uint32_t before = n->nrecs;
      rec_remove(n, i, "the kubelet no longer lists its container");
      if (n->nrecs < before)
        i--;
      continue;
    }
    if (n->cfg.no_api || !r->pod_uid[0] || node_now() - r->checked < POD_CHECK_NS)
      continue;
    r->checked = node_now();
    char uid[64] = "", phase[32] = "", *assigned = NULL;
    int e = node_kube_pod(n, r->ns, r->pod, &assigned, uid, sizeof(uid), phase, sizeof(phase), err,
                          sizeof(err));
    free(assigned);
    const char *why = e == -ENOENT                        ? "its pod was deleted"
                      : e == 0 && strcmp(uid, r->pod_uid) ? "its pod was replaced"
                      : e == 0 && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))
                          ? "its pod finished"
                          : NULL;
    if (why) {
      uint32_t before = n->nrecs;
      rec_remove(n, i, why);
      if (n->nrecs < before)
        i--;
    }
  }
  v1__list_pod_resources_response__free_unpacked(pl, NULL);
}
