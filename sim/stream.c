/* SPDX-License-Identifier: Apache-2.0 */
/* Streams (legacy, per-thread, user) and events: what work each stream waits for and
 * when it completes on the device clock. Kernels reach the engine only through
 * launch.c; graphs are graph.c's and the capture rules capture.c's. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- streams ---- */

struct ptds_slot {
  struct sim_ctx *ctx;
  uint64_t generation;
  struct sim_stream *s;
};
#define PTDS_SLOTS 8
static __thread struct ptds_slot ptds_slots[PTDS_SLOTS];

/* Destroyed streams and events are recycled, never freed: a stale handle then reads
 * a cleared magic (CUDA_ERROR_INVALID_HANDLE), not freed memory. sim.mu guards both. */
static struct sim_stream *stream_free_list;
static struct sim_event *event_free_list;

/* sim.mu held: s is no longer a stream. */
static void stream_recycle_locked(struct sim_stream *s) {
  memset(s, 0, sizeof(*s));
  s->next = stream_free_list;
  stream_free_list = s;
}

/* sim.mu held. */
static struct sim_stream *stream_new_locked(struct sim_ctx *c, enum sim_stream_kind kind,
                                            unsigned flags, int priority) {
  static unsigned long long next_id = 1;
  struct sim_stream *s = stream_free_list;
  if (s) {
    stream_free_list = s->next;
    memset(s, 0, sizeof(*s));
  } else if (!(s = calloc(1, sizeof(*s)))) {
    return NULL;
  }
  s->magic = SIM_STREAM_MAGIC;
  s->kind = kind;
  s->ctx = c;
  s->flags = flags;
  s->priority = priority;
  s->id = next_id++;
  s->next = c->streams;
  c->streams = s;
  return s;
}

/* The calling thread's default stream in c (a blocking stream, made on first use). */
static struct sim_stream *per_thread_stream(struct sim_ctx *c) {
  for (int i = 0; i < PTDS_SLOTS; i++)
    if (ptds_slots[i].ctx == c && ptds_slots[i].generation == c->generation && ptds_slots[i].s &&
        ptds_slots[i].s->magic == SIM_STREAM_MAGIC && ptds_slots[i].s->ctx == c &&
        ptds_slots[i].s->kind == SIM_STREAM_PER_THREAD)
      return ptds_slots[i].s;
  pthread_mutex_lock(&sim.mu);
  struct sim_stream *s = stream_new_locked(c, SIM_STREAM_PER_THREAD, 0, 0);
  pthread_mutex_unlock(&sim.mu);
  if (!s)
    return NULL;
  int victim = 0;
  for (int i = 0; i < PTDS_SLOTS; i++)
    if (!ptds_slots[i].s || !sim_ctx_alive(ptds_slots[i].ctx)) {
      victim = i;
      break;
    }
  ptds_slots[victim] = (struct ptds_slot){c, c->generation, s};
  return s;
}

/* The stream h names, not yet checked (a default stream is made on first use). */
static CUresult stream_find(CUstream h, int ptds, struct sim_stream **ret) {
  if (h != NULL && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
    *ret = (struct sim_stream *)h;
    return CUDA_SUCCESS;
  }
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  int per_thread = h == CU_STREAM_PER_THREAD || (h == NULL && ptds);
  *ret = per_thread ? per_thread_stream(c) : &c->legacy;
  return *ret ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* sim.mu held: s is still a stream. Another thread may destroy it at any time (the driver then
 * says CUDA_ERROR_INVALID_HANDLE, as for any destroyed handle); a destroyed stream is zeroed (its
 * context NULL) and may come back as a new one. */
static CUresult stream_live_locked(const struct sim_stream *s) {
  return s->magic == SIM_STREAM_MAGIC && sim_ctx_alive(s->ctx) ? CUDA_SUCCESS
                                                               : CUDA_ERROR_INVALID_HANDLE;
}

CUresult sim_stream_lock(CUstream h, int ptds, struct sim_stream **ret) {
  struct sim_stream *s;
  CUresult rc = stream_find(h, ptds, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&sim.mu);
  if ((rc = stream_live_locked(s)) != CUDA_SUCCESS) {
    pthread_mutex_unlock(&sim.mu);
    return rc;
  }
  *ret = s;
  return CUDA_SUCCESS;
}

CUresult sim_stream_relock(struct sim_stream *s, unsigned long long id) {
  pthread_mutex_lock(&sim.mu);
  if (stream_live_locked(s) == CUDA_SUCCESS && s->id == id)
    return CUDA_SUCCESS;
  pthread_mutex_unlock(&sim.mu);
  return CUDA_ERROR_INVALID_HANDLE;
}

/* The legacy stream waits for every blocking stream of its context, and they wait for it. */
struct sim_mark sim_stream_ready(const struct sim_stream *s) {
  const struct sim_ctx *c = s->ctx;
  struct sim_mark mk = s->tail;
  if (s->kind == SIM_STREAM_LEGACY) {
    for (const struct sim_stream *o = c->streams; o; o = o->next)
      if (!(o->flags & CU_STREAM_NON_BLOCKING))
        sim_mark_merge(&mk, &o->tail);
  } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
    sim_mark_merge(&mk, &c->legacy.tail);
  }
  return mk;
}

/* sim.mu held: everything queued on s so far. */
static struct sim_mark stream_done(const struct sim_stream *s) {
  return s->kind == SIM_STREAM_LEGACY ? sim_stream_ready(s) : s->tail;
}

/* sim.mu held: the capture rules for waiting on s (cuda.h, cuStreamIsCapturing; the
 * Programming Guide's "Prohibited and Unhandled Operations"): the legacy stream while a blocking
 * stream captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), a capture already invalidated, and a
 * stream in capture, which cannot be waited for or queried (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
 * the capture invalidated). */
static CUresult wait_check_locked(struct sim_stream *s) {
  CUresult rc = sim_capture_use_locked(s);
  if (rc == CUDA_SUCCESS && s->cap) {
    sim_capture_invalidate_locked(s->cap, "a synchronize or query of a capturing stream");
    rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return rc;
}

/* The capture rules for a synchronize or query of h; the legacy stream's is a potentially
 * unsafe call as well. *mk: what the stream has queued; *dev: its device (read under the lock:
 * the stream may be destroyed as soon as it is released). */
static CUresult wait_begin(CUstream h, int ptds, int unsafe, struct sim_mark *mk, int *dev) {
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptds, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  enum sim_stream_kind kind = s->kind;
  rc = sim_capturing_any() ? wait_check_locked(s) : CUDA_SUCCESS;
  *mk = stream_done(s);
  *dev = s->ctx->dev;
  pthread_mutex_unlock(&sim.mu);
  if (rc == CUDA_SUCCESS && (unsafe || kind == SIM_STREAM_LEGACY))
    rc = sim_capture_unsafe(unsafe ? "a synchronous copy or memset"
                                   : "a synchronize or query of the legacy stream");
  return rc;
}

/* *dev: the stream's device. */
static CUresult stream_wait_dev(CUstream h, int ptds, int unsafe, int *dev) {
  struct sim_mark mk;
  CUresult rc = wait_begin(h, ptds, unsafe, &mk, dev);
  if (rc != CUDA_SUCCESS)
    return rc;
  sim_mark_wait(*dev, &mk);
  return CUDA_SUCCESS;
}

CUresult sim_stream_wait(CUstream h, int ptds, int unsafe) {
  int dev;
  return stream_wait_dev(h, ptds, unsafe, &dev);
}

/* sim.mu held: a context goes away; so do its streams. */
void sim_ctx_streams_reset(struct sim_ctx *c) {
  struct sim_stream *s = c->streams;
  while (s) {
    struct sim_stream *next = s->next;
    sim_capture_stream_gone_locked(s); /* an unfinished capture goes with its stream */
    stream_recycle_locked(s);
    s = next;
  }
  c->streams = NULL;
  c->legacy.tail = (struct sim_mark){0, 0, 0};
}

static CUresult stream_create(CUstream *phStream, unsigned int flags, int priority) {
  SIM_REQUIRE_INIT();
  if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (priority > 0)
    priority = 0;
  if (priority < -5)
    priority = -5;
  pthread_mutex_lock(&sim.mu);
  struct sim_stream *s = stream_new_locked(c, SIM_STREAM_USER, flags, priority);
  pthread_mutex_unlock(&sim.mu);
  if (!s)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *phStream = (CUstream)s;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  return stream_create(phStream, Flags, 0);
}

SIM_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority) {
  return stream_create(phStream, flags, priority);
}

SIM_API CUresult cuStreamDestroy_v2(CUstream hStream) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s = (struct sim_stream *)hStream;
  pthread_mutex_lock(&sim.mu);
  if (!s || s->magic != SIM_STREAM_MAGIC || s->kind != SIM_STREAM_USER) {
    pthread_mutex_unlock(&sim.mu);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  /* Work already queued still runs (it is on the device timeline); only the handle goes. */
  struct sim_stream **pp = &s->ctx->streams;
  while (*pp && *pp != s)
    pp = &(*pp)->next;
  if (*pp)
    *pp = s->next;
  sim_capture_stream_gone_locked(s);
  stream_recycle_locked(s);
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamDestroy(CUstream hStream) {
  return cuStreamDestroy_v2(hStream);
}

static CUresult stream_query(CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_mark mk;
  int dev;
  CUresult rc = wait_begin(h, ptsz, 0, &mk, &dev);
  if (rc != CUDA_SUCCESS)
    return rc;
  uint64_t t;
  return sim_mark_done(dev, &mk, &t) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_TWINS(cuStreamQuery, _ptsz, stream_query, (CUstream h), h)

static CUresult stream_sync(CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  int dev;
  CUresult rc = stream_wait_dev(h, ptsz, 0, &dev);
  if (rc == CUDA_SUCCESS)
    sim_pools_trim(dev);
  return rc;
}

SIM_TWINS(cuStreamSynchronize, _ptsz, stream_sync, (CUstream h), h)

/* The stream an attribute query names, its output pointer checked; sim.mu held on success. */
static CUresult stream_query_arg(CUstream h, int ptsz, const void *out, struct sim_stream **ret) {
  SIM_REQUIRE_INIT();
  CUresult rc = sim_stream_lock(h, ptsz, ret);
  if (rc == CUDA_SUCCESS && !out) {
    pthread_mutex_unlock(&sim.mu);
    rc = CUDA_ERROR_INVALID_VALUE;
  }
  return rc;
}

/* One attribute of the stream, read under sim.mu. */
#define STREAM_ATTR(fn, type, expr)                                                                \
  static CUresult fn(CUstream h, type *out, int ptsz) {                                            \
    struct sim_stream *s;                                                                          \
    CUresult rc = stream_query_arg(h, ptsz, out, &s);                                              \
    if (rc == CUDA_SUCCESS) {                                                                      \
      *out = (expr);                                                                               \
      pthread_mutex_unlock(&sim.mu);                                                               \
    }                                                                                              \
    return rc;                                                                                     \
  }

STREAM_ATTR(stream_get_flags, unsigned int, s->flags)
STREAM_ATTR(stream_get_priority, int, s->priority)
STREAM_ATTR(stream_get_ctx, CUcontext, (CUcontext)s->ctx)
STREAM_ATTR(stream_get_id, unsigned long long, s->kind == SIM_STREAM_LEGACY ? 0 : s->id)

SIM_TWINS(cuStreamGetFlags, _ptsz, stream_get_flags, (CUstream h, unsigned int *flags), h, flags)
SIM_TWINS(cuStreamGetPriority, _ptsz, stream_get_priority, (CUstream h, int *priority), h, priority)
SIM_TWINS(cuStreamGetCtx, _ptsz, stream_get_ctx, (CUstream h, CUcontext *pctx), h, pctx)
SIM_TWINS(cuStreamGetId, _ptsz, stream_get_id, (CUstream h, unsigned long long *id), h, id)

/* ---- events ---- */

SIM_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  SIM_REQUIRE_INIT();
  if (!phEvent)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&sim.mu);
  struct sim_event *e = event_free_list;
  if (e)
    event_free_list = e->next;
  else
    e = malloc(sizeof(*e));
  if (e) {
    memset(e, 0, sizeof(*e));
    e->magic = SIM_EVENT_MAGIC;
    e->flags = Flags;
    e->ctx = c;
    e->next = c->events;
    if (c->events)
      c->events->prev = e;
    c->events = e;
  }
  pthread_mutex_unlock(&sim.mu);
  if (!e)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *phEvent = (CUevent)e;
  return CUDA_SUCCESS;
}

static struct sim_event *event_arg(CUevent h) {
  struct sim_event *e = (struct sim_event *)h;
  return e && e->magic == SIM_EVENT_MAGIC ? e : NULL;
}

/* sim.mu held: out of its context's list, onto the free list. */
static void event_recycle_locked(struct sim_event *e) {
  if (e->prev)
    e->prev->next = e->next;
  else if (e->ctx && e->ctx->events == e)
    e->ctx->events = e->next;
  if (e->next)
    e->next->prev = e->prev;
  memset(e, 0, sizeof(*e));
  e->next = event_free_list;
  event_free_list = e;
}

void sim_ctx_events_reset(struct sim_ctx *c) {
  while (c->events)
    event_recycle_locked(c->events);
}

SIM_API CUresult cuEventDestroy_v2(CUevent hEvent) {
  SIM_REQUIRE_INIT();
  pthread_mutex_lock(&sim.mu);
  struct sim_event *e = event_arg(hEvent);
  if (e)
    event_recycle_locked(e);
  pthread_mutex_unlock(&sim.mu);
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult cuEventDestroy(CUevent hEvent) {
  return cuEventDestroy_v2(hEvent);
}

void sim_event_record_locked(struct sim_event *e, struct sim_stream *s) {
  /* The event completes when the work queued before it does, or now if none is. */
  struct sim_mark now = {0, 0, sim_now_ns()};
  e->mk = sim_stream_ready(s);
  /* Work this process already found complete is done by now: the event needs no kernel's end
   * time, which the device forgets after 8192 more kernels ("Old end times", docs/sim.md). */
  if (e->mk.seq && !e->mk.wait && e->mk.seq == sim.done_seq[s->ctx->dev])
    e->mk.seq = 0;
  sim_mark_merge(&e->mk, &now);
  e->recorded++;
  e->resolved = 0;
  __atomic_store_n(&e->captured, 0, __ATOMIC_RELAXED);
}

/* Into a capturing stream an event record is a node of the capture (cuStreamBeginCapture:
 * "all operations pushed into the stream will not be executed"): the event then stands for
 * captured work, which never completes as such (cuEventQuery and the like refuse it,
 * CUDA_ERROR_CAPTURED_EVENT). CU_EVENT_RECORD_EXTERNAL makes it an event record node instead,
 * which records the event each time the graph runs, and is "invalid outside of stream capture". */
static CUresult event_record(CUevent hEvent, CUstream h, unsigned int flags, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_event *e = event_arg(hEvent);
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (e->magic != SIM_EVENT_MAGIC || e->ctx != s->ctx) {
    rc = CUDA_ERROR_INVALID_HANDLE; /* cuda.h: event and stream of one context */
  } else if ((rc = sim_capture_use_locked(s)) != CUDA_SUCCESS) {
  } else if (s->cap && (flags & CU_EVENT_RECORD_EXTERNAL)) {
    struct sim_node node = {.type = SIM_NODE_EVENT, .event = e};
    rc = sim_capture_add_locked(s, &node);
  } else if (s->cap) {
    __atomic_store_n(&e->captured, s->cap->id, __ATOMIC_RELAXED);
  } else if (flags & CU_EVENT_RECORD_EXTERNAL) {
    rc = CUDA_ERROR_INVALID_VALUE;
  } else {
    sim_event_record_locked(e, s);
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

static CUresult event_record_plain(CUevent hEvent, CUstream h, int ptsz) {
  return event_record(hEvent, h, 0, ptsz);
}

SIM_TWINS(cuEventRecord, _ptsz, event_record_plain, (CUevent hEvent, CUstream hStream), hEvent,
          hStream)
SIM_TWINS(cuEventRecordWithFlags, _ptsz, event_record,
          (CUevent hEvent, CUstream hStream, unsigned int flags), hEvent, hStream, flags)

/* An event last recorded in a capture cannot be queried, waited for or timed: "the thread is
 * still prohibited from API calls which necessarily conflict with stream capture, for example,
 * attempting cuEventQuery on an event that was last recorded inside a capture sequence"
 * (cuThreadExchangeStreamCaptureMode), in every mode; the attempt invalidates the capture if it
 * is still in progress. 1 if so. */
static int event_captured(struct sim_event *e) {
  if (!__atomic_load_n(&e->captured, __ATOMIC_RELAXED))
    return 0;
  pthread_mutex_lock(&sim.mu);
  unsigned long long id = e->captured;
  struct sim_capture *cap = id ? sim_capture_by_id_locked(id) : NULL;
  if (cap)
    sim_capture_invalidate_locked(cap, "a query, synchronize or timing of a captured event");
  pthread_mutex_unlock(&sim.mu);
  return id != 0;
}

/* 1 and the device time the work recorded before e completed, once it has; else 0 (and
 * when it would, if nothing more were queued). wait: sleep until it has. */
static int event_time(struct sim_event *e, int wait, uint64_t *ret_t) {
  pthread_mutex_lock(&sim.mu);
  int resolved = e->resolved, dev = e->ctx->dev, recorded = e->recorded;
  struct sim_mark mk = e->mk;
  uint64_t t = e->t;
  pthread_mutex_unlock(&sim.mu);
  if (!resolved) {
    if (wait) {
      t = sim_mark_wait(dev, &mk);
      resolved = 1;
    } else {
      resolved = sim_mark_done(dev, &mk, &t);
    }
    pthread_mutex_lock(&sim.mu);
    if (resolved && e->recorded == recorded) { /* not recorded again meanwhile */
      e->t = t;
      e->resolved = 1;
    }
    pthread_mutex_unlock(&sim.mu);
  }
  *ret_t = t;
  return resolved;
}

/* Of an event not recorded in a capture, a query is a potentially unsafe call: the capture
 * modes decide who may make it (capture.c; docs/sim.md, "which calls are unsafe", gives the
 * sources: NVIDIA's fix for PyTorch's NCCL watchdog and its caching allocator). */
SIM_API CUresult cuEventQuery(CUevent hEvent) {
  SIM_REQUIRE_INIT();
  struct sim_event *e = event_arg(hEvent);
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  if (event_captured(e))
    return CUDA_ERROR_CAPTURED_EVENT;
  CUresult rc = sim_capture_unsafe("cuEventQuery");
  if (rc != CUDA_SUCCESS)
    return rc;
  uint64_t t;
  return !e->recorded || event_time(e, 0, &t) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_API CUresult cuEventSynchronize(CUevent hEvent) {
  SIM_REQUIRE_INIT();
  struct sim_event *e = event_arg(hEvent);
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  if (event_captured(e))
    return CUDA_ERROR_CAPTURED_EVENT;
  uint64_t t;
  if (e->recorded)
    event_time(e, 1, &t);
  struct sim_ctx *c = sim_ctx_current();
  if (c)
    sim_pools_trim(c->dev);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  SIM_REQUIRE_INIT();
  struct sim_event *a = event_arg(hStart), *b = event_arg(hEnd);
  if (!pMilliseconds)
    return CUDA_ERROR_INVALID_VALUE;
  if (!a || !b)
    return CUDA_ERROR_INVALID_HANDLE;
  if (event_captured(a) | event_captured(b))
    return CUDA_ERROR_CAPTURED_EVENT;
  if ((a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING) ||
      !a->recorded || !b->recorded)
    return CUDA_ERROR_INVALID_HANDLE;
  uint64_t ta, tb;
  if (!event_time(a, 0, &ta) || !event_time(b, 0, &tb))
    return CUDA_ERROR_NOT_READY;
  *pMilliseconds = (float)(((double)tb - (double)ta) / 1e6);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

/* sim.mu held: a wait in or on a capture (the Programming Guide, "Cross-stream Dependencies
 * and Events" and "Prohibited and Unhandled Operations"). A stream waiting on an event recorded
 * in a capture in progress joins that capture (a fork; it must be of the same context here), one
 * already capturing into another capture would merge two (CUDA_ERROR_STREAM_CAPTURE_MERGE); a
 * capturing stream waiting on an event recorded outside any capture crosses the capture's
 * boundary (CUDA_ERROR_STREAM_CAPTURE_ISOLATION) unless CU_EVENT_WAIT_EXTERNAL says it is an
 * external wait node; an event of a capture that has ended is a captured event
 * (CUDA_ERROR_CAPTURED_EVENT). Each error invalidates the captures involved. 1 if handled
 * (*rc set), 0 for an ordinary wait. */
static int capture_wait_locked(struct sim_stream *s, struct sim_event *e, unsigned flags,
                               CUresult *rc) {
  *rc = CUDA_SUCCESS;
  if (!e->captured) {
    if (!s->cap)
      return 0;
    if (e->recorded && !(flags & CU_EVENT_WAIT_EXTERNAL)) {
      sim_capture_invalidate_locked(s->cap, "a wait on an event recorded outside the capture");
      *rc = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    return 1;
  }
  struct sim_capture *cap = sim_capture_by_id_locked(e->captured);
  if (!cap) {
    *rc = CUDA_ERROR_CAPTURED_EVENT;
    if (s->cap)
      sim_capture_invalidate_locked(s->cap, "a wait on an event of an ended capture");
  } else if (!s->cap && s->ctx == cap->origin->ctx && s->kind != SIM_STREAM_LEGACY) {
    s->cap = cap;
  } else if (s->cap != cap) {
    sim_capture_invalidate_locked(cap, "a wait joining another capture or context");
    if (s->cap)
      sim_capture_invalidate_locked(s->cap, "a wait joining another capture");
    *rc = s->cap ? CUDA_ERROR_STREAM_CAPTURE_MERGE : CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  return 1;
}

static CUresult stream_wait_event(CUstream h, CUevent hEvent, unsigned int flags, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_event *e = event_arg(hEvent);
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (e->magic != SIM_EVENT_MAGIC) {
    pthread_mutex_unlock(&sim.mu);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (sim_capturing_any() || e->captured) {
    if ((rc = sim_capture_use_locked(s)) != CUDA_SUCCESS || capture_wait_locked(s, e, flags, &rc)) {
      pthread_mutex_unlock(&sim.mu);
      return rc;
    }
  }
  if (flags & CU_EVENT_WAIT_EXTERNAL) {
    pthread_mutex_unlock(&sim.mu);
    return CUDA_ERROR_INVALID_VALUE; /* "invalid outside of stream capture" */
  }
  struct sim_mark mk = e->mk;
  int recorded = e->recorded, edev = e->ctx->dev, sdev = s->ctx->dev;
  if (recorded && e->ctx == s->ctx) {
    sim_mark_merge(&s->tail, &mk);
  } else if (recorded && edev == sdev) {
    /* Another context's work on this device: the stream's next kernel waits for it. */
    struct sim_mark foreign = {0, mk.seq > mk.wait ? mk.seq : mk.wait, mk.t};
    sim_mark_merge(&s->tail, &foreign);
  }
  pthread_mutex_unlock(&sim.mu);
  if (recorded && edev != sdev) /* s may be destroyed by now: its device read under the lock */
    sim_mark_wait(edev, &mk);   /* another device's engine: waited for here, on the host */
  return CUDA_SUCCESS;
}

SIM_TWINS(cuStreamWaitEvent, _ptsz, stream_wait_event,
          (CUstream h, CUevent hEvent, unsigned int Flags), h, hEvent, Flags)
