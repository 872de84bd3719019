/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's inside: the one typed table of the real driver's (and NVML's) entry points, and the
 * seams between the hook's files (resolve, memory, nvml, launch, log, config).
 *
 * For compute.c (the compute gate): call the real driver only through gs_real(), e.g.
 *     const struct gs_real *r = gs_real();
 *     if (r->cuEventRecord) r->cuEventRecord(ev, stream);
 * These pointers come from the next libcuda.so.1 (dlopen + dlsym on its handle), so nothing the
 * gate calls goes through the hook's own wrappers. A member is NULL when the driver lacks that
 * entry point.
 *
 * Every file of the hook is built with __CUDA_API_VERSION_INTERNAL (src/hook/CMakeLists.txt):
 * cuda.h then declares every ABI name as itself (cuLaunchKernel and cuLaunchKernel_ptsz,
 * cuMemAlloc_v2, cuCtxCreate_v2/_v3/_v4 ...) and defines no renaming macros, so the wrappers are
 * checked against cuda.h and the table's members are the exported names. */
#pragma once
#include <stdatomic.h>
#ifndef __CUDA_API_VERSION_INTERNAL
#error "the hook is built with -D__CUDA_API_VERSION_INTERNAL (see src/hook/CMakeLists.txt)"
#endif
#include <cuda.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "nvml_min.h"

#define GS_EXPORT __attribute__((visibility("default")))

#include "symbols.h"

struct gs_real {
#define GS_REAL_MEMBER(name) __typeof__(&name) name;
  GS_CUDA_WRAPPED(GS_REAL_MEMBER)
  GS_CUDA_CALLED(GS_REAL_MEMBER)
  GS_NVML_WRAPPED(GS_REAL_MEMBER)
  GS_NVML_CALLED(GS_REAL_MEMBER)
#undef GS_REAL_MEMBER
  void *cuda; /* dlopen handle of the real libcuda.so.1, NULL if none */
  void *nvml; /* dlopen handle of the real libnvidia-ml.so.1, NULL if none */
};

/* The real driver's table, resolved once (thread-safe). Once resolved, one acquire load: every
 * launch reads it twice, and through pthread_once it cost a call each. */
extern const struct gs_real *_Atomic gs_real_table;
const struct gs_real *gs_real_resolve(void);
static inline const struct gs_real *gs_real(void) {
  const struct gs_real *r = atomic_load_explicit(&gs_real_table, memory_order_acquire);
  return __builtin_expect(r != NULL, 1) ? r : gs_real_resolve();
}

/* slice.c: the hook's process-wide setup (configuration, the slice's region). Runs once; a
 * malformed configuration or a refused region stops the program there, with a message. */
void gs_setup(void);

/* log.c: warnings and errors to stderr (or GSLICE_LOG_FILE), debug when GSLICE_LOG_LEVEL=debug.
 * One write per line; never stdout. */
enum gs_log_level { GS_LOG_DEBUG, GS_LOG_INFO, GS_LOG_WARN, GS_LOG_ERROR };
void gs_log(enum gs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* config.c: the environment, parsed once. */
#define GS_CONFIG_MAX_ORDINALS 64
struct gs_config {
  int has_cap_all;
  uint64_t cap_all;
  uint64_t cap_set; /* bit i: cap[i] given for device ordinal i */
  uint64_t cap[GS_CONFIG_MAX_ORDINALS];
  char state_dir[4096];
  int state_dir_default; /* GSLICE_STATE_DIR unset: ${TMPDIR:-/tmp}/gslice-<uid> */
};
/* Parses GSLICE_MEMORY_LIMIT and GSLICE_STATE_DIR from `env` (a getenv-like function). On a
 * malformed value returns -EINVAL and writes a message naming the variable into `err`. */
/* The hook's variables (k8s.c): in a Kubernetes container's slice the ones slice.env set, as
 * read before main (the container may change its environment since), else secure_getenv's. */
char *gs_env(const char *name);
/* In a Kubernetes container's slice, whether CUDA_VISIBLE_DEVICES is no longer what slice.env
 * set (why: what to say); then no real cuInit is to be made. */
bool gs_devices_changed(char *why, size_t len);
int gs_config_parse(char *(*env)(const char *), struct gs_config *ret_config, char *err,
                    size_t err_len);
/* The configured cap for device ordinal `ordinal`: 1 and *ret_cap set, or 0 (no cap). */
int gs_config_cap(const struct gs_config *config, int ordinal, uint64_t *ret_cap);

/* view.c: the slice's view for NVML (nvml.c), by device UUID: cap and usage, 0 if capped.
 * -ENOENT when the slice has no cap on that device. */
int gs_memory_slice_view(const uint8_t uuid[16], uint64_t *ret_cap, uint64_t *ret_used);
