/* The daemon's socket side: connections (SO_PEERCRED), requests, and the token flow of every GPU. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "authz.h"
#include "daemon.h"
#include "metrics.h"
#include "region.h"

static void conn_close(struct daemon *d, struct conn *c, const char *why);
static void dispatch(struct daemon *d, struct gpu *g);

void daemon_sched_cfg(const struct config *c, struct sched_cfg *ret) {
  *ret = (struct sched_cfg){.window_ns = c->window_ms * 1000000ull,
                            .quantum_min_ns = c->quantum_min_us * 1000ull,
                            .quantum_max_ns = c->quantum_max_us * 1000ull,
                            .quantum_init_ns = c->quantum_init_us * 1000ull,
                            .quantum_kernels = (uint32_t)c->quantum_kernels};
}

static struct sched_params slice_params(const struct slice *s) {
  return (struct sched_params){.request_pct = s->spec.compute_request,
                               .limit_pct = s->spec.compute_limit,
                               .priority = s->spec.priority,
                               .weight = s->spec.weight};
}

/* ---- output ---- */

static void resume_cb(struct loop *l, uint64_t id, void *data);

/* Requests left in c->in (or in its socket) when its share of the turn ran out: handled at the
 * next turn, after the connections that were waiting. A timer due now runs after this turn's fd
 * events; the socket alone would not do, its data may already all be in c->in. */
static void conn_resume_later(struct daemon *d, struct conn *c) {
  if (!c->resume_timer && loop_add_timer(d->loop, 0, resume_cb, c, &c->resume_timer) < 0)
    c->resume_timer = 0; /* no timer: the next byte it sends wakes it, as before */
}

static void conn_flush(struct daemon *d, struct conn *c) {
  while (c->outlen) {
    ssize_t n = send(c->fd, c->out, c->outlen, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN)
        break;
      return; /* the read side sees the error and closes */
    }
    memmove(c->out, c->out + n, c->outlen - (size_t)n);
    c->outlen -= (size_t)n;
  }
  if (!c->outlen && c->outcap > CONN_OUT_KEEP) {
    d->freed_since_trim += c->outcap;
    free(c->out);
    c->out = NULL;
    c->outcap = 0;
  }
  /* Its requests wait while a reply waits (conn_serve): they go on once it is read. */
  if (!c->outlen && c->inlen)
    conn_resume_later(d, c);
  loop_mod_fd(d->loop, c->fd, EPOLLIN | EPOLLRDHUP | (c->outlen ? EPOLLOUT : 0));
}

/* Queues one message; a client that does not read is dropped, not buffered forever. */
static int conn_send(struct daemon *d, struct conn *c, uint32_t type, uint32_t seq, const void *body,
                     size_t len) {
  size_t need = c->outlen + sizeof(struct gs_msg_hdr) + len, n;

  if (need > CONN_OUT_MAX) {
    /* Closed where that is safe (conn_cb, housekeeping): callers may be walking the list. */
    c->dropped = true;
    return -ENOBUFS;
  }
  if (need > c->outcap) {
    size_t cap = c->outcap ? c->outcap : 1024;
    while (cap < need)
      cap *= 2;
    unsigned char *p = realloc(c->out, cap);
    if (!p)
      return -ENOMEM;
    c->out = p;
    c->outcap = cap;
  }
  int r = gs_msg_encode(c->out + c->outlen, c->outcap - c->outlen, type, seq, body, len, &n);
  if (r < 0)
    return r;
  c->outlen += n;
  conn_flush(d, c);
  return 0;
}

static void send_error(struct daemon *d, struct conn *c, uint32_t seq, int code, const char *text) {
  struct gs_msg_error e = {.code = code < 0 ? code : -EINVAL};
  snprintf(e.text, sizeof(e.text), "%s", text);
  conn_send(d, c, GS_MSG_ERROR, seq, &e, sizeof(e));
}

static void send_ok(struct daemon *d, struct conn *c, uint32_t seq) {
  struct gs_msg_ok ok = {0};
  conn_send(d, c, GS_MSG_OK, seq, &ok, sizeof(ok));
}

/* ---- the token flow of one GPU ---- */

static uint32_t ordinal_of(const struct slice *s, uint32_t gpu) {
  return (uint32_t)__builtin_popcount(slice_mask(s) & ((1u << gpu) - 1));
}

static void gpu_timer_cb(struct loop *l, uint64_t id, void *data);
static bool conn_serve(struct daemon *d, struct conn *c);

/* How long past expiry the holder may take to close its burst: its last kernels finish (a
 * kernel cannot be cut) and its release crosses the socket. One quantum, or two of its
 * kernels when they are longer, covers a holder that works; a stopped or hostile one loses
 * the token that much after expiry, not release_timeout_ms (1 s) later, so the others wait
 * about one quantum. release_timeout_ms stays the ceiling. */
static uint64_t release_grace(struct daemon *d, struct gpu *g) {
  struct sched_slice *sl = sched_find(&g->s, g->holder);
  uint64_t grace = g->s.valid_until - g->s.granted_at, cap = d->cfg.release_timeout_ms * 1000000ull;

  if (sl && 2 * sl->kernel_ns > grace)
    grace = 2 * sl->kernel_ns;
  return grace < cap ? grace : cap;
}

/* One timer per GPU: the release deadline while the token is held, else
 * the moment a slice held back by its limit may have it. */
static void rearm(struct daemon *d, struct gpu *g) {
  uint64_t when = UINT64_MAX;

  if (g->holder)
    when = g->s.valid_until + release_grace(d, g);
  else
    when = sched_next_wakeup(&g->s, loop_now());
  if (g->timer && g->timer_when == when)
    return;
  if (g->timer)
    loop_del_timer(d->loop, g->timer);
  g->timer = 0;
  if (when != UINT64_MAX && loop_add_timer(d->loop, when, gpu_timer_cb, g, &g->timer) == 0)
    g->timer_when = when;
}

static void slice_waiting_update(struct daemon *d, struct gpu *g, uint32_t slice_id, uint64_t now) {
  bool waiting = false;

  for (struct conn *c = d->conns; c; c = c->next)
    if (c->slice_id == slice_id && (c->waiting & (1u << g->index)))
      waiting = true;
  sched_set_waiting(&g->s, slice_id, waiting, now);
}

static void token_done(struct daemon *d, struct gpu *g) {
  uint64_t now = loop_now();

  /* Every burst of the token opened after its grant and was reported after it ran: a span
   * longer than the time since the grant is a hook's wrong clock, charged no more than that. */
  if (g->holder && g->span_end > g->span_start) {
    uint64_t span = g->span_end - g->span_start, held = now - g->s.granted_at;
    sched_charge(&g->s, g->holder, span < held ? span : held, g->span_launches, now);
  }
  g->span_start = g->span_end = g->span_launches = 0;
  sched_token_done(&g->s, now);
  g->holder = 0;
  g->participants = 0;
  dispatch(d, g);
}

static void dispatch(struct daemon *d, struct gpu *g) {
  uint64_t now = loop_now();
  struct sched_grant gr;

  while (!g->holder && sched_pick(&g->s, now, &gr) == 0) {
    struct slice *s = registry_find(&d->reg, gr.slice_id);
    uint32_t bit = 1u << g->index;
    g->holder = gr.slice_id;
    g->participants = 0;
    for (struct conn *c = d->conns; c && s; c = c->next) {
      if (c->slice_id != gr.slice_id || !(c->waiting & bit))
        continue;
      struct gs_msg_token_grant m = {.gpu = ordinal_of(s, g->index),
                                     .generation = gr.generation,
                                     .quantum_ns = gr.quantum_ns,
                                     .valid_until_ns = gr.valid_until_ns};
      c->waiting &= ~bit;
      if (conn_send(d, c, GS_MSG_TOKEN_GRANT, 0, &m, sizeof(m)) < 0)
        continue;
      c->holding |= bit;
      c->hold_gen[g->index] = gr.generation;
      g->participants++;
    }
    if (g->participants == 0) {
      /* Nobody is left to take it: free again, try the next. */
      sched_token_done(&g->s, now);
      g->holder = 0;
    }
  }
  rearm(d, g);
}

static void gpu_timer_cb(struct loop *l, uint64_t id, void *data) {
  struct gpu *g = data;
  struct daemon *d = g->d;

  (void)l;
  (void)id;
  g->timer = 0;
  if (g->holder && g->participants && loop_now() >= g->s.valid_until) {
    uint32_t bit = 1u << g->index;
    uint64_t gen = g->s.generation;
    /* The holders' releases may be waiting unread behind a loop that was itself held up: read
     * first, so that a slice is not revoked for the daemon's delay. */
    for (struct conn *c = d->conns, *next; c; c = next) {
      next = c->next; /* conn_serve closes at most c */
      if (c->holding & bit)
        conn_serve(d, c);
    }
    if (!g->holder || !g->participants || g->s.generation != gen) {
      if (!g->timer)
        dispatch(d, g);
      return;
    }
    /* A holder that never closed its burst (stuck kernel, stopped process):
     * take the token back so the others run; its late release is charged. */
    struct gs_msg_token_revoke rv = {.generation = g->s.generation};
    struct slice *s = registry_find(&d->reg, g->holder);
    uint64_t now = loop_now(), end = now;
    /* Charged up to its release deadline at most: a timer that fires later is the daemon's own
     * delay (a stalled loop), never the slice's. */
    if (g->timer_when && end > g->timer_when)
      end = g->timer_when;
    if (now - end > 50000000ull)
      dlog("warning",
           "gpu %u: slice %u kept its token %" PRIu64 " ms past expiry; revoked (the daemon "
           "itself was %" PRIu64 " ms late: not charged to the slice)",
           g->index, g->holder, (end - g->s.valid_until) / 1000000, (now - end) / 1000000);
    else
      dlog("warning", "gpu %u: slice %u kept its token %" PRIu64 " ms past expiry; revoked",
           g->index, g->holder, (end - g->s.valid_until) / 1000000);
    /* It held the GPU from the grant to its deadline: until its late release says what ran,
     * that is what it is charged (a hook that never releases gets nothing for free and cannot
     * win every pick on an empty account: it starved a neighbour to 2%). Then it is charged
     * what ran, not the time held: 64 slices on a loaded machine each charged 29-168 ms for one
     * 0.5 ms kernel (6.08 s charged of 4.24 s run) got nothing for 6-8 s. */
    uint64_t held = end > g->s.granted_at ? end - g->s.granted_at : 0;
    uint64_t reported = g->span_end - g->span_start;
    sched_charge_held(&g->s, held > reported ? held - reported : 0, now);
    for (struct conn *c = d->conns; c; c = c->next) {
      if (!(c->holding & bit))
        continue;
      c->holding &= ~bit;
      rv.gpu = s ? ordinal_of(s, g->index) : 0;
      conn_send(d, c, GS_MSG_TOKEN_REVOKE, 0, &rv, sizeof(rv));
    }
    g->revoked++;
    token_done(d, g);
    return;
  }
  dispatch(d, g);
}

static void leave_token(struct daemon *d, struct conn *c, struct gpu *g) {
  uint32_t bit = 1u << g->index;

  if (!(c->holding & bit))
    return;
  c->holding &= ~bit;
  if (g->participants > 0 && --g->participants == 0)
    token_done(d, g);
}

/* ---- requests ---- */

/* Its owner or an admin (authz.c); what they may change is authz_set's. */
static bool may_change(struct daemon *d, const struct conn *c, const struct slice *s) {
  return authz_may_change(d, c, s);
}

static void on_hello(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  struct gs_msg_hello_ok ok = {.daemon_version = GS_PROTO_VERSION,
                               .window_ns = d->cfg.window_ms * 1000000ull};

  if (m->u.hello.slice_id) {
    struct slice *s = registry_find(&d->reg, m->u.hello.slice_id);
    char why[GS_PROTO_TEXT_MAX];
    /* A Kubernetes slice's processes run as whatever user the container's image says. */
    bool joins = s && (s->flags & GS_REGISTER_ANY_UID) && m->u.hello.role == GS_ROLE_HOOK;
    if (!s || (!may_change(d, c, s) && !joins)) {
      send_error(d, c, m->hdr.seq, -ENOENT, "no such slice for this user");
      return;
    }
    /* Same id, another slice: this daemon lost the state the process's slice lived in (or
     * was started over another state dir) and gave the id out again. Joining would put the
     * process under a stranger's limits and share (measured: a hard 20% ran at 25% and took
     * the other's guarantee); it is refused, and the hook paces itself at its own limit. */
    if (m->u.hello.slice_nonce != s->nonce) {
      snprintf(why, sizeof(why),
               "slice %u of this gsliced is not this process's slice (%s): the daemon lost the "
               "state it was registered in; run the program again under gslice run",
               s->id, m->u.hello.slice_nonce ? "another slice nonce" : "no GSLICE_SLICE_NONCE");
      dlog("warning", "pid %d said HELLO as slice %u with a nonce that is not the slice's: "
           "refused (a process of a slice from an earlier daemon state?)", (int)c->pid, s->id);
      send_error(d, c, m->hdr.seq, -ESTALE, why);
      return;
    }
    ok.slice_id = s->id;
    ok.spec = s->spec;
  }
  c->hello = true;
  c->role = m->u.hello.role;
  c->slice_id = ok.slice_id;
  conn_send(d, c, GS_MSG_HELLO_OK, m->hdr.seq, &ok, sizeof(ok));
}

/* A slice any uid's processes join: its dir and memory region are made usable by them (the dir
 * is mounted into that one container only: docs/kubernetes.md). By path: the dir is made by
 * and belongs to an admin (authz_admin above), so no one else can swap what is in it. */
static void open_slice_dir(struct daemon *d, struct slice *s) {
  char path[GS_PROTO_PATH_MAX + 32];

  (void)d;
  snprintf(path, sizeof(path), "%s/%s", s->dir, GS_REGION_FILE);
  if (chmod(s->dir, 0755) < 0 || (access(path, F_OK) == 0 && chmod(path, 0666) < 0))
    dlog("warn", "slice %u: cannot open %s to its container's user: %s", s->id, s->dir,
         strerror(errno));
}

static void on_register(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  char why[GS_PROTO_TEXT_MAX];
  struct slice *s;
  uint64_t start = 0;
  int exited = 0, r;

  r = registry_admit(&d->reg, &m->u.reg.spec, 0, d->ngpus, why, sizeof(why));
  if (r < 0 || (r = authz_register(d, c, &m->u.reg.spec, why, sizeof(why))) < 0) {
    send_error(d, c, m->hdr.seq, r, why);
    return;
  }
  /* Held and any-uid slices outlive their registrant and take other users' processes: only an
   * admin (root, the daemon's user, admin_group) may make them — gslice-node, which makes one
   * per container of the node and so is not bound by max_slices_per_user. */
  uint32_t flags = m->u.reg.flags;
  if (flags && !authz_admin(d, c)) {
    send_error(d, c, m->hdr.seq, -EPERM,
               "only root, gsliced's own user or admin_group may register held or any-user "
               "slices (gslice-node does)");
    return;
  }
  /* One uid must not take every slice of the node (max_slices) from the others. A full node
   * is said as such (registry_add), whoever holds its slices. */
  uint32_t owned = 0;
  for (uint32_t i = 0; i < d->reg.n; i++)
    owned += d->reg.slices[i]->uid == c->uid && !d->reg.slices[i]->flags;
  if (!flags && d->reg.n < d->reg.max_slices && owned >= d->cfg.max_slices_per_user) {
    snprintf(why, sizeof(why),
             "uid %u has %u slices, the most one user may have (max_slices_per_user = %" PRIu64
             "); end one, or raise max_slices_per_user in gsliced's config (SIGHUP reloads it)",
             (unsigned)c->uid, owned, d->cfg.max_slices_per_user);
    send_error(d, c, m->hdr.seq, -EUSERS, why);
    return;
  }
  /* The slice lives as long as the peer that registered it (SO_PEERCRED, not
   * what the message claims). */
  gs_proc_identity(c->pid, &start, &exited);
  r = registry_add(&d->reg, &m->u.reg.spec, c->uid, c->gid, c->pid, start, &s);
  if (r < 0) {
    if (r == -ENOSPC)
      snprintf(why, sizeof(why), "the node has its maximum of %u slices (max_slices)",
               d->reg.max_slices);
    else
      snprintf(why, sizeof(why), "cannot add the slice: %s", strerror(-r));
    send_error(d, c, m->hdr.seq, r, why);
    return;
  }
  s->flags = m->u.reg.flags;
  for (uint32_t g = 0; g < d->ngpus; g++) {
    struct sched_params p = slice_params(s);
    if (slice_mask(s) & (1u << g))
      sched_add(&d->gpus[g].s, s->id, &p, loop_now());
  }
  daemon_apply_memory_cap(d, s);
  if (s->flags & GS_REGISTER_ANY_UID)
    open_slice_dir(d, s);
  r = registry_save(&d->reg);
  if (r < 0)
    dlog("error", "cannot save %s/%s: %s (slices will not survive a restart)", d->reg.state_dir,
         REGISTRY_FILE, strerror(-r));
  dlog("info", "slice %u '%s' registered by pid %d: gpus 0x%x request %u%% limit %u%% memory %" PRIu64,
       s->id, s->spec.name, (int)c->pid, slice_mask(s), s->spec.compute_request,
       s->spec.compute_limit, s->spec.memory_cap);
  struct gs_msg_registered ok = {.slice_id = s->id, .flags = s->flags, .slice_nonce = s->nonce};
  snprintf(ok.state_dir, sizeof(ok.state_dir), "%s", s->dir);
  conn_send(d, c, GS_MSG_REGISTERED, m->hdr.seq, &ok, sizeof(ok));
}

static void remove_slice(struct daemon *d, uint32_t id) {
  for (uint32_t i = 0; i < d->ngpus; i++) {
    struct gpu *g = &d->gpus[i];
    for (struct conn *c = d->conns; c; c = c->next)
      if (c->slice_id == id) {
        c->holding &= ~(1u << i);
        c->waiting &= ~(1u << i);
      }
    sched_remove(&g->s, id);
    if (g->holder == id) {
      g->holder = 0;
      g->participants = 0;
      g->span_start = g->span_end = g->span_launches = 0;
    }
    dispatch(d, g);
  }
  registry_remove(&d->reg, id);
  registry_save(&d->reg);
}

static void on_unregister(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  struct slice *s = registry_find(&d->reg, m->u.unregister.slice_id);

  /* A runner of a slice from an earlier daemon state must not remove the slice that got its
   * id here. */
  if (!s || !may_change(d, c, s) ||
      (m->u.unregister.slice_nonce && m->u.unregister.slice_nonce != s->nonce)) {
    send_error(d, c, m->hdr.seq, -ENOENT, "no such slice for this user");
    return;
  }
  char why[GS_PROTO_TEXT_MAX];
  int r = authz_unregister(d, c, s, why, sizeof(why));
  if (r < 0) {
    send_error(d, c, m->hdr.seq, r, why);
    return;
  }
  dlog("info", "slice %u '%s' removed", s->id, s->spec.name);
  remove_slice(d, s->id);
  send_ok(d, c, m->hdr.seq);
}

static void on_set(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  const struct gs_msg_set *st = &m->u.set;
  struct slice *s = registry_find(&d->reg, st->slice_id);
  char why[GS_PROTO_TEXT_MAX];
  struct gs_slice_spec spec;
  int r;

  if (!s || !may_change(d, c, s)) {
    send_error(d, c, m->hdr.seq, -ENOENT, "no such slice for this user");
    return;
  }
  if ((st->fields & GS_SET_MEMORY) && s->region_broken) {
    snprintf(why, sizeof(why),
             "slice %u's memory region was truncated by one of its processes: its memory cap "
             "cannot change; run the slice again",
             s->id);
    send_error(d, c, m->hdr.seq, -EBADMSG, why);
    return;
  }
  spec = s->spec;
  if (st->fields & GS_SET_REQUEST)
    spec.compute_request = st->spec.compute_request;
  if (st->fields & GS_SET_LIMIT)
    spec.compute_limit = st->spec.compute_limit;
  if (st->fields & GS_SET_PRIORITY)
    spec.priority = st->spec.priority;
  if (st->fields & GS_SET_WEIGHT)
    spec.weight = st->spec.weight;
  if (st->fields & GS_SET_MEMORY)
    spec.memory_cap = st->spec.memory_cap;
  r = registry_admit(&d->reg, &spec, s->id, d->ngpus, why, sizeof(why));
  if (r < 0 || (r = authz_set(d, c, s, &spec, why, sizeof(why))) < 0) {
    if (r == -EPERM)
      dlog("warning", "pid %d (uid %u): SET of slice %u refused: %s", (int)c->pid,
           (unsigned)c->uid, s->id, why);
    send_error(d, c, m->hdr.seq, r, why);
    return;
  }
  uint32_t force = 0;
  if ((st->fields & GS_SET_MEMORY) && spec.memory_cap) {
    for (uint32_t g = 0; g < d->ngpus; g++) {
      uint64_t used;
      if (!(slice_mask(s) & (1u << g)))
        continue;
      used = daemon_slice_memory_used(d, s, g);
      if (used > spec.memory_cap) {
        if (!st->force) {
          snprintf(why, sizeof(why),
                   "slice %u holds %" PRIu64 " bytes on GPU %u, more than the new cap %" PRIu64
                   "; use force to lower it anyway (new allocations then fail)",
                   s->id, used, g, spec.memory_cap);
          send_error(d, c, m->hdr.seq, -EBUSY, why);
          return;
        }
        force = 1;
      }
    }
  }
  s->spec = spec;
  if (st->fields & GS_SET_MEMORY) {
    s->memory_force = force;
    daemon_apply_memory_cap(d, s);
  }
  struct sched_params p = slice_params(s);
  for (uint32_t g = 0; g < d->ngpus; g++)
    sched_set_params(&d->gpus[g].s, s->id, &p);
  r = registry_save(&d->reg);
  if (r < 0)
    dlog("error", "cannot save the registry: %s", strerror(-r));
  dlog("info", "slice %u set: request %u%% limit %u%% priority %d weight %u memory %" PRIu64, s->id,
       spec.compute_request, spec.compute_limit, spec.priority, spec.weight, spec.memory_cap);
  send_ok(d, c, m->hdr.seq);
  for (uint32_t g = 0; g < d->ngpus; g++)
    dispatch(d, &d->gpus[g]);
}

static bool on_status(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  struct gs_status st;
  struct gs_msg_status_reply *r;
  size_t len;

  if (daemon_snapshot(d, &st) < 0) {
    send_error(d, c, m->hdr.seq, -ENOMEM, "out of memory");
    return true;
  }
  len = sizeof(*r) + (size_t)st.nslices * sizeof(struct gs_slice_status);
  r = calloc(1, len);
  if (!r) {
    gs_status_free(&st);
    send_error(d, c, m->hdr.seq, -ENOMEM, "out of memory");
    return true;
  }
  r->time_ns = st.time_ns;
  r->ngpus = st.ngpus;
  r->nslices = st.nslices;
  memcpy(r->gpus, st.gpus, sizeof(r->gpus));
  if (st.nslices)
    memcpy(r + 1, st.slices, (size_t)st.nslices * sizeof(struct gs_slice_status));
  /* A client that lets replies pile up is dropped by the caller. */
  bool ok = conn_send(d, c, GS_MSG_STATUS_REPLY, m->hdr.seq, r, len) == 0;
  free(r);
  gs_status_free(&st);
  return ok;
}

static struct gpu *hook_gpu(struct daemon *d, struct conn *c, uint32_t ordinal) {
  struct slice *s = registry_find(&d->reg, c->slice_id);
  uint32_t g;

  if (!s || slice_gpu(s, ordinal, &g) < 0 || g >= d->ngpus)
    return NULL;
  return &d->gpus[g];
}

static void on_token_request(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  struct gpu *g = hook_gpu(d, c, m->u.token_request.gpu);
  uint64_t now = loop_now();

  if (!g) {
    send_error(d, c, m->hdr.seq, -ENODEV, "no such GPU in this slice");
    return;
  }
  uint32_t bit = 1u << g->index;
  if (g->holder == c->slice_id && now < g->s.valid_until) {
    /* Processes of one slice share its token: join the burst. */
    struct gs_msg_token_grant gr = {.gpu = m->u.token_request.gpu,
                                    .generation = g->s.generation,
                                    .quantum_ns = g->s.valid_until - g->s.granted_at,
                                    .valid_until_ns = g->s.valid_until};
    if (!(c->holding & bit)) {
      c->holding |= bit;
      c->hold_gen[g->index] = g->s.generation;
      g->participants++;
    }
    conn_send(d, c, GS_MSG_TOKEN_GRANT, m->hdr.seq, &gr, sizeof(gr));
    return;
  }
  c->waiting |= bit;
  sched_set_waiting(&g->s, c->slice_id, true, now);
  dispatch(d, g);
}

static void on_token_release(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  const struct gs_msg_token_release *rl = &m->u.token_release;
  struct gpu *g = hook_gpu(d, c, rl->gpu);

  if (!g)
    return;
  bool current = (c->holding & (1u << g->index)) && c->hold_gen[g->index] == rl->generation;

  if (current && (rl->used_ns || rl->launches)) {
    /* Charged as the token's span when the last participant is done. A grant handed back
     * unused (start 0, nothing run) has no part in it: counted, it opened the span at 0 and
     * charged a slice of two processes the daemon's uptime (2950 s), wedging it behind its
     * own limit's pacing for hours. */
    uint64_t end = rl->start_ns + rl->used_ns;
    if (!g->span_end || rl->start_ns < g->span_start)
      g->span_start = rl->start_ns;
    if (end > g->span_end)
      g->span_end = end;
    g->span_launches += rl->launches;
  } else if (!current) {
    /* Device time is charged whatever token it ran under: a late report after a revoke (it
     * replaces the held time charged then), or one from before a daemon restart. */
    sched_charge_late(&g->s, c->slice_id, rl->generation, rl->used_ns, rl->launches, loop_now());
  }
  /* Waiting before the token is free: the pick that follows weighs this
   * slice too, instead of handing the token to whoever else asked. */
  if (rl->more) {
    c->waiting |= 1u << g->index;
    sched_set_waiting(&g->s, c->slice_id, true, loop_now());
  }
  if (current)
    leave_token(d, c, g);
  else if (rl->more)
    dispatch(d, g);
}

/* Returns false when the connection must close (a protocol violation). */
static bool handle(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  uint32_t t = m->hdr.type;

  if (!c->hello) {
    if (t != GS_MSG_HELLO)
      return false;
    on_hello(d, c, m);
    return true;
  }
  switch (t) {
  case GS_MSG_REGISTER:
    if (c->role == GS_ROLE_HOOK)
      return false;
    on_register(d, c, m);
    return true;
  case GS_MSG_UNREGISTER:
    on_unregister(d, c, m);
    return true;
  case GS_MSG_SET:
    on_set(d, c, m);
    return true;
  case GS_MSG_STATUS:
    return on_status(d, c, m);
  case GS_MSG_PING:
    conn_send(d, c, GS_MSG_PONG, m->hdr.seq, &m->u.ping, sizeof(m->u.ping));
    return true;
  case GS_MSG_TOKEN_REQUEST:
    if (c->role != GS_ROLE_HOOK || !c->slice_id)
      return false;
    on_token_request(d, c, m);
    return true;
  case GS_MSG_TOKEN_RELEASE:
    if (c->role != GS_ROLE_HOOK || !c->slice_id)
      return false;
    on_token_release(d, c, m);
    return true;
  default:
    /* HELLO twice, or a message only the daemon sends. */
    return false;
  }
}

/* ---- connections ---- */

static void conn_close(struct daemon *d, struct conn *c, const char *why) {
  struct conn **pp;

  if (why)
    dlog("info", "closing connection of pid %d (slice %u): %s", (int)c->pid, c->slice_id, why);
  for (pp = &d->conns; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  d->nconns--;
  if (c->resume_timer)
    loop_del_timer(d->loop, c->resume_timer);
  loop_del_fd(d->loop, c->fd);
  close(c->fd);
  /* A killed token holder: its burst is over as far as anyone can tell. */
  for (uint32_t i = 0; i < d->ngpus; i++) {
    struct gpu *g = &d->gpus[i];
    uint32_t bit = 1u << i;
    bool was_waiting = c->waiting & bit;
    c->waiting &= ~bit;
    if (c->holding & bit) {
      c->holding &= ~bit;
      if (g->participants > 0 && --g->participants == 0)
        token_done(d, g);
    }
    if (was_waiting && c->slice_id)
      slice_waiting_update(d, g, c->slice_id, loop_now());
  }
  if (c->outcap > CONN_OUT_KEEP)
    d->freed_since_trim += c->outcap;
  free(c->out);
  free(c);
}

/* Handles what c sent, within its share of one loop turn (CONN_TURN_MSGS requests, one STATUS),
 * and none while a reply to it waits to be read: what the daemon holds for a client that does not
 * read is one reply (250 such connections took it from 9 MB to 950 MB when it took every request).
 * Such a client that fills c->in with more requests is closed. Returns false when c was closed. */
static bool conn_serve(struct daemon *d, struct conn *c) {
  uint32_t msgs = 0, statuses = 0;

  for (;;) {
    /* The whole requests already in first: c->in holds at most CONN_IN_MAX bytes. */
    while (!c->outlen) {
      struct gs_msg_hdr h;
      struct gs_msg m;
      size_t len;
      int r = gs_msg_peek(c->in, c->inlen, &len);
      if (r == -EAGAIN)
        break;
      if (r < 0 || len > sizeof(c->in)) {
        conn_close(d, c, "malformed message");
        return false;
      }
      if (c->inlen < len)
        break;
      memcpy(&h, c->in, sizeof(h));
      if (msgs == CONN_TURN_MSGS || (statuses && h.type == GS_MSG_STATUS)) {
        conn_resume_later(d, c);
        return true;
      }
      if (gs_msg_decode(c->in, len, &m) < 0) {
        conn_close(d, c, "invalid message");
        return false;
      }
      memmove(c->in, c->in + len, c->inlen - len);
      c->inlen -= len;
      msgs++;
      statuses += h.type == GS_MSG_STATUS;
      if (!handle(d, c, &m)) {
        conn_close(d, c, "message out of protocol");
        return false;
      }
      if (c->dropped) {
        conn_close(d, c, "does not read its replies");
        return false;
      }
    }
    if (c->inlen == sizeof(c->in)) {
      /* Only a connection with replies waiting stops with whole requests left in c->in. */
      conn_close(d, c, "does not read its replies");
      return false;
    }
    ssize_t n = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, MSG_DONTWAIT);
    if (n == 0) {
      conn_close(d, c, NULL);
      return false;
    }
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN)
        return true;
      /* A reset is how a process that exits with replies unread says goodbye. */
      conn_close(d, c, errno == ECONNRESET ? NULL : strerror(errno));
      return false;
    }
    c->inlen += (size_t)n;
  }
}

static void resume_cb(struct loop *l, uint64_t id, void *data) {
  struct conn *c = data;

  (void)l;
  (void)id;
  c->resume_timer = 0;
  conn_serve(c->d, c);
}

/* Dispatched to the connection itself (the loop's per-fd data), not found by walking them. */
static void conn_cb(struct loop *l, int fd, uint32_t events, void *data) {
  struct conn *c = data;
  struct daemon *d = c->d;

  (void)l;
  (void)fd;
  if (events & EPOLLOUT)
    conn_flush(d, c);
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)))
    return;
  if (!conn_serve(d, c))
    return;
  if (events & (EPOLLHUP | EPOLLERR))
    conn_close(d, c, NULL);
}

/* One uid must not hold every connection of max_clients (idle after HELLO, or before it within
 * hello_timeout_ms). Counted at accept, before anything is allocated; the refused client gets
 * the reason as an ERROR if it reads before it sees the close, and the log says it, at most once
 * a second. */
static bool uid_over_limit(struct daemon *d, int cfd, uid_t uid) {
  uint32_t n = 0;
  uint64_t now;

  for (struct conn *c = d->conns; c; c = c->next)
    n += c->uid == uid;
  if (n < d->cfg.max_clients_per_user)
    return false;
  struct gs_msg_error e = {.code = -EUSERS};
  unsigned char buf[sizeof(struct gs_msg_hdr) + sizeof(e)];
  size_t len;
  snprintf(e.text, sizeof(e.text),
           "uid %u has %u connections to gsliced, the most one user may have "
           "(max_clients_per_user = %" PRIu64 "); close some, or raise max_clients_per_user "
           "in gsliced's config (SIGHUP reloads it)",
           (unsigned)uid, n, d->cfg.max_clients_per_user);
  now = loop_now();
  if (gs_msg_encode(buf, sizeof(buf), GS_MSG_ERROR, 0, &e, sizeof(e), &len) == 0 &&
      send(cfd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len &&
      shutdown(cfd, SHUT_WR) == 0) {
    /* Closed at once, the client's HELLO would fail with EPIPE before it reads the reason:
     * held (write side shut: it reads the ERROR, then end of file) until the next
     * housekeeping, at most REFUSED_MAX of them, the oldest closed first. */
    if (d->nrefused == REFUSED_MAX) {
      close(d->refused[0].fd);
      memmove(&d->refused[0], &d->refused[1], (REFUSED_MAX - 1) * sizeof(d->refused[0]));
      d->nrefused--;
    }
    d->refused[d->nrefused].fd = cfd;
    d->refused[d->nrefused++].at = now;
  } else {
    close(cfd);
  }
  if (now - d->said_user_clients_at >= 1000000000ull || !d->said_user_clients_at) {
    dlog("warning", "refusing a connection: %s", e.text);
    d->said_user_clients_at = now;
  }
  return true;
}

static void accept_cb(struct loop *l, int fd, uint32_t events, void *data) {
  struct daemon *d = data;

  (void)events;
  for (;;) {
    int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    struct conn *c;

    if (cfd < 0) {
      if (errno == EINTR)
        continue;
      if ((errno == EMFILE || errno == ENFILE) && d->spare_fd >= 0) {
        /* Out of file descriptors: the pending connection would keep the listening
         * socket readable and the loop spinning (100% CPU, measured). Take it with the
         * spare descriptor and close it: the client sees its connection refused. */
        close(d->spare_fd);
        cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd >= 0)
          close(cfd);
        d->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (!d->said_nofile)
          dlog("warning",
               "out of file descriptors at %u clients: refusing connections (raise "
               "the open-file limit, or lower max_clients)",
               d->nconns);
        d->said_nofile = true;
        if (cfd >= 0)
          continue;
      }
      return;
    }
    if (d->nconns >= d->cfg.max_clients) {
      dlog("warning", "refusing a connection: %u clients already (max_clients)", d->nconns);
      close(cfd);
      continue;
    }
    if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
      close(cfd);
      continue;
    }
    if (uid_over_limit(d, cfd, cred.uid))
      continue;
    if (!(c = calloc(1, sizeof(*c)))) {
      close(cfd);
      continue;
    }
    c->fd = cfd;
    c->d = d;
    c->accepted_at = loop_now();
    c->pid = cred.pid;
    int exited = 1;
    if (gs_proc_identity(c->pid, &c->start, &exited) < 0 || exited)
      c->start = 0;
    c->uid = cred.uid;
    c->gid = cred.gid;
    if (loop_add_fd(l, cfd, EPOLLIN | EPOLLRDHUP, conn_cb, c) < 0) {
      free(c);
      close(cfd);
      continue;
    }
    c->next = d->conns;
    d->conns = c;
    d->nconns++;
  }
}

int server_listen(struct daemon *d) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  char dir[sizeof(a.sun_path)];
  int fd, r;

  if (strlen(d->cfg.socket) >= sizeof(a.sun_path))
    return -ENAMETOOLONG;
  memcpy(a.sun_path, d->cfg.socket, strlen(d->cfg.socket) + 1);
  snprintf(dir, sizeof(dir), "%s", d->cfg.socket);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = 0;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
      return -errno;
  }
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  /* A socket file nobody answers on is a leftover of a dead daemon (the
   * state-dir lock already says no other daemon owns this state). */
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
    close(fd);
    return -EADDRINUSE;
  }
  unlink(d->cfg.socket);
  close(fd);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0) {
    r = -errno;
    close(fd);
    return r;
  }
  /* Anyone may connect: SO_PEERCRED says who, and only an owner (or root)
   * changes a slice. */
  chmod(d->cfg.socket, 0666);
  r = loop_add_fd(d->loop, fd, EPOLLIN, accept_cb, d);
  if (r < 0) {
    close(fd);
    return r;
  }
  d->listen_fd = fd;
  d->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return 0;
}

/* Refused connections held since at least `before` (all with UINT64_MAX). */
static void close_refused(struct daemon *d, uint64_t before) {
  uint32_t k = 0;

  for (uint32_t i = 0; i < d->nrefused; i++) {
    if (d->refused[i].at < before)
      close(d->refused[i].fd);
    else
      d->refused[k++] = d->refused[i];
  }
  d->nrefused = k;
}

void server_close_all(struct daemon *d) {
  close_refused(d, UINT64_MAX);
  while (d->conns)
    conn_close(d, d->conns, NULL);
  if (d->listen_fd >= 0) {
    loop_del_fd(d->loop, d->listen_fd);
    close(d->listen_fd);
    unlink(d->cfg.socket);
    d->listen_fd = -1;
  }
  if (d->spare_fd >= 0)
    close(d->spare_fd);
  d->spare_fd = -1;
}

void server_apply_sched_cfg(struct daemon *d) {
  struct sched_cfg sc;

  daemon_sched_cfg(&d->cfg, &sc);
  for (uint32_t i = 0; i < d->ngpus; i++)
    d->gpus[i].s.cfg = sc;
}

int server_adopt_slices(struct daemon *d) {
  for (uint32_t i = 0; i < d->reg.n; i++) {
    struct slice *s = d->reg.slices[i];
    struct sched_params p = slice_params(s);
    for (uint32_t g = 0; g < d->ngpus; g++)
      if (slice_mask(s) & (1u << g))
        sched_add(&d->gpus[g].s, s->id, &p, loop_now());
    daemon_apply_memory_cap(d, s);
  }
  return 0;
}

/* Connections that never said HELLO within hello_timeout_ms (they hold a slot of
 * max_clients for nothing), and those whose replies piled up unread. */
static void close_idle_conns(struct daemon *d) {
  uint64_t now = loop_now(), limit = d->cfg.hello_timeout_ms * 1000000ull;
  bool again = true;

  while (again) {
    again = false;
    for (struct conn *c = d->conns; c; c = c->next) {
      if (c->dropped || (!c->hello && now - c->accepted_at >= limit)) {
        conn_close(d, c, c->dropped ? "does not read its replies" : "no HELLO in time");
        again = true; /* the list changed under us */
        break;
      }
    }
  }
}

void server_housekeeping(struct daemon *d) {
  bool removed = false;

  close_idle_conns(d);
  close_refused(d, loop_now() - 100000000ull);

  for (uint32_t i = 0; i < d->reg.n; i++) {
    struct slice *s = d->reg.slices[i];
    uint64_t start = 0;
    int exited = 1;
    bool live_procs = false;

    if (s->flags & GS_REGISTER_HELD)
      continue; /* its registrant (gslice-node) removes it when its pod is gone */
    if (gs_proc_identity(s->runner_pid, &start, &exited) == 0 && !exited &&
        (s->runner_start == 0 || start == s->runner_start))
      continue;
    for (struct conn *c = d->conns; c; c = c->next)
      if (c->slice_id == s->id)
        live_procs = true;
    if (live_procs)
      continue;
    dlog("info", "slice %u '%s': its runner (pid %d) and processes are gone; removed", s->id,
         s->spec.name, (int)s->runner_pid);
    remove_slice(d, s->id);
    removed = true;
    i--; /* registry_remove moved the last slice here */
  }
  (void)removed;
  /* Caps not written while a process of the slice held its region's lock. */
  for (uint32_t i = 0; i < d->reg.n; i++)
    if (d->reg.slices[i]->cap_pending)
      daemon_apply_memory_cap(d, d->reg.slices[i]);
  /* Freed buffers of big replies stay in the heap (below the top or in the free lists) unless
   * handed back: 250 closed connections left the daemon at 939 MB. */
  if (d->freed_since_trim >= (1u << 20)) {
    malloc_trim(0);
    d->freed_since_trim = 0;
  }
  if (d->metrics) {
    struct gs_status st;
    if (daemon_snapshot(d, &st) == 0) {
      gs_metrics_publish(d->metrics, &st);
      gs_status_free(&st);
    }
  }
}
