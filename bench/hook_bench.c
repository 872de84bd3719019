/* SPDX-License-Identifier: Apache-2.0 */
/* Times cuMemAlloc + cuMemFree pairs, one sample per pair (ns), for bench/hook_alloc.sh: run it
 * with and without the hook to get the hook's added cost. Linked with -lcuda like any program.
 * usage: hook_bench PAIRS SIZE OUT_FILE [START_FILE]  (waits for START_FILE to exist, so several
 * processes start measuring together) */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "size.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
  uint64_t size;
  if (argc < 4 || gs_size_parse(argv[2], &size) < 0) {
    fprintf(stderr, "usage: hook_bench PAIRS SIZE OUT_FILE [START_FILE]\n");
    return 2;
  }
  long pairs = atol(argv[1]);
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    fprintf(stderr, "hook_bench: no CUDA device\n");
    return 1;
  }
  uint64_t *ns = calloc((size_t)pairs, sizeof(*ns));
  CUdeviceptr p;
  for (int i = 0; i < 200; i++) /* warm up: first-touch paths, caches */
    if (cuMemAlloc(&p, size) == CUDA_SUCCESS)
      cuMemFree(p);
  while (argc > 4 && access(argv[4], F_OK) != 0)
    usleep(1000);
  for (long i = 0; i < pairs; i++) {
    uint64_t t0 = now_ns();
    CUresult a = cuMemAlloc(&p, size);
    CUresult f = a == CUDA_SUCCESS ? cuMemFree(p) : a;
    ns[i] = now_ns() - t0;
    if (a != CUDA_SUCCESS || f != CUDA_SUCCESS) {
      fprintf(stderr, "hook_bench: alloc/free failed (%d/%d)\n", a, f);
      return 1;
    }
  }
  FILE *out = fopen(argv[3], "w");
  if (!out)
    return 1;
  for (long i = 0; i < pairs; i++)
    fprintf(out, "%llu\n", (unsigned long long)ns[i]);
  fclose(out);
  return 0;
}
