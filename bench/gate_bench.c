/* SPDX-License-Identifier: Apache-2.0 */
/* The compute gate's cost (issue 20.3): zero-length kernels in batches of B launches, each batch
 * ended by a cuStreamSynchronize, on one stream per thread. The batch sizes take turns in slices
 * of 10 ms, each for SECONDS in all, and the time per batch of each size is printed (the median
 * over the slices of each slice's mean: slices the thread spent partly off the CPU, on a loaded
 * machine, do not move it; and the same in the thread's CPU time, which a loaded machine moves
 * less), with the per-launch and per-synchronize cost fitted by least squares over the sizes:
 *     time per batch(B) = sync_ns + B * launch_ns.
 * bench/gate.sh runs it directly and under the hook in each mode, rounds alternated, and prints
 * the difference. Linked with -lcuda like any program.
 * GATE_IDLE_NS=N: after each synchronize the thread spins N ns on the clock (no CUDA call), so
 * that the device is busy for a part of the time only (a hard-limited slice below its limit);
 * then each batch is timed on its own, the spin left out (two more clock reads a batch, in the
 * direct run too).
 * GATE_EVICT_KB=N (with GATE_IDLE_NS): before the spin the thread also writes one byte in every
 * line of N KB of its own, as a program's own work between batches does (a Python interpreter's,
 * a data loader's): what the launch and the synchronize touch is then out of the CPU's caches at
 * each batch, in the direct run as under the hook.
 * usage: gate_bench SECONDS THREADS B1 B2 [B...] */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZES 8
#define MAX_SLICES 65536     /* per size and thread: 655 s of 10 ms slices */
#define SLICE_NS 10000000ull /* 10 ms of one batch size, then the next */
#define WARM_NS 300000000ull /* first token, the kernel length learnt, caches */

static const char ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                          ".visible .entry spin(.param .u64 us)\n{\n ret;\n}\n";

static CUcontext ctx;
static CUfunction fn;
static int nsizes;
static unsigned long sizes[MAX_SIZES];
static double seconds;
static unsigned long long idle_ns;             /* GATE_IDLE_NS */
static size_t evict_len;                       /* GATE_EVICT_KB */
static __thread volatile unsigned char *evict; /* each thread's own */

struct worker {
  pthread_t t;
  CUstream s; /* destroyed once every thread is done: the gate may still look at a burst's
               * streams while others launch (the hook does not see cuStreamDestroy) */
  int failed;
  double *slice[MAX_SIZES]; /* each slice's mean time per batch, per size */
  double *cpu[MAX_SIZES];   /* the same in the thread's CPU time */
  unsigned nslices[MAX_SIZES];
};

static unsigned long long clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static unsigned long long now_ns(void) {
  return clock_ns(CLOCK_MONOTONIC);
}

/* One batch: B launches and the synchronize. */
static int batch(CUstream s, unsigned long b) {
  unsigned long long us = 0;
  void *params[] = {&us};
  for (unsigned long i = 0; i < b; i++)
    if (cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) != CUDA_SUCCESS)
      return -1;
  return cuStreamSynchronize(s) == CUDA_SUCCESS ? 0 : -1;
}

/* With GATE_IDLE_NS: one batch timed on its own (wall and CPU), then the spin, not timed. */
static int idle_batch(CUstream s, unsigned long b, unsigned long long *wall,
                      unsigned long long *cpu) {
  unsigned long long c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = now_ns();
  if (batch(s, b) < 0)
    return -1;
  unsigned long long t1 = now_ns();
  *cpu += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  *wall += t1 - t0;
  for (size_t i = 0; i < evict_len; i += 64)
    evict[i]++;
  for (unsigned long long until = t1 + idle_ns; now_ns() < until;)
    ;
  return 0;
}

/* Batches of size k until `end`; their mean time goes to w (when it is given). */
static int run_slice(struct worker *w, CUstream s, int k, unsigned long long end) {
  unsigned long long c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = now_ns(), t = t0, n = 0;
  unsigned long long wall = 0, cpu = 0;
  while (t < end) {
    if ((idle_ns ? idle_batch(s, sizes[k], &wall, &cpu) : batch(s, sizes[k])) < 0)
      return -1;
    t = now_ns();
    n++;
  }
  if (!idle_ns) {
    cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    wall = t - t0;
  }
  if (w && n && w->nslices[k] < MAX_SLICES) {
    w->cpu[k][w->nslices[k]] = (double)cpu / (double)n;
    w->slice[k][w->nslices[k]++] = (double)wall / (double)n;
  }
  return 0;
}

static void *work(void *arg) {
  struct worker *w = arg;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
      cuStreamCreate(&w->s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    w->failed = 1;
    return NULL;
  }
  CUstream s = w->s;
  if (evict_len && !(evict = calloc(1, evict_len))) {
    w->failed = 1;
    return NULL;
  }
  unsigned long long t = now_ns(), stop = t + WARM_NS;
  for (int k = 0; t < stop; k = (k + 1) % nsizes, t = now_ns())
    if (run_slice(NULL, s, k, t + SLICE_NS / 10) < 0)
      goto fail;
  stop = now_ns() + (unsigned long long)(seconds * 1e9) * (unsigned long long)nsizes;
  for (int k = 0; (t = now_ns()) < stop; k = (k + 1) % nsizes)
    if (run_slice(w, s, k, t + SLICE_NS) < 0)
      goto fail;
  free((void *)evict);
  return NULL;
fail:
  free((void *)evict);
  w->failed = 1;
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of every thread's slices of size k (wall time, or CPU time). */
static double median(struct worker *w, int threads, int k, int cpu) {
  unsigned n = 0;
  for (int i = 0; i < threads; i++)
    n += w[i].nslices[k];
  double *all = calloc(n ? n : 1, sizeof(*all));
  n = 0;
  for (int i = 0; i < threads; i++)
    for (unsigned j = 0; j < w[i].nslices[k]; j++)
      all[n++] = cpu ? w[i].cpu[k][j] : w[i].slice[k][j];
  qsort(all, n, sizeof(*all), cmp);
  double m = n ? (n % 2 ? all[n / 2] : (all[n / 2 - 1] + all[n / 2]) / 2) : 0;
  free(all);
  return m;
}

/* Least squares over the sizes: T(B) = sync + B * launch. */
static void fit(const double *tb, double *launch, double *sync) {
  double mb = 0, mt = 0, cov = 0, var = 0;
  for (int k = 0; k < nsizes; k++) {
    mb += (double)sizes[k] / nsizes;
    mt += tb[k] / nsizes;
  }
  for (int k = 0; k < nsizes; k++) {
    cov += ((double)sizes[k] - mb) * (tb[k] - mt);
    var += ((double)sizes[k] - mb) * ((double)sizes[k] - mb);
  }
  *launch = cov / var;
  *sync = mt - *launch * mb;
}

static int parse(int argc, char **argv, int *threads) {
  if (argc < 5 || argc - 3 > MAX_SIZES)
    return -1;
  seconds = strtod(argv[1], NULL);
  *threads = atoi(argv[2]);
  const char *idle = getenv("GATE_IDLE_NS");
  idle_ns = idle ? strtoull(idle, NULL, 10) : 0;
  const char *ev = getenv("GATE_EVICT_KB");
  evict_len = ev ? strtoull(ev, NULL, 10) * 1024 : 0;
  nsizes = argc - 3;
  for (int k = 0; k < nsizes; k++) {
    sizes[k] = strtoul(argv[3 + k], NULL, 10);
    if (!sizes[k] || (k && sizes[k] == sizes[0]))
      return -1;
  }
  return seconds > 0 && *threads >= 1 && *threads <= 64 ? 0 : -1;
}

int main(int argc, char **argv) {
  int threads;
  CUdevice dev;
  CUmodule mod;
  if (parse(argc, argv, &threads) < 0) {
    fprintf(stderr, "usage: gate_bench SECONDS THREADS(1-64) B1 B2 [B...] (distinct sizes > 0)\n");
    return 2;
  }
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
      cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, ptx) ||
      cuModuleGetFunction(&fn, mod, "spin")) {
    fprintf(stderr, "gate_bench: CUDA set-up failed\n");
    return 1;
  }
  struct worker *w = calloc((size_t)threads, sizeof(*w));
  for (int i = 0; i < threads; i++) {
    for (int k = 0; k < nsizes; k++) {
      w[i].slice[k] = calloc(MAX_SLICES, sizeof(double));
      w[i].cpu[k] = calloc(MAX_SLICES, sizeof(double));
    }
    if (pthread_create(&w[i].t, NULL, work, &w[i]) != 0)
      return 1;
  }
  for (int i = 0; i < threads; i++) {
    pthread_join(w[i].t, NULL);
    if (w[i].failed) {
      fprintf(stderr, "gate_bench: a launch or synchronize failed\n");
      return 1;
    }
  }
  for (int cpu = 0; cpu < 2; cpu++) {
    double tb[MAX_SIZES], launch, sync;
    for (int k = 0; k < nsizes; k++) {
      tb[k] = median(w, threads, k, cpu);
      printf("%sbatch%lu_ns=%.1f ", cpu ? "cpu_" : "", sizes[k], tb[k]);
    }
    fit(tb, &launch, &sync);
    printf("%slaunch_ns=%.2f %ssync_ns=%.2f%s", cpu ? "cpu_" : "", launch, cpu ? "cpu_" : "", sync,
           cpu ? "\n" : " ");
  }
  for (int i = 0; i < threads; i++) {
    cuStreamDestroy(w[i].s);
    for (int k = 0; k < nsizes; k++) {
      free(w[i].slice[k]);
      free(w[i].cpu[k]);
    }
  }
  free(w);
  return 0;
}
