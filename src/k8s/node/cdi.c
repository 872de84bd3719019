/* SPDX-License-Identifier: Apache-2.0 */
/* The CDI spec writer (cdi.h): specs of gslice-node's devices in --cdi-dir, checked by the rules
 * of the CDI library (tags.cncf.io/container-device-interface: pkg/parser and the producer's
 * validator), and the edits that hold a container to its slice. */
#include "cdi.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "fileio.h"
#include "log.h"
#include "node.h"

#define CDI_SPEC_MAX (1u << 20) /* our own bound on one spec's text */

/* ---- names (CDI's rules) ---- */

static bool is_letter(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_alnum(char c) {
  return is_letter(c) || (c >= '0' && c <= '9');
}

/* A vendor or a class: a letter first, a letter or digit last, letters, digits, '_', '-' and
 * '.' between (the library's validateVendorOrClassName). One character is refused: the library
 * slices name[1:len-1] and fails on it. */
static int vendor_or_class_check(const char *s, size_t len, size_t max) {
  if (len < 2 || len > max || !is_letter(s[0]) || !is_alnum(s[len - 1]))
    return -EINVAL;
  for (size_t i = 1; i + 1 < len; i++)
    if (!is_alnum(s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
      return -EINVAL;
  return 0;
}

int cdi_kind_check(const char *kind) {
  const char *slash = strchr(kind, '/');
  /* The spec: the vendor a DNS subdomain of at most 253 characters, the class at most 63. */
  if (!slash || vendor_or_class_check(kind, (size_t)(slash - kind), 253) < 0)
    return -EINVAL;
  return vendor_or_class_check(slash + 1, strlen(slash + 1), 63);
}

/* A letter or digit first and last, letters, digits, '_', '-', '.' and ':' between (a digit
 * first needs cdiVersion 0.5.0: cdi_spec_write picks it). */
int cdi_name_check(const char *name) {
  size_t len = strlen(name);
  if (len == 0 || len > CDI_NAME_MAX || !is_alnum(name[0]) || !is_alnum(name[len - 1]))
    return -EINVAL;
  for (size_t i = 1; i + 1 < len; i++)
    if (!is_alnum(name[i]) && !strchr("_-.:", name[i]))
      return -EINVAL;
  return 0;
}

int cdi_qualified(const char *kind, const char *name, char *out, size_t len) {
  if (cdi_kind_check(kind) < 0 || cdi_name_check(name) < 0)
    return -EINVAL;
  int w = snprintf(out, len, "%s=%s", kind, name);
  return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* A spec's file name (without ".json"): letters, digits, '_', '-', '.', not starting with '.'
 * (gs_file_write_atomic's temporary is ".NAME.tmp", which no reader takes for a spec). */
static int file_check(const char *file) {
  size_t len = strlen(file);
  if (len == 0 || len > 200 || file[0] == '.')
    return -EINVAL;
  for (size_t i = 0; i < len; i++)
    if (!is_alnum(file[i]) && !strchr("_-.", file[i]))
      return -EINVAL;
  return 0;
}

/* ---- the spec's JSON ---- */

static int edits_check(const struct cdi_edits *e, const char *what, char *err, size_t err_len) {
  for (size_t i = 0; i < e->nenv; i++) {
    const char *eq = strchr(e->env[i], '=');
    if (!eq || eq == e->env[i]) {
      snprintf(err, err_len, "CDI: %s: environment entry \"%.100s\" is not KEY=VALUE", what,
               e->env[i]);
      return -EINVAL;
    }
  }
  for (size_t i = 0; i < e->nmounts; i++)
    if (e->mounts[i].host[0] != '/' || e->mounts[i].ctr[0] != '/') {
      snprintf(err, err_len, "CDI: %s: mount %.200s <- %.200s: both paths must be absolute", what,
               e->mounts[i].ctr, e->mounts[i].host);
      return -EINVAL;
    }
  for (size_t i = 0; i < e->ndev; i++)
    if (e->dev_nodes[i][0] != '/') {
      snprintf(err, err_len, "CDI: %s: device node %.200s is not an absolute path", what,
               e->dev_nodes[i]);
      return -EINVAL;
    }
  return 0;
}

/* Appends a JSON string to arr; a string that is not UTF-8 (json_string refuses it) fails. */
static int arr_str(json_t *arr, const char *s) {
  json_t *v = json_string(s);
  return v && json_array_append_new(arr, v) == 0 ? 0 : -EINVAL;
}

static int obj_str(json_t *obj, const char *key, const char *s) {
  json_t *v = json_string(s);
  return v && json_object_set_new(obj, key, v) == 0 ? 0 : -EINVAL;
}

/* One mount: bind mounts as the runtimes make a device plugin's (rbind, rprivate), nosuid and
 * nodev, ro where asked; no type (a mount's type needs cdiVersion 0.4.0, and runc and crun take
 * a mount with "rbind" in its options as a bind mount). */
static int mount_json(json_t *arr, const struct cdi_mount *mt) {
  static const char *const opts[] = {"ro", "nosuid", "nodev", "rbind", "rprivate"};
  json_t *opt = json_array(), *m = json_object();
  /* json_array_append_new takes m even when it fails; arr's owner frees what is in it. */
  if (json_array_append_new(arr, m) < 0 || !opt) {
    json_decref(opt);
    return -ENOMEM;
  }
  int r = obj_str(m, "hostPath", mt->host);
  if (r == 0)
    r = obj_str(m, "containerPath", mt->ctr);
  for (size_t k = mt->ro ? 0 : 1; r == 0 && k < sizeof(opts) / sizeof(opts[0]); k++)
    r = arr_str(opt, opts[k]);
  if (r == 0 && json_object_set(m, "options", opt) < 0)
    r = -ENOMEM;
  json_decref(opt);
  return r;
}

/* The containerEdits object: only the fields of cdiVersion 0.3.0 (env, deviceNodes by path
 * alone: the runtime reads the node's type and numbers on the host, mounts). Empty lists are
 * left out, as the library's omitempty does. */
static json_t *edits_json(const struct cdi_edits *e) {
  json_t *o = json_object(), *env = json_array(), *dn = json_array(), *mn = json_array();
  int r = o && env && dn && mn ? 0 : -ENOMEM;

  for (size_t i = 0; r == 0 && i < e->nenv; i++)
    r = arr_str(env, e->env[i]);
  for (size_t i = 0; r == 0 && i < e->ndev; i++) {
    json_t *d = json_object();
    r = d && json_array_append_new(dn, d) == 0 ? obj_str(d, "path", e->dev_nodes[i]) : -ENOMEM;
  }
  for (size_t i = 0; r == 0 && i < e->nmounts; i++)
    r = mount_json(mn, &e->mounts[i]);
  if (r == 0 && json_array_size(env))
    r = json_object_set(o, "env", env);
  if (r == 0 && json_array_size(dn))
    r = json_object_set(o, "deviceNodes", dn);
  if (r == 0 && json_array_size(mn))
    r = json_object_set(o, "mounts", mn);
  json_decref(env);
  json_decref(dn);
  json_decref(mn);
  if (r < 0) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* The lowest cdiVersion these fields need (specs-go/version.go): 0.3.0, the earliest the
 * library takes; 0.5.0 for a device name starting with a digit; 0.6.0 for a '.' in the class.
 * hostPath of a device node (0.5.0), a mount's type (0.4.0), annotations (0.6.0), intelRdt and
 * additionalGIDs (0.7.0) are never written. */
static const char *spec_version(const char *kind, const struct cdi_device *devs, size_t ndevs) {
  if (strchr(strchr(kind, '/') + 1, '.'))
    return "0.6.0";
  for (size_t i = 0; i < ndevs; i++)
    if (!is_letter(devs[i].name[0]))
      return "0.5.0";
  return CDI_VERSION_MIN;
}

static int spec_check(const char *kind, const struct cdi_device *devs, size_t ndevs,
                      const struct cdi_edits *common, char *err, size_t err_len) {
  if (cdi_kind_check(kind) < 0) {
    snprintf(err, err_len,
             "CDI: kind \"%.100s\" is not vendor/class (a letter first, letters, digits, '_', "
             "'-', '.', a letter or digit last, each at least 2 characters)",
             kind);
    return -EINVAL;
  }
  if (ndevs == 0) {
    snprintf(err, err_len, "CDI: a spec of %s names no device (CDI needs one)", kind);
    return -EINVAL;
  }
  for (size_t i = 0; i < ndevs; i++) {
    const struct cdi_edits *e = &devs[i].edits;
    if (cdi_name_check(devs[i].name) < 0) {
      snprintf(err, err_len,
               "CDI: device name \"%.100s\" is refused (a letter or digit first and last, "
               "letters, digits, '_', '-', '.', ':' between, at most %d characters)",
               devs[i].name, CDI_NAME_MAX);
      return -EINVAL;
    }
    for (size_t j = 0; j < i; j++)
      if (!strcmp(devs[j].name, devs[i].name)) {
        snprintf(err, err_len, "CDI: device %s is named twice", devs[i].name);
        return -EINVAL;
      }
    /* The library refuses a device with no edits ("empty container edits"). */
    if (!e->nenv && !e->nmounts && !e->ndev) {
      snprintf(err, err_len, "CDI: device %s has no edits (CDI refuses it)", devs[i].name);
      return -EINVAL;
    }
    int r = edits_check(e, devs[i].name, err, err_len);
    if (r < 0)
      return r;
  }
  return common ? edits_check(common, "the spec's edits", err, err_len) : 0;
}

/* The spec's text (malloc'd), fields in the order the spec's documentation lists them. */
static int spec_json(const char *kind, const struct cdi_device *devs, size_t ndevs,
                     const struct cdi_edits *common, char **ret) {
  json_t *s = json_object(), *arr = json_array();
  int r = s && arr && obj_str(s, "cdiVersion", spec_version(kind, devs, ndevs)) == 0 &&
                  obj_str(s, "kind", kind) == 0 && json_object_set(s, "devices", arr) == 0
              ? 0
              : -ENOMEM;

  for (size_t i = 0; r == 0 && i < ndevs; i++) {
    json_t *d = json_object();
    if (json_array_append_new(arr, d) < 0 || obj_str(d, "name", devs[i].name) < 0 ||
        json_object_set_new(d, "containerEdits", edits_json(&devs[i].edits)) < 0)
      r = -EINVAL;
  }
  if (r == 0 && common && (common->nenv || common->nmounts || common->ndev)) {
    json_t *e = edits_json(common);
    r = e && json_object_set_new(s, "containerEdits", e) == 0 ? 0 : -EINVAL;
  }
  *ret = r == 0 ? json_dumps(s, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
  if (r == 0 && !*ret)
    r = -ENOMEM;
  json_decref(arr);
  json_decref(s);
  return r;
}

/* ---- the directory ---- */

/* Opens dir (made 0755 when missing), never through a symlink, and refuses one anyone may write
 * (a spec there is what a runtime run as root applies). */
static int dir_open(const char *dir, bool make, int *ret_fd, char *err, size_t err_len) {
  struct stat st;
  if (dir[0] != '/') {
    snprintf(err, err_len, "CDI: --cdi-dir %.200s is not an absolute path", dir);
    return -EINVAL;
  }
  bool made = make && mkdir(dir, 0755) == 0;
  if (make && !made && errno != EEXIST) {
    int e = -errno;
    snprintf(err, err_len, "CDI: cannot make %.200s: %s (does its parent exist?)", dir,
             strerror(-e));
    return e;
  }
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = errno == ENOTDIR ? -ELOOP : -errno;
    if (e != -ENOENT || make)
      snprintf(err, err_len, "CDI: cannot open %.200s: %s (it must be a directory, not a link)",
               dir, e == -ELOOP ? "a symbolic link or not a directory" : strerror(-e));
    return e;
  }
  if (fstat(fd, &st) < 0 || (st.st_mode & S_IWOTH) || (st.st_uid != 0 && st.st_uid != geteuid())) {
    snprintf(err, err_len,
             "CDI: %.200s is writable by others or owned by another user: give gslice-node a "
             "directory only root writes (the default /var/run/cdi)",
             dir);
    close(fd);
    return -EPERM;
  }
  /* 0755 whatever the umask: the runtimes read it as root, the kubelet's plugins may too. */
  if (made && fchmod(fd, 0755) < 0) {
    int e = -errno;
    snprintf(err, err_len, "CDI: cannot make %.200s 0755: %s", dir, strerror(-e));
    close(fd);
    return e;
  }
  *ret_fd = fd;
  return 0;
}

int cdi_spec_write(const char *dir, const char *file, const char *kind,
                   const struct cdi_device *devs, size_t ndevs, const struct cdi_edits *common,
                   char *err, size_t err_len) {
  char name[256], *text = NULL;
  struct stat st;
  int fd = -1, r;

  if (file_check(file) < 0) {
    snprintf(err, err_len,
             "CDI: spec file name \"%.100s\" is refused (letters, digits, '_', "
             "'-', '.'; not starting with '.')",
             file);
    return -EINVAL;
  }
  snprintf(name, sizeof(name), "%s.json", file);
  r = spec_check(kind, devs, ndevs, common, err, err_len);
  if (r < 0)
    return r;
  r = spec_json(kind, devs, ndevs, common, &text);
  if (r < 0) {
    snprintf(err, err_len, "CDI: spec %s: %s", file,
             r == -EINVAL ? "a string in it is not UTF-8" : strerror(-r));
    return r;
  }
  if (strlen(text) > CDI_SPEC_MAX) {
    snprintf(err, err_len, "CDI: spec %s is over %u bytes", file, CDI_SPEC_MAX);
    r = -EFBIG;
    goto out;
  }
  r = dir_open(dir, true, &fd, err, err_len);
  if (r < 0)
    goto out;
  /* The rename would replace a link, never follow it; a link there is still not ours. */
  if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
    snprintf(err, err_len, "CDI: %.200s/%s is not a regular file (a link?): not replaced", dir,
             name);
    r = -ELOOP;
    goto out;
  }
  r = gs_file_write_atomic(fd, name, text, strlen(text), 0644);
  if (r < 0)
    snprintf(err, err_len, "CDI: cannot write %.200s/%s: %s", dir, name, strerror(-r));
out:
  if (fd >= 0)
    close(fd);
  free(text);
  return r;
}

int cdi_spec_remove(const char *dir, const char *file, char *err, size_t err_len) {
  char name[256];
  int fd, r;

  if (file_check(file) < 0) {
    snprintf(err, err_len, "CDI: spec file name \"%.100s\" is refused", file);
    return -EINVAL;
  }
  snprintf(name, sizeof(name), "%s.json", file);
  r = dir_open(dir, false, &fd, err, err_len);
  if (r == -ENOENT)
    return 0;
  if (r < 0)
    return r;
  if (unlinkat(fd, name, 0) < 0 && errno != ENOENT) {
    r = -errno;
    snprintf(err, err_len, "CDI: cannot remove %.200s/%s: %s", dir, name, strerror(-r));
  } else {
    r = gs_dir_sync(fd, NULL);
    if (r < 0)
      snprintf(err, err_len, "CDI: cannot sync %.200s: %s", dir, strerror(-r));
  }
  close(fd);
  return r;
}

/* ---- the slice's edits ---- */

/* The value of "Key:   value" lines of the driver's information file, trimmed. */
static bool info_value(char *text, const char *key, char *out, size_t len) {
  size_t kl = strlen(key);
  char *save = NULL;
  /* strtok_r: Allocate and DRA's Prepare may read these on threads of their own. */
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, key, kl) || line[kl] != ':')
      continue;
    char *v = line + kl + 1;
    while (*v == ' ' || *v == '\t')
      v++;
    size_t vl = strlen(v);
    while (vl && isspace((unsigned char)v[vl - 1]))
      vl--;
    snprintf(out, len, "%.*s", (int)vl, v);
    return true;
  }
  return false;
}

int cdi_gpu_minor(const char *gpus_info_dir, const char *uuid, unsigned *ret_minor) {
  DIR *d = opendir(gpus_info_dir);
  struct dirent *e;
  int r = -ENOENT;

  if (!d)
    return errno == ENOENT ? -ENOENT : -errno;
  while (r == -ENOENT && (e = readdir(d))) {
    char path[300], *text = NULL, *copy, u[NODE_UUID_MAX] = "", m[16] = "", *end;
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof(path), "%s/information", e->d_name);
    if (gs_file_read(dirfd(d), path, GS_FILE_NOFOLLOW, 16384, &text, NULL) < 0)
      continue;
    copy = strdup(text);
    bool found = copy && info_value(text, "GPU UUID", u, sizeof(u)) && !strcasecmp(u, uuid) &&
                 info_value(copy, "Device Minor", m, sizeof(m));
    free(text);
    free(copy);
    if (!found)
      continue;
    errno = 0;
    unsigned long v = strtoul(m, &end, 10);
    /* The driver's GPUs are minors 0..254 (255 is nvidiactl). */
    r = m[0] >= '0' && m[0] <= '9' && !*end && !errno && v < 255 ? 0 : -EBADMSG;
    if (r == 0)
      *ret_minor = (unsigned)v;
  }
  closedir(d);
  return r;
}

/* A copy of the formatted string in st's pool, or NULL when it is full. */
__attribute__((format(printf, 2, 3))) static const char *pool_printf(struct cdi_slice_storage *st,
                                                                     const char *fmt, ...) {
  va_list ap;
  size_t room = sizeof(st->pool) - st->used;
  va_start(ap, fmt);
  int w = vsnprintf(st->pool + st->used, room, fmt, ap);
  va_end(ap);
  if (w < 0 || (size_t)w >= room)
    return NULL;
  const char *s = st->pool + st->used;
  st->used += (size_t)w + 1;
  return s;
}

/* NVIDIA_VISIBLE_DEVICES: --nvidia-visible-devices as given, but "all" for a subset of the
 * node's GPUs (DRA's claims) is that subset's UUIDs, so that the NVIDIA runtime gives the
 * container those GPUs and no others. */
static const char *nvidia_visible(const struct node *n, const struct node_gpu *const *gpus,
                                  size_t ngpus, struct cdi_slice_storage *st) {
  if (strcmp(n->cfg.nvidia_visible, "all") || ngpus >= n->ngpus)
    return pool_printf(st, "NVIDIA_VISIBLE_DEVICES=%s", n->cfg.nvidia_visible);
  const char *s = pool_printf(st, "NVIDIA_VISIBLE_DEVICES=");
  for (size_t i = 0; s && i < ngpus; i++) {
    st->used--; /* over the NUL: the pieces are one string */
    if (!pool_printf(st, "%s%s", i ? "," : "", gpus[i]->uuid))
      return NULL;
  }
  return s;
}

/* The environment Allocate gives (plugin.c), from the same values. */
static int slice_env(const struct node *n, const char *slots, const char *sock_base,
                     const struct node_gpu *const *gpus, size_t ngpus, struct cdi_slice_storage *st,
                     struct cdi_edits *out) {
  const char *env[CDI_SLICE_MAX_ENV] = {
      pool_printf(st, "GSLICE_K8S_SLOTS=%s", slots),
      pool_printf(st, "GSLICE_K8S_DIR=%s", NODE_CTR_SLICE_DIR),
      pool_printf(st, "GSLICE_STATE_DIR=%s", NODE_CTR_SLICE_DIR),
      pool_printf(st, "GSLICE_SOCKET=%s/%s", NODE_CTR_DAEMON_DIR, sock_base),
  };
  size_t ne = 4;
  if (n->cfg.nvidia_visible[0]) {
    env[ne++] = nvidia_visible(n, gpus, ngpus, st);
    env[ne++] = pool_printf(st, "NVIDIA_DRIVER_CAPABILITIES=compute,utility");
  }
  for (size_t i = 0; i < ne; i++) {
    if (!env[i])
      return -ENAMETOOLONG;
    st->env[i] = env[i];
  }
  out->env = st->env;
  out->nenv = ne;
  return 0;
}

/* /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools and each GPU's /dev/nvidia<minor>,
 * those that are character devices on the host (the runtime reads their numbers there). */
static int slice_devs(const char *dev_root, const char *gpus_info_dir,
                      const struct node_gpu *const *gpus, size_t ngpus,
                      struct cdi_slice_storage *st, struct cdi_edits *out, char *err,
                      size_t err_len) {
  static const char *const always[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"};
  char path[PATH_MAX];
  struct stat sb;
  size_t nd = 0;

  for (size_t i = 0; i < 3 + ngpus; i++) {
    unsigned minor = 0;
    if (i >= 3) {
      int r = cdi_gpu_minor(gpus_info_dir, gpus[i - 3]->uuid, &minor);
      /* No driver information at all (no NVIDIA driver: the simulated GPU): no node to give. */
      if (r == -ENOENT && access(gpus_info_dir, F_OK) < 0)
        continue;
      if (r < 0) {
        snprintf(err, err_len, "CDI: GPU %u (%s): no device minor in %.200s: %s",
                 gpus[i - 3]->index, gpus[i - 3]->uuid, gpus_info_dir,
                 r == -ENOENT ? "no information file names its UUID" : strerror(-r));
        return r == -ENOENT ? -ENODEV : r;
      }
    }
    int w = i < 3 ? snprintf(path, sizeof(path), "%s/%s", dev_root, always[i])
                  : snprintf(path, sizeof(path), "%s/nvidia%u", dev_root, minor);
    if (w < 0 || (size_t)w >= sizeof(path))
      return -ENAMETOOLONG;
    if (stat(path, &sb) < 0 || !S_ISCHR(sb.st_mode))
      continue;
    /* The container sees the node at /dev/<name>, whatever root it was found under. */
    const char *p =
        i < 3 ? pool_printf(st, "/dev/%s", always[i]) : pool_printf(st, "/dev/nvidia%u", minor);
    if (!p)
      return -ENAMETOOLONG;
    st->dev[nd++] = p;
  }
  out->dev_nodes = st->dev;
  out->ndev = nd;
  return 0;
}

int cdi_slice_edits_at(const struct node *n, const char *dev_root, const char *gpus_info_dir,
                       const char *slice_dir, const char *region, const char *slots,
                       const uint32_t *gpu_index, size_t ngpus, struct cdi_slice_storage *st,
                       struct cdi_edits *out, char *err, size_t err_len) {
  const struct node_gpu *gpus[GS_MAX_GPUS];
  char hook_sock[PATH_MAX], sdir[PATH_MAX], sbase[PATH_MAX];
  int r;

  memset(out, 0, sizeof(*out));
  st->used = 0;
  if (!slots || !*slots || !slice_dir || !region) {
    snprintf(err, err_len, "CDI: a slice's edits need its slots (or claim), directory and region");
    return -EINVAL;
  }
  if (ngpus > GS_MAX_GPUS) {
    snprintf(err, err_len, "CDI: %zu GPUs, at most %d", ngpus, GS_MAX_GPUS);
    return -EINVAL;
  }
  for (size_t i = 0; i < ngpus; i++) {
    gpus[i] = NULL;
    for (uint32_t j = 0; j < n->ngpus; j++)
      if (n->gpus[j].index == gpu_index[i])
        gpus[i] = &n->gpus[j];
    if (!gpus[i]) {
      snprintf(err, err_len, "CDI: gsliced has no GPU %u", gpu_index[i]);
      return -ENODEV;
    }
  }
  if (gs_hook_socket_path(n->cfg.socket, hook_sock, sizeof(hook_sock)) < 0) {
    snprintf(err, err_len, "CDI: gsliced's socket path %.200s is too long", n->cfg.socket);
    return -ENAMETOOLONG;
  }
  /* dirname and basename may write into their argument: each gets its own copy. */
  snprintf(sdir, sizeof(sdir), "%s", hook_sock);
  snprintf(sbase, sizeof(sbase), "%s", hook_sock);
  const struct cdi_mount mnt[CDI_SLICE_MAX_MOUNTS] = {
      {n->cfg.hook, NODE_CTR_HOOK, true},
      {pool_printf(st, "%s/%s", n->cfg.state_dir, NODE_PRELOAD), NODE_CTR_PRELOAD, true},
      {pool_printf(st, "%s", dirname(sdir)), NODE_CTR_DAEMON_DIR, true},
      {pool_printf(st, "%s", slice_dir), NODE_CTR_SLICE_DIR, true},
      {pool_printf(st, "%s", region), NODE_CTR_REGION, false},
  };
  for (size_t i = 0; i < CDI_SLICE_MAX_MOUNTS; i++) {
    if (!mnt[i].host)
      return -ENAMETOOLONG;
    st->mounts[i] = mnt[i];
  }
  out->mounts = st->mounts;
  out->nmounts = CDI_SLICE_MAX_MOUNTS;
  r = slice_env(n, slots, basename(sbase), gpus, ngpus, st, out);
  if (r < 0) {
    snprintf(err, err_len, "CDI: the slice's environment does not fit in %zu bytes",
             sizeof(st->pool));
    return r;
  }
  return slice_devs(dev_root, gpus_info_dir, gpus, ngpus, st, out, err, err_len);
}

int cdi_slice_edits(const struct node *n, const char *slice_dir, const char *region,
                    const char *slots, const uint32_t *gpu_index, size_t ngpus,
                    struct cdi_slice_storage *st, struct cdi_edits *out, char *err,
                    size_t err_len) {
  return cdi_slice_edits_at(n, "/dev", "/proc/driver/nvidia/gpus", slice_dir, region, slots,
                            gpu_index, ngpus, st, out, err, err_len);
}

/* ---- --allocate-cdi ---- */

int cdi_slot_file(const char *key, char *out, size_t len) {
  int w = snprintf(out, len, "%s%s", CDI_SLOT_FILE_PREFIX, key);
  return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

void cdi_slot_spec_drop(const struct node *n, const struct node_rec *r) {
  char file[NODE_SLOT_ID_MAX + 32], err[512] = "";
  if (!n->cfg.allocate_cdi || r->superseded || cdi_slot_file(r->key, file, sizeof(file)) < 0)
    return;
  if (cdi_spec_remove(n->cfg.cdi_dir, file, err, sizeof(err)) < 0)
    gs_log(GS_LOG_WARNING, "%s (slots %s)", err, r->slots);
}
