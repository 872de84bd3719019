/* SPDX-License-Identifier: Apache-2.0 */
/* The synchronizes a slice is charged through (integration/compute_sync_kinds.sh): rounds of a
 * launch-bound loop (zero-length kernels, each batch synchronized on its stream: the gate then
 * takes a synchronize of the burst for one that finds its work done, without asking), then one
 * kernel of KERNEL_US and a synchronize of MODE while it runs:
 *   other   another stream's (empty): returns at once, the kernel still running;
 *   event   an event recorded before the kernel (done): the same;
 *   stream  the kernel's stream: waits for it;
 *   ctx     the context: waits for it;
 * then sleeps past the kernel's end, launches once more and synchronizes the kernel's stream. A
 * synchronize that does not wait for the kernel must not mark the burst idle. Prints "done
 * launched_s=S" once the last round's work has run, then sleeps HOLD_S so that the slice's token is
 * released and charged while the test looks. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progs_common.h"

static int check(CUresult r, const char *what) {
  return progs_check("compute_sync_kinds", r, what);
}

static int launch(CUfunction fn, CUstream s, unsigned long long us) {
  void *params[] = {&us};
  return check(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL), "cuLaunchKernel");
}

static int sync_of(const char *mode, CUstream s, CUstream other, CUevent before) {
  if (!strcmp(mode, "other"))
    return check(cuStreamSynchronize(other), "cuStreamSynchronize(other)");
  if (!strcmp(mode, "event"))
    return check(cuEventSynchronize(before), "cuEventSynchronize");
  if (!strcmp(mode, "stream"))
    return check(cuStreamSynchronize(s), "cuStreamSynchronize");
  return check(cuCtxSynchronize(), "cuCtxSynchronize");
}

int main(int argc, char **argv) {
  if (argc != 5 || (strcmp(argv[1], "other") && strcmp(argv[1], "event") &&
                    strcmp(argv[1], "stream") && strcmp(argv[1], "ctx"))) {
    fprintf(stderr, "usage: compute_sync_kinds other|event|stream|ctx ROUNDS KERNEL_US HOLD_S\n");
    return 2;
  }
  const char *mode = argv[1];
  unsigned long rounds = strtoul(argv[2], NULL, 10);
  unsigned long long kernel_us = strtoull(argv[3], NULL, 10);
  unsigned hold_s = (unsigned)strtoul(argv[4], NULL, 10);
  char ptx_default[4096];
  CUfunction fn;
  CUstream s, other;
  CUevent before;

  if (spin_setup(spin_ptx_path(NULL, ptx_default, sizeof(ptx_default)), &fn, check) < 0 ||
      check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
      check(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
      check(cuEventCreate(&before, CU_EVENT_DEFAULT), "cuEventCreate"))
    return 1;
  for (unsigned long r = 0; r < rounds; r++) {
    for (int batch = 0; batch < 50; batch++) {
      for (int k = 0; k < 4; k++)
        if (launch(fn, s, 0))
          return 1;
      if (check(cuStreamSynchronize(s), "cuStreamSynchronize"))
        return 1;
    }
    if (check(cuEventRecord(before, s), "cuEventRecord") || launch(fn, s, kernel_us) ||
        sync_of(mode, s, other, before))
      return 1;
    /* The kernel runs out meanwhile: a synchronize taken for one that found the burst idle would
     * take this time (the kernel's) off the charge at the next launch. */
    usleep((useconds_t)(kernel_us + 5000));
    if (launch(fn, s, 0) || check(cuStreamSynchronize(s), "cuStreamSynchronize"))
      return 1;
  }
  printf("done launched_s=%.4f\n", (double)rounds * (double)kernel_us / 1e6);
  fflush(stdout);
  sleep(hold_s);
  return 0;
}
