/* SPDX-License-Identifier: Apache-2.0 */
/* CUDA graphs under the compute gate, as PyTorch (torch.cuda.graph) and vLLM use them.
 *   compute_graph capture MODE [--replays N] [--per-thread]: warm-up on a side stream, a capture
 *     there in MODE (global, thread-local, relaxed) while another thread launches and
 *     synchronizes on its own stream (--per-thread: its per-thread default stream, which the
 *     gate cannot time with events), instantiate, N replays (1000); every call must succeed, the
 *     capture must end with its graph, and the replays must take their device time.
 *   compute_graph share [--nodes K] [--kernel-us U] [--replays N] [--start EPOCH_S] [--warmup S]
 *     [--duration S] [--label L]: a graph of K spin(U) kernels captured once, then replayed in
 *     batches of N, synchronized; prints the device time it got in the window like compute_spin
 *     (label= kernels= device_s= share= cpu_wait_s= window_s=). */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progs_common.h"

static CUfunction spin;

static int check(CUresult r, const char *what) {
  const char *name = "?";
  if (r == CUDA_SUCCESS)
    return 0;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
    name = "?";
  fprintf(stderr, "compute_graph: %s: %s (%d)\n", what, name, (int)r);
  return 1;
}
#define CK(call)                                                                                   \
  do {                                                                                             \
    if (check((call), #call))                                                                      \
      return 1;                                                                                    \
  } while (0)

static CUresult launch(uint64_t us, CUstream s) {
  void *params[] = {&us};
  return cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}

/* Captures `nodes` spin(us) kernels on s in `mode`; between two captured launches `between`
 * runs (the pattern's other thread). */
static int capture(CUstream s, CUstreamCaptureMode mode, int nodes, uint64_t us, CUgraph *ret,
                   void (*between)(void)) {
  CK(cuStreamBeginCapture(s, mode));
  for (int i = 0; i < nodes; i++) {
    CK(launch(us, s));
    if (between)
      between();
  }
  CK(cuStreamEndCapture(s, ret));
  return 0;
}

/* ---- capture: the pattern, in one mode ---- */

struct worker {
  CUcontext ctx;
  int per_thread;
  int stop, rounds;
  CUresult rc;
};
static struct worker w;

static void *worker_thread(void *arg) {
  CUstream ws;
  (void)arg;
  cuCtxSetCurrent(w.ctx);
  if (w.per_thread)
    ws = CU_STREAM_PER_THREAD;
  else
    w.rc = cuStreamCreate(&ws, CU_STREAM_DEFAULT);
  while (w.rc == CUDA_SUCCESS && !__atomic_load_n(&w.stop, __ATOMIC_RELAXED)) {
    CUresult rc = launch(200, ws);
    if (rc == CUDA_SUCCESS)
      rc = cuStreamSynchronize(ws);
    __atomic_store_n(&w.rc, rc, __ATOMIC_RELAXED);
    __atomic_add_fetch(&w.rounds, 1, __ATOMIC_RELAXED);
  }
  if (!w.per_thread)
    cuStreamDestroy(ws);
  return NULL;
}

/* Two rounds of the other thread, and time for the hook's helper to look (its tick is 0.5 ms). */
static void let_others_run(void) {
  int r = __atomic_load_n(&w.rounds, __ATOMIC_RELAXED);
  while (__atomic_load_n(&w.rounds, __ATOMIC_RELAXED) < r + 2 &&
         __atomic_load_n(&w.rc, __ATOMIC_RELAXED) == CUDA_SUCCESS)
    usleep(100);
  usleep(2000);
}

static int run_capture(const char *mode_name, int replays) {
  static const char *names[] = {"global", "thread-local", "relaxed"};
  static const CUstreamCaptureMode modes[] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
                                              CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                              CU_STREAM_CAPTURE_MODE_RELAXED};
  int m = -1;
  for (int i = 0; i < 3; i++)
    if (!strcmp(mode_name, names[i]))
      m = i;
  if (m < 0) {
    fprintf(stderr, "compute_graph: unknown mode %s\n", mode_name);
    return 2;
  }
  const int nodes = 10;
  const uint64_t us = 100;
  CUstream side;
  CK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 3; i++) /* warm-up, as torch.cuda.graph asks */
    CK(launch(us, side));
  CK(cuStreamSynchronize(side));
  CK(cuCtxGetCurrent(&w.ctx));
  pthread_t t;
  pthread_create(&t, NULL, worker_thread, NULL);
  while (__atomic_load_n(&w.rounds, __ATOMIC_RELAXED) < 3 &&
         __atomic_load_n(&w.rc, __ATOMIC_RELAXED) == CUDA_SUCCESS)
    usleep(100);
  /* Work of the side stream queued when the capture begins: the gate's events are on it. */
  CK(launch(us, side));
  CUgraph g;
  int bad = capture(side, modes[m], nodes, us, &g, let_others_run);
  __atomic_store_n(&w.stop, 1, __ATOMIC_RELAXED);
  pthread_join(t, NULL);
  if (bad)
    return 1;
  CK(w.rc);
  CUstreamCaptureStatus st;
  CK(cuStreamIsCapturing(side, &st));
  if (st != CU_STREAM_CAPTURE_STATUS_NONE)
    return check(CUDA_ERROR_ILLEGAL_STATE, "side stream still capturing");
  CUgraphExec x;
  CK(cuGraphInstantiate(&x, g, 0));
  CK(cuStreamSynchronize(side));
  double t0 = real_s();
  for (int i = 0; i < replays; i++)
    CK(cuGraphLaunch(x, side));
  CK(cuStreamSynchronize(side));
  double wall = real_s() - t0, want = (double)replays * nodes * (double)us / 1e6;
  printf("mode=%s worker=%s rounds=%d replays=%d wall_s=%.4f graph_s=%.4f\n", names[m],
         w.per_thread ? "per-thread" : "created", w.rounds, replays, wall, want);
  if (wall < want * 0.999)
    return check(CUDA_ERROR_UNKNOWN, "replays faster than their kernels: not all ran");
  CK(cuGraphExecDestroy(x));
  CK(cuGraphDestroy(g));
  CK(cuStreamDestroy(side));
  return 0;
}

/* ---- share: replays only, measured like compute_spin ---- */

static int run_share(int argc, char **argv) {
  const char *label = "g";
  unsigned long long nodes = 10, kernel_us = 200, replays = 4;
  double start = 0, warmup = 1, duration = 6;
  for (int i = 2; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (!strcmp(a, "--nodes"))
      nodes = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--kernel-us"))
      kernel_us = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--replays"))
      replays = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--start"))
      start = strtod(v, NULL);
    else if (!strcmp(a, "--warmup"))
      warmup = strtod(v, NULL);
    else if (!strcmp(a, "--duration"))
      duration = strtod(v, NULL);
    else if (!strcmp(a, "--label"))
      label = v;
    else
      return 2;
  }
  CUstream s;
  CUgraph g;
  CUgraphExec x;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  if (capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL, (int)nodes, kernel_us, &g, NULL))
    return 1;
  CK(cuGraphInstantiate(&x, g, 0));
  if (start == 0)
    start = real_s();
  double m0 = start + warmup, m1 = m0 + duration, counted = 0, cpu_wait0 = -1, cpu_wait = -1;
  while (real_s() < start)
    usleep(1000);
  /* A batch counts by the part of its run inside the window (compute_spin). */
  for (;;) {
    double t0 = real_s(), queued_from = 0;
    if (t0 >= m1)
      break;
    if (t0 >= m0 && cpu_wait0 < 0)
      cpu_wait0 = cpu_wait_s();
    for (unsigned long long k = 0; k < replays; k++) {
      CK(cuGraphLaunch(x, s));
      if (k == 0)
        queued_from = real_s();
    }
    CK(cuStreamSynchronize(s));
    double t1 = real_s(), in0 = queued_from > m0 ? queued_from : m0, in1 = t1 < m1 ? t1 : m1;
    if (in1 > in0)
      counted +=
          (double)(replays * nodes) * (t1 > queued_from ? (in1 - in0) / (t1 - queued_from) : 1);
  }
  if (cpu_wait0 >= 0 && (cpu_wait = cpu_wait_s()) >= 0)
    cpu_wait -= cpu_wait0;
  printf("label=%s kernels=%.0f device_s=%.4f share=%.4f cpu_wait_s=%.4f window_s=%.1f\n", label,
         counted, counted * (double)kernel_us / 1e6, counted * (double)kernel_us / 1e6 / duration,
         cpu_wait, duration);
  CK(cuGraphExecDestroy(x));
  CK(cuGraphDestroy(g));
  CK(cuStreamDestroy(s));
  return 0;
}

int main(int argc, char **argv) {
  char buf[4096];
  if (argc < 2 || (strcmp(argv[1], "capture") && strcmp(argv[1], "share"))) {
    fprintf(stderr, "usage: compute_graph capture MODE [--replays N] [--per-thread] | "
                    "compute_graph share "
                    "[--nodes K] [--kernel-us U] [--replays N] [--start EPOCH_S] [--warmup S] "
                    "[--duration S] [--label L]\n");
    return 2;
  }
  if (spin_setup(spin_ptx_path(NULL, buf, sizeof(buf)), &spin, check) < 0)
    return 1;
  if (!strcmp(argv[1], "share"))
    return run_share(argc, argv);
  if (argc < 3)
    return 2;
  int replays = 1000;
  for (int i = 3; i < argc; i++)
    if (!strcmp(argv[i], "--replays") && i + 1 < argc)
      replays = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--per-thread"))
      w.per_thread = 1;
    else
      return 2;
  return run_capture(argv[2], replays);
}
