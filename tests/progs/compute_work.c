/* SPDX-License-Identifier: Apache-2.0 */
/* A workload of device work that is not cuLaunchKernel, for the share tests: batches of memsets,
 * device-to-device copies or legacy launches, synchronized, and the device time it got in a
 * measuring window common to every process (absolute clock), counted as compute_spin counts its
 * kernels. An operation's device time is what the sim gives it: --bytes / --gbps for a memset,
 * twice that for a copy (GSLICE_SIM_MEMORY_BANDWIDTH=--gbps), --kernel-us for a legacy launch.
 * Prints compute_spin's line (label, kernels = operations, device_s, share, cpu_wait_s...). */
#define CUDA_ENABLE_DEPRECATED 1 /* the legacy launch */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progs_common.h"

static int check(CUresult r, const char *what) {
  return progs_check("compute_work", r, what);
}

enum mode { M_MEMSET_ASYNC, M_MEMSET, M_D2D_ASYNC, M_D2D, M_MEMCPY, M_LEGACY, M_CAPTURE };
static const char *const modes[] = {"memset-async", "memset", "d2d-async", "d2d",
                                    "memcpy",       "legacy", "capture"};

struct work {
  enum mode mode;
  CUfunction fn;
  CUstream stream;
  CUdeviceptr a, b;
  size_t bytes;
  CUgraphExec exec; /* capture: a memset and a copy captured, replayed as one operation */
};

static CUresult one(const struct work *w) {
  switch (w->mode) {
  case M_MEMSET_ASYNC: return cuMemsetD32Async(w->a, 0x5a5a5a5a, w->bytes / 4, w->stream);
  case M_MEMSET: return cuMemsetD32(w->a, 0x5a5a5a5a, w->bytes / 4);
  case M_D2D_ASYNC: return cuMemcpyDtoDAsync(w->b, w->a, w->bytes, w->stream);
  case M_D2D: return cuMemcpyDtoD(w->b, w->a, w->bytes);
  case M_MEMCPY: return cuMemcpy(w->b, w->a, w->bytes);
  case M_LEGACY: return cuLaunchGridAsync(w->fn, 1, 1, w->stream);
  case M_CAPTURE: return cuGraphLaunch(w->exec, w->stream);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static int setup(struct work *w, const char *ptx, unsigned long long kernel_us) {
  if (spin_setup(ptx, &w->fn, check) < 0 ||
      check(cuStreamCreate(&w->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
      check(cuMemAlloc(&w->a, w->bytes), "cuMemAlloc") ||
      check(cuMemAlloc(&w->b, w->bytes), "cuMemAlloc"))
    return -1;
  if (w->mode == M_LEGACY &&
      (check(cuFuncSetBlockShape(w->fn, 1, 1, 1), "cuFuncSetBlockShape") ||
       check(cuParamSetv(w->fn, 0, &kernel_us, sizeof(kernel_us)), "cuParamSetv") ||
       check(cuParamSetSize(w->fn, sizeof(kernel_us)), "cuParamSetSize")))
    return -1;
  if (w->mode == M_CAPTURE) {
    /* Under the gate, work into a capturing stream becomes nodes: nothing of the gate's may go
     * into the capture (an event recorded there fails the capture). */
    CUgraph g;
    if (check(cuStreamBeginCapture(w->stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "BeginCapture") ||
        check(cuMemsetD32Async(w->a, 1, w->bytes / 4, w->stream), "captured cuMemsetD32Async") ||
        check(cuMemcpyDtoDAsync(w->b, w->a, w->bytes, w->stream), "captured cuMemcpyDtoDAsync") ||
        check(cuMemcpyAsync(w->b, w->a, w->bytes, w->stream), "captured cuMemcpyAsync") ||
        check(cuStreamEndCapture(w->stream, &g), "cuStreamEndCapture") ||
        check(cuGraphInstantiate(&w->exec, g, 0), "cuGraphInstantiate"))
      return -1;
  }
  return 0;
}

struct opts {
  const char *ptx, *label, *mode;
  unsigned long long batch, bytes, gbps, kernel_us;
  double start, warmup, duration;
};

/* 0, or -1 on an unknown option. */
static int parse(int argc, char **argv, struct opts *o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (!strcmp(a, "--mode"))
      o->mode = v;
    else if (!strcmp(a, "--bytes"))
      o->bytes = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--gbps"))
      o->gbps = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--kernel-us"))
      o->kernel_us = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--batch"))
      o->batch = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--start"))
      o->start = strtod(v, NULL);
    else if (!strcmp(a, "--warmup"))
      o->warmup = strtod(v, NULL);
    else if (!strcmp(a, "--duration"))
      o->duration = strtod(v, NULL);
    else if (!strcmp(a, "--ptx"))
      o->ptx = v;
    else if (!strcmp(a, "--label"))
      o->label = v;
    else
      return -1;
  }
  return argc % 2 ? 0 : -1;
}

int main(int argc, char **argv) {
  struct opts o = {NULL, "x", "memset-async", 8, 1000000, 1, 1000, 0, 1, 10};
  if (parse(argc, argv, &o) < 0)
    goto usage;
  const char *ptx = o.ptx, *label = o.label, *mode = o.mode;
  unsigned long long batch = o.batch, bytes = o.bytes, gbps = o.gbps, kernel_us = o.kernel_us;
  double start = o.start, warmup = o.warmup, duration = o.duration;
  struct work w = {.bytes = bytes};
  unsigned m = 0;
  while (m < sizeof(modes) / sizeof(modes[0]) && strcmp(modes[m], mode))
    m++;
  if (m == sizeof(modes) / sizeof(modes[0]) || !gbps || bytes < 4)
    goto usage;
  w.mode = (enum mode)m;
  /* A graph's memsets and copies take no device time on the sim (docs/sim.md). */
  double op_s = w.mode == M_CAPTURE                              ? 0
                : w.mode == M_LEGACY                             ? (double)kernel_us / 1e6
                : w.mode == M_MEMSET || w.mode == M_MEMSET_ASYNC ? (double)bytes / gbps / 1e9
                                                                 : 2.0 * (double)bytes / gbps / 1e9;
  char ptx_default[4096];
  if (setup(&w, spin_ptx_path(ptx, ptx_default, sizeof(ptx_default)), kernel_us) < 0)
    return 1;
  if (start == 0)
    start = real_s();
  double m0 = start + warmup, m1 = m0 + duration, counted = 0, cpu_wait0 = -1, cpu_wait = -1;
  unsigned long long batches = 0;
  while (real_s() < start)
    usleep(1000);
  for (;;) {
    double t0 = real_s(), queued_from = 0;
    if (t0 >= m1)
      break;
    if (t0 >= m0 && cpu_wait0 < 0)
      cpu_wait0 = cpu_wait_s();
    for (unsigned long long k = 0; k < batch; k++) {
      if (check(one(&w), modes[w.mode]))
        return 1;
      if (k == 0)
        queued_from = real_s();
    }
    if (check(cuCtxSynchronize(), "cuCtxSynchronize"))
      return 1;
    /* The batch counts by the part of its run inside the window (compute_spin). */
    double t1 = real_s(), in0 = queued_from > m0 ? queued_from : m0, in1 = t1 < m1 ? t1 : m1;
    if (in1 > in0)
      counted += (double)batch * (t1 > queued_from ? (in1 - in0) / (t1 - queued_from) : 1);
    batches += t1 >= m0 && t1 < m1;
  }
  if (cpu_wait0 >= 0 && (cpu_wait = cpu_wait_s()) >= 0)
    cpu_wait -= cpu_wait0;
  printf("label=%s mode=%s kernels=%.0f batches=%llu device_s=%.4f share=%.4f cpu_wait_s=%.4f "
         "window_s=%.1f\n",
         label, modes[w.mode], counted, batches, counted * op_s, counted * op_s / duration,
         cpu_wait, duration);
  return 0;
usage:
  fprintf(stderr,
          "usage: compute_work [--mode memset-async|memset|d2d-async|d2d|memcpy|legacy|capture] "
          "[--bytes N] [--gbps N] [--kernel-us N] [--batch N] [--start EPOCH_S] "
          "[--warmup S] [--duration S] [--ptx FILE] [--label L]\n");
  return 2;
}
