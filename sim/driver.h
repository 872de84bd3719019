/* SPDX-License-Identifier: Apache-2.0 */
/* Internals of the simulated libcuda shared by its files: the process-wide driver
 * state (contexts, streams, allocations, pools) and the helpers each phase uses. */
#pragma once
/* Declares every ABI name (cuMemAlloc_v2, cuLaunchKernel_ptsz, the v1 names...) with
 * its own prototype, so the compiler checks each definition against cuda.h. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "state.h"

#define SIM_API __attribute__((visibility("default")))

#define SIM_CTX_MAGIC 0x43545831u
#define SIM_STREAM_MAGIC 0x53545231u
#define SIM_EVENT_MAGIC 0x45564e31u
#define SIM_MODULE_MAGIC 0x4d4f4431u
#define SIM_FUNC_MAGIC 0x46554e31u
#define SIM_POOL_MAGIC 0x504f4f31u
#define SIM_PHYS_MAGIC 0x50485931u
#define SIM_ARRAY_MAGIC 0x41525231u
#define SIM_GRAPH_MAGIC 0x47524131u
#define SIM_EXEC_MAGIC 0x47455831u

#define SIM_GRANULARITY (2ull << 20) /* VMM and pool reservation granularity */
#define SIM_PITCH_ALIGN 512ull

struct sim_graph;
struct sim_array;
struct sim_capture;

enum sim_stream_kind { SIM_STREAM_USER, SIM_STREAM_LEGACY, SIM_STREAM_PER_THREAD };

/* Where queued work stands on a context's device: complete once kernel seq of the context
 * (0: none) and kernel wait of another context on the same device (0: none) have completed,
 * and not before time t. Kernels of one context complete in launch order, so merging two
 * marks of one context keeps the larger seq; wait keeps the later launch (exact for one
 * other context, an approximation across several). */
struct sim_mark {
  uint64_t seq, wait;
  uint64_t t;
};

struct sim_stream {
  uint32_t magic;
  enum sim_stream_kind kind;
  struct sim_ctx *ctx;
  unsigned flags;
  int priority;
  struct sim_mark tail;    /* its queued work */
  struct sim_capture *cap; /* the capture sequence it is in (begun on it or joined), or NULL */
  struct sim_stream *next; /* in ctx->streams */
  unsigned long long id;
};

struct sim_ctx {
  uint32_t magic;
  int dev;
  int primary;
  unsigned refs; /* primary: retain count */
  int active;    /* primary: created (first retain) and not yet destroyed (last release, reset) */
  unsigned flags;
  uint64_t generation; /* bumps when a primary context is reset: per-thread streams expire */
  uint64_t last_seq;   /* its latest kernel with device time: it completes after all others */
  struct sim_stream legacy;
  struct sim_stream *streams; /* user and per-thread streams */
  /* What goes with the context (cuCtxDestroy, the primary's last release, reset); all
   * under sim.mu. Allocations are found through the ranges' ctx. */
  struct sim_event *events;
  struct sim_module *modules;
  struct sim_array *arrays;
  struct sim_ctx *next;
};

struct sim_event {
  uint32_t magic;
  unsigned flags;
  int recorded;
  int resolved;       /* t is known: the work before it has completed */
  struct sim_mark mk; /* the work queued before it */
  uint64_t t;         /* once resolved: device time that work completed */
  /* Last recorded into a capture (its id), else 0: a node of that graph, never completing. */
  unsigned long long captured;
  struct sim_ctx *ctx;
  struct sim_event *prev, *next; /* in ctx->events, or the free list */
};

/* The parameter buffer of the legacy launch (cuParamSet*, cuLaunch*): the driver's 4 KiB. */
#define SIM_PARAM_MAX 4096

struct sim_func {
  uint32_t magic;
  struct sim_module *mod;
  int spin;
  uint64_t fixed_ns;
  struct sim_func *next;
  char name[128];
  /* The legacy launch's state, under sim.mu: cuFuncSetBlockShape (0 until set),
   * cuFuncSetSharedSize, cuParamSetSize and the bytes cuParamSeti/f/v wrote. */
  int block[3];
  unsigned shared, param_size;
  unsigned char params[SIM_PARAM_MAX];
};

struct sim_module {
  uint32_t magic;
  char *ptx; /* text images only; NULL for cubin/fatbin, which accept any name */
  struct sim_func *funcs;
  struct sim_ctx *ctx;            /* NULL for libraries (cuLibraryLoad*), which no context owns */
  struct sim_module *prev, *next; /* in ctx->modules */
};

struct sim_pool {
  uint32_t magic;
  int dev;
  int destroyed;
  uint64_t threshold;
  uint64_t reserved, reserved_high;
  uint64_t used, used_high;
  struct sim_pool *next;
};

struct sim_phys {
  uint32_t magic;
  int dev;
  int fd;
  int released;
  unsigned maps;
  uint64_t size;
  uint64_t charged;
  struct sim_phys *next_free;
};

enum sim_range_kind { SIM_R_ALLOC, SIM_R_POOL, SIM_R_MAPPING, SIM_R_IPC };

/* A live device address range of this process (the device address is the host
 * address of its backing mapping). */
struct sim_range {
  uintptr_t base;
  size_t size;
  enum sim_range_kind kind;
  int dev;
  uint64_t charged; /* bytes counted on the device for it (0 for pool/mapping/ipc) */
  size_t maplen;
  int fd; /* memfd backing (IPC-exported allocations), else -1 */
  struct sim_pool *pool;
  struct sim_phys *phys;
  int managed;
  struct sim_ctx *ctx; /* SIM_R_ALLOC: the context it was made in, and goes with */
};

struct sim_driver {
  int ready;
  CUresult init_rc;
  struct sim_config cfg;
  struct sim_state st;
  int slot;
  /* CUDA_VISIBLE_DEVICES: the program's devices 0..ndev-1 are the machine's pdev[i].
   * Every CUdevice and every dev field below is such an ordinal; the machine (memory,
   * contexts, timelines, UUIDs) is addressed by sim_pdev(). */
  unsigned ndev;
  unsigned pdev[SIM_MAX_DEVICES];
  pthread_mutex_t mu; /* this process's tables; taken before the machine lock */
  struct sim_ctx primary[SIM_MAX_DEVICES];
  struct sim_ctx *contexts;
  struct sim_range **ranges; /* sorted by base */
  size_t nranges, cap_ranges;
  struct sim_pool default_pool[SIM_MAX_DEVICES];
  struct sim_pool *cur_pool[SIM_MAX_DEVICES];
  struct sim_pool *pools; /* created with cuMemPoolCreate */
  /* Under mu: per device, the kernel this process last found complete and its end, so a
   * synchronize or event query of work already known done needs no machine lock, and an event
   * recorded behind it needs no end time. */
  uint64_t done_seq[SIM_MAX_DEVICES], done_end[SIM_MAX_DEVICES];
  /* Capture sequences in progress (capture.c), under mu; ncaptures is read without it. */
  struct sim_capture *captures;
  int ncaptures;
};

/* The one process-wide instance: a driver library is global state by nature. */
extern struct sim_driver sim;

#define SIM_REQUIRE_INIT()                                                                         \
  do {                                                                                             \
    if (!__atomic_load_n(&sim.ready, __ATOMIC_ACQUIRE))                                            \
      return CUDA_ERROR_NOT_INITIALIZED;                                                           \
  } while (0)

/* An entry point taking a stream and its per-thread-default-stream twin (suffix _ptsz
 * or _ptds, the ABI's names), both over one implementation whose last argument says
 * whether stream 0 means the calling thread's default stream. params is the entry
 * point's parameter list as cuda.h declares it (so the compiler checks both against
 * their prototypes); the rest are the arguments passed on. */
#define SIM_TWINS(name, suffix, impl, params, ...)                                                 \
  SIM_API CUresult name params {                                                                   \
    return impl(__VA_ARGS__, 0);                                                                   \
  }                                                                                                \
  SIM_API CUresult name##suffix params {                                                           \
    return impl(__VA_ARGS__, 1);                                                                   \
  }

static inline unsigned sim_pdev(int dev) {
  return sim.pdev[dev];
}

static inline uint64_t sim_round_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

/* core.c */
int sim_dev_ok(CUdevice d);
/* Counts a live context of this process on dev (delta +1 / -1) on the machine. */
void sim_count_context(int dev, int delta);
CUresult sim_charge(int dev, uint64_t bytes);
void sim_uncharge(int dev, uint64_t bytes);
void sim_wait_until(uint64_t t);

/* context.c */
struct sim_ctx *sim_ctx_current(void);
/* The current context, or why there is none: CUDA_ERROR_INVALID_CONTEXT (none bound),
 * CUDA_ERROR_CONTEXT_IS_DESTROYED (the bound one was destroyed / released to zero). */
CUresult sim_ctx_current_rc(struct sim_ctx **ret);
int sim_ctx_alive(const struct sim_ctx *c);
CUresult sim_ctx_sync(struct sim_ctx *c);

/* mem.c: this process's ranges (sim.mu held) */
int sim_range_add(struct sim_range *r);
struct sim_range *sim_range_find(uintptr_t p, size_t n);
void sim_range_remove(struct sim_range *r);
void *sim_backing_map(size_t size, size_t *ret_len);
/* Maps fresh backing and records a range; charged bytes go to the device first. ctx:
 * the context that owns it (plain, pitched, managed), NULL for pool memory. */
CUresult sim_alloc_range(struct sim_ctx *ctx, int dev, size_t size, uint64_t charge,
                         enum sim_range_kind kind, struct sim_pool *pool, CUdeviceptr *dptr);
/* Frees a pool or plain allocation; sim.mu held by nobody. */
CUresult sim_free_range(CUdeviceptr dptr);
/* CUDA_SUCCESS if [p, p + n) lies in one live range, else CUDA_ERROR_INVALID_VALUE. */
CUresult sim_check_dev_range(CUdeviceptr p, size_t n);
/* sim.mu held: a context's allocations (plain, pitched, managed, host) and arrays go
 * with it. */
void sim_ctx_memory_reset(struct sim_ctx *c);

/* copy.c */
CUresult sim_do_copy(void *dst, const void *src, size_t n, int kind);
CUresult sim_do_memset(CUdeviceptr dst, unsigned value, size_t elem, size_t n);

/* pool.c */
void sim_pools_trim(int dev);
void sim_pools_init(void);
/* sim.mu held: gives bytes of p's reservation back to the device. */
void sim_pool_release_locked(struct sim_pool *p, uint64_t bytes);

/* array.c: sim.mu held; a context's arrays go with it. */
void sim_ctx_arrays_reset(struct sim_ctx *c);

/* stream.c */
/* Every use of a stream handle starts here: the stream h names (NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD as the driver reads them; ptds: NULL is the per-thread stream), checked
 * under sim.mu and returned with sim.mu HELD (CUDA_SUCCESS); else its error, sim.mu not held.
 * Another thread may destroy the stream the moment sim.mu is released: a caller that lets go of
 * the lock and comes back to the stream takes it again with sim_stream_relock. */
CUresult sim_stream_lock(CUstream h, int ptds, struct sim_stream **ret);
/* Takes sim.mu again for s, looked up (sim_stream_lock) when its id was id: CUDA_SUCCESS with
 * sim.mu held while s is still that stream; CUDA_ERROR_INVALID_HANDLE, not held, once it was
 * destroyed (or its memory became another stream). */
CUresult sim_stream_relock(struct sim_stream *s, unsigned long long id);
/* sim.mu held: the work new work on s comes after (the legacy stream and blocking streams
 * wait for each other). */
struct sim_mark sim_stream_ready(const struct sim_stream *s);
/* Sleep until the stream's work is done (sync copies wait this way), after the capture rules
 * for waiting on it (capture.c); unsafe: the caller is a potentially unsafe call (a synchronous
 * copy), as waiting on the legacy stream is too. */
CUresult sim_stream_wait(CUstream h, int ptds, int unsafe);
void sim_ctx_streams_reset(struct sim_ctx *c);
/* sim.mu held: a context's events go with it. */
void sim_ctx_events_reset(struct sim_ctx *c);

/* module.c */
const char *sim_func_name(CUfunction f); /* NULL if not a live function */
/* The legacy launch's parameters of f: its block shape set (else CUDA_ERROR_INVALID_VALUE) and
 * its parameter buffer copied into buf (*size bytes). */
CUresult sim_func_legacy_params(CUfunction f, unsigned char buf[SIM_PARAM_MAX], size_t *size);
/* sim.mu held: a context's modules go with it. */
void sim_ctx_modules_reset(struct sim_ctx *c);

/* launch.c */
/* Device time of one launch of f with these parameters. */
uint64_t sim_kernel_ns(const struct sim_func *f, void **params, void **extra);
/* sim.mu held: queues dur ns of kernel on s. */
void sim_enqueue_locked(struct sim_stream *s, uint64_t dur);
void sim_mark_merge(struct sim_mark *into, const struct sim_mark *from);
/* 1 and the device time it completed when the work of mk on dev is complete; else 0 and
 * when it would complete if nothing more were queued. Runs the engine up to now. */
int sim_mark_done(int dev, const struct sim_mark *mk, uint64_t *ret_t);
/* Sleeps until the work of mk on dev is complete; returns the device time it completed. */
uint64_t sim_mark_wait(int dev, const struct sim_mark *mk);

/* graph.c: a captured copy or memset replays its bytes at each launch. */
enum sim_node_type {
  SIM_NODE_KERNEL,
  SIM_NODE_COPY,
  SIM_NODE_MEMSET,
  SIM_NODE_EVENT, /* an external event record (CU_EVENT_RECORD_EXTERNAL) */
  SIM_NODE_HOST,  /* cuLaunchHostFunc */
};
struct sim_node {
  enum sim_node_type type;
  struct sim_event *event; /* event */
  CUhostFn fn;             /* host */
  void *data;              /* host */
  uint64_t dur;            /* kernel */
  void *dst;               /* copy, memset */
  const void *src;         /* copy */
  size_t n;                /* bytes (copy) or elements (memset) */
  unsigned value;          /* memset */
  unsigned elem;           /* memset element size */
  int kind;                /* copy kind, for the range checks */
};
/* sim.mu held: appends to g; -ENOMEM. */
int sim_graph_add_node(struct sim_graph *g, const struct sim_node *node);
struct sim_graph *sim_graph_new(void);
size_t sim_graph_nodes(const struct sim_graph *g);
void sim_graph_free(struct sim_graph *g);
/* stream.c: sim.mu held; records e on s now (what s has queued). */
void sim_event_record_locked(struct sim_event *e, struct sim_stream *s);

/* capture.c: the rules of stream capture (docs/sim.md, "Stream capture"). */
struct sim_capture {
  struct sim_graph *graph;
  CUstreamCaptureMode mode;
  const void *thread; /* the thread that began it (sim_thread_id) */
  int invalid;        /* a prohibited call invalidated it */
  unsigned long long id;
  struct sim_stream *origin;
  struct sim_capture *next; /* in sim.captures */
};
const void *sim_thread_id(void);
static inline int sim_capturing_any(void) {
  return __atomic_load_n(&sim.ncaptures, __ATOMIC_ACQUIRE) != 0;
}
/* sim.mu held: what use of s (queueing work on it, waiting for it) meets: the legacy stream
 * while a blocking stream of its context captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, those
 * captures invalidated), a capture already invalidated (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED),
 * else CUDA_SUCCESS. */
CUresult sim_capture_use_locked(struct sim_stream *s);
/* sim.mu held: appends to s's capture (CUDA_ERROR_OUT_OF_MEMORY). */
CUresult sim_capture_add_locked(struct sim_stream *s, const struct sim_node *node);
/* A potentially unsafe call (cuMemAlloc, a synchronous copy...):
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the captures that prohibit it invalidated when the
 * calling thread's mode and the captures in progress prohibit it; else CUDA_SUCCESS. Takes sim.mu.
 */
CUresult sim_capture_unsafe(const char *call);
/* sim.mu held: a stream of c is capturing (those captures invalidated): synchronizing c
 * necessarily conflicts with capture in every mode. */
int sim_capture_ctx_conflict_locked(struct sim_ctx *c);
/* sim.mu held: the capture of that id if still in progress, else NULL. */
struct sim_capture *sim_capture_by_id_locked(unsigned long long id);
/* why: the call that did it, which GSLICE_SIM_TRACE prints. */
void sim_capture_invalidate_locked(struct sim_capture *cap, const char *why);
/* sim.mu held: s leaves its capture; the capture ends (graph freed) when s began it. */
void sim_capture_stream_gone_locked(struct sim_stream *s);

/* A device pointer as the host address backing it. */
#define SIM_DP(x) ((void *)(uintptr_t)(x))
