/* The daemon's requests (requests.h): HELLO, REGISTER, UNREGISTER, SET, STATUS, PING, and the
 * registry's slices put on (and taken off) the GPUs' schedulers. */
#include "requests.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "authz.h"
#include "conn.h"
#include "metrics.h"
#include "region.h"
#include "sock.h"
#include "token.h"

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
      conn_send_error(d, c, m->hdr.seq, -ENOENT, "no such slice for this user");
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
      dlog("warning",
           "pid %d said HELLO as slice %u with a nonce that is not the slice's: "
           "refused (a process of a slice from an earlier daemon state?)",
           (int)c->pid, s->id);
      conn_send_error(d, c, m->hdr.seq, -ESTALE, why);
      return;
    }
    ok.slice_id = s->id;
    ok.spec = s->spec;
  }
  c->hello = true;
  c->role = m->u.hello.role;
  c->slice_id = ok.slice_id;
  if (ok.slice_id)
    conn_join_slice(c, registry_find(&d->reg, ok.slice_id));
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
    conn_send_error(d, c, m->hdr.seq, r, why);
    return;
  }
  /* Held and any-uid slices outlive their registrant and take other users' processes: only an
   * admin (root, the daemon's user, admin_group) may make them — gslice-node, which makes one
   * per container of the node and so is not bound by max_slices_per_user. */
  uint32_t flags = m->u.reg.flags;
  if (flags && !authz_admin(d, c)) {
    conn_send_error(d, c, m->hdr.seq, -EPERM,
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
    conn_send_error(d, c, m->hdr.seq, -EUSERS, why);
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
    conn_send_error(d, c, m->hdr.seq, r, why);
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
  dlog("info",
       "slice %u '%s' registered by pid %d: gpus 0x%x request %u%% limit %u%% memory %" PRIu64,
       s->id, s->spec.name, (int)c->pid, slice_mask(s), s->spec.compute_request,
       s->spec.compute_limit, s->spec.memory_cap);
  struct gs_msg_registered ok = {.slice_id = s->id, .flags = s->flags, .slice_nonce = s->nonce};
  snprintf(ok.state_dir, sizeof(ok.state_dir), "%s", s->dir);
  conn_send(d, c, GS_MSG_REGISTERED, m->hdr.seq, &ok, sizeof(ok));
}

void requests_remove_slice(struct daemon *d, uint32_t id) {
  struct slice *s = registry_find(&d->reg, id);

  token_forget_slice(d, id);
  if (s)
    conn_slice_gone(s);
  registry_remove(&d->reg, id);
  registry_save(&d->reg);
}

static void on_unregister(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  struct slice *s = registry_find(&d->reg, m->u.unregister.slice_id);

  /* A runner of a slice from an earlier daemon state must not remove the slice that got its
   * id here. */
  if (!s || !may_change(d, c, s) ||
      (m->u.unregister.slice_nonce && m->u.unregister.slice_nonce != s->nonce)) {
    conn_send_error(d, c, m->hdr.seq, -ENOENT, "no such slice for this user");
    return;
  }
  char why[GS_PROTO_TEXT_MAX];
  int r = authz_unregister(d, c, s, why, sizeof(why));
  if (r < 0) {
    conn_send_error(d, c, m->hdr.seq, r, why);
    return;
  }
  dlog("info", "slice %u '%s' removed", s->id, s->spec.name);
  requests_remove_slice(d, s->id);
  conn_send_ok(d, c, m->hdr.seq);
}

static void on_set(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  const struct gs_msg_set *st = &m->u.set;
  struct slice *s = registry_find(&d->reg, st->slice_id);
  char why[GS_PROTO_TEXT_MAX];
  struct gs_slice_spec spec;
  int r;

  if (!s || !may_change(d, c, s)) {
    conn_send_error(d, c, m->hdr.seq, -ENOENT, "no such slice for this user");
    return;
  }
  if ((st->fields & GS_SET_MEMORY) && s->region_broken) {
    snprintf(why, sizeof(why),
             "slice %u's memory region was truncated by one of its processes: its memory cap "
             "cannot change; run the slice again",
             s->id);
    conn_send_error(d, c, m->hdr.seq, -EBADMSG, why);
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
      dlog("warning", "pid %d (uid %u): SET of slice %u refused: %s", (int)c->pid, (unsigned)c->uid,
           s->id, why);
    conn_send_error(d, c, m->hdr.seq, r, why);
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
          conn_send_error(d, c, m->hdr.seq, -EBUSY, why);
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
  conn_send_ok(d, c, m->hdr.seq);
  for (uint32_t g = 0; g < d->ngpus; g++)
    token_dispatch(d, &d->gpus[g]);
}

static bool on_status(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  struct gs_status st;
  struct gs_msg_status_reply *r;
  size_t len;

  if (daemon_snapshot(d, &st) < 0) {
    conn_send_error(d, c, m->hdr.seq, -ENOMEM, "out of memory");
    return true;
  }
  len = sizeof(*r) + (size_t)st.nslices * sizeof(struct gs_slice_status);
  r = calloc(1, len);
  if (!r) {
    gs_status_free(&st);
    conn_send_error(d, c, m->hdr.seq, -ENOMEM, "out of memory");
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

/* Returns false when the connection must close (a protocol violation). */
bool requests_handle(struct daemon *d, struct conn *c, const struct gs_msg *m) {
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
  case GS_MSG_UNREGISTER: on_unregister(d, c, m); return true;
  case GS_MSG_SET: on_set(d, c, m); return true;
  case GS_MSG_STATUS: return on_status(d, c, m);
  case GS_MSG_PING:
    conn_send(d, c, GS_MSG_PONG, m->hdr.seq, &m->u.ping, sizeof(m->u.ping));
    return true;
  case GS_MSG_TOKEN_REQUEST:
    if (c->role != GS_ROLE_HOOK || !c->slice_id)
      return false;
    token_request(d, c, m);
    return true;
  case GS_MSG_TOKEN_RELEASE:
    if (c->role != GS_ROLE_HOOK || !c->slice_id)
      return false;
    token_release(d, c, m);
    return true;
  default:
    /* HELLO twice, or a message only the daemon sends. */
    return false;
  }
}

void server_apply_sched_cfg(struct daemon *d) {
  struct sched_cfg sc;

  daemon_sched_cfg(&d->cfg, &sc);
  for (uint32_t i = 0; i < d->ngpus; i++)
    d->gpus[i].s.cfg = sc;
}

void server_adopt_slices(struct daemon *d) {
  for (uint32_t i = 0; i < d->reg.n; i++) {
    struct slice *s = d->reg.slices[i];
    struct sched_params p = slice_params(s);
    for (uint32_t g = 0; g < d->ngpus; g++)
      if (slice_mask(s) & (1u << g))
        sched_add(&d->gpus[g].s, s->id, &p, loop_now());
    daemon_apply_memory_cap(d, s);
  }
}

void server_housekeeping(struct daemon *d) {
  bool removed = false;

  sock_housekeeping(d);

  for (uint32_t i = 0; i < d->reg.n; i++) {
    struct slice *s = d->reg.slices[i];
    uint64_t start = 0;
    int exited = 1;

    if (s->flags & GS_REGISTER_HELD)
      continue; /* its registrant (gslice-node) removes it when its pod is gone */
    if (gs_proc_identity(s->runner_pid, &start, &exited) == 0 && !exited &&
        (s->runner_start == 0 || start == s->runner_start))
      continue;
    if (s->conns)
      continue;
    dlog("info", "slice %u '%s': its runner (pid %d) and processes are gone; removed", s->id,
         s->spec.name, (int)s->runner_pid);
    requests_remove_slice(d, s->id);
    removed = true;
    i--; /* registry_remove moved the last slice here */
  }
  (void)removed;
  token_watchdog(d);
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
