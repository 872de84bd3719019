/* SPDX-License-Identifier: Apache-2.0 */
/* Streams destroyed while the gate times a burst on them: launcher threads each launch spin
 * kernels into their own stream and synchronize it, while one thread, round after round, makes a
 * stream, launches into it, destroys it (its work still queued on even rounds) and launches on a
 * stream of its own for a while before the next: the destroyed stream was one of the burst's.
 * First (one thread, nothing else made meanwhile) the driver's handle checks on a destroyed
 * stream: query, synchronize, event record and wait are CUDA_ERROR_INVALID_HANDLE. Prints the
 * device time all threads' kernels took in the window (share), as compute_ptsz. */
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
static unsigned long long kernel_us = 200;
static double m0, m1;

static int check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return 0;
  fprintf(stderr, "compute_stream_destroy: %s: %d\n", what, (int)r);
  return -1;
}

static CUresult launch(CUstream s, unsigned n) {
  for (unsigned k = 0; k < n; k++) {
    void *params[] = {&kernel_us};
    CUresult r = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
    if (r != CUDA_SUCCESS)
      return r;
  }
  return CUDA_SUCCESS;
}

/* The driver's answer for a destroyed stream, never a crash. */
static int destroyed_handle_checks(void) {
  CUstream s;
  CUevent e;
  if (check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
      check(cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate") ||
      check(launch(s, 2), "launch") || check(cuStreamDestroy(s), "cuStreamDestroy"))
    return -1;
  struct {
    const char *what;
    CUresult got;
  } c[] = {{"cuStreamQuery", cuStreamQuery(s)},
           {"cuStreamSynchronize", cuStreamSynchronize(s)},
           {"cuEventRecord", cuEventRecord(e, s)},
           {"cuStreamWaitEvent", cuStreamWaitEvent(s, e, 0)},
           {"cuStreamDestroy again", cuStreamDestroy(s)}};
  int bad = 0;
  for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
    if (c[i].got != CUDA_ERROR_INVALID_HANDLE) {
      fprintf(stderr, "compute_stream_destroy: %s of a destroyed stream: %d, want %d\n", c[i].what,
              (int)c[i].got, (int)CUDA_ERROR_INVALID_HANDLE);
      bad = -1;
    }
  printf("destroyed stream: query, synchronize, record, wait, destroy: %s\n",
         bad ? "WRONG" : "CUDA_ERROR_INVALID_HANDLE");
  return check(cuEventDestroy(e), "cuEventDestroy") || bad;
}

/* The sim's checks against a destroy in another thread (--sim-race: undefined on a real driver,
 * which may free the handle; the sim recycles it, and must look at it under its lock): one thread
 * makes and destroys streams, another queries, records into and synchronizes whichever is the
 * latest. Each call is CUDA_SUCCESS, NOT_READY or INVALID_HANDLE, never a crash. */
static _Atomic(CUstream) race_stream;
static _Atomic int race_stop;

static void *race_destroyer(void *arg) {
  (void)arg;
  cuCtxSetCurrent(ctx);
  while (!race_stop) {
    CUstream s;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS || launch(s, 1) != CUDA_SUCCESS)
      return (void *)1;
    race_stream = s;
    if (cuStreamDestroy(s) != CUDA_SUCCESS)
      return (void *)1;
    for (double t = real_s() + 20e-6; real_s() < t;)
      ; /* the handle stays a destroyed one a while (the next create takes its place) */
  }
  return NULL;
}

static int sim_race(double seconds) {
  CUevent e;
  pthread_t t;
  unsigned long long calls = 0, invalid = 0;
  if (check(cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate") ||
      pthread_create(&t, NULL, race_destroyer, NULL) != 0)
    return -1;
  int bad = 0;
  for (double end = real_s() + seconds; real_s() < end && !bad;) {
    CUstream s = race_stream;
    if (!s)
      continue;
    CUresult r[] = {cuStreamQuery(s), cuEventRecord(e, s), cuStreamSynchronize(s),
                    cuStreamWaitEvent(s, e, 0)};
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
      calls++;
      invalid += r[i] == CUDA_ERROR_INVALID_HANDLE;
      if (r[i] != CUDA_SUCCESS && r[i] != CUDA_ERROR_NOT_READY &&
          r[i] != CUDA_ERROR_INVALID_HANDLE) {
        fprintf(stderr, "compute_stream_destroy: call %zu on a stream being destroyed: %d\n", i,
                (int)r[i]);
        bad = -1;
      }
    }
  }
  race_stop = 1;
  void *rv;
  pthread_join(t, &rv);
  printf("sim race: %llu calls on streams being destroyed, %llu INVALID_HANDLE, no crash\n", calls,
         invalid);
  return check(cuEventDestroy(e), "cuEventDestroy") || bad || rv != NULL ? -1 : 0;
}

struct launcher {
  pthread_t t;
  unsigned long long counted;
  int failed;
};

static void *launcher(void *arg) {
  struct launcher *l = arg;
  CUstream s;
  if (check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent") ||
      check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate")) {
    l->failed = 1;
    return NULL;
  }
  while (real_s() < m1) {
    if (check(launch(s, 4), "launch") || check(cuStreamSynchronize(s), "cuStreamSynchronize")) {
      l->failed = 1;
      break;
    }
    double t = real_s();
    if (t >= m0 && t < m1)
      l->counted += 4;
  }
  if (check(cuStreamDestroy(s), "cuStreamDestroy"))
    l->failed = 1;
  return NULL;
}

/* One round: a stream made, launched into, destroyed; then this thread's own stream for a while
 * (helper looks, others' synchronizes and closes come by with the destroyed one in the burst). */
struct destroyer {
  unsigned long long rounds, counted;
};

static void *destroyer(void *arg) {
  struct destroyer *dd = arg;
  unsigned long long *rounds = &dd->rounds;
  CUstream own;
  if (check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent") ||
      check(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return (void *)1;
  for (; real_s() < m1; ++*rounds) {
    CUstream s;
    if (check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
        check(launch(s, 2), "launch") ||
        (*rounds % 2 && check(cuStreamSynchronize(s), "cuStreamSynchronize")) ||
        check(cuStreamDestroy(s), "cuStreamDestroy"))
      return (void *)1;
    for (int k = 0; k < 4; k++)
      if (check(launch(own, 2), "launch") || check(cuStreamSynchronize(own), "cuStreamSynchronize"))
        return (void *)1;
    double t = real_s();
    if (t >= m0 && t < m1)
      dd->counted += 10;
  }
  return check(cuStreamDestroy(own), "cuStreamDestroy") ? (void *)1 : NULL;
}

int main(int argc, char **argv) {
  const char *ptx = NULL;
  unsigned nthreads = 3;
  double warmup = 0.5, duration = 3, race = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--threads"))
      nthreads = (unsigned)strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--kernel-us"))
      kernel_us = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--duration"))
      duration = strtod(argv[i + 1], NULL);
    else if (!strcmp(argv[i], "--warmup"))
      warmup = strtod(argv[i + 1], NULL);
    else if (!strcmp(argv[i], "--ptx"))
      ptx = argv[i + 1];
    else if (!strcmp(argv[i], "--sim-race"))
      race = strtod(argv[i + 1], NULL);
    else
      nthreads = 0;
  }
  if (nthreads < 1 || nthreads > 64 || argc % 2 == 0) {
    fprintf(stderr, "usage: compute_stream_destroy [--threads 1-64 (launchers)] [--kernel-us N] "
                    "[--warmup S] [--duration S] [--ptx FILE] [--sim-race S]\n");
    return 2;
  }
  char ptx_default[4096];
  ptx = spin_ptx_path(ptx, ptx_default, sizeof(ptx_default));
  if (spin_setup(ptx, &fn, check) || check(cuCtxGetCurrent(&ctx), "cuCtxGetCurrent") ||
      destroyed_handle_checks() || (race > 0 && sim_race(race)))
    return 1;
  m0 = real_s() + warmup;
  m1 = m0 + duration;
  struct launcher l[64];
  memset(l, 0, sizeof(l));
  struct destroyer dd = {0, 0};
  unsigned long long total = 0;
  pthread_t d;
  for (unsigned i = 0; i < nthreads; i++)
    if (pthread_create(&l[i].t, NULL, launcher, &l[i]) != 0)
      return 1;
  if (pthread_create(&d, NULL, destroyer, &dd) != 0)
    return 1;
  void *rv;
  pthread_join(d, &rv);
  int bad = rv != NULL;
  total += dd.counted;
  for (unsigned i = 0; i < nthreads; i++) {
    pthread_join(l[i].t, NULL);
    bad |= l[i].failed;
    total += l[i].counted;
  }
  if (bad) {
    fprintf(stderr, "compute_stream_destroy: a call failed\n");
    return 1;
  }
  printf("label=stream_destroy threads=%u rounds=%llu kernels=%llu share=%.4f window_s=%.1f\n",
         nthreads, dd.rounds, total, (double)total * (double)kernel_us / 1e6 / duration, duration);
  return 0;
}
