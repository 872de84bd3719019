/* SPDX-License-Identifier: Apache-2.0 */
/* A workload launching the way code built with --default-stream per-thread does: spin kernels
 * through cuLaunchKernel_ptsz on stream 0 from several threads, each synchronizing its own
 * per-thread stream. Prints the device time it got in the measuring window, as compute_spin. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progs_common.h"

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*sync_fn)(CUstream);

static launch_fn launch_ptsz;
static sync_fn sync_ptsz;
static CUcontext ctx;
static CUfunction fn;
static unsigned long long kernel_us = 1000, batch = 8;
static double m0, m1;

static void *worker(void *arg) {
  unsigned long long *counted = arg;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    return (void *)1;
  while (real_s() < m1) {
    for (unsigned long long k = 0; k < batch; k++) {
      void *params[] = {&kernel_us};
      /* NULL in a _ptsz call: this thread's default stream. */
      if (launch_ptsz(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS)
        return (void *)1;
    }
    if (sync_ptsz(NULL) != CUDA_SUCCESS)
      return (void *)1;
    double t = real_s();
    if (t >= m0 && t < m1)
      *counted += batch;
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *ptx = NULL;
  unsigned nthreads = 2;
  double warmup = 1, duration = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--threads"))
      nthreads = (unsigned)strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--kernel-us"))
      kernel_us = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--duration"))
      duration = strtod(argv[i + 1], NULL);
    else if (!strcmp(argv[i], "--warmup"))
      warmup = strtod(argv[i + 1], NULL);
    else if (!strcmp(argv[i], "--ptx"))
      ptx = argv[i + 1];
    else {
      fprintf(stderr, "usage: compute_ptsz [--threads N] [--kernel-us N] [--warmup S] "
                      "[--duration S] [--ptx FILE]\n");
      return 2;
    }
  }
  if (nthreads < 1 || nthreads > 64)
    return 2;
  char ptx_default[4096];
  ptx = spin_ptx_path(ptx, ptx_default, sizeof(ptx_default));
  /* As libcudart finds them: by name, from whatever libcuda.so.1 the process sees first
   * (the hook, when preloaded). */
  launch_ptsz = (launch_fn)dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz");
  sync_ptsz = (sync_fn)dlsym(RTLD_DEFAULT, "cuStreamSynchronize_ptsz");
  CUdevice dev;
  CUmodule mod;
  if (!launch_ptsz || !sync_ptsz || cuInit(0) != CUDA_SUCCESS ||
      cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
      cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoad(&mod, ptx) != CUDA_SUCCESS ||
      cuModuleGetFunction(&fn, mod, "spin") != CUDA_SUCCESS) {
    fprintf(stderr, "compute_ptsz: setup failed\n");
    return 1;
  }
  m0 = real_s() + warmup;
  m1 = m0 + duration;
  pthread_t t[64];
  unsigned long long counted[64] = {0}, total = 0;
  for (unsigned i = 0; i < nthreads; i++)
    if (pthread_create(&t[i], NULL, worker, &counted[i]) != 0)
      return 1;
  /* The process's wait for a CPU over the window (cpu_wait_s), as compute_spin reports it. */
  for (double d; (d = m0 - real_s()) > 0;)
    usleep((useconds_t)(d > 0.01 ? 1e4 : d * 1e6));
  double cpu_wait0 = cpu_wait_s(), cpu_wait = -1;
  /* Read again at the window's end, while the workers still live (an exited thread's figures
   * go with it). */
  for (double d; (d = m1 - real_s()) > 0;)
    usleep((useconds_t)(d > 0.01 ? 1e4 : d * 1e6));
  if (cpu_wait0 >= 0 && (cpu_wait = cpu_wait_s()) >= 0)
    cpu_wait -= cpu_wait0;
  int bad = 0;
  for (unsigned i = 0; i < nthreads; i++) {
    void *rv;
    pthread_join(t[i], &rv);
    bad |= rv != NULL;
    total += counted[i];
  }
  if (bad) {
    fprintf(stderr, "compute_ptsz: a launch or synchronize failed\n");
    return 1;
  }
  printf("label=ptsz threads=%u kernels=%llu share=%.4f cpu_wait_s=%.4f window_s=%.1f\n", nthreads,
         total, (double)total * (double)kernel_us / 1e6 / duration, cpu_wait, duration);
  return 0;
}
