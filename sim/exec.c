/* Simulated execution: modules and functions, streams (legacy, per-thread, user),
 * events on the device clock, kernel launches on the shared engine timeline, and
 * graphs (captured or built) replayed as a chain on one stream. */
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
static void graph_free(struct sim_graph *g);
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
        ptds_slots[i].s->magic == SIM_STREAM_MAGIC)
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

CUresult sim_stream_get(CUstream h, int ptds, struct sim_stream **ret) {
  struct sim_stream *s;
  if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    struct sim_ctx *c;
    CUresult rc = sim_ctx_current_rc(&c);
    if (rc != CUDA_SUCCESS)
      return rc;
    int per_thread = h == CU_STREAM_PER_THREAD || (h == NULL && ptds);
    s = per_thread ? per_thread_stream(c) : &c->legacy;
    if (!s)
      return CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    s = (struct sim_stream *)h;
    if (s->magic != SIM_STREAM_MAGIC || !sim_ctx_alive(s->ctx))
      return CUDA_ERROR_INVALID_HANDLE;
  }
  *ret = s;
  return CUDA_SUCCESS;
}

/* sim.mu held: earliest device time new work on s may start. The legacy stream waits
 * for every blocking stream of its context, and they wait for it. */
uint64_t sim_stream_ready(const struct sim_stream *s) {
  const struct sim_ctx *c = s->ctx;
  uint64_t t = s->tail;
  if (s->kind == SIM_STREAM_LEGACY) {
    for (const struct sim_stream *o = c->streams; o; o = o->next)
      if (!(o->flags & CU_STREAM_NON_BLOCKING) && o->tail > t)
        t = o->tail;
  } else if (!(s->flags & CU_STREAM_NON_BLOCKING) && c->legacy.tail > t) {
    t = c->legacy.tail;
  }
  return t;
}

/* sim.mu held: when everything queued on s so far is done. */
static uint64_t stream_done(const struct sim_stream *s) {
  return s->kind == SIM_STREAM_LEGACY ? sim_stream_ready(s) : s->tail;
}

CUresult sim_stream_wait(CUstream h, int ptds) {
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptds, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&sim.mu);
  uint64_t t = stream_done(s);
  pthread_mutex_unlock(&sim.mu);
  sim_wait_until(t);
  return CUDA_SUCCESS;
}

/* sim.mu held: a context goes away; so do its streams. */
void sim_ctx_streams_reset(struct sim_ctx *c) {
  struct sim_stream *s = c->streams;
  while (s) {
    struct sim_stream *next = s->next;
    if (s->capture) /* an unfinished capture goes with its stream */
      graph_free(s->capture);
    stream_recycle_locked(s);
    s = next;
  }
  c->streams = NULL;
  c->legacy.tail = 0;
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
  if (s->capture)
    graph_free(s->capture);
  stream_recycle_locked(s);
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamDestroy(CUstream hStream) { return cuStreamDestroy_v2(hStream); }

static CUresult stream_query(CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&sim.mu);
  uint64_t t = stream_done(s);
  pthread_mutex_unlock(&sim.mu);
  return sim_now_ns() >= t ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_API CUresult cuStreamQuery(CUstream h) { return stream_query(h, 0); }
SIM_API CUresult cuStreamQuery_ptsz(CUstream h) { return stream_query(h, 1); }

static CUresult stream_sync(CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (s->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  rc = sim_stream_wait(h, ptsz);
  if (rc == CUDA_SUCCESS)
    sim_pools_trim(s->ctx->dev);
  return rc;
}

SIM_API CUresult cuStreamSynchronize(CUstream h) { return stream_sync(h, 0); }
SIM_API CUresult cuStreamSynchronize_ptsz(CUstream h) { return stream_sync(h, 1); }

static CUresult stream_get_flags(CUstream h, unsigned int *flags, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc == CUDA_SUCCESS && !flags)
    rc = CUDA_ERROR_INVALID_VALUE;
  if (rc == CUDA_SUCCESS)
    *flags = s->flags;
  return rc;
}

SIM_API CUresult cuStreamGetFlags(CUstream h, unsigned int *flags) {
  return stream_get_flags(h, flags, 0);
}
SIM_API CUresult cuStreamGetFlags_ptsz(CUstream h, unsigned int *flags) {
  return stream_get_flags(h, flags, 1);
}

static CUresult stream_get_priority(CUstream h, int *priority, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc == CUDA_SUCCESS && !priority)
    rc = CUDA_ERROR_INVALID_VALUE;
  if (rc == CUDA_SUCCESS)
    *priority = s->priority;
  return rc;
}

SIM_API CUresult cuStreamGetPriority(CUstream h, int *priority) {
  return stream_get_priority(h, priority, 0);
}
SIM_API CUresult cuStreamGetPriority_ptsz(CUstream h, int *priority) {
  return stream_get_priority(h, priority, 1);
}

static CUresult stream_get_ctx(CUstream h, CUcontext *pctx, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc == CUDA_SUCCESS && !pctx)
    rc = CUDA_ERROR_INVALID_VALUE;
  if (rc == CUDA_SUCCESS)
    *pctx = (CUcontext)s->ctx;
  return rc;
}

SIM_API CUresult cuStreamGetCtx(CUstream h, CUcontext *pctx) { return stream_get_ctx(h, pctx, 0); }
SIM_API CUresult cuStreamGetCtx_ptsz(CUstream h, CUcontext *pctx) {
  return stream_get_ctx(h, pctx, 1);
}

static CUresult stream_get_id(CUstream h, unsigned long long *id, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc == CUDA_SUCCESS && !id)
    rc = CUDA_ERROR_INVALID_VALUE;
  if (rc == CUDA_SUCCESS)
    *id = s->kind == SIM_STREAM_LEGACY ? 0 : s->id;
  return rc;
}

SIM_API CUresult cuStreamGetId(CUstream h, unsigned long long *id) { return stream_get_id(h, id, 0); }
SIM_API CUresult cuStreamGetId_ptsz(CUstream h, unsigned long long *id) {
  return stream_get_id(h, id, 1);
}

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

SIM_API CUresult cuEventDestroy_v2(CUevent hEvent) {
  SIM_REQUIRE_INIT();
  pthread_mutex_lock(&sim.mu);
  struct sim_event *e = event_arg(hEvent);
  if (e)
    event_recycle_locked(e);
  pthread_mutex_unlock(&sim.mu);
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult cuEventDestroy(CUevent hEvent) { return cuEventDestroy_v2(hEvent); }

static CUresult event_record(CUevent hEvent, CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_event *e = event_arg(hEvent);
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (e->ctx != s->ctx)
    return CUDA_ERROR_INVALID_HANDLE; /* cuda.h: event and stream of one context */
  pthread_mutex_lock(&sim.mu);
  if (!s->capture) {
    /* The event completes when the work queued before it does, or now if none is. */
    uint64_t t = sim_stream_ready(s), now = sim_now_ns();
    e->t = t > now ? t : now;
    e->recorded = 1;
  }
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  return event_record(hEvent, hStream, 0);
}
SIM_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  return event_record(hEvent, hStream, 1);
}
SIM_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  return event_record(hEvent, hStream, 0);
}
SIM_API CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) {
  return event_record(hEvent, hStream, 1);
}

SIM_API CUresult cuEventQuery(CUevent hEvent) {
  SIM_REQUIRE_INIT();
  struct sim_event *e = event_arg(hEvent);
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  return !e->recorded || sim_now_ns() >= e->t ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_API CUresult cuEventSynchronize(CUevent hEvent) {
  SIM_REQUIRE_INIT();
  struct sim_event *e = event_arg(hEvent);
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  if (e->recorded)
    sim_wait_until(e->t);
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
  if (!a || !b || (a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING) ||
      !a->recorded || !b->recorded)
    return CUDA_ERROR_INVALID_HANDLE;
  uint64_t now = sim_now_ns();
  if (now < a->t || now < b->t)
    return CUDA_ERROR_NOT_READY;
  *pMilliseconds = (float)(((double)b->t - (double)a->t) / 1e6);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

static CUresult stream_wait_event(CUstream h, CUevent hEvent, unsigned int flags, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_event *e = event_arg(hEvent);
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&sim.mu);
  if (e->recorded && e->t > s->tail)
    s->tail = e->t;
  pthread_mutex_unlock(&sim.mu);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamWaitEvent(CUstream h, CUevent hEvent, unsigned int Flags) {
  return stream_wait_event(h, hEvent, Flags, 0);
}
SIM_API CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent hEvent, unsigned int Flags) {
  return stream_wait_event(h, hEvent, Flags, 1);
}

/* ---- modules and functions ---- */

static int image_is_binary(const void *image) {
  const unsigned char *p = image;
  uint32_t magic;
  memcpy(&magic, p, sizeof(magic));
  /* ELF cubin, fatbin (0xBA55ED50) or the fatbin wrapper nvcc emits (0x466243B1). */
  return (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') || magic == 0xBA55ED50u ||
         magic == 0x466243B1u;
}

static CUresult module_new(const void *image, struct sim_module **ret) {
  if (!image)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_module *m = calloc(1, sizeof(*m));
  if (!m)
    return CUDA_ERROR_OUT_OF_MEMORY;
  m->magic = SIM_MODULE_MAGIC;
  if (!image_is_binary(image)) {
    const char *text = image;
    if (!strstr(text, ".version") && !strstr(text, ".entry")) {
      free(m);
      return CUDA_ERROR_INVALID_IMAGE;
    }
    m->ptx = strdup(text);
    if (!m->ptx) {
      free(m);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  *ret = m;
  return CUDA_SUCCESS;
}

static CUresult module_load_data(CUmodule *module, const void *image) {
  SIM_REQUIRE_INIT();
  if (!module)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *c;
  CUresult rc = sim_ctx_current_rc(&c);
  if (rc != CUDA_SUCCESS)
    return rc;
  struct sim_module *m;
  rc = module_new(image, &m);
  if (rc == CUDA_SUCCESS) {
    /* A module belongs to the context it was loaded in, and goes with it. */
    pthread_mutex_lock(&sim.mu);
    m->ctx = c;
    m->next = c->modules;
    if (c->modules)
      c->modules->prev = m;
    c->modules = m;
    pthread_mutex_unlock(&sim.mu);
    *module = (CUmodule)m;
  }
  return rc;
}

SIM_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  return module_load_data(module, image);
}

SIM_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                    CUjit_option *options, void **optionValues) {
  return module_load_data(module, image);
}

SIM_API CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin) {
  return module_load_data(module, fatCubin);
}

static char *read_file(const char *fname) {
  int fd = open(fname, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0)
    return NULL;
  char *buf = NULL;
  if (fstat(fd, &sb) == 0 && sb.st_size >= 0 && sb.st_size < (1 << 30)) {
    buf = calloc(1, (size_t)sb.st_size + 1);
    if (buf && read(fd, buf, (size_t)sb.st_size) != sb.st_size) {
      free(buf);
      buf = NULL;
    }
  }
  close(fd);
  return buf;
}

SIM_API CUresult cuModuleLoad(CUmodule *module, const char *fname) {
  SIM_REQUIRE_INIT();
  if (!fname)
    return CUDA_ERROR_INVALID_VALUE;
  char *buf = read_file(fname);
  if (!buf)
    return CUDA_ERROR_FILE_NOT_FOUND;
  CUresult rc = module_load_data(module, buf);
  free(buf);
  return rc;
}

/* sim.mu held. */
static void module_free_locked(struct sim_module *m) {
  /* Functions stay allocated (magic cleared): a stale CUfunction is an error, not UB. */
  for (struct sim_func *f = m->funcs; f; f = f->next)
    f->magic = 0;
  m->magic = 0;
  free(m->ptx);
  m->ptx = NULL;
  if (m->ctx) {
    if (m->prev)
      m->prev->next = m->next;
    else if (m->ctx->modules == m)
      m->ctx->modules = m->next;
    if (m->next)
      m->next->prev = m->prev;
    m->ctx = NULL;
    m->prev = m->next = NULL;
  }
}

SIM_API CUresult cuModuleUnload(CUmodule hmod) {
  SIM_REQUIRE_INIT();
  struct sim_module *m = (struct sim_module *)hmod;
  pthread_mutex_lock(&sim.mu);
  int ok = m && m->magic == SIM_MODULE_MAGIC;
  if (ok)
    module_free_locked(m);
  pthread_mutex_unlock(&sim.mu);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void sim_ctx_exec_reset(struct sim_ctx *c) {
  while (c->events)
    event_recycle_locked(c->events);
  while (c->modules)
    module_free_locked(c->modules);
}

static int ptx_has_entry(const char *ptx, const char *name) {
  size_t n = strlen(name);
  for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 1, ".entry")) {
    const char *q = p + 6;
    while (*q == ' ' || *q == '\t')
      q++;
    if (strncmp(q, name, n) == 0 && (q[n] == '(' || q[n] == ' ' || q[n] == '\t' ||
                                     q[n] == '\n' || q[n] == '\r'))
      return 1;
  }
  return 0;
}

static CUresult module_get_function(struct sim_func **ret, CUmodule hmod, const char *name) {
  SIM_REQUIRE_INIT();
  struct sim_module *m = (struct sim_module *)hmod;
  if (!ret || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!m || m->magic != SIM_MODULE_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  if (strlen(name) >= sizeof(((struct sim_func *)0)->name))
    return CUDA_ERROR_NOT_FOUND;
  pthread_mutex_lock(&sim.mu);
  struct sim_func *f;
  for (f = m->funcs; f; f = f->next)
    if (strcmp(f->name, name) == 0)
      break;
  CUresult rc = CUDA_SUCCESS;
  if (!f) {
    if (m->ptx && !ptx_has_entry(m->ptx, name)) {
      rc = CUDA_ERROR_NOT_FOUND;
    } else if (!(f = calloc(1, sizeof(*f)))) {
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      f->magic = SIM_FUNC_MAGIC;
      f->mod = m;
      strcpy(f->name, name);
      f->spin = strcmp(name, "spin") == 0;
      uint64_t us = sim_config_kernel_us(&sim.cfg, name);
      f->fixed_ns = us > UINT64_MAX / 1000 ? UINT64_MAX / 2 : us * 1000;
      f->next = m->funcs;
      m->funcs = f;
    }
  }
  if (rc == CUDA_SUCCESS)
    *ret = f;
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

const char *sim_func_name(CUfunction hf) {
  struct sim_func *f = (struct sim_func *)hf;
  return f && f->magic == SIM_FUNC_MAGIC ? f->name : NULL;
}

SIM_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  return module_get_function((struct sim_func **)hfunc, hmod, name);
}

SIM_API CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                      const char *name) {
  SIM_REQUIRE_INIT();
  return CUDA_ERROR_NOT_FOUND; /* module globals are not modelled */
}

SIM_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                   void **jitOptionsValues, unsigned int numJitOptions,
                                   CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                   unsigned int numLibraryOptions) {
  SIM_REQUIRE_INIT();
  if (!library)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_module *m;
  CUresult rc = module_new(code, &m);
  if (rc == CUDA_SUCCESS)
    *library = (CUlibrary)m;
  return rc;
}

SIM_API CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                       CUjit_option *jitOptions, void **jitOptionsValues,
                                       unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                       void **libraryOptionValues,
                                       unsigned int numLibraryOptions) {
  SIM_REQUIRE_INIT();
  if (!fileName)
    return CUDA_ERROR_INVALID_VALUE;
  char *buf = read_file(fileName);
  if (!buf)
    return CUDA_ERROR_FILE_NOT_FOUND;
  CUresult rc = cuLibraryLoadData(library, buf, NULL, NULL, 0, NULL, NULL, 0);
  free(buf);
  return rc;
}

SIM_API CUresult cuLibraryUnload(CUlibrary library) {
  return cuModuleUnload((CUmodule)library);
}

SIM_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name) {
  return module_get_function((struct sim_func **)pKernel, (CUmodule)library, name);
}

SIM_API CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library) {
  SIM_REQUIRE_INIT();
  if (!pMod)
    return CUDA_ERROR_INVALID_VALUE;
  *pMod = (CUmodule)library;
  return CUDA_SUCCESS;
}

/* A CUkernel and the CUfunction it gives in a context are the same object here. */
SIM_API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel) {
  SIM_REQUIRE_INIT();
  struct sim_func *f = (struct sim_func *)kernel;
  if (!pFunc)
    return CUDA_ERROR_INVALID_VALUE;
  if (!f || f->magic != SIM_FUNC_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  *pFunc = (CUfunction)f;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc) {
  SIM_REQUIRE_INIT();
  if (!pi)
    return CUDA_ERROR_INVALID_VALUE;
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
  case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 16; break;
  case CU_FUNC_ATTRIBUTE_PTX_VERSION:
  case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
  default: *pi = 0;
  }
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  SIM_REQUIRE_INIT();
  return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  SIM_REQUIRE_INIT();
  return CUDA_SUCCESS;
}

/* ---- launches ---- */

/* Device time of one launch: spin(us) takes us microseconds, others what
 * GSLICE_SIM_KERNEL_US says (default 0). */
static uint64_t kernel_ns(const struct sim_func *f, void **params, void **extra) {
  if (!f->spin)
    return f->fixed_ns;
  uint64_t us = 0;
  if (params && params[0]) {
    memcpy(&us, params[0], sizeof(us));
  } else if (extra) {
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END && i < 16; i += 2)
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER && extra[i + 1])
        memcpy(&us, extra[i + 1], sizeof(us));
  }
  if (us > 3600ull * 1000000ull)
    us = 3600ull * 1000000ull; /* an hour: past that it is surely a bad argument */
  return us * 1000;
}

/* sim.mu held: queue dur ns of kernel on s. */
static void enqueue_locked(struct sim_stream *s, uint64_t dur) {
  uint64_t earliest = sim_stream_ready(s);
  struct sim_machine *m = sim.st.m;
  sim_lock(m);
  sim_reap(m, 0);
  uint64_t end = sim_schedule(m, sim.slot, sim_pdev(s->ctx->dev), earliest, dur);
  sim_unlock(m);
  s->tail = end;
}

struct sim_graph {
  uint32_t magic;
  struct sim_node *nodes;
  size_t n, cap;
  struct sim_graph *next_free;
};

static int graph_add_node(struct sim_graph *g, const struct sim_node *node) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    struct sim_node *n = realloc(g->nodes, cap * sizeof(*n));
    if (!n)
      return -ENOMEM;
    g->nodes = n;
    g->cap = cap;
  }
  g->nodes[g->n++] = *node;
  return 0;
}

static int graph_add(struct sim_graph *g, uint64_t dur) {
  struct sim_node node = {.type = SIM_NODE_KERNEL, .dur = dur};
  return graph_add_node(g, &node);
}

int sim_capture_add(struct sim_stream *s, const struct sim_node *node) {
  return graph_add_node(s->capture, node);
}

static CUresult launch(CUfunction hf, CUstream h, void **params, void **extra, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_func *f = (struct sim_func *)hf;
  if (!f || f->magic != SIM_FUNC_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  uint64_t dur = kernel_ns(f, params, extra);
  pthread_mutex_lock(&sim.mu);
  if (s->capture) {
    if (graph_add(s->capture, dur) < 0)
      rc = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    enqueue_locked(s, dur);
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream,
                                void **kernelParams, void **extra) {
  return launch(f, hStream, kernelParams, extra, 0);
}

SIM_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX,
                                     unsigned int blockDimY, unsigned int blockDimZ,
                                     unsigned int sharedMemBytes, CUstream hStream,
                                     void **kernelParams, void **extra) {
  return launch(f, hStream, kernelParams, extra, 1);
}

SIM_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                  void **extra) {
  if (!config)
    return CUDA_ERROR_INVALID_VALUE;
  return launch(f, config->hStream, kernelParams, extra, 0);
}

SIM_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                       void **kernelParams, void **extra) {
  if (!config)
    return CUDA_ERROR_INVALID_VALUE;
  return launch(f, config->hStream, kernelParams, extra, 1);
}

SIM_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                           unsigned int gridDimY, unsigned int gridDimZ,
                                           unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes,
                                           CUstream hStream, void **kernelParams) {
  return launch(f, hStream, kernelParams, NULL, 0);
}

SIM_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                unsigned int gridDimY, unsigned int gridDimZ,
                                                unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ,
                                                unsigned int sharedMemBytes, CUstream hStream,
                                                void **kernelParams) {
  return launch(f, hStream, kernelParams, NULL, 1);
}

/* ---- graphs ---- */

/* Destroyed graphs and executable graphs are recycled, never freed, so destroying one
 * twice is an error (CUDA_ERROR_INVALID_VALUE), not a double free. */
static pthread_mutex_t graph_free_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_graph *graph_free_list;

static struct sim_graph *graph_new(void) {
  pthread_mutex_lock(&graph_free_mu);
  struct sim_graph *g = graph_free_list;
  if (g)
    graph_free_list = g->next_free;
  pthread_mutex_unlock(&graph_free_mu);
  if (!g && !(g = malloc(sizeof(*g))))
    return NULL;
  memset(g, 0, sizeof(*g));
  g->magic = SIM_GRAPH_MAGIC;
  return g;
}

static struct sim_graph *graph_arg(void *h, uint32_t magic) {
  struct sim_graph *g = h;
  return g && g->magic == magic ? g : NULL;
}

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (s->kind == SIM_STREAM_LEGACY)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  pthread_mutex_lock(&sim.mu);
  if (s->capture)
    rc = CUDA_ERROR_ILLEGAL_STATE;
  else if (!(s->capture = graph_new()))
    rc = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  return begin_capture(h, mode, 0);
}
SIM_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) {
  return begin_capture(h, mode, 1);
}
SIM_API CUresult cuStreamBeginCapture(CUstream h) {
  return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}
SIM_API CUresult cuStreamBeginCapture_ptsz(CUstream h) {
  return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 1);
}

static CUresult end_capture(CUstream h, CUgraph *phGraph, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!phGraph)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.mu);
  if (!s->capture) {
    rc = CUDA_ERROR_ILLEGAL_STATE;
  } else {
    *phGraph = (CUgraph)s->capture;
    s->capture = NULL;
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_API CUresult cuStreamEndCapture(CUstream h, CUgraph *phGraph) {
  return end_capture(h, phGraph, 0);
}
SIM_API CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *phGraph) {
  return end_capture(h, phGraph, 1);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *status, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!status)
    return CUDA_ERROR_INVALID_VALUE;
  *status = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *status) {
  return is_capturing(h, status, 0);
}
SIM_API CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *status) {
  return is_capturing(h, status, 1);
}

SIM_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
  SIM_REQUIRE_INIT();
  if (!phGraph)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_graph *g = graph_new();
  if (!g)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *phGraph = (CUgraph)g;
  return CUDA_SUCCESS;
}

static void graph_free(struct sim_graph *g) {
  g->magic = 0;
  free(g->nodes);
  g->nodes = NULL;
  g->n = g->cap = 0;
  pthread_mutex_lock(&graph_free_mu);
  g->next_free = graph_free_list;
  graph_free_list = g;
  pthread_mutex_unlock(&graph_free_mu);
}

SIM_API CUresult cuGraphDestroy(CUgraph hGraph) {
  SIM_REQUIRE_INIT();
  struct sim_graph *g = graph_arg(hGraph, SIM_GRAPH_MAGIC);
  if (!g)
    return CUDA_ERROR_INVALID_VALUE;
  graph_free(g);
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                         const CUgraphNode *dependencies, size_t numDependencies,
                                         const CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  SIM_REQUIRE_INIT();
  struct sim_graph *g = graph_arg(hGraph, SIM_GRAPH_MAGIC);
  if (!g || !phGraphNode || !nodeParams)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_func *f = (struct sim_func *)(nodeParams->func ? (void *)nodeParams->func
                                                            : (void *)nodeParams->kern);
  if (!f || f->magic != SIM_FUNC_MAGIC)
    return CUDA_ERROR_INVALID_VALUE;
  if (graph_add(g, kernel_ns(f, nodeParams->kernelParams, nodeParams->extra)) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  /* Nodes are run as a chain in the order added: with one kernel at a time on the
   * device, any order the edges allow takes the same device time. */
  *phGraphNode = (CUgraphNode)(uintptr_t)g->n;
  return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph) {
  SIM_REQUIRE_INIT();
  struct sim_graph *g = graph_arg(hGraph, SIM_GRAPH_MAGIC);
  if (!g || !phGraphExec)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_graph *x = graph_new();
  if (!x)
    return CUDA_ERROR_OUT_OF_MEMORY;
  x->magic = SIM_EXEC_MAGIC;
  for (size_t i = 0; i < g->n; i++)
    if (graph_add_node(x, &g->nodes[i]) < 0) {
      graph_free(x);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  *phGraphExec = (CUgraphExec)x;
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags) {
  return instantiate(phGraphExec, hGraph);
}

SIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                       CUgraphNode *phErrorNode, char *logBuffer,
                                       size_t bufferSize) {
  if (logBuffer && bufferSize)
    logBuffer[0] = 0;
  return instantiate(phGraphExec, hGraph);
}

SIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                    CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize) {
  return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  SIM_REQUIRE_INIT();
  struct sim_graph *x = graph_arg(hGraphExec, SIM_EXEC_MAGIC);
  if (!x)
    return CUDA_ERROR_INVALID_VALUE;
  graph_free(x);
  return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec hGraphExec, CUstream h, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_graph *x = graph_arg(hGraphExec, SIM_EXEC_MAGIC);
  if (!x)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  CUresult rc = sim_stream_get(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS; i++) {
    const struct sim_node *nd = &x->nodes[i];
    /* Copies and memsets move their bytes as the launch reaches them, as async ones do
     * (and, like them, check their ranges under sim.mu themselves). */
    if (nd->type == SIM_NODE_KERNEL) {
      pthread_mutex_lock(&sim.mu);
      enqueue_locked(s, nd->dur);
      pthread_mutex_unlock(&sim.mu);
    } else if (nd->type == SIM_NODE_COPY) {
      rc = sim_do_copy(nd->dst, nd->src, nd->n, nd->kind);
    } else {
      rc = sim_do_memset((CUdeviceptr)(uintptr_t)nd->dst, nd->value, nd->elem, nd->n);
    }
  }
  return rc;
}

SIM_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  return graph_launch(hGraphExec, hStream, 0);
}
SIM_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return graph_launch(hGraphExec, hStream, 1);
}

SIM_API CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId) {
  if (secure_getenv("GSLICE_SIM_TRACE") && pExportTableId) {
    const unsigned char *u = (const unsigned char *)pExportTableId->bytes;
    fprintf(stderr, "gslice-sim: cuGetExportTable(");
    for (int i = 0; i < 16; i++)
      fprintf(stderr, "%02x", u[i]);
    fprintf(stderr, ")\n");
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

/* One table for both error calls, so a code's name and text cannot drift apart: every
 * CUresult of cuda.h by name (text NULL: the name stands for it). A code the driver does not
 * know gets CUDA_ERROR_INVALID_VALUE and a NULL string, as cuGetErrorString documents. */
static const struct {
  CUresult code;
  const char *name, *text;
} error_names[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", NULL},
    {CUDA_ERROR_PROFILER_DISABLED, "CUDA_ERROR_PROFILER_DISABLED", NULL},
    {CUDA_ERROR_PROFILER_NOT_INITIALIZED, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", NULL},
    {CUDA_ERROR_PROFILER_ALREADY_STARTED, "CUDA_ERROR_PROFILER_ALREADY_STARTED", NULL},
    {CUDA_ERROR_PROFILER_ALREADY_STOPPED, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", NULL},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", NULL},
    {CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", NULL},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE", NULL},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_DEVICE_NOT_LICENSED, "CUDA_ERROR_DEVICE_NOT_LICENSED", NULL},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", NULL},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", NULL},
    {CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED", NULL},
    {CUDA_ERROR_UNMAP_FAILED, "CUDA_ERROR_UNMAP_FAILED", NULL},
    {CUDA_ERROR_ARRAY_IS_MAPPED, "CUDA_ERROR_ARRAY_IS_MAPPED", NULL},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", NULL},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", NULL},
    {CUDA_ERROR_ALREADY_ACQUIRED, "CUDA_ERROR_ALREADY_ACQUIRED", NULL},
    {CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED", NULL},
    {CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", NULL},
    {CUDA_ERROR_NOT_MAPPED_AS_POINTER, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", NULL},
    {CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE", NULL},
    {CUDA_ERROR_UNSUPPORTED_LIMIT, "CUDA_ERROR_UNSUPPORTED_LIMIT", NULL},
    {CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", NULL},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", NULL},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", NULL},
    {CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", NULL},
    {CUDA_ERROR_NVLINK_UNCORRECTABLE, "CUDA_ERROR_NVLINK_UNCORRECTABLE", NULL},
    {CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", NULL},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", NULL},
    {CUDA_ERROR_JIT_COMPILATION_DISABLED, "CUDA_ERROR_JIT_COMPILATION_DISABLED", NULL},
    {CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", NULL},
    {CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", NULL},
    {CUDA_ERROR_CONTAINED, "CUDA_ERROR_CONTAINED", NULL},
    {CUDA_ERROR_INVALID_SOURCE, "CUDA_ERROR_INVALID_SOURCE", NULL},
    {CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", NULL},
    {CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", NULL},
    {CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", NULL},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", NULL},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", NULL},
    {CUDA_ERROR_LOSSY_QUERY, "CUDA_ERROR_LOSSY_QUERY", NULL},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", NULL},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", NULL},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", NULL},
    {CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", NULL},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", NULL},
    {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", NULL},
    {CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", NULL},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", NULL},
    {CUDA_ERROR_TOO_MANY_PEERS, "CUDA_ERROR_TOO_MANY_PEERS", NULL},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", NULL},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", NULL},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR", NULL},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION", NULL},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", NULL},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE", NULL},
    {CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC", NULL},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", NULL},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", NULL},
    {CUDA_ERROR_TENSOR_MEMORY_LEAK, "CUDA_ERROR_TENSOR_MEMORY_LEAK", NULL},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", NULL},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_SYSTEM_NOT_READY, "CUDA_ERROR_SYSTEM_NOT_READY", NULL},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", NULL},
    {CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", NULL},
    {CUDA_ERROR_MPS_CONNECTION_FAILED, "CUDA_ERROR_MPS_CONNECTION_FAILED", NULL},
    {CUDA_ERROR_MPS_RPC_FAILURE, "CUDA_ERROR_MPS_RPC_FAILURE", NULL},
    {CUDA_ERROR_MPS_SERVER_NOT_READY, "CUDA_ERROR_MPS_SERVER_NOT_READY", NULL},
    {CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", NULL},
    {CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", NULL},
    {CUDA_ERROR_MPS_CLIENT_TERMINATED, "CUDA_ERROR_MPS_CLIENT_TERMINATED", NULL},
    {CUDA_ERROR_CDP_NOT_SUPPORTED, "CUDA_ERROR_CDP_NOT_SUPPORTED", NULL},
    {CUDA_ERROR_CDP_VERSION_MISMATCH, "CUDA_ERROR_CDP_VERSION_MISMATCH", NULL},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", NULL},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", NULL},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE", NULL},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", NULL},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", NULL},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", NULL},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", NULL},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT", NULL},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", NULL},
    {CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT", NULL},
    {CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", NULL},
    {CUDA_ERROR_EXTERNAL_DEVICE, "CUDA_ERROR_EXTERNAL_DEVICE", NULL},
    {CUDA_ERROR_INVALID_CLUSTER_SIZE, "CUDA_ERROR_INVALID_CLUSTER_SIZE", NULL},
    {CUDA_ERROR_FUNCTION_NOT_LOADED, "CUDA_ERROR_FUNCTION_NOT_LOADED", NULL},
    {CUDA_ERROR_INVALID_RESOURCE_TYPE, "CUDA_ERROR_INVALID_RESOURCE_TYPE", NULL},
    {CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", NULL},
    {CUDA_ERROR_KEY_ROTATION, "CUDA_ERROR_KEY_ROTATION", NULL},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", NULL},
};

static CUresult error_lookup(CUresult error, const char **pStr, int want_name) {
  if (!pStr)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof(error_names) / sizeof(error_names[0]); i++) {
    if (error_names[i].code != error)
      continue;
    *pStr = want_name || !error_names[i].text ? error_names[i].name : error_names[i].text;
    return CUDA_SUCCESS;
  }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGetErrorString(CUresult error, const char **pStr) {
  return error_lookup(error, pStr, 0);
}

SIM_API CUresult cuGetErrorName(CUresult error, const char **pStr) {
  return error_lookup(error, pStr, 1);
}

SIM_API CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
  if (!nodeParams)
    return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof(p));
  p.func = nodeParams->func;
  p.kernelParams = nodeParams->kernelParams;
  p.extra = nodeParams->extra;
  return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &p);
}
