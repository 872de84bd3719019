/* SPDX-License-Identifier: Apache-2.0 */
/* The CDI spec writer (cdi.h): specs of gslice-node's devices in --cdi-dir, and the edits that
 * hold a container to its slice. */
#include "cdi.h"

#include <errno.h>
#include <stdio.h>

#include "node.h"

int cdi_kind_check(const char *kind) {
  (void)kind;
  return -ENOSYS;
}

int cdi_name_check(const char *name) {
  (void)name;
  return -ENOSYS;
}

int cdi_qualified(const char *kind, const char *name, char *out, size_t len) {
  int w = snprintf(out, len, "%s=%s", kind, name);
  return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

int cdi_spec_write(const char *dir, const char *file, const char *kind,
                   const struct cdi_device *devs, size_t ndevs, const struct cdi_edits *common,
                   char *err, size_t err_len) {
  (void)dir, (void)file, (void)kind, (void)devs, (void)ndevs, (void)common;
  snprintf(err, err_len, "CDI: not yet");
  return -ENOSYS;
}

int cdi_spec_remove(const char *dir, const char *file, char *err, size_t err_len) {
  (void)dir, (void)file;
  snprintf(err, err_len, "CDI: not yet");
  return -ENOSYS;
}

int cdi_gpu_minor(const char *gpus_info_dir, const char *uuid, unsigned *ret_minor) {
  (void)gpus_info_dir, (void)uuid, (void)ret_minor;
  return -ENOENT;
}

int cdi_slice_edits_at(const struct node *n, const char *dev_root, const char *gpus_info_dir,
                       const char *slice_dir, const char *region, const char *slots,
                       const uint32_t *gpu_index, size_t ngpus, struct cdi_slice_storage *st,
                       struct cdi_edits *out, char *err, size_t err_len) {
  (void)n, (void)dev_root, (void)gpus_info_dir, (void)slice_dir, (void)region, (void)slots;
  (void)gpu_index, (void)ngpus, (void)st, (void)out;
  snprintf(err, err_len, "CDI: not yet");
  return -ENOSYS;
}

int cdi_slice_edits(const struct node *n, const char *slice_dir, const char *region,
                    const char *slots, const uint32_t *gpu_index, size_t ngpus,
                    struct cdi_slice_storage *st, struct cdi_edits *out, char *err,
                    size_t err_len) {
  return cdi_slice_edits_at(n, "/dev", "/proc/driver/nvidia/gpus", slice_dir, region, slots,
                            gpu_index, ngpus, st, out, err, err_len);
}
