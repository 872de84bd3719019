/* The compute gate: the hook's token client. Launches go ahead only while the slice holds a token;
 * each burst is timed with events, closed when its work is done, and charged to the daemon.
 *
 * Fast path (token valid): one vDSO clock read and a few atomics on this process's burst; no
 * syscall, no lock, no allocation. Slow path (under one mutex): close the burst (stop launching,
 * wait for what was queued to finish, measure it with events), report it, wait for the next
 * token. A helper thread owns the daemon connection: it reads grants and revokes, closes a burst
 * when its token expires or its process has gone idle (so the token goes back at once), and
 * reconnects after the daemon is lost. Meanwhile the slice paces itself at its limit. */
#include "hook.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "compute.h"
#include "proto.h"

#define NS_PER_MS 1000000ull
#define BURST_STREAMS 8
/* The helper's tick while a burst is open. A process is idle when two looks in a row find
 * nothing queued and no launch: 0.5-1 ms, longer than a synchronize-and-relaunch takes (tens
 * of us), so a process between two batches keeps its token, and one that stopped hands it
 * back about a millisecond after its last kernel ended. */
#define IDLE_TICK_NS 500000ull
#define IDLE_TICKS 2
/* A grant nobody here takes up within this is handed back. */
#define UNUSED_GRANT_NS 2000000ull
/* Without a daemon: bursts of this length, paced at the slice's limit. */
#define SELF_QUANTUM_NS (10 * NS_PER_MS)
#define RECONNECT_NS (200 * NS_PER_MS)
/* A grant later than this: the hook asks whether the daemon is there at all (PING). A slice can
 * rightly wait longer (others' guarantees come first), so a late grant alone proves nothing. */
#define GRANT_WAIT_NS (1000 * NS_PER_MS)
/* No PONG within this: the daemon is stopped (SIGSTOP, a debugger) or hung; the slice paces
 * itself at its limit until the daemon answers, as when it is lost (a 12 s stop of the daemon
 * stopped every slice's GPU work for 12 s). */
#define PING_WAIT_NS (500 * NS_PER_MS)
/* Launches per burst when nothing is known yet about this process's kernels. */
#define FIRST_BUDGET 16
#define MAX_BUDGET (1u << 20)

enum mode { MODE_OFF, MODE_DAEMON, MODE_SELF };

/* One GPU (as this process numbers them) of this process. */
struct burst {
  _Atomic uint64_t valid_until; /* launches go ahead before this; 0: no burst open */
  _Atomic uint64_t launches;    /* launches that passed the gate in this burst */
  _Atomic int inflight;         /* launches between the gate and the driver's return */
  _Atomic uintptr_t streams[BURST_STREAMS];
  _Atomic unsigned nstreams;
  _Atomic uint64_t budget; /* launches allowed in this burst: the quantum over the mean kernel */
  bool open;
  bool thread_local_stream; /* a per-thread stream: only a context sync sees all of it */
  uint32_t generation;
  uint64_t opened_at;
  CUcontext ctx;
  CUevent start, end[BURST_STREAMS], probe[BURST_STREAMS];
  /* A burst is charged its segments: from a launch to the synchronize that waited for it. The
   * idle time between a synchronize and the next launch is the process's own, not the device's
   * (a 0.2 ms-kernel slice synchronizing every 8 kernels was charged 10-25% above what ran on a
   * loaded machine, and fell under its request where requests add up to 100%). */
  CUevent seg_start;
  bool seg_open;          /* a segment is open: seg_start marks where it began */
  uint64_t seg_used_ns;   /* device time of the burst's closed segments */
  uint64_t seg_span_ns;   /* from the burst's start to its last closed segment's end */
  uint64_t sync_seq;      /* bumped at each mark, burst open and close: a stale mark is ignored */
  uint64_t mark_launches; /* launches when the last mark's end events were recorded */
  bool have_events;
  bool probe_set;
  uint64_t probe_launches;
  uint32_t idle_ticks; /* helper looks in a row that found nothing queued and no launch */
  uint64_t kernel_ns;  /* EWMA of device time per launch */
  /* Daemon side of the token. */
  bool waiting; /* a TOKEN_REQUEST is out */
  bool granted; /* a grant arrived, not yet opened */
  bool denied;  /* the daemon refused this GPU: pace at the limit */
  struct gs_msg_token_grant grant;
  uint64_t granted_at;   /* when the grant arrived */
  int gate_waiters;      /* launching threads waiting for a token */
  uint64_t self_next;    /* self-paced: no burst before this */
  uint64_t requested_at; /* when the TOKEN_REQUEST out went */
  bool self_burst;       /* the open burst is self-paced, not the daemon's token */
};

struct compute {
  _Atomic int state; /* 0: not set up, 1: set up */
  pthread_mutex_t init_mu;
  _Atomic int mode; /* enum mode: the fast path reads it, the helper changes it */
  uint32_t slice_id;
  uint64_t slice_nonce; /* GSLICE_SLICE_NONCE: the slice's identity beyond its id */
  bool stale;           /* the daemon's slice of this id is another one: never reconnect */
  uint32_t limit_pct;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int fd;      /* the daemon connection, -1 when lost */
  int wake_fd; /* eventfd: wakes the helper */
  bool said_lost;
  uint64_t ping_at;  /* a PING is out since then, 0: none */
  bool unresponsive; /* no PONG within PING_WAIT_NS: self-paced until the daemon answers */
  uint64_t ping_cookie;
  uint64_t next_connect;
  unsigned char in[1024] __attribute__((aligned(8)));
  size_t inlen;
  struct burst b[GS_MAX_GPUS];
};

/* The hook's init-once table for compute. */
static struct compute C = {.init_mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .wake_fd = -1};
static __thread int tl_gated = -1;
static __thread CUcontext tl_ctx;
static __thread int tl_dev = -1;

static void wake_helper(void) {
  uint64_t one = 1;
  if (C.wake_fd >= 0 && write(C.wake_fd, &one, sizeof(one)) < 0) {
    /* Full counter: the helper is awake anyway. */
  }
}

/* ---- the daemon connection (mu held) ---- */

static int send_msg(uint32_t type, const void *body, size_t len) {
  if (C.fd < 0)
    return -ENOTCONN;
  int r = gs_client_send(C.fd, type, 0, body, len);
  if (r < 0) {
    /* The helper notices the broken connection and reconnects. */
    shutdown(C.fd, SHUT_RDWR);
  }
  return r;
}

static void lost_daemon(void) {
  if (C.fd >= 0)
    close(C.fd);
  C.fd = -1;
  C.inlen = 0;
  C.mode = MODE_SELF;
  C.ping_at = 0;
  C.unresponsive = false;
  C.next_connect = gs_mono_ns() + RECONNECT_NS;
  for (int i = 0; i < GS_MAX_GPUS; i++) {
    C.b[i].waiting = false;
    C.b[i].granted = false;
  }
  if (!C.said_lost)
    gs_log(GS_LOG_WARN,
           "lost the gslice daemon: slice %u keeps running at no more than its "
           "%u%% limit and reconnects in the background",
           C.slice_id, C.limit_pct);
  C.said_lost = true;
  pthread_cond_broadcast(&C.cv);
}

/* Connects and says hello; mu is dropped meanwhile when `locked`, so a
 * slow daemon never stalls the gate. */
static int try_connect(bool locked) {
  struct gs_msg_hello_ok ok;
  int fd, r;

  if (locked)
    pthread_mutex_unlock(&C.mu);
  r = gs_client_connect(gs_client_socket_path(), &fd);
  if (r == 0) {
    r = gs_client_hello_slice(fd, GS_ROLE_HOOK, C.slice_id, C.slice_nonce, &ok, NULL, 0);
    if (r < 0)
      close(fd);
  }
  if (locked)
    pthread_mutex_lock(&C.mu);
  if (r == -ESTALE && !C.stale) {
    /* A daemon that lost this slice's state gave its id to another slice: joining it would
     * run under a stranger's limits. Paced at our own limit from here on, said once. */
    C.stale = true;
    gs_log(GS_LOG_WARN,
           "the gslice daemon's slice %u is not this process's slice (the daemon "
           "lost its state): running unscheduled at no more than the %u%% limit; "
           "run the program again under gslice run",
           C.slice_id, C.limit_pct);
  }
  if (r < 0)
    return r;
  C.fd = fd;
  C.limit_pct = ok.spec.compute_limit;
  C.mode = MODE_DAEMON;
  if (C.said_lost)
    gs_log(GS_LOG_WARN, "reconnected to the gslice daemon (slice %u)", C.slice_id);
  C.said_lost = false;
  for (int i = 0; i < GS_MAX_GPUS; i++)
    C.b[i].denied = false;
  pthread_cond_broadcast(&C.cv);
  return 0;
}

/* ---- bursts (mu held) ---- */

static int current_dev(CUcontext *ret_ctx) {
  const struct gs_real *r = gs_real();
  CUcontext ctx = NULL;
  CUdevice dev;

  if (!r->cuCtxGetCurrent || r->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
    return -1;
  if (ctx != tl_ctx || tl_dev < 0) {
    if (!r->cuCtxGetDevice || r->cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
        dev >= GS_MAX_GPUS)
      return -1;
    tl_ctx = ctx;
    tl_dev = dev;
  }
  *ret_ctx = ctx;
  return tl_dev;
}

static void destroy_events(struct burst *b) {
  const struct gs_real *r = gs_real();
  if (!b->have_events || !r->cuEventDestroy_v2)
    return;
  r->cuEventDestroy_v2(b->start);
  r->cuEventDestroy_v2(b->seg_start);
  for (int i = 0; i < BURST_STREAMS; i++) {
    r->cuEventDestroy_v2(b->end[i]);
    r->cuEventDestroy_v2(b->probe[i]);
  }
  b->have_events = false;
}

/* Events live in the burst's context: made once, again only if the context changes. */
static int make_events(struct burst *b, CUcontext ctx) {
  const struct gs_real *r = gs_real();

  if (b->have_events && b->ctx == ctx)
    return 0;
  destroy_events(b);
  b->ctx = ctx;
  if (!r->cuEventCreate || r->cuEventCreate(&b->start, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
      r->cuEventCreate(&b->seg_start, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
    return -EIO;
  for (int i = 0; i < BURST_STREAMS; i++)
    if (r->cuEventCreate(&b->end[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
        r->cuEventCreate(&b->probe[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS)
      return -EIO;
  b->have_events = true;
  return 0;
}

static CUresult record(CUevent ev, CUstream s) {
  const struct gs_real *r = gs_real();
  return r->cuEventRecord ? r->cuEventRecord(ev, s) : CUDA_ERROR_NOT_FOUND;
}

static bool elapsed_ms(float *ret_ms, CUevent from, CUevent to) {
  const struct gs_real *r = gs_real();
  CUresult er = r->cuEventElapsedTime_v2 ? r->cuEventElapsedTime_v2(ret_ms, from, to)
                                         : r->cuEventElapsedTime(ret_ms, from, to);
  return er == CUDA_SUCCESS;
}

static bool stream_known(struct burst *b, CUstream s) {
  unsigned n = atomic_load(&b->nstreams);
  for (unsigned i = 0; i < n; i++)
    if (atomic_load(&b->streams[i]) == (uintptr_t)s)
      return true;
  return false;
}

/* A stream joins the burst before its first launch in it. */
static void add_stream(struct burst *b, CUstream s) {
  unsigned n = atomic_load(&b->nstreams);
  if (stream_known(b, s))
    return;
  if (s == CU_STREAM_PER_THREAD)
    b->thread_local_stream = true;
  if (n >= BURST_STREAMS) {
    /* Too many to time one by one: the close syncs the whole context. */
    b->thread_local_stream = true;
    return;
  }
  atomic_store(&b->streams[n], (uintptr_t)s);
  atomic_store(&b->nstreams, n + 1);
}

static void open_burst(struct burst *b, CUcontext ctx, CUstream s, uint32_t gen, uint64_t until,
                       uint64_t quantum) {
  uint64_t k = b->kernel_ns;

  b->open = true;
  b->generation = gen;
  b->opened_at = gs_mono_ns();
  b->thread_local_stream = false;
  b->probe_set = false;
  b->idle_ticks = 0;
  atomic_store(&b->nstreams, 0);
  atomic_store(&b->launches, 0);
  /* Launches are asynchronous: without a budget a slice could queue seconds
   * of work inside one token. The budget keeps what is queued near the
   * quantum, by this process's measured kernel length. */
  uint64_t budget = k ? quantum / k : FIRST_BUDGET;
  if (budget < 1)
    budget = 1;
  if (budget > MAX_BUDGET)
    budget = MAX_BUDGET;
  atomic_store(&b->budget, budget);
  b->seg_open = true;
  b->seg_used_ns = b->seg_span_ns = 0;
  b->sync_seq++;
  if (make_events(b, ctx) < 0 || record(b->start, s) != CUDA_SUCCESS ||
      record(b->seg_start, s) != CUDA_SUCCESS)
    b->thread_local_stream = true; /* no events: wall time it is */
  add_stream(b, s);
  /* Which stream the start event went on: a _ptsz launch on NULL must be
   * timed on its thread's stream, never on the legacy one (launch.c). */
  gs_log(GS_LOG_DEBUG, "compute: burst %u opened on the %s stream", gen,
         s == CU_STREAM_PER_THREAD            ? "per-thread"
         : s == NULL || s == CU_STREAM_LEGACY ? "legacy"
                                              : "created");
  atomic_store(&b->valid_until, until);
}

/* Closes the burst of GPU `dev`: no launch passes from here on; what was
 * queued runs to its end (a kernel cannot be cut), and the burst's device
 * time, overrun included, is what gets charged. */
static void close_burst(int dev, bool from_helper, bool more) {
  const struct gs_real *r = gs_real();
  struct burst *b = &C.b[dev];
  uint64_t used = 0, span = 0, launches, seen;
  unsigned n;

  if (!b->open)
    return;
  b->sync_seq++;
  atomic_store(&b->valid_until, 0);
  while (atomic_load(&b->inflight) > 0)
    sched_yield();
  seen = launches = atomic_load(&b->launches);
  if (launches > atomic_load(&b->budget))
    launches = atomic_load(&b->budget); /* refused fast-path attempts counted themselves */
  n = atomic_load(&b->nstreams);
  CUcontext saved = NULL;
  if (from_helper && r->cuCtxGetCurrent && r->cuCtxSetCurrent) {
    r->cuCtxGetCurrent(&saved);
    r->cuCtxSetCurrent(b->ctx);
  }
  if (b->have_events && !b->thread_local_stream && !b->seg_open) {
    /* Ended at a synchronize, nothing launched since. */
    used = b->seg_used_ns;
    span = b->seg_span_ns;
  } else if (b->have_events && !b->thread_local_stream) {
    /* Nothing launched since the helper's last probe: the probe marks the
     * true end, not the moment someone noticed. */
    bool use_probe = b->probe_set && b->probe_launches == seen;
    float seg_ms = 0, span_ms = 0;
    bool ok = true;
    for (unsigned i = 0; i < n && ok; i++) {
      CUevent e = use_probe ? b->probe[i] : b->end[i];
      float a, z;
      if (!use_probe)
        ok = record(e, (CUstream)atomic_load(&b->streams[i])) == CUDA_SUCCESS;
      ok = ok && r->cuEventSynchronize(e) == CUDA_SUCCESS;
      ok = ok && elapsed_ms(&a, b->seg_start, e) && elapsed_ms(&z, b->start, e);
      if (ok && a > seg_ms)
        seg_ms = a;
      if (ok && z > span_ms)
        span_ms = z;
    }
    if (ok) {
      used = b->seg_used_ns + (uint64_t)((double)seg_ms * 1e6);
      span = (uint64_t)((double)span_ms * 1e6);
      if (span < b->seg_span_ns)
        span = b->seg_span_ns;
    } else {
      b->thread_local_stream = true;
    }
  }
  if (!b->have_events || b->thread_local_stream) {
    if (r->cuCtxSynchronize)
      r->cuCtxSynchronize();
    used = gs_mono_ns() - b->opened_at;
    span = used;
  }
  if (from_helper && r->cuCtxSetCurrent)
    r->cuCtxSetCurrent(saved);
  if (launches && used) {
    uint64_t k = used / launches;
    b->kernel_ns = b->kernel_ns ? (3 * b->kernel_ns + k) / 4 : k;
  } else if (launches && !used) {
    b->kernel_ns = 1000; /* free kernels: count them as 1 us so the budget stays finite */
  }
  b->open = false;
  gs_log(GS_LOG_DEBUG, "compute: gpu %d burst %u closed by %s: %llu ns, %llu launches%s", dev,
         b->generation, from_helper ? "helper" : "gate", (unsigned long long)used,
         (unsigned long long)launches, b->thread_local_stream ? " (wall time)" : "");
  if (C.mode == MODE_DAEMON && !b->denied && !b->self_burst) {
    /* The burst's end stays where it was; its start moves up by the idle time left out, so a
     * lone participant's span is what it ran, and a shared token's span still ends where the
     * last participant's work did. */
    uint64_t idle = span > used ? span - used : 0;
    struct gs_msg_token_release rel = {.gpu = (uint32_t)dev,
                                       .generation = b->generation,
                                       .used_ns = used,
                                       .launches = launches,
                                       .more = more,
                                       .start_ns = b->opened_at + idle};
    if (send_msg(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel)) == 0 && more) {
      b->waiting = true;
      b->requested_at = gs_mono_ns();
    }
  } else if (C.limit_pct < 100) {
    b->self_next = b->opened_at + used * 100 / C.limit_pct;
  }
}

/* The helper's look at a GPU: a grant left unused, an expired burst, or an idle one. */
static void check_burst(int dev, uint64_t now) {
  const struct gs_real *r = gs_real();
  struct burst *b = &C.b[dev];
  uint64_t launches;
  unsigned n;

  if (b->granted && !b->open && b->gate_waiters == 0 && now >= b->granted_at + UNUSED_GRANT_NS) {
    struct gs_msg_token_release rel = {.gpu = (uint32_t)dev, .generation = b->grant.generation};
    b->granted = false;
    send_msg(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel));
    return;
  }
  if (!b->open)
    return;
  launches = atomic_load(&b->launches);
  if (now >= atomic_load(&b->valid_until)) {
    /* Expired while the process is probably synchronizing on what it queued:
     * it will want more, so it stays in the running for the next pick (an
     * unused grant comes back after UNUSED_GRANT_NS). */
    close_burst(dev, true, launches > 0);
    return;
  }
  if (!b->have_events || b->thread_local_stream)
    return;
  if (!b->probe_set || b->probe_launches != launches) {
    /* New launches since the last look: mark where the queue ends now. */
    CUcontext saved = NULL;
    n = atomic_load(&b->nstreams);
    r->cuCtxGetCurrent(&saved);
    r->cuCtxSetCurrent(b->ctx);
    bool ok = true;
    for (unsigned i = 0; i < n; i++)
      ok = ok && record(b->probe[i], (CUstream)atomic_load(&b->streams[i])) == CUDA_SUCCESS;
    r->cuCtxSetCurrent(saved);
    b->probe_set = ok;
    b->probe_launches = launches;
    b->idle_ticks = 0;
    return;
  }
  n = atomic_load(&b->nstreams);
  for (unsigned i = 0; i < n; i++)
    if (r->cuEventQuery(b->probe[i]) != CUDA_SUCCESS) {
      b->idle_ticks = 0;
      return;
    }
  /* Nothing queued and nothing launched: after IDLE_TICKS looks, nothing is
   * left to run, and the token goes back at once. */
  if (++b->idle_ticks >= IDLE_TICKS)
    close_burst(dev, true, false);
}

/* ---- the helper thread ---- */

static void handle_msg(const struct gs_msg *m) {
  /* Whatever it sends, the daemon is there: late grants are waited for again. */
  if (C.unresponsive)
    gs_log(GS_LOG_WARN, "the gslice daemon answers again: slice %u is scheduled by it again",
           C.slice_id);
  if (C.ping_at || C.unresponsive) {
    uint64_t now = gs_mono_ns();
    for (int i = 0; i < GS_MAX_GPUS; i++)
      if (C.b[i].waiting)
        C.b[i].requested_at = now;
  }
  C.ping_at = 0;
  C.unresponsive = false;
  if (m->hdr.type == GS_MSG_PONG) {
    pthread_cond_broadcast(&C.cv);
  } else if (m->hdr.type == GS_MSG_TOKEN_GRANT) {
    struct burst *b = &C.b[m->u.token_grant.gpu];
    if (!b->waiting) {
      /* Nobody asked (any more): hand it straight back. */
      struct gs_msg_token_release rel = {.gpu = m->u.token_grant.gpu,
                                         .generation = m->u.token_grant.generation};
      send_msg(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel));
      return;
    }
    b->waiting = false;
    b->granted = true;
    b->granted_at = gs_mono_ns();
    b->grant = m->u.token_grant;
    pthread_cond_broadcast(&C.cv);
  } else if (m->hdr.type == GS_MSG_TOKEN_REVOKE) {
    struct burst *b = &C.b[m->u.token_revoke.gpu];
    if (b->open && b->generation == m->u.token_revoke.generation)
      close_burst((int)m->u.token_revoke.gpu, true, false);
  } else if (m->hdr.type == GS_MSG_ERROR) {
    /* A token request refused (GPU not in the slice): pace at the limit. */
    for (int i = 0; i < GS_MAX_GPUS; i++)
      if (C.b[i].waiting) {
        C.b[i].waiting = false;
        C.b[i].denied = true;
      }
    pthread_cond_broadcast(&C.cv);
  }
}

static void read_daemon(void) {
  for (;;) {
    ssize_t n = recv(C.fd, C.in + C.inlen, sizeof(C.in) - C.inlen, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      lost_daemon();
      return;
    }
    if (n < 0)
      return;
    C.inlen += (size_t)n;
    for (;;) {
      size_t len;
      struct gs_msg m;
      int r = gs_msg_frame(C.in, C.inlen, sizeof(C.in), &len);
      if (r == -EAGAIN)
        break;
      if (r < 0 || gs_msg_decode(C.in, len, &m) < 0) {
        lost_daemon();
        return;
      }
      handle_msg(&m);
      gs_msg_consume(C.in, &C.inlen, len);
    }
  }
}

static void *helper(void *arg) {
  (void)arg;
  pthread_mutex_lock(&C.mu);
  for (;;) {
    uint64_t now = gs_mono_ns(), wake = UINT64_MAX;
    struct pollfd p[2] = {{.fd = C.wake_fd, .events = POLLIN}, {.fd = C.fd, .events = POLLIN}};
    for (int i = 0; i < GS_MAX_GPUS; i++) {
      check_burst(i, now);
      if (C.b[i].granted && !C.b[i].open && C.b[i].granted_at + UNUSED_GRANT_NS < wake)
        wake = C.b[i].granted_at + UNUSED_GRANT_NS;
      if (C.b[i].open) {
        uint64_t t = now + IDLE_TICK_NS, v = atomic_load(&C.b[i].valid_until);
        if (v && v < t)
          t = v;
        if (t < wake)
          wake = t;
      }
    }
    if (C.fd < 0 && C.slice_id && !C.stale) {
      if (now >= C.next_connect && try_connect(true) < 0)
        C.next_connect = now + RECONNECT_NS;
      if (C.fd < 0 && C.next_connect < wake)
        wake = C.next_connect;
    }
    p[1].fd = C.fd;
    int timeout = wake == UINT64_MAX ? -1 : (int)((wake > now ? wake - now : 0) / NS_PER_MS);
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 0};
    pthread_mutex_unlock(&C.mu);
    if (wake != UINT64_MAX && timeout == 0) {
      ts.tv_nsec = (long)(wake > now ? wake - now : 0);
      ppoll(p, 2, &ts, NULL);
    } else {
      poll(p, 2, timeout);
    }
    pthread_mutex_lock(&C.mu);
    if (p[0].revents & POLLIN) {
      uint64_t v;
      if (read(C.wake_fd, &v, sizeof(v)) < 0) {
        /* EAGAIN: someone else drained it. */
      }
    }
    if (C.fd >= 0 && p[1].fd == C.fd && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
      read_daemon();
  }
  return NULL;
}

/* ---- set-up ---- */

static void child_after_fork(void) {
  /* The helper does not exist in the child, and the connection is the
   * parent's: start over at the child's first launch. */
  if (C.fd >= 0)
    close(C.fd);
  if (C.wake_fd >= 0)
    close(C.wake_fd);
  C.fd = C.wake_fd = -1;
  memset(C.b, 0, sizeof(C.b));
  pthread_mutex_init(&C.init_mu, NULL);
  atomic_store(&C.state, 0);
}

static void compute_setup(void) {
  const char *slice = secure_getenv("GSLICE_SLICE");
  const char *limit = secure_getenv("GSLICE_COMPUTE_LIMIT");
  pthread_condattr_t ca;
  pthread_t t;
  static bool atfork_done;

  if (!atfork_done) {
    pthread_atfork(NULL, NULL, child_after_fork);
    atfork_done = true;
  }
  pthread_mutex_init(&C.mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&C.cv, &ca);
  pthread_condattr_destroy(&ca);
  C.mode = MODE_OFF;
  C.limit_pct = 100;
  if (limit && *limit) {
    unsigned long v = strtoul(limit, NULL, 10);
    if (v >= 1 && v <= 100)
      C.limit_pct = (uint32_t)v;
  }
  if (!slice || !*slice || strtoul(slice, NULL, 10) == 0) {
    /* Worth a warning only where someone set gslice up for this process
     * (a memory cap, a state dir) and may expect compute limits too. */
    bool configured = secure_getenv("GSLICE_MEMORY_LIMIT") || secure_getenv("GSLICE_STATE_DIR");
    gs_log(configured ? GS_LOG_WARN : GS_LOG_INFO,
           "not in a gslice slice (GSLICE_SLICE unset, no daemon to ask): compute is not "
           "limited; memory caps still hold");
    return;
  }
  C.slice_id = (uint32_t)strtoul(slice, NULL, 10);
  const char *nonce = secure_getenv("GSLICE_SLICE_NONCE");
  C.slice_nonce = nonce ? strtoull(nonce, NULL, 16) : 0;
  C.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (try_connect(false) < 0) {
    C.mode = MODE_SELF;
    C.next_connect = gs_mono_ns() + RECONNECT_NS;
  }
  if (C.mode == MODE_SELF && !C.stale) {
    gs_log(GS_LOG_WARN,
           "no gslice daemon answers on %s: slice %u runs at no more than its %u%% "
           "limit and keeps trying to connect",
           gs_client_socket_path(), C.slice_id, C.limit_pct);
    C.said_lost = true;
  }
  if (pthread_create(&t, NULL, helper, NULL) != 0) {
    gs_log(GS_LOG_ERROR, "cannot start the compute helper thread: compute is not limited");
    C.mode = MODE_OFF;
    return;
  }
  pthread_detach(t);
}

static void ensure_setup(void) {
  pthread_mutex_lock(&C.init_mu);
  if (atomic_load(&C.state) == 0) {
    compute_setup();
    atomic_store(&C.state, 1);
  }
  pthread_mutex_unlock(&C.init_mu);
}

/* ---- the gate ---- */

static CUresult slow_path(int dev, CUcontext ctx, CUstream stream) {
  struct burst *b = &C.b[dev];

  pthread_mutex_lock(&C.mu);
  for (;;) {
    uint64_t now = gs_mono_ns();
    if (b->open && now < atomic_load(&b->valid_until) &&
        atomic_load(&b->launches) < atomic_load(&b->budget) && b->ctx == ctx) {
      /* Still valid: this stream is new to the burst, or the burst's last segment ended at a
       * synchronize and this launch begins the next one. */
      if (!b->seg_open) {
        b->seg_open = true;
        if (record(b->seg_start, stream) != CUDA_SUCCESS)
          b->thread_local_stream = true;
      }
      add_stream(b, stream);
      atomic_fetch_add(&b->inflight, 1);
      atomic_fetch_add(&b->launches, 1);
      break;
    }
    if (b->open) {
      close_burst(dev, false, true);
      continue;
    }
    if (b->granted) {
      b->granted = false;
      if (now < b->grant.valid_until_ns) {
        open_burst(b, ctx, stream, b->grant.generation, b->grant.valid_until_ns,
                   b->grant.quantum_ns);
        b->self_burst = false;
        /* The helper watches the burst from now on (expiry, idle). */
        wake_helper();
      } else {
        /* Expired before we got to it: give it back unused. */
        struct gs_msg_token_release rel = {.gpu = (uint32_t)dev, .generation = b->grant.generation};
        send_msg(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel));
      }
      continue;
    }
    if (C.mode == MODE_DAEMON && !b->denied && !C.unresponsive) {
      if (!b->waiting) {
        struct gs_msg_token_request q = {.gpu = (uint32_t)dev};
        if (send_msg(GS_MSG_TOKEN_REQUEST, &q, sizeof(q)) < 0) {
          wake_helper();
          pthread_cond_wait(&C.cv, &C.mu);
          continue;
        }
        b->waiting = true;
        b->requested_at = now;
      }
      /* The wait is bounded: a late grant sends a PING, and no PONG in time means the daemon
       * is not there (the request stays out: its grant is taken when it comes). */
      uint64_t deadline = C.ping_at ? C.ping_at + PING_WAIT_NS : b->requested_at + GRANT_WAIT_NS;
      if (now >= deadline) {
        if (!C.ping_at) {
          struct gs_msg_ping p = {.cookie = ++C.ping_cookie};
          C.ping_at = now;
          send_msg(GS_MSG_PING, &p, sizeof(p));
        } else {
          C.unresponsive = true;
          gs_log(GS_LOG_WARN,
                 "the gslice daemon has not answered for %llu ms (stopped?): slice "
                 "%u runs at no more than its %u%% limit until it does",
                 (unsigned long long)((now - b->requested_at) / NS_PER_MS), C.slice_id,
                 C.limit_pct);
          pthread_cond_broadcast(&C.cv);
        }
        continue;
      }
      struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull),
                            .tv_nsec = (long)(deadline % 1000000000ull)};
      b->gate_waiters++;
      pthread_cond_timedwait(&C.cv, &C.mu, &ts);
      b->gate_waiters--;
      continue;
    }
    /* No daemon (or it refused this GPU): pace at the limit ourselves. */
    if (now < b->self_next) {
      struct timespec ts = {.tv_sec = (time_t)(b->self_next / 1000000000ull),
                            .tv_nsec = (long)(b->self_next % 1000000000ull)};
      pthread_cond_timedwait(&C.cv, &C.mu, &ts);
      continue;
    }
    open_burst(b, ctx, stream, 0, now + SELF_QUANTUM_NS, SELF_QUANTUM_NS);
    b->self_burst = true;
    wake_helper();
  }
  pthread_mutex_unlock(&C.mu);
  tl_gated = dev;
  return CUDA_SUCCESS;
}

CUresult gs_compute_before_launch(CUstream stream) {
  CUcontext ctx;
  int dev;

  if (atomic_load_explicit(&C.state, memory_order_acquire) == 0)
    ensure_setup();
  if (C.mode == MODE_OFF)
    return CUDA_SUCCESS;
  dev = current_dev(&ctx);
  if (dev < 0)
    return CUDA_SUCCESS; /* no context: the driver will say so */
  struct burst *b = &C.b[dev];
  atomic_fetch_add(&b->inflight, 1);
  if (gs_mono_ns() < atomic_load(&b->valid_until) && stream_known(b, stream) &&
      atomic_fetch_add(&b->launches, 1) < atomic_load(&b->budget)) {
    tl_gated = dev;
    return CUDA_SUCCESS;
  }
  atomic_fetch_sub(&b->inflight, 1);
  return slow_path(dev, ctx, stream);
}

void gs_compute_after_launch(void) {
  if (tl_gated >= 0) {
    atomic_fetch_sub(&C.b[tl_gated].inflight, 1);
    tl_gated = -1;
  }
}

/* ---- segments: the idle time between a synchronize and the next launch is not charged ---- */

uint64_t gs_compute_before_sync(void) {
  CUcontext ctx;
  uint64_t mark = 0;
  int dev;

  if (atomic_load_explicit(&C.state, memory_order_acquire) == 0 || C.mode == MODE_OFF)
    return 0;
  dev = current_dev(&ctx);
  if (dev < 0)
    return 0;
  struct burst *b = &C.b[dev];
  if (atomic_load(&b->valid_until) == 0)
    return 0; /* no burst open: nothing to mark */
  pthread_mutex_lock(&C.mu);
  if (b->open && b->seg_open && b->have_events && !b->thread_local_stream && b->ctx == ctx &&
      atomic_load(&b->inflight) == 0) {
    /* End events right behind what is queued: they complete when that work has, and time it. */
    unsigned n = atomic_load(&b->nstreams);
    bool ok = n > 0;
    for (unsigned i = 0; i < n && ok; i++)
      ok = record(b->end[i], (CUstream)atomic_load(&b->streams[i])) == CUDA_SUCCESS;
    if (ok) {
      b->mark_launches = atomic_load(&b->launches);
      mark = (++b->sync_seq << 8) | (uint64_t)(dev + 1);
    }
  }
  pthread_mutex_unlock(&C.mu);
  return mark;
}

void gs_compute_after_sync(uint64_t mark) {
  const struct gs_real *r = gs_real();
  int dev = (int)(mark & 0xff) - 1;

  if (!mark || dev < 0 || dev >= GS_MAX_GPUS)
    return;
  struct burst *b = &C.b[dev];
  pthread_mutex_lock(&C.mu);
  if (b->open && b->seg_open && !b->thread_local_stream && b->sync_seq == mark >> 8 &&
      atomic_load(&b->launches) == b->mark_launches) {
    /* Launches from here on take the slow path (no stream is known), which opens the next
     * segment under mu; wait for any that passed the fast path meanwhile. */
    unsigned n = atomic_load(&b->nstreams);
    atomic_store(&b->nstreams, 0);
    while (atomic_load(&b->inflight) > 0)
      sched_yield();
    float seg_ms = 0, span_ms = 0;
    bool ok = atomic_load(&b->launches) == b->mark_launches;
    for (unsigned i = 0; i < n && ok; i++) {
      float a, z;
      /* The synchronize may have waited for one stream only: every one must be done. */
      ok = r->cuEventQuery(b->end[i]) == CUDA_SUCCESS && elapsed_ms(&a, b->seg_start, b->end[i]) &&
           elapsed_ms(&z, b->start, b->end[i]);
      if (ok && a > seg_ms)
        seg_ms = a;
      if (ok && z > span_ms)
        span_ms = z;
    }
    if (ok) {
      b->seg_used_ns += (uint64_t)((double)seg_ms * 1e6);
      b->seg_span_ns = (uint64_t)((double)span_ms * 1e6);
      b->seg_open = false;
      b->probe_set = false;
      b->idle_ticks = 0;
    } else {
      atomic_store(&b->nstreams, n);
    }
  }
  pthread_mutex_unlock(&C.mu);
}
