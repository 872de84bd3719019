/* SPDX-License-Identifier: Apache-2.0 */
/* Bench (a): what the compute gate adds to a launch. Launches zero-time `spin` kernels on one
 * stream and prints the median (fast path) and mean (everything, token round trips included)
 * cost per launch; run it with and without the hook to see the difference. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
  const char *label = argc > 2 ? argv[2] : "?";
  const char *src = getenv("GSLICE_SRC");
  char ptx[4096];
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  unsigned long long zero = 0;
  void *params[] = {&zero};

  snprintf(ptx, sizeof(ptx), "%s/tests/gpu/spin.ptx", src ? src : ".");
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
      cuCtxSetCurrent(ctx) || cuModuleLoad(&mod, ptx) || cuModuleGetFunction(&fn, mod, "spin")) {
    fprintf(stderr, "compute_launch: CUDA set-up failed\n");
    return 1;
  }
  uint64_t *t = malloc(n * sizeof(*t));
  /* Warm up: the first launches set up the gate and take the first token. */
  for (int i = 0; i < 1000; i++)
    cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
  cuCtxSynchronize();
  uint64_t t0 = ns();
  for (unsigned long i = 0; i < n; i++) {
    uint64_t a = ns();
    if (cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS) {
      fprintf(stderr, "compute_launch: launch failed\n");
      return 1;
    }
    t[i] = ns() - a;
    if (i % 10000 == 9999)
      cuCtxSynchronize();
  }
  uint64_t total = ns() - t0;
  qsort(t, n, sizeof(*t), cmp);
  printf("label=%s launches=%lu median_ns=%llu p99_ns=%llu mean_ns=%.0f\n", label, n,
         (unsigned long long)t[n / 2], (unsigned long long)t[n * 99 / 100],
         (double)total / (double)n);
  free(t);
  return 0;
}
