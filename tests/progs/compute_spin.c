/* SPDX-License-Identifier: Apache-2.0 */
/* A compute workload for the share tests and benches: batches of `spin` kernels, synchronized,
 * and the device time it got in a measuring window common to every process (absolute clock). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progs_common.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int check(CUresult r, const char *what) {
  return progs_check("compute_spin", r, what);
}

int main(int argc, char **argv) {
  const char *ptx = NULL, *label = "x";
  unsigned long long kernel_us = 2000, batch = 8, pause_us = 0;
  double start = 0, warmup = 1, duration = 10;

  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (!strcmp(a, "--kernel-us"))
      kernel_us = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--batch"))
      batch = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--pause-us"))
      pause_us = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--start"))
      start = strtod(v, NULL);
    else if (!strcmp(a, "--warmup"))
      warmup = strtod(v, NULL);
    else if (!strcmp(a, "--duration"))
      duration = strtod(v, NULL);
    else if (!strcmp(a, "--ptx"))
      ptx = v;
    else if (!strcmp(a, "--label"))
      label = v;
    else {
      fprintf(stderr, "usage: compute_spin [--kernel-us N] [--batch N] [--pause-us N] [--start "
                      "EPOCH_S] [--warmup S] [--duration S] [--ptx FILE] [--label L]\n");
      return 2;
    }
  }
  char ptx_default[4096];
  ptx = spin_ptx_path(ptx, ptx_default, sizeof(ptx_default));
  CUfunction fn;
  if (spin_setup(ptx, &fn, check) < 0)
    return 1;
  if (start == 0)
    start = real_s();
  double m0 = start + warmup, m1 = m0 + duration;
  size_t nwaits = 0, capw = 1024;
  double *waits = malloc(capw * sizeof(double));
  /* Kernels counted in the window. A batch counts by the part of its run inside the window,
   * from the return of its first launch (its kernels queue from then on) to the end of its
   * synchronize, its kernels taken as spread evenly over that: counted whole by where the batch
   * ended, a share came in steps of one batch (20 ms kernels in batches of 8 at 20% of the
   * device: 6 or 7 batches in 5 s, read as 19.2% or 22.4%, and the same phase every run). */
  double counted = 0;
  unsigned long long batches = 0;
  /* The longest time between two batches' ends in the window: a stall anywhere in a batch. */
  double prev_end = 0, gap_max = 0;
  /* Time in launch calls in the window: the gate's waits (for a grant, for pacing, for the
   * previous burst to end). */
  double in_launch = 0;
  /* This process's wait for a CPU over the window (cpu_wait_s): the host's part in its share. */
  double cpu_wait0 = -1, cpu_wait = -1;
  while (real_s() < start)
    usleep(1000);
  for (;;) {
    double t0 = real_s();
    if (t0 >= m1)
      break;
    if (t0 >= m0 && cpu_wait0 < 0)
      cpu_wait0 = cpu_wait_s();
    double queued_from = 0;
    for (unsigned long long k = 0; k < batch; k++) {
      void *params[] = {&kernel_us};
      double a = real_s();
      if (check(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel"))
        return 1;
      if (k == 0)
        queued_from = real_s();
      if (a >= m0 && a < m1)
        in_launch += real_s() - a;
      /* The gate's wait shows as the time a launch call takes. */
      if (k == 0 && a >= m0) {
        if (nwaits == capw)
          waits = realloc(waits, (capw *= 2) * sizeof(double));
        waits[nwaits++] = real_s() - a;
      }
    }
    if (check(cuCtxSynchronize(), "cuCtxSynchronize"))
      return 1;
    double t1 = real_s();
    double in0 = queued_from > m0 ? queued_from : m0, in1 = t1 < m1 ? t1 : m1;
    if (in1 > in0)
      counted += (double)batch * (t1 > queued_from ? (in1 - in0) / (t1 - queued_from) : 1);
    if (t1 >= m0 && t1 < m1) {
      batches++;
      if (prev_end && t1 - prev_end > gap_max)
        gap_max = t1 - prev_end;
      prev_end = t1;
    }
    if (pause_us)
      usleep((useconds_t)pause_us);
  }
  if (cpu_wait0 >= 0 && (cpu_wait = cpu_wait_s()) >= 0)
    cpu_wait -= cpu_wait0;
  qsort(waits, nwaits, sizeof(double), cmp_double);
  double p50 = nwaits ? waits[nwaits / 2] : 0, p99 = nwaits ? waits[(nwaits * 99) / 100] : 0;
  printf("label=%s kernels=%.0f batches=%llu device_s=%.4f share=%.4f wait_p50_us=%.0f "
         "wait_p99_us=%.0f gap_max_ms=%.0f in_launch_s=%.4f cpu_wait_s=%.4f window_s=%.1f\n",
         label, counted, batches, counted * (double)kernel_us / 1e6,
         counted * (double)kernel_us / 1e6 / duration, p50 * 1e6, p99 * 1e6, gap_max * 1e3,
         in_launch, cpu_wait, duration);
  free(waits);
  return 0;
}
