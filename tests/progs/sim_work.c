/* SPDX-License-Identifier: Apache-2.0 */
/* Device work other than cuLaunchKernel on the sim, timed on the sim's clock (events): memsets
 * and device-to-device copies take bytes / GSLICE_SIM_MEMORY_BANDWIDTH of device time on their
 * stream, in order with kernels; their synchronous forms return without waiting (device memory)
 * or wait (managed memory); copies with the host take none; the legacy launch (cuParamSet*,
 * cuFuncSetBlockShape, cuLaunch*) and cuLaunchCooperativeKernelMultiDevice run like
 * cuLaunchKernel. Run with GSLICE_SIM_MEMORY_BANDWIDTH=1 (1 byte a ns): `sim_work all PTX`;
 * with 0: `sim_work zero PTX` (no device time). Prints ok/FAIL lines, exits 1 on a failure. */
/* The legacy launch is deprecated, and what this program checks. */
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void ok(int cond, const char *what) {
  printf("%s: %s\n", cond ? "ok" : "FAIL", what);
  failures += !cond;
}

#define CK(call)                                                                                   \
  do {                                                                                             \
    CUresult rc_ = (call);                                                                         \
    if (rc_ != CUDA_SUCCESS) {                                                                     \
      printf("FAIL: %s = %d (line %d)\n", #call, (int)rc_, __LINE__);                              \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static CUfunction spin;
static CUevent ev[3];
static const unsigned long long LONG_US = 300000; /* a kernel the host cannot outwait */

static double elapsed_ms(CUevent a, CUevent b) {
  float ms = -1;
  CK(cuEventSynchronize(b));
  CK(cuEventElapsedTime(&ms, a, b));
  return ms;
}

static int near(double got, double want) {
  return got > want - 0.01 && got < want + 0.01;
}

/* A long kernel on s, then ev[0] behind it: work queued after it and ev[1] behind that work time
 * what the work took; ev[0] still pending once the work's call returned says the call did not
 * wait for the stream. */
static void long_kernel(CUstream s) {
  void *params[] = {(void *)&LONG_US};
  CK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
  CK(cuEventRecord(ev[0], s));
}

/* After the work's call returned: whether it waited, and its device time in ms. */
static double work_done(CUstream s, int *waited) {
  *waited = cuEventQuery(ev[0]) == CUDA_SUCCESS;
  CK(cuEventRecord(ev[1], s));
  return elapsed_ms(ev[0], ev[1]);
}

/* Whether the work took want_ms of device time on s, and waited in its call or not; printed
 * when so or when last (a host that stalled the program past the long kernel's end before the
 * call leaves the stream idle, and both readings wrong: such an attempt is made again). */
static int check_work(const char *what, CUstream s, double want_ms, int want_wait, int last) {
  char line[200];
  int waited;
  double ms = work_done(s, &waited);
  /* A call that waited returns after the work ended, by the host's wakeup (21 ms seen on a
   * loaded host): at least the work's time, and well short of the long kernel's. */
  int good = (want_wait ? ms > want_ms - 0.01 && ms < want_ms + 250 : near(ms, want_ms)) &&
             waited == want_wait;
  if (!good && !last)
    return 0;
  snprintf(line, sizeof(line), "%s: %.3f ms of device time (want %.3f), %s the call", what, ms,
           want_ms, waited ? "waited in" : "returned from");
  ok(good, line);
  return 1;
}

/* call (on stream s) behind a long kernel, checked by check_work, up to 3 attempts. */
#define WORK(what, s, want_ms, want_wait, call)                                                    \
  for (int try_ = 0;; try_++) {                                                                    \
    long_kernel(s);                                                                                \
    CK(call);                                                                                      \
    if (check_work(what, s, want_ms, want_wait, try_ == 2))                                        \
      break;                                                                                       \
  }

static void memsets(CUstream s, CUdeviceptr d, CUdeviceptr managed, double scale) {
  WORK("cuMemsetD8Async 1 MB", s, 1.0 * scale, 0, cuMemsetD8Async(d, 1, 1000000, s));
  WORK("cuMemsetD32Async 2 MB", s, 2.0 * scale, 0, cuMemsetD32Async(d, 7, 500000, s));
  WORK("cuMemsetD16 1 MB (legacy stream)", NULL, 1.0 * scale, 0, cuMemsetD16(d, 3, 500000));
  WORK("cuMemsetD8 1 MB of managed memory", NULL, 1.0 * scale, 1, cuMemsetD8(managed, 3, 1000000));
  /* 100 rows of 4000 bytes, 8192 apart */
  WORK("cuMemsetD2D32Async 100 x 4000 B", s, 0.4 * scale, 0,
       cuMemsetD2D32Async(d, 8192, 5, 1000, 100, s));
  WORK("cuMemsetD2D8 1000 x 1000 B (legacy stream)", NULL, 1.0 * scale, 0,
       cuMemsetD2D8(d, 4096, 9, 1000, 1000));
  unsigned char b[3] = {0};
  CK(cuMemcpyDtoH(b, d + 4096 + 999, 2));
  ok(b[0] == 9 && b[1] != 9, "cuMemsetD2D8 wrote its rows, not the pitch's rest");
}

static void copies(CUstream s, CUdeviceptr d, CUdeviceptr d2, double scale) {
  static char host[1000000];
  WORK("cuMemcpyDtoDAsync 1 MB (read and write)", s, 2.0 * scale, 0,
       cuMemcpyDtoDAsync(d2, d, 1000000, s));
  WORK("cuMemcpyDtoD 0.5 MB (legacy stream)", NULL, 1.0 * scale, 0, cuMemcpyDtoD(d2, d, 500000));
  WORK("cuMemcpy device to device 0.5 MB", NULL, 1.0 * scale, 0, cuMemcpy(d2, d, 500000));
  WORK("cuMemcpyAsync device to device 0.25 MB", s, 0.5 * scale, 0,
       cuMemcpyAsync(d2, d, 250000, s));
  WORK("cuMemcpyHtoDAsync 1 MB: no device time", s, 0, 0,
       cuMemcpyHtoDAsync(d, host, sizeof(host), s));
  WORK("cuMemcpy device to host: waits, no device time", NULL, 0, 1,
       cuMemcpy((CUdeviceptr)(uintptr_t)host, d, 1000));
}

/* The per-thread forms, found as a program built with --default-stream per-thread finds them. */
static void per_thread(CUdeviceptr d, double scale) {
  CUresult (*set8)(CUdeviceptr, unsigned char, size_t) = NULL;
  CUresult (*d2d)(CUdeviceptr, CUdeviceptr, size_t) = NULL;
  CK(cuGetProcAddress("cuMemsetD8", (void **)&set8, 12000,
                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
  CK(cuGetProcAddress("cuMemcpyDtoD", (void **)&d2d, 12000,
                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
  WORK("cuMemsetD8_v2_ptds 1 MB (per-thread stream)", CU_STREAM_PER_THREAD, 1.0 * scale, 0,
       set8(d, 1, 1000000));
  WORK("cuMemcpyDtoD_v2_ptds 1 MB (per-thread stream)", CU_STREAM_PER_THREAD, 2.0 * scale, 0,
       d2d(d + 1000000, d, 1000000));
}

static void legacy_launches(CUmodule mod, const char *ptx, CUstream s) {
  CUfunction f, g;
  CUmodule fresh;
  unsigned long long us = 1500;
  CK(cuModuleGetFunction(&f, mod, "spin"));
  CK(cuFuncSetBlockShape(f, 32, 1, 1));
  CK(cuParamSetv(f, 0, &us, sizeof(us)));
  CK(cuParamSetSize(f, sizeof(us)));
  WORK("cuLaunchGridAsync spin(1500)", s, 1.5, 0, cuLaunchGridAsync(f, 4, 2, s));
  WORK("cuLaunchGrid spin(1500) (legacy stream)", NULL, 1.5, 0, cuLaunchGrid(f, 1, 1));
  us = 700; /* the parameters are read at the launch */
  CK(cuParamSetv(f, 0, &us, sizeof(us)));
  WORK("cuLaunch spin(700) (legacy stream)", NULL, 0.7, 0, cuLaunch(f));
  CK(cuModuleLoad(&fresh, ptx));
  CK(cuModuleGetFunction(&g, fresh, "spin"));
  ok(cuLaunch(g) == CUDA_ERROR_INVALID_VALUE, "cuLaunch with no block shape set refused");
  ok(cuFuncSetBlockShape(f, 0, 1, 1) == CUDA_ERROR_INVALID_VALUE, "a zero block dimension refused");
  ok(cuParamSetv(f, 4090, &us, sizeof(us)) == CUDA_ERROR_INVALID_VALUE,
     "parameters past 4 KiB refused");
  void *params[] = {&us};
  CUDA_LAUNCH_PARAMS lp = {.function = f,
                           .gridDimX = 1,
                           .gridDimY = 1,
                           .gridDimZ = 1,
                           .blockDimX = 1,
                           .blockDimY = 1,
                           .blockDimZ = 1,
                           .hStream = s,
                           .kernelParams = params};
  WORK("cuLaunchCooperativeKernelMultiDevice spin(700)", s, 0.7, 0,
       cuLaunchCooperativeKernelMultiDevice(&lp, 1, 0));
  ok(cuLaunchCooperativeKernelMultiDevice(&lp, 1, 0x100) == CUDA_ERROR_INVALID_VALUE,
     "unknown multi-device flags refused");
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "all") && strcmp(argv[1], "zero"))) {
    fprintf(stderr, "usage: sim_work all|zero SPIN_PTX\n");
    return 2;
  }
  double scale = strcmp(argv[1], "zero") ? 1.0 : 0.0;
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUstream s;
  CUdeviceptr d, d2, managed;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuModuleLoad(&mod, argv[2]));
  CK(cuModuleGetFunction(&spin, mod, "spin"));
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 3; i++)
    CK(cuEventCreate(&ev[i], 0));
  CK(cuMemAlloc(&d, 8u << 20));
  CK(cuMemAlloc(&d2, 8u << 20));
  CK(cuMemAllocManaged(&managed, 1u << 20, CU_MEM_ATTACH_GLOBAL));
  memsets(s, d, managed, scale);
  copies(s, d, d2, scale);
  per_thread(d, scale);
  if (scale)
    legacy_launches(mod, argv[2], s);
  CK(cuCtxSynchronize());
  return failures ? 1 : 0;
}
