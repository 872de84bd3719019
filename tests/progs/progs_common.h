/* What the spin workloads (compute_spin, compute_ptsz, demo_spin) share: the clock they measure
 * with, where spin.ptx is found, and the setup that loads its `spin` kernel. */
#ifndef GSLICE_PROGS_COMMON_H
#define GSLICE_PROGS_COMMON_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Wall-clock seconds: the measuring window is common to every process of a test. */
static inline double real_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* `ptx` when given, else tests/gpu/spin.ptx under $GSLICE_SRC (or the current directory),
 * written into buf. */
static inline const char *spin_ptx_path(const char *ptx, char *buf, size_t n) {
  if (ptx)
    return ptx;
  const char *src = getenv("GSLICE_SRC");
  snprintf(buf, n, "%s/tests/gpu/spin.ptx", src ? src : ".");
  return buf;
}

/* Device 0's primary context made current and the `spin` kernel of `ptx` loaded; each step goes
 * through the program's own `check`, which reports a failure. 0, or -1 at the first failure. */
static inline int spin_setup(const char *ptx, CUfunction *ret_fn,
                             int (*check)(CUresult r, const char *what)) {
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  if (check(cuInit(0), "cuInit") || check(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
      check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
      check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent") ||
      check(cuModuleLoad(&mod, ptx), "cuModuleLoad") ||
      check(cuModuleGetFunction(ret_fn, mod, "spin"), "cuModuleGetFunction"))
    return -1;
  return 0;
}

#endif
