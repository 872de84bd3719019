/* SPDX-License-Identifier: Apache-2.0 */
/* The stream capture rules of the CUDA driver, one subcommand per rule, on the sim alone
 * (docs/sim.md, "Stream capture", gives each rule its source): capture modes and each thread's
 * interaction mode, the potentially unsafe calls a capture prohibits and the invalidation they
 * cause, captured work that does not run, events in a capture, the legacy stream, capture info,
 * fork and join through events, instantiate flags, upload and replay with device time.
 * Usage: sim_capture RULE (sim_capture list names them); sim_capture probe prints what the
 * driver answers to the calls the sources leave open. */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "progs_common.h"

/* The older ABI variants of cuStreamGetCaptureInfo, by their exported names (cuda.h maps the
 * public name to _v3). */
extern CUresult capture_info_v1(CUstream h, CUstreamCaptureStatus *st,
                                cuuint64_t *id) __asm__("cuStreamGetCaptureInfo");
extern CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                                          CUgraph *g, const CUgraphNode **deps, size_t *n);

static int failures;
#define EXPECT(c)                                                                                  \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                 \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)
/* A call that must return exactly rc. */
#define EXPECT_RC(call, rc)                                                                        \
  do {                                                                                             \
    CUresult got_ = (call);                                                                        \
    if (got_ != (rc)) {                                                                            \
      fprintf(stderr, "FAIL %s:%d: %s = %d, want %d (%s)\n", __FILE__, __LINE__, #call, got_,      \
              (int)(rc), #rc);                                                                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)
#define CK(call) EXPECT_RC(call, CUDA_SUCCESS)

static CUfunction spin;

static int check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return 0;
  fprintf(stderr, "FAIL: %s = %d\n", what, r);
  return 1;
}

static CUresult launch(uint64_t us, CUstream s) {
  void *params[] = {&us};
  return cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static CUstreamCaptureStatus status_of(CUstream s) {
  CUstreamCaptureStatus st = (CUstreamCaptureStatus)-1;
  CK(cuStreamIsCapturing(s, &st));
  return st;
}

/* Ends the capture on s expecting rc; the graph is destroyed. */
static void end_expect(CUstream s, CUresult rc) {
  CUgraph g = (CUgraph)1;
  EXPECT_RC(cuStreamEndCapture(s, &g), rc);
  if (rc == CUDA_SUCCESS)
    CK(cuGraphDestroy(g));
  else if (rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    EXPECT(g == NULL); /* "a NULL graph will be returned" */
}

static const CUstreamCaptureMode modes[] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
                                            CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                            CU_STREAM_CAPTURE_MODE_RELAXED};
static const char *mode_names[] = {"global", "thread-local", "relaxed"};

/* ---- rules ---- */

/* Beginning, status, ids, capture info (v1, v2, v3) and ending. */
static void rule_begin_end(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  EXPECT_RC(cuStreamBeginCapture(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS);
  EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_NONE);
  CUstreamCaptureStatus st;
  cuuint64_t id1 = 0, id2 = 0;
  CK(capture_info_v1(s, &st, &id1));
  EXPECT(st == CU_STREAM_CAPTURE_STATUS_NONE);
  CUgraph none;
  EXPECT_RC(cuStreamEndCapture(s, &none), CUDA_ERROR_ILLEGAL_STATE);

  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_RC(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CK(capture_info_v1(s, &st, &id1));
  EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id1 != 0);
  CUgraph g = NULL;
  const CUgraphNode *deps = NULL;
  size_t n = 99;
  CK(cuStreamGetCaptureInfo_v2(s, &st, &id2, &g, &deps, &n));
  EXPECT(id2 == id1 && g != NULL && n == 0);
  CK(launch(10, s));
  const CUgraphEdgeData *edges = NULL;
  CK(cuStreamGetCaptureInfo(s, &st, &id2, &g, &deps, &edges, &n));
  EXPECT(id2 == id1 && n == 1 && deps && edges);
  EXPECT_RC(cuStreamGetCaptureInfo(s, &st, NULL, NULL, NULL, &edges, NULL),
            CUDA_ERROR_INVALID_VALUE); /* edgeData_out without dependencies_out */
  EXPECT_RC(cuStreamGetCaptureInfo(s, NULL, NULL, NULL, NULL, NULL, NULL),
            CUDA_ERROR_INVALID_VALUE); /* captureStatus_out is required */
  end_expect(s, CUDA_SUCCESS);
  EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_NONE);
  /* The id is unique over the process's life. */
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(capture_info_v1(s, &st, &id2));
  EXPECT(id2 != 0 && id2 != id1);
  end_expect(s, CUDA_SUCCESS);
  CK(cuStreamDestroy(s));
}

/* The calling thread's own capture prohibits potentially unsafe calls unless begun relaxed;
 * a prohibited call returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, does nothing, and
 * invalidates the capture (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED at the end, a NULL graph). */
enum unsafe_call { U_ALLOC, U_FREE0, U_HOST, U_COPY, U_MEMSET, U_LEGACY_SYNC, U_LEGACY_QUERY, U_N };
static const char *unsafe_names[] = {"cuMemAlloc",      "cuMemFree(0)", "cuMemAllocHost",
                                     "cuMemcpyHtoD",    "cuMemsetD32",  "cuStreamSynchronize(0)",
                                     "cuStreamQuery(0)"};
static CUdeviceptr unsafe_buf;

static CUresult unsafe(enum unsafe_call u) {
  CUdeviceptr d;
  void *h;
  uint32_t word = 7;
  CUresult rc;
  switch (u) {
  case U_ALLOC:
    rc = cuMemAlloc(&d, 4096);
    if (rc == CUDA_SUCCESS)
      cuMemFree(d);
    return rc;
  case U_FREE0: return cuMemFree(0);
  case U_HOST:
    rc = cuMemAllocHost(&h, 4096);
    if (rc == CUDA_SUCCESS)
      cuMemFreeHost(h);
    return rc;
  case U_COPY: return cuMemcpyHtoD(unsafe_buf, &word, sizeof(word));
  case U_MEMSET: return cuMemsetD32(unsafe_buf, 1, 1);
  case U_LEGACY_SYNC: return cuStreamSynchronize(CU_STREAM_LEGACY);
  case U_LEGACY_QUERY: return cuStreamQuery(CU_STREAM_LEGACY);
  case U_N: break;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static void rule_unsafe_own_thread(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&unsafe_buf, 4096));
  for (int m = 0; m < 3; m++)
    for (int u = 0; u < U_N; u++) {
      CK(cuStreamBeginCapture(s, modes[m]));
      CUresult rc = unsafe((enum unsafe_call)u);
      int relaxed = modes[m] == CU_STREAM_CAPTURE_MODE_RELAXED;
      if ((rc == CUDA_SUCCESS) != relaxed)
        fprintf(stderr, "FAIL: %s in a %s capture of its own thread: %d\n", unsafe_names[u],
                mode_names[m], rc);
      EXPECT(relaxed ? rc == CUDA_SUCCESS : rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
      if (relaxed) {
        EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
        end_expect(s, CUDA_SUCCESS);
        continue;
      }
      EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
      /* Further use of the stream is an error until the capture is ended. */
      EXPECT_RC(launch(10, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
      end_expect(s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
      EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_NONE);
      CK(launch(10, s)); /* usable again */
      CK(cuStreamSynchronize(s));
    }
  /* A prohibited allocation allocates nothing. */
  size_t free0, free1, total;
  CK(cuMemGetInfo(&free0, &total));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr d = 0;
  EXPECT_RC(cuMemAlloc(&d, 64 << 20), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  end_expect(s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CK(cuMemGetInfo(&free1, &total));
  EXPECT(free1 == free0);
  CK(cuMemFree(unsafe_buf));
  CK(cuStreamDestroy(s));
}

/* Another thread's capture: a thread in global mode (the default) is prohibited from unsafe
 * calls while any other thread has a global capture in progress; thread-local and relaxed
 * threads ignore other threads' captures; thread-local and relaxed captures prohibit nothing
 * to other threads. */
struct cross {
  CUcontext ctx;
  CUstreamCaptureMode thread_mode;
  pthread_barrier_t *bar;
  CUresult (*call)(void); /* the potentially unsafe call */
  CUresult rc_call, rc_exchange;
};

static void *cross_thread(void *arg) {
  struct cross *x = arg;
  cuCtxSetCurrent(x->ctx);
  CUstreamCaptureMode m = x->thread_mode;
  x->rc_exchange = cuThreadExchangeStreamCaptureMode(&m);
  pthread_barrier_wait(x->bar); /* the other thread is capturing */
  x->rc_call = x->call();
  pthread_barrier_wait(x->bar);
  return NULL;
}

static CUresult alloc_call(void) {
  CUdeviceptr d;
  CUresult rc = cuMemAlloc(&d, 4096);
  if (rc == CUDA_SUCCESS)
    cuMemFree(d);
  return rc;
}

/* call in another thread, in each thread mode, during a capture in each mode on s: prohibited
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture invalidated) exactly when both are global. */
static void other_thread_matrix(CUstream s, CUresult (*call)(void), const char *name) {
  CUcontext ctx;
  CK(cuCtxGetCurrent(&ctx));
  for (int cm = 0; cm < 3; cm++)
    for (int tm = 0; tm < 3; tm++) {
      pthread_barrier_t bar;
      pthread_barrier_init(&bar, NULL, 2);
      struct cross x = {ctx, modes[tm], &bar, call, -1, -1};
      pthread_t t;
      pthread_create(&t, NULL, cross_thread, &x);
      CK(cuStreamBeginCapture(s, modes[cm]));
      CK(launch(10, s));
      pthread_barrier_wait(&bar);
      pthread_barrier_wait(&bar); /* the other thread has made the call */
      pthread_join(t, NULL);
      pthread_barrier_destroy(&bar);
      CK(x.rc_exchange);
      int prohibited =
          modes[cm] == CU_STREAM_CAPTURE_MODE_GLOBAL && modes[tm] == CU_STREAM_CAPTURE_MODE_GLOBAL;
      CUresult want = prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
      if (x.rc_call != want)
        fprintf(stderr, "FAIL: %s in a %s thread during a %s capture: %d, want %d\n", name,
                mode_names[tm], mode_names[cm], x.rc_call, want);
      EXPECT(x.rc_call == want);
      end_expect(s, prohibited ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS);
    }
}

static void rule_unsafe_other_thread(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  other_thread_matrix(s, alloc_call, "cuMemAlloc");
  CK(cuStreamDestroy(s));
}

/* cuThreadExchangeStreamCaptureMode swaps the calling thread's mode (push/pop); a relaxed
 * thread is not prohibited even by its own global capture. */
static void rule_exchange(void) {
  EXPECT_RC(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE);
  CUstreamCaptureMode m = (CUstreamCaptureMode)9;
  EXPECT_RC(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
  m = CU_STREAM_CAPTURE_MODE_RELAXED;
  CK(cuThreadExchangeStreamCaptureMode(&m));
  EXPECT(m == CU_STREAM_CAPTURE_MODE_GLOBAL); /* the default */
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr d;
  CK(cuMemAlloc(&d, 4096));
  CK(cuMemFree(d));
  CK(cuThreadExchangeStreamCaptureMode(&m)); /* pop: back to global */
  EXPECT(m == CU_STREAM_CAPTURE_MODE_RELAXED);
  EXPECT_RC(cuMemAlloc(&d, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  end_expect(s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CK(cuStreamDestroy(s));
}

/* Work pushed into a capturing stream does not run: kernels, memsets, copies, host functions
 * and graph launches become nodes, run (with their device time, bytes and calls) when the
 * graph is launched. */
static int host_calls;
static void host_fn(void *p) {
  (void)p;
  host_calls++;
}

static void rule_nodes(void) {
  CUstream s, s2;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUdeviceptr buf;
  CK(cuMemAlloc(&buf, 4096));
  CK(cuMemsetD32(buf, 0, 1024));
  uint32_t src = 0x5a5a5a5a, word = 0;
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(launch(100000, s));
  CK(cuMemsetD32Async(buf, 0x12345678u, 1, s));
  CK(cuMemcpyHtoDAsync(buf + 4, &src, 4, s));
  CK(cuLaunchHostFunc(s, host_fn, NULL));
  CK(launch(100000, s));
  CUgraph g;
  CK(cuStreamEndCapture(s, &g));
  /* 200 ms of kernels were not queued: the stream is idle at once (a stall of the host as long
   * would hide a bug, never fail a right sim). */
  CK(cuStreamQuery(s));
  EXPECT(host_calls == 0);
  CK(cuMemcpyDtoH(&word, buf, 4));
  EXPECT(word == 0);
  CK(cuMemcpyDtoH(&word, buf + 4, 4));
  EXPECT(word == 0);

  CUgraphExec x;
  CK(cuGraphInstantiate(&x, g, 0));
  CUevent e0, e1;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CK(cuEventRecord(e0, s2));
  CK(cuGraphLaunch(x, s2));
  CK(cuEventRecord(e1, s2));
  CK(cuEventSynchronize(e1));
  float ms = 0;
  CK(cuEventElapsedTime(&ms, e0, e1));
  EXPECT(ms >= 199.9f && ms < 2000);
  EXPECT(host_calls == 1);
  CK(cuMemcpyDtoH(&word, buf, 4));
  EXPECT(word == 0x12345678u);
  CK(cuMemcpyDtoH(&word, buf + 4, 4));
  EXPECT(word == src);

  /* A graph launched into a capture is captured (a child graph), not run. */
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuGraphLaunch(x, s));
  CK(cuGraphLaunch(x, s));
  CUgraph outer;
  CK(cuStreamEndCapture(s, &outer));
  CK(cuStreamQuery(s));
  EXPECT(host_calls == 1);
  CUgraphExec ox;
  CK(cuGraphInstantiate(&ox, outer, 0));
  CK(cuEventRecord(e0, s2));
  CK(cuGraphLaunch(ox, s2));
  CK(cuEventRecord(e1, s2));
  CK(cuEventSynchronize(e1));
  CK(cuEventElapsedTime(&ms, e0, e1));
  EXPECT(ms >= 399.9f && ms < 4000);
  EXPECT(host_calls == 3);
  CK(cuGraphExecDestroy(ox));
  CK(cuGraphDestroy(outer));
  CK(cuGraphExecDestroy(x));
  CK(cuGraphDestroy(g));
  CK(cuMemFree(buf));
  CK(cuStreamDestroy(s));
  CK(cuStreamDestroy(s2));
}

/* An event recorded into a capture is a node that never completes: querying, synchronizing or
 * timing it is refused (CUDA_ERROR_CAPTURED_EVENT) in every mode and invalidates the capture;
 * CU_EVENT_RECORD_EXTERNAL records it at each replay instead, and is invalid outside capture. */
static void rule_events(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent e, e0;
  CK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventRecord(e0, s));
  for (int m = 0; m < 3; m++)
    for (int op = 0; op < 3; op++) {
      CK(cuStreamBeginCapture(s, modes[m]));
      CK(launch(1000, s));
      CK(cuEventRecord(e, s));
      float ms;
      CUresult rc = op == 0   ? cuEventQuery(e)
                    : op == 1 ? cuEventSynchronize(e)
                              : cuEventElapsedTime(&ms, e0, e);
      if (rc != CUDA_ERROR_CAPTURED_EVENT)
        fprintf(stderr, "FAIL: op %d on a captured event in a %s capture: %d\n", op, mode_names[m],
                rc);
      EXPECT(rc == CUDA_ERROR_CAPTURED_EVENT);
      EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
      end_expect(s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
  /* Still the last record: a captured event until recorded outside a capture. */
  EXPECT_RC(cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT);
  CK(cuEventRecord(e, s));
  CK(cuEventSynchronize(e));
  CK(cuEventQuery(e));

  /* External event records. */
  EXPECT_RC(cuEventRecordWithFlags(e, s, CU_EVENT_RECORD_EXTERNAL), CUDA_ERROR_INVALID_VALUE);
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuEventRecordWithFlags(e0, s, CU_EVENT_RECORD_EXTERNAL));
  CK(launch(10000, s));
  CK(cuEventRecordWithFlags(e, s, CU_EVENT_RECORD_EXTERNAL));
  /* Not a captured event: its last record stands (queried relaxed, as a query of an event
   * recorded outside the capture is a potentially unsafe call: rule event-query). */
  CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
  CK(cuThreadExchangeStreamCaptureMode(&relaxed));
  CK(cuEventQuery(e));
  CK(cuThreadExchangeStreamCaptureMode(&relaxed));
  CUgraph g;
  CK(cuStreamEndCapture(s, &g));
  CUgraphExec x;
  CK(cuGraphInstantiate(&x, g, 0));
  CK(cuGraphLaunch(x, s));
  CK(cuEventSynchronize(e));
  float ms = 0;
  CK(cuEventElapsedTime(&ms, e0, e));
  EXPECT(ms >= 9.9f && ms < 2000);
  CK(cuGraphExecDestroy(x));
  CK(cuGraphDestroy(g));
  CK(cuEventDestroy(e));
  CK(cuEventDestroy(e0));
  CK(cuStreamDestroy(s));
}

/* A query of an event recorded outside any capture is a potentially unsafe call (PyTorch's NCCL
 * watchdog, fixed by NVIDIA by querying in thread-local mode; its caching allocator, which skips
 * its event queries in the capturing thread): the capturing thread, unless the capture or the
 * thread is relaxed, and another thread in global mode during a global capture, get
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated. */
static CUevent query_event; /* recorded outside any capture, complete */

static CUresult event_query_call(void) {
  return cuEventQuery(query_event);
}

static void rule_event_query(void) {
  CUstream s, other;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&query_event, CU_EVENT_DEFAULT));
  CK(cuEventRecord(query_event, other));
  CK(cuEventSynchronize(query_event));
  for (int cm = 0; cm < 3; cm++)
    for (int tm = 0; tm < 3; tm++) { /* the capturing thread's own query */
      CK(cuStreamBeginCapture(s, modes[cm]));
      CK(launch(10, s));
      CUstreamCaptureMode m = modes[tm];
      CK(cuThreadExchangeStreamCaptureMode(&m));
      CUresult rc = cuEventQuery(query_event);
      CK(cuThreadExchangeStreamCaptureMode(&m));
      int prohibited = modes[cm] != CU_STREAM_CAPTURE_MODE_RELAXED &&
                       modes[tm] != CU_STREAM_CAPTURE_MODE_RELAXED;
      CUresult want = prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
      if (rc != want)
        fprintf(stderr, "FAIL: cuEventQuery in its %s capture, the thread %s: %d, want %d\n",
                mode_names[cm], mode_names[tm], rc, want);
      EXPECT(rc == want);
      end_expect(s, prohibited ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS);
    }
  other_thread_matrix(s, event_query_call, "cuEventQuery");
  CK(cuEventQuery(query_event)); /* no capture: allowed */
  CK(cuEventDestroy(query_event));
  CK(cuStreamDestroy(other));
  CK(cuStreamDestroy(s));
}

/* What the sources leave open (docs/sim.md, "Not modelled"): cuEventSynchronize of an event
 * recorded outside any capture, cuStreamQuery and cuStreamSynchronize of a stream outside every
 * capture, made by the capturing thread and by another, in each capture and thread mode. `probe`
 * prints what the driver answers and checks nothing: run against a GPU's libcuda (the program
 * loads libcuda.so.1), it says what the sim should do. */
static CUstream probe_stream; /* outside every capture, idle */

static CUresult probe_event_sync(void) {
  return cuEventSynchronize(query_event);
}
static CUresult probe_stream_query(void) {
  return cuStreamQuery(probe_stream);
}
static CUresult probe_stream_sync(void) {
  return cuStreamSynchronize(probe_stream);
}

static void probe_one(CUstream s, CUresult (*call)(void), const char *name, int other) {
  CUcontext ctx;
  CK(cuCtxGetCurrent(&ctx));
  for (int cm = 0; cm < 3; cm++)
    for (int tm = 0; tm < 3; tm++) {
      pthread_barrier_t bar;
      pthread_barrier_init(&bar, NULL, 2);
      struct cross x = {ctx, modes[tm], &bar, call, -1, -1};
      pthread_t t;
      if (other)
        pthread_create(&t, NULL, cross_thread, &x);
      CK(cuStreamBeginCapture(s, modes[cm]));
      CK(launch(10, s));
      if (other) {
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar);
        pthread_join(t, NULL);
      } else {
        CUstreamCaptureMode m = modes[tm];
        CK(cuThreadExchangeStreamCaptureMode(&m));
        x.rc_call = call();
        CK(cuThreadExchangeStreamCaptureMode(&m));
      }
      pthread_barrier_destroy(&bar);
      CUgraph g = NULL;
      CUresult end = cuStreamEndCapture(s, &g);
      if (g)
        cuGraphDestroy(g);
      printf("probe %s, %s thread in %s mode, %s capture: %d, end capture %d\n", name,
             other ? "another" : "the capturing", mode_names[tm], mode_names[cm], x.rc_call, end);
    }
}

static void probe(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&probe_stream, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&query_event, CU_EVENT_DEFAULT));
  CK(cuEventRecord(query_event, probe_stream));
  CK(cuStreamSynchronize(probe_stream));
  for (int other = 0; other < 2; other++) {
    probe_one(s, event_query_call, "cuEventQuery", other); /* modelled: for comparison */
    probe_one(s, probe_event_sync, "cuEventSynchronize", other);
    probe_one(s, probe_stream_query, "cuStreamQuery", other);
    probe_one(s, probe_stream_sync, "cuStreamSynchronize", other);
  }
  CK(cuEventDestroy(query_event));
  CK(cuStreamDestroy(probe_stream));
  CK(cuStreamDestroy(s));
}

/* A capturing stream cannot be synchronized or queried, in any mode: the capture is
 * invalidated. */
static void rule_stream_sync(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int m = 0; m < 3; m++)
    for (int op = 0; op < 2; op++) {
      CK(cuStreamBeginCapture(s, modes[m]));
      CK(launch(1000, s));
      EXPECT_RC(op ? cuStreamQuery(s) : cuStreamSynchronize(s),
                CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
      EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
      end_expect(s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
  CK(cuStreamDestroy(s));
}

/* A context with a stream in capture cannot be synchronized, in any mode. */
static void rule_ctx_sync(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int m = 0; m < 3; m++) {
    CK(cuStreamBeginCapture(s, modes[m]));
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_expect(s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  CK(cuCtxSynchronize());
  CK(cuStreamDestroy(s));
}

/* The legacy stream while a blocking stream of its context captures: using it is an implicit
 * dependency on the capture (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), which invalidates it;
 * cuStreamIsCapturing and cuStreamGetCaptureInfo of it say so without invalidating. A
 * non-blocking capturing stream leaves the legacy stream alone, and the per-thread default
 * stream never synchronizes with other streams. */
static void rule_legacy(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
  CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
  CK(cuThreadExchangeStreamCaptureMode(&relaxed)); /* not about unsafe calls here */
  CUdeviceptr buf;
  CK(cuMemAlloc(&buf, 4096));
  CUevent e;
  CK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  for (int op = 0; op < 5; op++) {
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUstreamCaptureStatus st;
    EXPECT_RC(cuStreamIsCapturing(CU_STREAM_LEGACY, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT_RC(cuStreamGetCaptureInfo(NULL, &st, NULL, NULL, NULL, NULL, NULL),
              CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    uint32_t word = 1;
    CUresult rc = op == 0   ? launch(10, NULL)
                  : op == 1 ? cuStreamSynchronize(NULL)
                  : op == 2 ? cuEventRecord(e, CU_STREAM_LEGACY)
                  : op == 3 ? cuMemcpyHtoD(buf, &word, 4)
                            : cuMemsetD32Async(buf, 0, 1, NULL);
    if (rc != CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
      fprintf(stderr, "FAIL: legacy op %d beside a blocking capture: %d\n", op, rc);
    EXPECT(rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT(status_of(s) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_expect(s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  CUstream nb;
  CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
  CK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(launch(10, NULL));
  CK(cuStreamSynchronize(NULL));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(launch(10, CU_STREAM_PER_THREAD));
  CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  end_expect(s, CUDA_SUCCESS);
  end_expect(nb, CUDA_SUCCESS);
  CK(cuThreadExchangeStreamCaptureMode(&relaxed));
  CK(cuMemFree(buf));
  CK(cuEventDestroy(e));
  CK(cuStreamDestroy(nb));
  CK(cuStreamDestroy(s));
}

/* Fork and join: a stream waiting on an event recorded in a capture joins it; the capture
 * ends on its origin stream only; a capturing stream waiting on an event recorded outside
 * the capture crosses its boundary unless the wait is external. */
static void rule_fork_join(void) {
  CUstream s1, s2;
  CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent fork, join, outside;
  CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  CK(cuEventCreate(&outside, CU_EVENT_DEFAULT));
  CK(cuEventRecord(outside, s2));
  CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(launch(5000, s1));
  CK(cuEventRecord(fork, s1));
  CK(cuStreamWaitEvent(s2, fork, 0));
  EXPECT(status_of(s2) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  cuuint64_t id1, id2;
  CUstreamCaptureStatus st;
  CK(capture_info_v1(s1, &st, &id1));
  CK(capture_info_v1(s2, &st, &id2));
  EXPECT(id1 == id2);
  CK(launch(5000, s2));
  CK(cuEventRecord(join, s2));
  CK(cuStreamWaitEvent(s1, join, 0));
  CUgraph g;
  EXPECT_RC(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  CK(cuStreamEndCapture(s1, &g));
  EXPECT(status_of(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
  CUgraphExec x;
  CK(cuGraphInstantiate(&x, g, 0));
  CUevent e0, e1;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CK(cuEventRecord(e0, s1));
  CK(cuGraphLaunch(x, s1));
  CK(cuEventRecord(e1, s1));
  CK(cuEventSynchronize(e1));
  float ms = 0;
  CK(cuEventElapsedTime(&ms, e0, e1));
  EXPECT(ms >= 9.9f && ms < 2000); /* both branches' kernels */
  CK(cuGraphExecDestroy(x));
  CK(cuGraphDestroy(g));

  CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuStreamWaitEvent(s1, outside, CU_EVENT_WAIT_EXTERNAL));
  EXPECT(status_of(s1) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_RC(cuStreamWaitEvent(s1, outside, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  end_expect(s1, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_RC(cuStreamWaitEvent(s1, outside, CU_EVENT_WAIT_EXTERNAL), CUDA_ERROR_INVALID_VALUE);
  CK(cuStreamWaitEvent(s1, outside, 0));
  CK(cuEventDestroy(fork));
  CK(cuEventDestroy(join));
  CK(cuEventDestroy(outside));
  CK(cuEventDestroy(e0));
  CK(cuEventDestroy(e1));
  CK(cuStreamDestroy(s1));
  CK(cuStreamDestroy(s2));
}

/* A capture not begun relaxed must be ended by the thread that began it. */
struct ender {
  CUcontext ctx;
  CUstream s;
  CUresult rc;
};
static void *end_other(void *arg) {
  struct ender *x = arg;
  cuCtxSetCurrent(x->ctx);
  CUgraph g = NULL;
  x->rc = cuStreamEndCapture(x->s, &g);
  if (x->rc == CUDA_SUCCESS)
    cuGraphDestroy(g);
  return NULL;
}

static void rule_end_thread(void) {
  struct ender x;
  CK(cuCtxGetCurrent(&x.ctx));
  CK(cuStreamCreate(&x.s, CU_STREAM_NON_BLOCKING));
  for (int m = 0; m < 3; m++) {
    CK(cuStreamBeginCapture(x.s, modes[m]));
    pthread_t t;
    pthread_create(&t, NULL, end_other, &x);
    pthread_join(t, NULL);
    if (modes[m] == CU_STREAM_CAPTURE_MODE_RELAXED) {
      EXPECT(x.rc == CUDA_SUCCESS);
    } else {
      EXPECT(x.rc == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
      EXPECT(status_of(x.s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
      end_expect(x.s, CUDA_SUCCESS);
    }
  }
  CK(cuStreamDestroy(x.s));
}

/* Instantiate flags as cuda.h documents them, upload, and replays taking their device time. */
static void rule_instantiate(void) {
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUgraph empty, g;
  CK(cuGraphCreate(&empty, 0));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int i = 0; i < 3; i++)
    CK(launch(5000, s));
  CK(cuStreamEndCapture(s, &g));
  CUgraphExec x;
  cuuint64_t flags;
  const unsigned long long ok[] = {0, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
                                   CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH,
                                   CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY,
                                   CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                       CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    CK(cuGraphInstantiateWithFlags(&x, g, ok[i]));
    CK(cuGraphExecGetFlags(x, &flags));
    EXPECT(flags == ok[i]);
    CK(cuGraphExecDestroy(x));
  }
  EXPECT_RC(cuGraphInstantiateWithFlags(&x, g, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_RC(cuGraphInstantiateWithFlags(&x, g,
                                        CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                                            CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_RC(cuGraphInstantiateWithFlags(&x, empty, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_RC(cuGraphInstantiateWithFlags(&x, g, 0x100), CUDA_ERROR_INVALID_VALUE);
  CUDA_GRAPH_INSTANTIATE_PARAMS p = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
                                     .hUploadStream = s};
  CK(cuGraphInstantiateWithParams(&x, g, &p));
  EXPECT(p.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS);
  CK(cuGraphExecGetFlags(x, &flags));
  EXPECT(flags == 0); /* UPLOAD "will not be returned" */
  p.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  CUgraphExec bad;
  EXPECT_RC(cuGraphInstantiateWithParams(&bad, empty, &p), CUDA_ERROR_INVALID_VALUE);
  EXPECT(p.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS);
  CK(cuGraphUpload(x, s));
  EXPECT_RC(cuGraphUpload(NULL, s), CUDA_ERROR_INVALID_VALUE);
  /* Replays run the graph's kernels with their device time, one launch after another. */
  CUevent e0, e1;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CK(cuEventRecord(e0, s));
  CK(cuGraphLaunch(x, s));
  CK(cuGraphLaunch(x, s));
  CK(cuEventRecord(e1, s));
  CK(cuEventSynchronize(e1));
  float ms = 0;
  CK(cuEventElapsedTime(&ms, e0, e1));
  printf("two replays of 3x spin(5000us): %.3f ms\n", ms);
  EXPECT(ms >= 29.9f && ms < 3000);
  CK(cuGraphExecDestroy(x));
  CK(cuGraphDestroy(g));
  CK(cuGraphDestroy(empty));
  CK(cuEventDestroy(e0));
  CK(cuEventDestroy(e1));
  CK(cuStreamDestroy(s));
}

/* The pattern PyTorch and vLLM use: warm-up, a capture in global mode on a side stream while
 * another thread launches and synchronizes on its own stream (neither is a potentially unsafe
 * call), instantiate, replay a thousand times: each replay takes the graph's device time. */
struct worker {
  CUcontext ctx;
  int stop;
  int rounds;
  CUresult rc;
};

static void *worker_thread(void *arg) {
  struct worker *w = arg;
  CUstream ws;
  cuCtxSetCurrent(w->ctx);
  CUresult rc = cuStreamCreate(&ws, CU_STREAM_DEFAULT);
  __atomic_store_n(&w->rc, rc, __ATOMIC_RELAXED); /* the main thread reads it meanwhile */
  while (rc == CUDA_SUCCESS && !__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
    rc = launch(50, ws);
    if (rc == CUDA_SUCCESS)
      rc = cuStreamSynchronize(ws);
    __atomic_store_n(&w->rc, rc, __ATOMIC_RELAXED);
    __atomic_add_fetch(&w->rounds, 1, __ATOMIC_RELAXED);
  }
  cuStreamDestroy(ws);
  return NULL;
}

static int worker_failed(struct worker *w) {
  return __atomic_load_n(&w->rc, __ATOMIC_RELAXED) != CUDA_SUCCESS;
}

static void rule_replay_pattern(void) {
  CUstream side;
  CK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 3; i++) /* warm-up */
    CK(launch(10, side));
  CK(cuStreamSynchronize(side));
  struct worker w = {0};
  CK(cuCtxGetCurrent(&w.ctx));
  pthread_t t;
  pthread_create(&t, NULL, worker_thread, &w);
  while (__atomic_load_n(&w.rounds, __ATOMIC_RELAXED) < 3 && !worker_failed(&w))
    ;
  CK(cuStreamBeginCapture(side, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int i = 0; i < 10; i++) {
    CK(launch(10, side));
    int r = __atomic_load_n(&w.rounds, __ATOMIC_RELAXED);
    while (__atomic_load_n(&w.rounds, __ATOMIC_RELAXED) == r && !worker_failed(&w))
      ; /* the other thread launches and synchronizes meanwhile */
  }
  CUgraph g;
  CK(cuStreamEndCapture(side, &g));
  __atomic_store_n(&w.stop, 1, __ATOMIC_RELAXED);
  pthread_join(t, NULL);
  CK(w.rc);
  CUgraphExec x;
  CK(cuGraphInstantiate(&x, g, 0));
  /* Timed on the wall clock and by events: the start event, recorded behind the warm-up
   * found complete, must not read the end of a kernel the device forgot after 8192 more. */
  CUevent e0, e1;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CK(cuStreamSynchronize(side));
  double t0 = mono_ms();
  CK(cuEventRecord(e0, side));
  for (int i = 0; i < 1000; i++)
    CK(cuGraphLaunch(x, side));
  CK(cuEventRecord(e1, side));
  CK(cuStreamSynchronize(side));
  double wall = mono_ms() - t0;
  float ms = 0;
  CK(cuEventElapsedTime(&ms, e0, e1));
  printf("1000 replays of 10x spin(10us): %.3f ms by events, %.3f ms wall\n", ms, wall);
  EXPECT(wall >= 99.9 && wall < 2000);
  EXPECT(ms >= 99.9f && ms <= wall + 0.1);
  CK(cuEventDestroy(e0));
  CK(cuEventDestroy(e1));
  CK(cuGraphExecDestroy(x));
  CK(cuGraphDestroy(g));
  CK(cuStreamDestroy(side));
}

static const struct {
  const char *name;
  void (*run)(void);
} rules[] = {
    {"begin-end", rule_begin_end},
    {"unsafe-own-thread", rule_unsafe_own_thread},
    {"unsafe-other-thread", rule_unsafe_other_thread},
    {"exchange", rule_exchange},
    {"nodes", rule_nodes},
    {"events", rule_events},
    {"event-query", rule_event_query},
    {"stream-sync", rule_stream_sync},
    {"ctx-sync", rule_ctx_sync},
    {"legacy", rule_legacy},
    {"fork-join", rule_fork_join},
    {"end-thread", rule_end_thread},
    {"instantiate", rule_instantiate},
    {"replay-pattern", rule_replay_pattern},
};

int main(int argc, char **argv) {
  size_t n = sizeof(rules) / sizeof(rules[0]);
  if (argc == 2 && strcmp(argv[1], "list") == 0) {
    for (size_t i = 0; i < n; i++)
      printf("%s\n", rules[i].name);
    return 0;
  }
  char buf[4096];
  if (argc == 2 && strcmp(argv[1], "probe") == 0) {
    if (spin_setup(spin_ptx_path(NULL, buf, sizeof(buf)), &spin, check) < 0)
      return 1;
    probe();
    return failures ? 1 : 0;
  }
  for (size_t i = 0; argc == 2 && i < n; i++) {
    if (strcmp(argv[1], rules[i].name) != 0)
      continue;
    if (spin_setup(spin_ptx_path(NULL, buf, sizeof(buf)), &spin, check) < 0)
      return 1;
    rules[i].run();
    printf("%s: %s\n", rules[i].name, failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
  }
  fprintf(stderr, "usage: sim_capture RULE (sim_capture list) | probe\n");
  return 2;
}
