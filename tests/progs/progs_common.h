/* SPDX-License-Identifier: Apache-2.0 */
/* What the spin workloads (compute_spin, compute_ptsz, demo_spin) share: the clock they measure
 * with, where spin.ptx is found, and the setup that loads its `spin` kernel. */
#ifndef GSLICE_PROGS_COMMON_H
#define GSLICE_PROGS_COMMON_H

#include <cuda.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Wall-clock seconds: the measuring window is common to every process of a test. */
static inline double real_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds this process's threads have waited for a CPU while runnable (the second field of
 * /proc/self/task/N/schedstat, summed), or -1 where the kernel does not say. The difference over
 * a measuring window is how much of it a loaded host took from the process: a share measured
 * on the wall clock is only the scheduler's doing when that is small. */
static inline double cpu_wait_s(void) {
  DIR *d = opendir("/proc/self/task");
  double sum = 0;
  int n = 0;
  if (!d)
    return -1;
  for (struct dirent *e; (e = readdir(d));) {
    char path[300];
    unsigned long long run, wait;
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", e->d_name);
    FILE *f = fopen(path, "re");
    if (!f)
      continue;
    if (fscanf(f, "%llu %llu", &run, &wait) == 2) {
      sum += (double)wait / 1e9;
      n++;
    }
    fclose(f);
  }
  closedir(d);
  return n ? sum : -1;
}

/* A driver call's result: 0, or -1 once stderr says which call failed and how (the error's
 * name), after the program's name. */
static inline int progs_check(const char *prog, CUresult r, const char *what) {
  const char *name = "?";
  if (r == CUDA_SUCCESS)
    return 0;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
    name = "?";
  fprintf(stderr, "%s: %s: %s\n", prog, what, name);
  return -1;
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
