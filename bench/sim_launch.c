/* SPDX-License-Identifier: Apache-2.0 */
/* The sim's own cost per call: launch + synchronize of a zero-time kernel, a launch
 * alone, an event record, and an alloc + free; median and p99 over many runs. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(call)                                                                                   \
  do {                                                                                             \
    CUresult rc_ = (call);                                                                         \
    if (rc_ != CUDA_SUCCESS) {                                                                     \
      fprintf(stderr, "%s failed: %d\n", #call, (int)rc_);                                         \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *what, double *t, int n) {
  qsort(t, (size_t)n, sizeof(*t), cmp);
  printf("| %-40s | %8d | %10.2f | %10.2f |\n", what, n, t[n / 2] / 1e3, t[n * 99 / 100] / 1e3);
}

static const char ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                          ".visible .entry spin(.param .u64 us)\n{\n ret;\n}\n";

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction f;
  CUstream s;
  CUevent e;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuModuleLoadData(&mod, ptx));
  CK(cuModuleGetFunction(&f, mod, "spin"));
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  double *t = calloc((size_t)n, sizeof(double));
  uint64_t us = 0;
  void *params[] = {&us};
  printf("| %-40s | %8s | %10s | %10s |\n", "operation (simulated device)", "runs", "median us",
         "p99 us");
  printf("|%s|%s|%s|%s|\n", "------------------------------------------", "----------",
         "------------", "------------");
  for (int i = 0; i < n; i++) {
    double a = now_ns();
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CK(cuStreamSynchronize(s));
    t[i] = now_ns() - a;
  }
  report("spin(0) launch + stream synchronize", t, n);
  for (int i = 0; i < n; i++) {
    double a = now_ns();
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    t[i] = now_ns() - a;
  }
  CK(cuStreamSynchronize(s));
  report("spin(0) launch alone", t, n);
  us = 100;
  int m = n / 20 > 100 ? n / 20 : 100;
  for (int i = 0; i < m; i++) {
    double a = now_ns();
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CK(cuStreamSynchronize(s));
    t[i] = now_ns() - a - 100e3;
  }
  report("spin(100us) + sync: wall past 100us", t, m);
  us = 0;
  for (int i = 0; i < n; i++) {
    double a = now_ns();
    CK(cuEventRecord(e, s));
    CK(cuEventSynchronize(e));
    t[i] = now_ns() - a;
  }
  report("event record + synchronize", t, n);
  for (int i = 0; i < n; i++) {
    CUdeviceptr p;
    double a = now_ns();
    CK(cuMemAlloc(&p, 1 << 20));
    CK(cuMemFree(p));
    t[i] = now_ns() - a;
  }
  report("cuMemAlloc(1MiB) + cuMemFree", t, n);
  free(t);
  return 0;
}
