/* SPDX-License-Identifier: Apache-2.0 */
/* A workload with two contexts on one GPU (the fifth attack run's G5, compute_ctx2.sh). Each
 * round: one 1 us kernel on the legacy stream of the primary context A, then BATCH kernels of
 * KERNEL_US in a second context B (cuCtxCreate) on B's legacy stream ("b"), or on a stream of B
 * ("bs"), or the same rounds all in A ("a"); B synchronized, then A. NULL is every context's own
 * legacy stream: a gate that knows a burst's streams by handle alone took B's kernels for A's
 * burst's and charged them nothing. Prints device_s and share as compute_spin does.
 * Usage: compute_ctx2 a|b|bs [--start EPOCH] [--warmup S] [--duration S] [--kernel-us U]
 *        [--batch N] [--label L] */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progs_common.h"

static int check(CUresult r, const char *what) {
  return progs_check("compute_ctx2", r, what);
}

struct ctx2 {
  CUcontext a, b;
  CUfunction fa, fb;
  CUstream sb; /* B's kernels' stream: NULL (B's legacy stream) but in mode bs */
};

/* A's context and kernel (the primary), and B's: a context of its own in modes b and bs. */
static int ctx2_setup(const char *mode, struct ctx2 *x) {
  char ptx[4096];
  CUdevice dev;
  CUmodule mb;

  memset(x, 0, sizeof(*x));
  if (spin_setup(spin_ptx_path(NULL, ptx, sizeof(ptx)), &x->fa, check) < 0 ||
      check(cuCtxGetCurrent(&x->a), "cuCtxGetCurrent") ||
      check(cuDeviceGet(&dev, 0), "cuDeviceGet"))
    return -1;
  if (!strcmp(mode, "a")) {
    x->b = x->a;
    x->fb = x->fa;
    return 0;
  }
#if CUDA_VERSION >= 13000 /* cuCtxCreate is cuCtxCreate_v4 (creation parameters) */
  CUresult rc = cuCtxCreate(&x->b, NULL, 0, dev);
#else
  CUresult rc = cuCtxCreate(&x->b, 0, dev);
#endif
  if (check(rc, "cuCtxCreate") || check(cuModuleLoad(&mb, ptx), "cuModuleLoad") ||
      check(cuModuleGetFunction(&x->fb, mb, "spin"), "cuModuleGetFunction"))
    return -1;
  if (!strcmp(mode, "bs") && check(cuStreamCreate(&x->sb, 0), "cuStreamCreate"))
    return -1;
  return check(cuCtxSetCurrent(x->a), "cuCtxSetCurrent");
}

/* One round: A's short kernel, B's batch, B synchronized, then A. */
static int ctx2_round(const struct ctx2 *x, unsigned long long kus, int batch) {
  unsigned long long one = 1;
  void *p1[] = {&one}, *pk[] = {&kus};

  if (check(cuLaunchKernel(x->fa, 1, 1, 1, 1, 1, 1, 0, NULL, p1, NULL), "launch in A") ||
      check(cuCtxSetCurrent(x->b), "cuCtxSetCurrent B"))
    return -1;
  for (int i = 0; i < batch; i++)
    if (check(cuLaunchKernel(x->fb, 1, 1, 1, 1, 1, 1, 0, x->sb, pk, NULL), "launch in B"))
      return -1;
  if (check(cuCtxSynchronize(), "cuCtxSynchronize B") ||
      check(cuCtxSetCurrent(x->a), "cuCtxSetCurrent A") ||
      check(cuCtxSynchronize(), "cuCtxSynchronize A"))
    return -1;
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "", *label = "x";
  double start = 0, warmup = 1, duration = 5, counted = 0, cpu_wait0 = -1, cpu_wait = -1;
  unsigned long long kus = 2000;
  int batch = 8;
  struct ctx2 x;

  if (strcmp(mode, "a") && strcmp(mode, "b") && strcmp(mode, "bs")) {
    fprintf(stderr, "usage: compute_ctx2 a|b|bs [--start EPOCH] [--warmup S] [--duration S] "
                    "[--kernel-us U] [--batch N] [--label L]\n");
    return 2;
  }
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--start"))
      start = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup"))
      warmup = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--duration"))
      duration = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--kernel-us"))
      kus = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--batch"))
      batch = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--label"))
      label = argv[i + 1];
  }
  if (ctx2_setup(mode, &x) < 0)
    return 1;
  if (start == 0)
    start = real_s();
  while (real_s() < start)
    usleep(1000);
  double m0 = start + warmup, m1 = m0 + duration;
  while (real_s() < m1) {
    double t0 = real_s();
    if (cpu_wait0 < 0 && t0 >= m0)
      cpu_wait0 = cpu_wait_s();
    if (ctx2_round(&x, kus, batch) < 0)
      return 1;
    double t1 = real_s(), in0 = t0 > m0 ? t0 : m0, in1 = t1 < m1 ? t1 : m1;
    if (in1 > in0)
      counted += (double)batch * (in1 - in0) / (t1 - t0);
  }
  if (cpu_wait0 >= 0 && (cpu_wait = cpu_wait_s()) >= 0)
    cpu_wait -= cpu_wait0;
  double dev_s = counted * (double)kus / 1e6;
  printf("label=%s mode=%s kernels=%.0f device_s=%.4f share=%.4f cpu_wait_s=%.4f window_s=%.1f\n",
         label, mode, counted, dev_s, dev_s / duration, cpu_wait, duration);
  return 0;
}
