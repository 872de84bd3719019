/* SPDX-License-Identifier: Apache-2.0 */
/* CDI (Container Device Interface) specs gslice-node writes into --cdi-dir, so that a runtime
 * with CDI on (containerd >= 1.7, CRI-O >= 1.23) gives a container its slice: the hook, the
 * slice's directory and region, gsliced's hook socket and the GPUs' device nodes. Used by DRA's
 * NodePrepareResources (kind NODE_CDI_KIND_CLAIM) and by the device plugin's Allocate with
 * --allocate-cdi (kind NODE_CDI_KIND_SLOT). The spec is what the CDI library
 * (tags.cncf.io/container-device-interface) reads strictly: only its fields, the lowest
 * cdiVersion they need, names checked by its rules before anything is written. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct node;

struct cdi_mount {
  const char *host, *ctr;
  bool ro;
};

struct cdi_edits {
  const char *const *env; /* "KEY=VALUE" */
  size_t nenv;
  const struct cdi_mount *mounts;
  size_t nmounts;
  const char *const *dev_nodes; /* host path == container path */
  size_t ndev;
};

struct cdi_device {
  const char *name;
  struct cdi_edits edits;
};

/* The cdiVersion of a spec that needs no newer field (the earliest the library takes). */
#define CDI_VERSION_MIN "0.3.0"
#define CDI_NAME_MAX 128 /* our own bound on a device name (CDI sets none) */

/* Writes, atomically (gs_file_write_atomic, 0644), <dir>/<file>.json: a CDI spec of `kind`
 * ("vendor/class", e.g. NODE_CDI_KIND_CLAIM) with these devices and top-level edits (common may
 * be NULL), at the lowest cdiVersion its fields need. The kind, the device names, the file name
 * and every path are checked (CDI's rules; paths absolute) before anything is written. dir is
 * made (0755) when missing; a symlink as dir's last component or as the spec's name is refused
 * (-ELOOP). 0 or -errno with err. */
int cdi_spec_write(const char *dir, const char *file, const char *kind,
                   const struct cdi_device *devs, size_t ndevs, const struct cdi_edits *common,
                   char *err, size_t err_len);

/* Removes <dir>/<file>.json; absent (the file or dir) is success. */
int cdi_spec_remove(const char *dir, const char *file, char *err, size_t err_len);

/* "kind=name" into out: 0, -EINVAL for a kind or name CDI refuses, -ENAMETOOLONG. */
int cdi_qualified(const char *kind, const char *name, char *out, size_t len);

/* CDI's rules, for callers that check before they build names: 0 or -EINVAL. */
int cdi_kind_check(const char *kind);
int cdi_name_check(const char *name);

/* The storage cdi_slice_edits fills: the strings and arrays a struct cdi_edits points into. */
#define CDI_SLICE_MAX_ENV 10
#define CDI_SLICE_MAX_MOUNTS 5
#define CDI_SLICE_MAX_DEV (3 + GS_MAX_GPUS)
struct cdi_slice_storage {
  const char *env[CDI_SLICE_MAX_ENV];
  struct cdi_mount mounts[CDI_SLICE_MAX_MOUNTS];
  const char *dev[CDI_SLICE_MAX_DEV];
  size_t used;
  char pool[6 * PATH_MAX + 4096];
};

/* The edits a container needs to be held to a slice and reach the GPU:
 * - mounts: the hook at NODE_CTR_HOOK and ld.so.preload at NODE_CTR_PRELOAD (ro), slice_dir at
 *   NODE_CTR_SLICE_DIR (ro), region at NODE_CTR_REGION (rw), gsliced's hook socket directory at
 *   NODE_CTR_DAEMON_DIR (ro) — the same as Allocate's mounts;
 * - env: GSLICE_K8S_SLOTS=<slots> (what the hook names the container's share by, and what makes
 *   it read slice_dir/slice.env: the slots, or "claim-<uid>" in DRA), GSLICE_K8S_DIR,
 *   GSLICE_STATE_DIR, GSLICE_SOCKET, and with --nvidia-visible-devices (not ""),
 *   NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES=compute,utility — the same as
 *   Allocate's; CUDA_VISIBLE_DEVICES stays slice.env's (the hook sets it);
 * - device nodes: /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools and /dev/nvidia<minor>
 *   of the given GPUs (indexes into n->gpus, by gpu index), each only when it exists on the
 *   host. A GPU's minor is the driver's own, read from /proc/driver/nvidia/gpus/<bus>/information
 *   by the GPU's UUID (the NVML index is not the minor in general).
 * The driver's user-space libraries are not in these edits: the NVIDIA container toolkit gives
 * them (its runtime with NVIDIA_VISIBLE_DEVICES, or its own CDI spec).
 * Filled into caller storage `st` (the strings live there; it is large: not on a small stack).
 * 0 or -errno with err (-ENODEV: a GPU index gsliced does not have). */
int cdi_slice_edits(const struct node *n, const char *slice_dir, const char *region,
                    const char *slots, const uint32_t *gpu_index, size_t ngpus,
                    struct cdi_slice_storage *st, struct cdi_edits *out, char *err, size_t err_len);

/* The same, with the roots of /dev and /proc/driver/nvidia/gpus given (tests). */
int cdi_slice_edits_at(const struct node *n, const char *dev_root, const char *gpus_info_dir,
                       const char *slice_dir, const char *region, const char *slots,
                       const uint32_t *gpu_index, size_t ngpus, struct cdi_slice_storage *st,
                       struct cdi_edits *out, char *err, size_t err_len);

/* The minor of the GPU whose UUID is uuid, from the driver's information files in
 * gpus_info_dir (<bus>/information: "GPU UUID:" and "Device Minor:" lines). 0, -ENOENT when no
 * file names that UUID (or the directory is absent: no NVIDIA driver), -errno. */
int cdi_gpu_minor(const char *gpus_info_dir, const char *uuid, unsigned *ret_minor);

/* --allocate-cdi: Allocate's spec for the container whose first slot is key: kind
 * NODE_CDI_KIND_SLOT, one device named key, in <cdi-dir>/CDI_SLOT_FILE_PREFIX<key>.json (the
 * library's transient name, vendor-class_id). Written again (replaced) at each Allocate of the
 * key, so an allocation the slots went on from never leaves its spec behind. */
#define CDI_SLOT_FILE_PREFIX "gslice.io-slot_"
int cdi_slot_file(const char *key, char *out, size_t len);

struct node_rec;
/* When the slots of r are free again (the kubelet no longer lists their container, or its pod
 * finished; node_reconcile): removes r's spec, unless Allocate gave the key out again since
 * (r->superseded: the spec is the new container's). Nothing without --allocate-cdi. Logs a
 * failure (the next removal tries nothing again: the file is overwritten at the key's next
 * Allocate). With n->lock held, as Allocate writes the spec. */
void cdi_slot_spec_drop(const struct node *n, const struct node_rec *r);
