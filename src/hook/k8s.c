/* SPDX-License-Identifier: Apache-2.0 */
/* A Kubernetes container's slice: gslice-node's device plugin gives the container
 * GSLICE_K8S_SLOTS and a directory (GSLICE_K8S_DIR) that it fills before the container starts
 * (PreStartContainer) with slice.env — the slice id, memory caps, compute limit and the GPUs —
 * or with why the container has no slice. Read once, before main (the hook is in
 * /etc/ld.so.preload), into the environment the rest of the hook and the driver read. */
#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv.h"

#define K8S_ENV_MAX 4096
#define K8S_VALUE_MAX 1024

static char refused[512];

static const char *const allowed[] = {"GSLICE_SLICE",         "GSLICE_SLICE_NONCE",
                                      "GSLICE_MEMORY_LIMIT",  "GSLICE_COMPUTE_LIMIT",
                                      "CUDA_VISIBLE_DEVICES", "GSLICE_K8S_ERROR"};
#define NALLOWED (sizeof(allowed) / sizeof(allowed[0]))
/* A container's slice (GSLICE_K8S_SLOTS set): the values slice.env gave, kept in the hook's own
 * memory. The environment is the container's to change before or after main (setenv,
 * unsetenv): read from there, GSLICE_SLICE unset left the process ungated, GSLICE_MEMORY_LIMIT
 * unset uncapped, and CUDA_VISIBLE_DEVICES set to another GPU of the node (the device plugin's
 * containers see every GPU's device node) put it on another tenant's GPU. */
static bool k8s_slice;
static char kept[NALLOWED][K8S_VALUE_MAX];
static bool kept_set[NALLOWED];

struct env_apply {
  bool any;
};

/* One slice.env line: a variable the hook and the driver read, or why there is no slice (the
 * rest of the file then does not matter: -ECANCELED stops the parse). */
static int apply_line(const char *key, const char *value, unsigned line, void *user, char *err,
                      size_t err_len) {
  struct env_apply *a = user;
  size_t i = 0;

  while (i < NALLOWED && strcmp(key, allowed[i]))
    i++;
  if (i == NALLOWED)
    return -EBADMSG;
  if (!strcmp(key, "GSLICE_K8S_ERROR")) {
    snprintf(refused, sizeof(refused), "%s", value);
    return -ECANCELED;
  }
  if (strlen(value) >= K8S_VALUE_MAX)
    return -E2BIG;
  snprintf(kept[i], sizeof(kept[i]), "%s", value);
  kept_set[i] = true;
  if (setenv(key, value, 1) < 0)
    return -errno;
  a->any = true;
  return 0;
}

char *gs_env(const char *name) {
  if (!k8s_slice)
    return secure_getenv(name);
  for (size_t i = 0; i < NALLOWED; i++)
    if (!strcmp(name, allowed[i]))
      return kept_set[i] ? kept[i] : NULL;
  return secure_getenv(name);
}

static int apply(char *text) {
  struct env_apply a = {false};
  int r = gs_kv_parse(text, '\n', 0, apply_line, &a, NULL, 0);
  if (r == -ECANCELED)
    return 0;
  if (r < 0)
    return r;
  return a.any ? 0 : -EBADMSG;
}

__attribute__((constructor)) static void k8s_setup(void) {
  const char *slots = secure_getenv("GSLICE_K8S_SLOTS");
  const char *dir = secure_getenv("GSLICE_K8S_DIR");
  char path[4200], text[K8S_ENV_MAX + 1];

  if (!slots || !*slots)
    return;
  k8s_slice = true; /* from here on, the slice's variables are the kept ones (gs_env) */
  if (!dir || dir[0] != '/') {
    snprintf(refused, sizeof(refused), "GSLICE_K8S_SLOTS=%s without GSLICE_K8S_DIR", slots);
    return;
  }
  snprintf(path, sizeof(path), "%s/slice.env", dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  ssize_t n = fd >= 0 ? read(fd, text, K8S_ENV_MAX + 1) : -1;
  if (fd >= 0)
    close(fd);
  if (n < 0 || n > K8S_ENV_MAX) {
    snprintf(refused, sizeof(refused),
             "no slice for this container (%.200s: %s): gslice-node did not prepare it (is "
             "gslice-node running, and did the kubelet call PreStartContainer?)",
             path, n < 0 ? strerror(errno) : "too large");
    return;
  }
  text[n] = 0;
  if (apply(text) < 0)
    snprintf(refused, sizeof(refused),
             "%.300s is malformed: not the KEY=VALUE lines gslice-node writes", path);
  if (refused[0]) {
    /* Nothing must run on the GPU: the driver shows no device, and cuInit says so too. */
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    unsetenv("GSLICE_SLICE");
    unsetenv("GSLICE_SLICE_NONCE");
    memset(kept_set, 0, sizeof(kept_set));
  }
}

/* The devices the driver is to show are the slice's: CUDA_VISIBLE_DEVICES as slice.env set it
 * (the driver reads it at cuInit). Changed since, by the program or a library, it is refused,
 * not followed: another value may name another tenant's GPU. */
bool gs_devices_changed(char *why, size_t len) {
  const char *now = getenv("CUDA_VISIBLE_DEVICES");
  const char *want = gs_env("CUDA_VISIBLE_DEVICES");
  if (!k8s_slice || refused[0] || !want || (now && !strcmp(now, want)))
    return false;
  if (why)
    snprintf(why, len,
             "CUDA_VISIBLE_DEVICES was changed to \"%.100s\" after the hook set it to this "
             "container's GPUs (\"%.200s\"): a container runs on its slice's GPUs only (leave it "
             "as set: they are numbered from 0)",
             now ? now : "(unset)", want);
  return true;
}

GS_EXPORT CUresult cuInit(unsigned int flags) {
  static int said;
  const struct gs_real *r = gs_real();

  if (refused[0]) {
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_ACQ_REL))
      gs_log(GS_LOG_ERROR, "this container has no GPU slice: %s (slots %s)", refused,
             secure_getenv("GSLICE_K8S_SLOTS") ? secure_getenv("GSLICE_K8S_SLOTS") : "?");
    return CUDA_ERROR_NO_DEVICE;
  }
  char why[512];
  if (gs_devices_changed(why, sizeof(why))) {
    gs_log(GS_LOG_ERROR, "%s", why);
    return CUDA_ERROR_NO_DEVICE;
  }
  if (!r->cuInit)
    return CUDA_ERROR_NOT_FOUND;
  return r->cuInit(flags);
}
