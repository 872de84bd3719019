/* SPDX-License-Identifier: Apache-2.0 */
/* The demo's workload: loads spin.ptx, launches `spin` kernels in batches for a while
 * (optionally after grabbing device memory in chunks until its cap says no), and says
 * how much device time it got. Linked to libcuda.so.1 like any CUDA program. */
#include <cuda.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "progs_common.h"
#include "size.h"

static volatile sig_atomic_t stop, late_now;
static void on_term(int sig) {
  (void)sig;
  stop = 1;
}
static void on_usr1(int sig) {
  (void)sig;
  late_now = 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return 0;
  const char *name = "?";
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
    name = "?";
  fprintf(stderr, "demo_spin: %s failed: %s\n", what, name);
  return -1;
}

static void usage(void) {
  fprintf(stderr, "usage: demo_spin [--ptx FILE] [--kernel-us N] [--batch N] [--seconds S]\n"
                  "                 [--alloc SIZE] [--chunk SIZE] [--late-alloc SIZE --late-at S]\n"
                  "  --late-alloc: one more allocation S seconds into the run (or on SIGUSR1),\n"
                  "  its result printed\n");
}

int main(int argc, char **argv) {
  const char *ptx = NULL;
  unsigned long long kernel_us = 1000, batch = 4;
  double seconds = 10;
  uint64_t alloc = 0, chunk = 16ull << 20, late = 0;
  double late_at = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      usage();
      return 2;
    }
    i++;
    if (!strcmp(a, "--ptx"))
      ptx = v;
    else if (!strcmp(a, "--kernel-us"))
      kernel_us = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--batch"))
      batch = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--seconds"))
      seconds = strtod(v, NULL);
    else if (!strcmp(a, "--alloc") && gs_size_parse(v, &alloc) == 0)
      ;
    else if (!strcmp(a, "--chunk") && gs_size_parse(v, &chunk) == 0 && chunk)
      ;
    else if (!strcmp(a, "--late-alloc") && gs_size_parse(v, &late) == 0 && late)
      ;
    else if (!strcmp(a, "--late-at"))
      late_at = strtod(v, NULL);
    else {
      usage();
      return 2;
    }
  }
  if (!ptx || !kernel_us || !batch) {
    usage();
    return 2;
  }
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGUSR1, on_usr1);

  CUfunction fn;
  if (spin_setup(ptx, &fn, check) < 0)
    return 1;

  /* Take memory chunk by chunk: the slice's cap decides where it stops. */
  uint64_t got = 0;
  int oom = 0;
  CUdeviceptr held[4096];
  size_t nheld = 0;
  while (got < alloc && nheld < sizeof(held) / sizeof(held[0])) {
    uint64_t want = alloc - got < chunk ? alloc - got : chunk;
    CUresult r = cuMemAlloc(&held[nheld], want);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      oom = 1;
      break;
    }
    if (check(r, "cuMemAlloc"))
      return 1;
    nheld++;
    got += want;
  }
  if (alloc) {
    char a[24], g[24];
    gs_size_format(alloc, a, sizeof(a));
    gs_size_format(got, g, sizeof(g));
    printf("demo_spin: asked %s, got %s%s\n", a, g, oom ? " (out of memory: cap reached)" : "");
    fflush(stdout);
  }

  unsigned long long kernels = 0;
  double start = now_s();
  while (!stop && now_s() - start < seconds) {
    for (unsigned long long b = 0; b < batch; b++) {
      void *params[] = {&kernel_us};
      if (check(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel"))
        return 1;
    }
    if (check(cuCtxSynchronize(), "cuCtxSynchronize"))
      return 1;
    kernels += batch;
    if (late && (late_now || (late_at >= 0 && now_s() - start >= late_at))) {
      CUdeviceptr p;
      char l[24];
      CUresult r = cuMemAlloc(&p, late);
      gs_size_format(late, l, sizeof(l));
      printf("demo_spin: late allocation of %s: %s\n", l,
             r == CUDA_SUCCESS               ? "ok"
             : r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory"
                                             : "failed");
      fflush(stdout);
      if (r == CUDA_SUCCESS && nheld < sizeof(held) / sizeof(held[0]))
        held[nheld++] = p;
      late_now = 0;
      late_at = -1;
    }
  }
  double took = now_s() - start;
  printf("demo_spin: %llu kernels of %lluus in %.1fs: %.1f%% of the device\n", kernels, kernel_us,
         took, took > 0 ? 100.0 * (double)kernels * (double)kernel_us / 1e6 / took : 0);
  for (size_t i = 0; i < nheld; i++)
    cuMemFree(held[i]);
  return 0;
}
