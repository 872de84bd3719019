/* SPDX-License-Identifier: Apache-2.0 */
/* The compute gate's daemon link: the connection to gsliced (connect, hello, lost, reconnect),
 * the helper thread that owns it (reads grants and revokes, watches the open bursts, hands back
 * unused grants) and the set-up at the first launch. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "compute_state.h"
#include "fileio.h"
#include "words.h"

struct compute gs_compute_state = {.init_mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .wake_fd = -1};

void gs_link_wake(void) {
  uint64_t one = 1;
  if (C.wake_fd >= 0 && write(C.wake_fd, &one, sizeof(one)) < 0) {
    /* Full counter: the helper is awake anyway. */
  }
}

/* ---- the daemon connection (mu held) ---- */

int gs_link_send(uint32_t type, const void *body, size_t len) {
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

/* ---- the helper thread ---- */

/* A revoke of a grant that no launching thread has opened a burst with yet: one waits for the
 * mutex, or sleeps in the gate until the previous holder's tail. The daemon has given the token to
 * another slice already, so the grant is dropped, never opened; opened, its burst ran beside the
 * next holder's kernels. The daemon charges a revoked token the time it was held until a release
 * of its generation says what ran: this one says nothing did, and asks again in the same message
 * (more) when a launching thread waits, as a close with more work does. */
static void revoke_grant(uint32_t gpu) {
  struct burst *b = &C.b[gpu];
  bool more = b->gate_waiters > 0;
  struct gs_msg_token_release rel = {.gpu = gpu, .generation = b->grant.generation, .more = more};

  b->granted = false;
  gs_log(GS_LOG_DEBUG, "compute: gpu %u grant %u revoked before a burst opened with it%s", gpu,
         b->grant.generation, more ? ": asking again" : "");
  if (gs_link_send(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel)) == 0 && more) {
    b->waiting = true;
    b->requested_at = gs_mono_ns();
  }
  pthread_cond_broadcast(&C.cv);
}

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
      gs_link_send(GS_MSG_TOKEN_RELEASE, &rel, sizeof(rel));
      return;
    }
    b->waiting = false;
    b->granted = true;
    b->granted_at = gs_mono_ns();
    b->grant = m->u.token_grant;
    uint64_t until = m->u.token_grant.valid_until_ns;
    gs_log(GS_LOG_DEBUG,
           "compute: gpu %u grant %u, quantum %.3f ms, valid for %.1f ms, previous tail until %.3f",
           m->u.token_grant.gpu, m->u.token_grant.generation,
           (double)m->u.token_grant.quantum_ns / 1e6,
           until > b->granted_at ? (double)(until - b->granted_at) / 1e6 : 0.0,
           (double)m->u.token_grant.busy_until_ns / 1e6);
    pthread_cond_broadcast(&C.cv);
  } else if (m->hdr.type == GS_MSG_TOKEN_REVOKE) {
    struct burst *b = &C.b[m->u.token_revoke.gpu];
    if (b->open && b->generation == m->u.token_revoke.generation)
      gs_burst_close((int)m->u.token_revoke.gpu, true, false);
    else if (b->granted && b->grant.generation == m->u.token_revoke.generation)
      revoke_grant(m->u.token_revoke.gpu);
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
  /* The helper never captures: its event queries and records must not be prohibited by a
   * program's global capture, in any mode (cuThreadExchangeStreamCaptureMode). */
  gs_burst_relax(true);
  pthread_mutex_lock(&C.mu);
  for (;;) {
    uint64_t now = gs_mono_ns(), wake = UINT64_MAX;
    struct pollfd p[2] = {{.fd = C.wake_fd, .events = POLLIN}, {.fd = C.fd, .events = POLLIN}};
    for (int i = 0; i < GS_MAX_GPUS; i++) {
      gs_burst_check(i, now);
      wake = gs_burst_next_look(&C.b[i], now, wake);
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

/* The TSC for the gate's clock where the kernel keeps time by it: constant, and the same on every
 * CPU (the kernel checks both before it takes it). Elsewhere, or unreadable: CLOCK_MONOTONIC. */
static void clock_setup(void) {
#if defined(__x86_64__)
  char *cs = NULL;
  if (gs_file_read(AT_FDCWD, "/sys/devices/system/clocksource/clocksource0/current_clocksource", 0,
                   64, &cs, NULL) == 0 &&
      strcmp(cs, "tsc\n") == 0) {
    C.mono0 = gs_mono_ns();
    C.tsc0 = __rdtsc();
    C.tsc = true;
  }
  free(cs);
#endif
}

/* A length in the gate's ticks, in ns: by the TSC's rate since set-up (its error: that of two
 * clock reads over the time since, 1e-4 a millisecond after the first launch). */
uint64_t gs_ticks_ns(uint64_t ticks) {
  if (!C.tsc)
    return ticks;
#if defined(__x86_64__)
  uint64_t m = gs_mono_ns(), t = __rdtsc();
  if (t > C.tsc0 && m > C.mono0)
    return (uint64_t)((double)ticks * (double)(m - C.mono0) / (double)(t - C.tsc0));
#endif
  return 0; /* a TSC gone backwards: no gap is taken off */
}

uint64_t gs_ns_ticks(uint64_t ns) {
  if (!C.tsc)
    return ns;
#if defined(__x86_64__)
  uint64_t m = gs_mono_ns(), t = __rdtsc();
  if (t > C.tsc0 && m > C.mono0 + 10000000ull)
    return (uint64_t)((double)ns * (double)(t - C.tsc0) / (double)(m - C.mono0));
#endif
  return 0;
}

static void child_after_fork(void) {
  /* The helper does not exist in the child, and the connection is the
   * parent's: start over at the child's first launch. */
  if (C.fd >= 0)
    close(C.fd);
  if (C.wake_fd >= 0)
    close(C.wake_fd);
  C.fd = C.wake_fd = -1;
  memset(C.b, 0, sizeof(C.b));
  gs_gate_slots_forked();
  /* The parent's captures and closes are not the child's (one in a context synchronize at the
   * fork would hold the child's first capture forever). */
  atomic_store(&C.captures, 0);
  atomic_store(&C.ctx_syncing, 0);
  pthread_mutex_init(&C.init_mu, NULL);
  atomic_store(&C.state, 0);
}

static void compute_setup(void) {
  const char *slice = gs_env("GSLICE_SLICE");
  const char *limit = gs_env("GSLICE_COMPUTE_LIMIT");
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
  C.limit_pct = GS_PERCENT_MAX;
  if (limit && *limit && gs_percent_parse(limit, 1, GS_PERCENT_MAX, &C.limit_pct) < 0)
    C.limit_pct = GS_PERCENT_MAX;
  uint64_t id;
  if (!slice || gs_uint_parse(slice, 1, UINT32_MAX, &id) < 0) {
    /* Worth a warning only where someone set gslice up for this process
     * (a memory cap, a state dir) and may expect compute limits too. */
    bool configured = gs_env("GSLICE_MEMORY_LIMIT") || gs_env("GSLICE_STATE_DIR");
    gs_log(configured ? GS_LOG_WARN : GS_LOG_INFO,
           "not in a gslice slice (GSLICE_SLICE unset, no daemon to ask): compute is not "
           "limited; memory caps still hold");
    return;
  }
  C.slice_id = (uint32_t)id;
  for (unsigned i = 0; i < GS_MAX_GPUS; i++)
    C.b[i].dev = i;
  clock_setup();
  int ngpus = 0;
  C.one_gpu = gs_real()->cuDeviceGetCount && gs_real()->cuDeviceGetCount(&ngpus) == CUDA_SUCCESS &&
              ngpus == 1;
  const char *nonce = gs_env("GSLICE_SLICE_NONCE");
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

void gs_link_ensure_setup(void) {
  pthread_mutex_lock(&C.init_mu);
  if (atomic_load(&C.state) == 0) {
    compute_setup();
    atomic_store(&C.state, 1);
  }
  pthread_mutex_unlock(&C.init_mu);
}
