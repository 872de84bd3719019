/* SPDX-License-Identifier: Apache-2.0 */
/* Finding the real driver and handing out wrappers: the typed real table, dlsym and
 * cuGetProcAddress interception. */
#include "hook.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct gs_real real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
/* Set while this thread resolves: dlsym calls made by the libraries being loaded pass through.
 * Initial-exec: reading it never calls __tls_get_addr, which a sanitizer runtime intercepts and
 * may not have set up yet when its own initialization calls dlsym. */
static __thread int resolving __attribute__((tls_model("initial-exec")));

typedef void *(*dlsym_fn)(void *, const char *);

/* The dlsym path runs for every dlsym in the process, including a sanitizer runtime's own
 * lookups before it is initialized: no instrumentation there (it would touch shadow memory that
 * is not mapped yet). */
#define GS_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined")))
static dlsym_fn real_dlsym_ptr;

GS_UNINSTRUMENTED static dlsym_fn real_dlsym(void) {
  dlsym_fn fn = __atomic_load_n(&real_dlsym_ptr, __ATOMIC_ACQUIRE);
  if (!fn) {
    /* dlvsym is not intercepted; the 2.34 version is the one programs link today. */
    fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!fn)
      fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n(&real_dlsym_ptr, fn, __ATOMIC_RELEASE);
  }
  return fn;
}

struct wrapped {
  const char *name;
  void *wrapper;
  void **real;
};

static struct wrapped wrapped[] = {
#define GS_WRAPPED_ENTRY(name) {#name, (void *)name, (void **)&real.name},
    GS_CUDA_WRAPPED(GS_WRAPPED_ENTRY) GS_NVML_WRAPPED(GS_WRAPPED_ENTRY)
#undef GS_WRAPPED_ENTRY
};
#define N_WRAPPED (sizeof(wrapped) / sizeof(wrapped[0]))

static void resolve(void) {
  resolving = 1;
  dlsym_fn sym = real_dlsym();
  /* The next libcuda.so.1 / libnvidia-ml.so.1 on the library path: the sim's in tests, the GPU's
   * in production. dlsym on these handles searches those libraries, never this one. */
  real.cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  real.nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!real.cuda)
    gs_log(GS_LOG_DEBUG, "no real libcuda.so.1: %s", dlerror());
  if (real.cuda && sym) {
#define GS_RESOLVE_CUDA(name) real.name = (__typeof__(real.name))sym(real.cuda, #name);
    GS_CUDA_WRAPPED(GS_RESOLVE_CUDA)
    GS_CUDA_CALLED(GS_RESOLVE_CUDA)
#undef GS_RESOLVE_CUDA
  }
  if (real.nvml && sym) {
#define GS_RESOLVE_NVML(name) real.name = (__typeof__(real.name))sym(real.nvml, #name);
    GS_NVML_WRAPPED(GS_RESOLVE_NVML)
    GS_NVML_CALLED(GS_RESOLVE_NVML)
#undef GS_RESOLVE_NVML
  }
  resolving = 0;
  atomic_store_explicit(&gs_real_table, &real, memory_order_release);
}

const struct gs_real *_Atomic gs_real_table;

const struct gs_real *gs_real_resolve(void) {
  pthread_once(&real_once, resolve);
  return &real;
}

/* The wrapper standing for a real entry point's address, or NULL if it is not one the hook wraps.
 */
static void *gs_wrapper_for(const void *real_fn) {
  if (!real_fn)
    return NULL;
  gs_real();
  for (size_t i = 0; i < N_WRAPPED; i++)
    if (*wrapped[i].real == real_fn)
      return wrapped[i].wrapper;
  return NULL;
}

static int is_wrapper(const void *fn) {
  for (size_t i = 0; i < N_WRAPPED; i++)
    if (wrapped[i].wrapper == fn)
      return 1;
  return 0;
}

/* cuXxx and nvmlXxx only: "cuserid" is not the driver's. */
GS_UNINSTRUMENTED static int is_driver_name(const char *name) {
  if (!name)
    return 0;
  if (name[0] == 'c' && name[1] == 'u')
    return name[2] >= 'A' && name[2] <= 'Z';
  return strncmp(name, "nvml", 4) == 0 && name[4] >= 'A' && name[4] <= 'Z';
}

/* Whether `symbol` is the base name of an entry point the hook wraps (symbol, symbol_vN,
 * symbol_ptsz ...). */
static int wraps_name(const char *symbol);

/* Whether `p` is an entry point of a CUDA driver other than the real one the hook holds: a second
 * copy of libcuda (dlmopen into a new namespace, or the same file under another path), whose
 * allocations nothing here would count. An object is a driver if it defines cuGetProcAddress
 * itself or is named libcuda.so*. */
static int from_other_driver(const void *p) {
  Dl_info info;
  struct link_map *obj = NULL, *real_obj = NULL, *def = NULL;
  if (!real.cuda || !dladdr1(p, &info, (void **)&obj, RTLD_DL_LINKMAP) || !obj ||
      dlinfo(real.cuda, RTLD_DI_LINKMAP, &real_obj) != 0 || obj == real_obj)
    return 0;
  const char *base = obj->l_name ? strrchr(obj->l_name, '/') : NULL;
  base = base ? base + 1 : obj->l_name;
  if (base && strncmp(base, "libcuda.so", 10) == 0)
    return 1;
  /* glibc's handles are link maps: look in that object alone (not its dependencies). */
  void *gpa = real_dlsym()(obj, "cuGetProcAddress");
  return gpa && dladdr1(gpa, &info, (void **)&def, RTLD_DL_LINKMAP) && def == obj;
}

/* glibc's dlsym takes its caller from its return address (RTLD_NEXT searches after the
 * caller's object), so every name that is not the driver's leaves by a tail call: the real dlsym
 * then returns to, and judges by, the program's own call. Driver names found with RTLD_NEXT are
 * searched after this library, which is where the real driver is. */
GS_EXPORT GS_UNINSTRUMENTED __attribute__((optimize("optimize-sibling-calls"))) void *
dlsym(void *handle, const char *name) {
  dlsym_fn sym = real_dlsym();
  if (!sym)
    return NULL;
  if (resolving || !is_driver_name(name))
    return sym(handle, name);
  gs_setup();
  void *p = sym(handle, name);
  void *w = gs_wrapper_for(p);
  if (w)
    return w;
  if (p && !is_wrapper(p) && wraps_name(name) && from_other_driver(p)) {
    gs_log(GS_LOG_WARN,
           "refusing %s from a second copy of the CUDA driver: its memory would not be held to "
           "the slice",
           name);
    return NULL;
  }
  return p;
}

static int wraps_name(const char *symbol) {
  size_t len = strlen(symbol);
  for (size_t i = 0; i < N_WRAPPED; i++) {
    const char *rest = wrapped[i].name + len;
    if (strncmp(wrapped[i].name, symbol, len) == 0 &&
        (rest[0] == 0 || strncmp(rest, "_v", 2) == 0 || strcmp(rest, "_ptsz") == 0))
      return 1;
  }
  return 0;
}

/* The address the driver returns is matched against the real addresses of the wrapped ABI
 * variants, so the version map (which variant a cudaVersion and flags select) stays the
 * driver's. An address the hook does not know is left alone, and said: guessing between _v2 and
 * a 32-bit original would be worse than not wrapping. */
static void swap_for_wrapper(const char *symbol, void **pfn) {
  if (!pfn || !*pfn || is_wrapper(*pfn))
    return;
  void *w = gs_wrapper_for(*pfn);
  if (w)
    *pfn = w;
  else if (symbol && wraps_name(symbol))
    gs_log(GS_LOG_WARN,
           "cuGetProcAddress(%s) returned an address gslice does not know; calls through it are "
           "not held to the slice",
           symbol);
}

GS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
  gs_setup();
  const struct gs_real *r = gs_real();
  if (!r->cuGetProcAddress_v2)
    return CUDA_ERROR_NOT_FOUND;
  CUresult rc = r->cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, status);
  if (rc == CUDA_SUCCESS)
    swap_for_wrapper(symbol, pfn);
  return rc;
}

GS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags) {
  gs_setup();
  const struct gs_real *r = gs_real();
  if (!r->cuGetProcAddress)
    return CUDA_ERROR_NOT_FOUND;
  CUresult rc = r->cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS)
    swap_for_wrapper(symbol, pfn);
  return rc;
}
