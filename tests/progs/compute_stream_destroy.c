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
 * makes and destroys streams, another uses whichever is the latest in every way a stream is used
 * (queries, records, synchronizes, waits, launches, async copies and memsets, host functions,
 * graph launches and uploads, stream-ordered allocations, the device query, and a capture in each
 * mode with work in it). Each call is CUDA_SUCCESS, NOT_READY or INVALID_HANDLE (a capture's
 * calls also ILLEGAL_STATE and STREAM_CAPTURE_INVALIDATED: the stream it began on destroyed, or
 * recycled as a new one, meanwhile), never a crash. */
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
    for (double t = real_s() + 20e-6; real_s() < t;)
      ; /* live a while: the other thread's calls find it live and then, some, destroyed */
    if (cuStreamDestroy(s) != CUDA_SUCCESS)
      return (void *)1;
    for (double t = real_s() + 20e-6; real_s() < t;)
      ; /* the handle stays a destroyed one a while (the next create takes its place) */
  }
  return NULL;
}

struct race {
  CUevent e;
  CUstream own; /* the racer's own: frees what a destroyed stream's cuMemFreeAsync refused */
  CUgraphExec exec;
  CUdeviceptr dev;
  char host[256];
  unsigned long long calls, invalid, host_calls;
  int bad;
};

static void race_host_fn(void *p) {
  ++*(unsigned long long *)p;
}

/* One call's answer: SUCCESS, NOT_READY, INVALID_HANDLE, or (capture) one of the capture errors. */
static void race_answer(struct race *r, const char *what, CUresult got, int capture) {
  r->calls++;
  r->invalid += got == CUDA_ERROR_INVALID_HANDLE;
  if (got == CUDA_SUCCESS || got == CUDA_ERROR_NOT_READY || got == CUDA_ERROR_INVALID_HANDLE ||
      (capture &&
       (got == CUDA_ERROR_ILLEGAL_STATE || got == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)))
    return;
  fprintf(stderr, "compute_stream_destroy: %s on a stream being destroyed: %d\n", what, (int)got);
  r->bad = -1;
}

/* The stream's work: what a capture records, and what runs outside one. */
static void race_work(struct race *r, CUstream s, int capture) {
  void *params[] = {&kernel_us};
  race_answer(r, "cuLaunchKernel", cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL),
              capture);
  race_answer(r, "cuMemsetD8Async", cuMemsetD8Async(r->dev, 7, sizeof(r->host), s), capture);
  race_answer(r, "cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(r->dev, r->host, sizeof(r->host), s),
              capture);
  race_answer(r, "cuLaunchHostFunc", cuLaunchHostFunc(s, race_host_fn, &r->host_calls), capture);
  race_answer(r, "cuGraphLaunch", cuGraphLaunch(r->exec, s), capture);
  CUstreamCaptureStatus st;
  cuuint64_t id;
  race_answer(r, "cuStreamIsCapturing", cuStreamIsCapturing(s, &st), capture);
  race_answer(r, "cuStreamGetCaptureInfo",
              cuStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL), capture);
}

/* Everything once on s: outside a capture, then inside one begun in mode. */
static void race_round(struct race *r, CUstream s, CUstreamCaptureMode mode) {
  CUresult q[] = {cuStreamQuery(s), cuEventRecord(r->e, s), cuStreamSynchronize(s),
                  cuStreamWaitEvent(s, r->e, 0)};
  for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
    race_answer(r, "query, record, synchronize or wait", q[i], 0);
  race_work(r, s, 0);
  race_answer(r, "cuGraphUpload", cuGraphUpload(r->exec, s), 0);
  CUdevice d;
  race_answer(r, "cuStreamGetDevice", cuStreamGetDevice(s, &d), 0);
  CUdeviceptr p = 0;
  CUresult got = cuMemAllocAsync(&p, 4096, s);
  race_answer(r, "cuMemAllocAsync", got, 0);
  if (got == CUDA_SUCCESS && (got = cuMemFreeAsync(p, s)) != CUDA_SUCCESS)
    cuMemFreeAsync(p, r->own);
  race_answer(r, "cuMemFreeAsync", got, 0);
  race_answer(r, "cuStreamBeginCapture", cuStreamBeginCapture(s, mode), 1);
  race_work(r, s, 1);
  CUgraph g = NULL;
  race_answer(r, "cuStreamEndCapture", cuStreamEndCapture(s, &g), 1);
  if (g)
    cuGraphDestroy(g);
}

/* An executable graph of one kernel, for the race's graph launches. */
static int race_graph(struct race *r) {
  CUgraph g;
  if (check(cuStreamBeginCapture(r->own, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture") ||
      check(launch(r->own, 1), "launch into the capture") ||
      check(cuStreamEndCapture(r->own, &g), "cuStreamEndCapture"))
    return -1;
  int rc = check(cuGraphInstantiate(&r->exec, g, 0), "cuGraphInstantiate");
  cuGraphDestroy(g);
  return rc;
}

static int sim_race(double seconds) {
  static struct race r;
  pthread_t t;
  unsigned long long us = kernel_us;
  kernel_us = 2; /* short kernels: the destroys come often, not throttled by a queue of work */
  if (check(cuEventCreate(&r.e, CU_EVENT_DEFAULT), "cuEventCreate") ||
      check(cuStreamCreate(&r.own, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
      check(cuMemAlloc(&r.dev, sizeof(r.host)), "cuMemAlloc") || race_graph(&r) ||
      pthread_create(&t, NULL, race_destroyer, NULL) != 0)
    return -1;
  static const CUstreamCaptureMode modes[] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
                                              CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                              CU_STREAM_CAPTURE_MODE_RELAXED};
  unsigned long long rounds = 0;
  for (double end = real_s() + seconds; real_s() < end && !r.bad;) {
    CUstream s = race_stream;
    if (s)
      race_round(&r, s, modes[rounds++ % 3]);
  }
  race_stop = 1;
  void *rv;
  pthread_join(t, &rv);
  kernel_us = us;
  printf("sim race: %llu rounds, %llu calls on streams being destroyed, %llu INVALID_HANDLE, "
         "%llu answered otherwise, %llu host functions run, no crash\n",
         rounds, r.calls, r.invalid, r.calls - r.invalid, r.host_calls);
  int rc = check(cuStreamSynchronize(r.own), "cuStreamSynchronize") ||
           check(cuGraphExecDestroy(r.exec), "cuGraphExecDestroy") ||
           check(cuMemFree(r.dev), "cuMemFree") || check(cuStreamDestroy(r.own), "cuStreamDestroy");
  return check(cuEventDestroy(r.e), "cuEventDestroy") || rc || r.bad || rv != NULL ? -1 : 0;
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
