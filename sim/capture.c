/* SPDX-License-Identifier: Apache-2.0 */
/* Stream capture as the driver documents it (docs/sim.md, "Stream capture", gives each rule
 * its source): capture sequences and their modes, each thread's capture interaction mode, the
 * potentially unsafe calls a capture in progress prohibits, the legacy stream's implicit
 * dependency on capturing blocking streams, and the invalidation a prohibited call causes.
 * What a captured call records is graph.c's; the calls themselves check here. */
#include "driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* This thread's stream capture interaction mode (cuThreadExchangeStreamCaptureMode); the
 * default is CU_STREAM_CAPTURE_MODE_GLOBAL (0), as the reference says. */
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static __thread char thread_tag;

const void *sim_thread_id(void) {
  return &thread_tag;
}

static unsigned long long capture_next_id = 1; /* sim.mu; unique over the process's life */

static int mode_ok(CUstreamCaptureMode mode) {
  return mode == CU_STREAM_CAPTURE_MODE_GLOBAL || mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
         mode == CU_STREAM_CAPTURE_MODE_RELAXED;
}

void sim_capture_invalidate_locked(struct sim_capture *cap, const char *why) {
  if (!cap->invalid && secure_getenv("GSLICE_SIM_TRACE"))
    fprintf(stderr, "gslice-sim: capture %llu invalidated by %s (thread %ld)\n", cap->id, why,
            (long)syscall(SYS_gettid));
  cap->invalid = 1;
}

struct sim_capture *sim_capture_by_id_locked(unsigned long long id) {
  for (struct sim_capture *cap = sim.captures; cap; cap = cap->next)
    if (cap->id == id)
      return cap;
  return NULL;
}

/* sim.mu held: a blocking stream of c is capturing. Those captures are invalidated when
 * invalidate is set. */
static int legacy_conflict_locked(struct sim_ctx *c, int invalidate) {
  int hit = 0;
  for (struct sim_stream *o = c->streams; o; o = o->next)
    if (o->cap && !(o->flags & CU_STREAM_NON_BLOCKING)) {
      hit = 1;
      if (invalidate)
        sim_capture_invalidate_locked(o->cap, "a use of the legacy stream");
    }
  return hit;
}

CUresult sim_capture_use_locked(struct sim_stream *s) {
  if (!sim_capturing_any())
    return CUDA_SUCCESS;
  if (s->kind == SIM_STREAM_LEGACY)
    return legacy_conflict_locked(s->ctx, 1) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
  if (s->cap && s->cap->invalid)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  return CUDA_SUCCESS;
}

CUresult sim_capture_add_locked(struct sim_stream *s, const struct sim_node *node) {
  return sim_graph_add_node(s->cap->graph, node) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult sim_capture_unsafe(const char *call) {
  if (!sim_capturing_any() || thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_SUCCESS;
  const void *me = sim_thread_id();
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&sim.mu);
  for (struct sim_capture *cap = sim.captures; cap; cap = cap->next) {
    /* The calling thread's own capture unless relaxed; with the thread in global mode,
     * another thread's global capture too. */
    int own = cap->thread == me && cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    int other = thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && cap->thread != me &&
                cap->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (own || other) {
      sim_capture_invalidate_locked(cap, call);
      rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

int sim_capture_ctx_conflict_locked(struct sim_ctx *c) {
  int hit = 0;
  for (struct sim_stream *o = c->streams; o; o = o->next)
    if (o->cap) {
      sim_capture_invalidate_locked(o->cap, "a synchronize of its context");
      hit = 1;
    }
  return hit;
}

/* sim.mu held: the capture is over; every stream in it leaves capture mode. */
static void capture_end_locked(struct sim_capture *cap) {
  for (struct sim_capture **pp = &sim.captures; *pp; pp = &(*pp)->next)
    if (*pp == cap) {
      *pp = cap->next;
      break;
    }
  __atomic_sub_fetch(&sim.ncaptures, 1, __ATOMIC_RELEASE);
  /* Streams that joined it through an event wait are found through their contexts. */
  struct sim_ctx *c = cap->origin->ctx;
  for (struct sim_stream *o = c->streams; o; o = o->next)
    if (o->cap == cap)
      o->cap = NULL;
  free(cap);
}

void sim_capture_stream_gone_locked(struct sim_stream *s) {
  struct sim_capture *cap = s->cap;
  s->cap = NULL;
  if (cap && cap->origin == s) {
    sim_graph_free(cap->graph);
    capture_end_locked(cap);
  }
}

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int ptsz) {
  SIM_REQUIRE_INIT();
  if (!mode_ok(mode))
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_graph *g = sim_graph_new();
  struct sim_capture *cap = calloc(1, sizeof(*cap));
  struct sim_stream *s;
  CUresult rc = !g || !cap ? CUDA_ERROR_OUT_OF_MEMORY : sim_stream_lock(h, ptsz, &s);
  if (rc == CUDA_SUCCESS) {
    if (s->kind == SIM_STREAM_LEGACY) {
      rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* "may not be initiated" on it */
    } else if (s->cap) {
      rc = CUDA_ERROR_ILLEGAL_STATE; /* "only if the stream is not already in capture mode" */
    } else {
      *cap = (struct sim_capture){g, mode, sim_thread_id(), 0, capture_next_id++, s, sim.captures};
      sim.captures = cap;
      s->cap = cap;
      __atomic_add_fetch(&sim.ncaptures, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&sim.mu);
  }
  if (rc != CUDA_SUCCESS) {
    sim_graph_free(g);
    free(cap);
  }
  return rc;
}

SIM_TWINS(cuStreamBeginCapture_v2, _ptsz, begin_capture, (CUstream h, CUstreamCaptureMode mode), h,
          mode)
SIM_TWINS(cuStreamBeginCapture, _ptsz, begin_capture, (CUstream h), h,
          CU_STREAM_CAPTURE_MODE_GLOBAL)

static CUresult end_capture(CUstream h, CUgraph *phGraph, int ptsz) {
  SIM_REQUIRE_INIT();
  if (!phGraph)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  struct sim_capture *cap = s->cap;
  if (!cap) {
    rc = CUDA_ERROR_ILLEGAL_STATE;
  } else if (cap->origin != s) {
    rc = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED; /* "must be ended on the same stream" */
  } else if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED && cap->thread != sim_thread_id()) {
    rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  } else if (cap->invalid) {
    sim_graph_free(cap->graph);
    *phGraph = NULL;
    capture_end_locked(cap);
    rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else {
    *phGraph = (CUgraph)cap->graph;
    capture_end_locked(cap);
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_TWINS(cuStreamEndCapture, _ptsz, end_capture, (CUstream h, CUgraph *phGraph), h, phGraph)

/* sim.mu held: s's capture status; CUDA_ERROR_STREAM_CAPTURE_IMPLICIT for the legacy stream
 * while a blocking stream of its context captures (that capture is not invalidated). */
static CUresult capture_status_locked(struct sim_stream *s, CUstreamCaptureStatus *status) {
  if (s->kind == SIM_STREAM_LEGACY && sim_capturing_any() && legacy_conflict_locked(s->ctx, 0))
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  *status = !s->cap           ? CU_STREAM_CAPTURE_STATUS_NONE
            : s->cap->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                              : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *status, int ptsz) {
  SIM_REQUIRE_INIT();
  if (!status)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = capture_status_locked(s, status);
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_TWINS(cuStreamIsCapturing, _ptsz, is_capturing, (CUstream h, CUstreamCaptureStatus *status), h,
          status)

/* The next node captured in a stream depends on the last one (graphs are chains here); the
 * array returned stays valid until the next call on the stream, as the reference allows. */
static __thread CUgraphNode info_dep;
static __thread CUgraphEdgeData info_edge;

static CUresult capture_info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *ndeps, int ptsz) {
  SIM_REQUIRE_INIT();
  if (!status || (edges && !deps))
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = capture_status_locked(s, status);
  if (rc == CUDA_SUCCESS && *status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    size_t n = sim_graph_nodes(s->cap->graph);
    if (id)
      *id = s->cap->id;
    if (graph)
      *graph = (CUgraph)s->cap->graph;
    info_dep = (CUgraphNode)(uintptr_t)n;
    memset(&info_edge, 0, sizeof(info_edge));
    if (deps)
      *deps = n ? &info_dep : NULL;
    if (edges)
      *edges = n ? &info_edge : NULL;
    if (ndeps)
      *ndeps = n ? 1 : 0;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

static CUresult capture_info_v1(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
                                int ptsz) {
  return capture_info(h, status, id, NULL, NULL, NULL, NULL, ptsz);
}

static CUresult capture_info_v2(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
                                CUgraph *graph, const CUgraphNode **deps, size_t *ndeps, int ptsz) {
  return capture_info(h, status, id, graph, deps, NULL, ndeps, ptsz);
}

SIM_TWINS(cuStreamGetCaptureInfo, _ptsz, capture_info_v1,
          (CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id), h, status, id)
SIM_TWINS(cuStreamGetCaptureInfo_v2, _ptsz, capture_info_v2,
          (CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
           const CUgraphNode **deps, size_t *ndeps),
          h, status, id, graph, deps, ndeps)
SIM_TWINS(cuStreamGetCaptureInfo_v3, _ptsz, capture_info,
          (CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
           const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps),
          h, status, id, graph, deps, edges, ndeps)

SIM_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  SIM_REQUIRE_INIT();
  if (!mode || !mode_ok(*mode))
    return CUDA_ERROR_INVALID_VALUE;
  CUstreamCaptureMode old = thread_mode;
  thread_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}
