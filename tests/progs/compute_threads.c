/* SPDX-License-Identifier: Apache-2.0 */
/* Launching threads that come and go, more of them at once than the gate has slots (256): waves
 * of THREADS threads, each launching LAUNCHES short spin kernels into the legacy stream in
 * batches of eight, each batch synchronized, and exiting. The gate counts the launches in flight
 * as those entered less those each thread counted done in its own slot (src/hook/compute.c): a
 * slot lost, or shared by two writers, would make a close wait forever, or let one go on while a
 * launch is still on its way. Prints "launched N", after a pause long enough for the gate to hand
 * back its last burst and report it, and stays HOLD seconds more (its slice is asked about then).
 * usage: compute_threads [--waves W] [--threads T] [--launches L] [--kernel-us U] [--hold S]
 *        [--ptx F] */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progs_common.h"

static CUcontext ctx;
static CUfunction fn;
static unsigned long long kernel_us = 20;
static unsigned launches = 64;
static _Atomic unsigned long long launched;
static _Atomic int failed;

static int check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return 0;
  fprintf(stderr, "compute_threads: %s: %d\n", what, (int)r);
  return -1;
}

static void *worker(void *arg) {
  (void)arg;
  if (check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent")) {
    failed = 1;
    return NULL;
  }
  for (unsigned i = 0; i < launches; i++) {
    void *params[] = {&kernel_us};
    if (check(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel")) {
      failed = 1;
      return NULL;
    }
    launched++;
    if (i % 8 == 7 && check(cuStreamSynchronize(NULL), "cuStreamSynchronize")) {
      failed = 1;
      return NULL;
    }
  }
  return NULL;
}

/* One wave: `threads` threads at once, all joined. */
static int wave(unsigned threads) {
  pthread_t *t = calloc(threads, sizeof(*t));
  unsigned made = 0;
  if (!t)
    return -1;
  for (; made < threads; made++)
    if (pthread_create(&t[made], NULL, worker, NULL) != 0)
      break;
  for (unsigned i = 0; i < made; i++)
    pthread_join(t[i], NULL);
  free(t);
  if (made < threads)
    fprintf(stderr, "compute_threads: only %u of %u threads started\n", made, threads);
  return made == threads && !failed ? 0 : -1;
}

int main(int argc, char **argv) {
  unsigned waves = 3, threads = 300, hold = 0;
  const char *ptx = NULL;
  char buf[4096];
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--waves"))
      waves = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads"))
      threads = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--launches"))
      launches = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--kernel-us"))
      kernel_us = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--hold"))
      hold = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--ptx"))
      ptx = argv[i + 1];
    else {
      fprintf(stderr, "compute_threads: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (spin_setup(spin_ptx_path(ptx, buf, sizeof(buf)), &fn, check) ||
      check(cuCtxGetCurrent(&ctx), "cuCtxGetCurrent"))
    return 1;
  for (unsigned w = 0; w < waves; w++)
    if (wave(threads) < 0)
      return 1;
  usleep(500000); /* the gate's idle look hands the last burst back and reports its launches */
  printf("launched %llu\n", (unsigned long long)launched);
  fflush(stdout);
  sleep(hold); /* while the slice is there to be asked about */
  return 0;
}
