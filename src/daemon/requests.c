/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's requests (requests.h): HELLO, REGISTER, UNREGISTER, SET, STATUS, PING, and the
 * registry's slices put on (and taken off) the GPUs' schedulers. */
#include "requests.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "authz.h"
#include "conn.h"
#include "daemon.h"
#include "log.h"
#include "region.h"
#include "regions.h"
#include "snapshot.h"
#include "sock.h"
#include "token.h"

/* Its parameters on GPU index `gpu`: the request is that GPU's (a slice may ask 16% of one GPU and
 * 15% of another), the rest is the slice's. */
static struct sched_params slice_params(const struct slice *s, uint32_t gpu) {
  return (struct sched_params){.request_pct = gs_spec_request(&s->spec, gpu),
                               .limit_pct = s->spec.compute_limit,
                               .priority = s->spec.priority,
                               .weight = s->spec.weight};
}

/* A HELLO refused: the connection may say another, HELLO_REFUSED_MAX refused in all. Returns
 * false at the last (its ERROR is sent; conn_serve closes it). */
static bool hello_refused(struct conn *c) {
  return ++c->hellos_refused < HELLO_REFUSED_MAX;
}

/* Returns false when the HELLO was refused (an ERROR sent). */
static bool on_hello(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  struct gs_msg_hello_ok ok = {.daemon_version = GS_PROTO_VERSION,
                               .window_ns = d->cfg.window_ms * 1000000ull};

  if (m->u.hello.slice_id) {
    struct slice *s = registry_find(&d->reg, m->u.hello.slice_id);
    char why[GS_PROTO_TEXT_MAX];
    /* A Kubernetes slice's processes run as whatever user the container's image says. */
    bool joins = s && (s->flags & GS_REGISTER_ANY_UID) && m->u.hello.role == GS_ROLE_HOOK;
    if (!s || (!authz_may_change(d, c, s) && !joins)) {
      conn_send_error(c, m->hdr.seq, -ENOENT, "no such slice for this user");
      return false;
    }
    /* Same id, another slice: this daemon lost the state the process's slice lived in (or
     * was started over another state dir) and gave the id out again. Joining would put the
     * process under a stranger's limits and share (and take the other's guarantee); it is
     * refused, and the hook paces itself at its own limit. */
    if (m->u.hello.slice_nonce != s->nonce) {
      snprintf(why, sizeof(why),
               "slice %u of this gsliced is not this process's slice (%s): the daemon lost the "
               "state it was registered in; run the program again under gslice run",
               s->id, m->u.hello.slice_nonce ? "another slice nonce" : "no GSLICE_SLICE_NONCE");
      gs_log(GS_LOG_WARNING,
             "pid %d said HELLO as slice %u with a nonce that is not the slice's: "
             "refused (a process of a slice from an earlier daemon state?)",
             (int)c->pid, s->id);
      conn_send_error(c, m->hdr.seq, -ESTALE, why);
      return false;
    }
    /* On the hook socket, a slice's connections are bounded by the slice, not by uid (a
     * container chooses its uids): one container's hooks must not take every connection of
     * the hook socket from the others' (sock.c bounds them before HELLO). */
    if (c->hook_only) {
      uint64_t most = sock_hook_bound(d, d->cfg.max_hook_clients_per_slice);
      uint32_t n = 0;
      for (const struct conn *o = s->conns; o; o = o->slice_next)
        n += o->hook_only;
      if (n >= most) {
        snprintf(why, sizeof(why),
                 "slice %u has %u connections on gsliced's hook socket, the most one slice may "
                 "have (max_hook_clients_per_slice = %" PRIu64 "): this process runs at the "
                 "slice's limit unscheduled; raise the setting in gsliced's config",
                 s->id, n, most);
        gs_log(GS_LOG_WARNING, "pid %d: HELLO as slice %u on the hook socket refused: %s",
               (int)c->pid, s->id, why);
        conn_send_error(c, m->hdr.seq, -EUSERS, why);
        return false;
      }
    }
    ok.slice_id = s->id;
    ok.spec = s->spec;
  }
  c->hello = true;
  c->role = m->u.hello.role;
  c->slice_id = ok.slice_id;
  if (ok.slice_id)
    conn_join_slice(c, registry_find(&d->reg, ok.slice_id));
  conn_send(c, GS_MSG_HELLO_OK, m->hdr.seq, &ok, sizeof(ok));
  return true;
}

/* A slice any uid's processes join: its memory region is made usable by them (its dir is 0755,
 * registry.c; mounted into that one container only: docs/kubernetes.md). Through a descriptor
 * opened without following a link, and only a regular file of one link: a container's root can
 * write in the dir once it is mounted, and a path there is the container's. */
static void open_slice_region(struct slice *s) {
  struct stat st;
  int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), fd = -1;

  if (dfd >= 0)
    fd = openat(dfd, GS_REGION_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT)
      gs_log(GS_LOG_WARNING, "slice %u: cannot open %s/%s to its container's user: %s", s->id,
             s->dir, GS_REGION_FILE, strerror(errno));
  } else if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
             fchmod(fd, 0666) < 0) {
    gs_log(GS_LOG_WARNING, "slice %u: %s/%s is not the region the daemon made; left as it is",
           s->id, s->dir, GS_REGION_FILE);
  }
  if (fd >= 0)
    close(fd);
  if (dfd >= 0)
    close(dfd);
}

/* s on the scheduler of each of its GPUs. */
static void schedule_slice(struct daemon *d, const struct slice *s) {
  for (uint32_t g = 0; g < d->ngpus; g++) {
    struct sched_params p = slice_params(s, g);
    if (slice_mask(s) & (1u << g))
      sched_add(&d->gpus[g].s, s->id, &p, loop_now());
  }
}

/* Whether c may register slices at all (else an ERROR is sent). */
static bool register_allowed(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  /* A container's processes reach gsliced's socket (it is mounted into them); what they may do
   * is what a slice's processes do. A slice for a container is gslice-node's to make, on the
   * host: whatever its uid, a process in another pid namespace registers nothing (it could
   * commit a GPU's share beside the slices the cluster placed). */
  if (!authz_host_process(d, c)) {
    gs_log(GS_LOG_WARNING, "pid %d (uid %u): REGISTER from another pid namespace refused",
           (int)c->pid, (unsigned)c->uid);
    conn_send_error(c, m->hdr.seq, -EPERM,
                    "no REGISTER from a container (a process in another pid namespace than "
                    "gsliced's), whatever its uid: slices for containers are made by gslice-node");
    return false;
  }
  /* On a Kubernetes node the cluster places every slice (the extender counts what it placed):
   * a node-local user's slice would commit compute that placement cannot see, and the pod it
   * placed into that share would be refused. */
  if (!d->cfg.user_slices && !authz_admin(d, c)) {
    gs_log(GS_LOG_WARNING, "pid %d (uid %u): REGISTER refused: user_slices is false", (int)c->pid,
           (unsigned)c->uid);
    conn_send_error(c, m->hdr.seq, -EPERM,
                    "this gsliced takes slices only from root, its own user or admin_group "
                    "(user_slices = false: on a Kubernetes node the cluster places the GPU's "
                    "shares); user_slices = true in gsliced's config allows users' slices");
    return false;
  }
  return true;
}

/* Whether the slice fits the node and its user's bounds, and c may make one of its kind (else an
 * ERROR is sent). */
static bool register_fits(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  char why[GS_PROTO_TEXT_MAX];
  int r = registry_admit(&d->reg, &m->u.reg.spec, 0, d->ngpus, why, sizeof(why));

  if (r < 0 || (r = authz_register(d, c, &m->u.reg.spec, why, sizeof(why))) < 0) {
    conn_send_error(c, m->hdr.seq, r, why);
    return false;
  }
  /* Held and any-uid slices outlive their registrant and take other users' processes: only an
   * admin (root, the daemon's user, admin_group) may make them — gslice-node, which makes one
   * per container of the node and so is not bound by max_slices_per_user. */
  if (m->u.reg.flags && !authz_admin(d, c)) {
    conn_send_error(c, m->hdr.seq, -EPERM,
                    "only root, gsliced's own user or admin_group may register held or any-user "
                    "slices (gslice-node does)");
    return false;
  }
  /* One uid must not take every slice of the node (max_slices) from the others. A full node
   * is said as such (registry_add), whoever holds its slices. */
  uint32_t owned = 0;
  for (uint32_t i = 0; i < d->reg.n; i++)
    owned += d->reg.slices[i]->uid == c->uid && !d->reg.slices[i]->flags;
  if (!m->u.reg.flags && d->reg.n < d->reg.max_slices && owned >= d->cfg.max_slices_per_user) {
    snprintf(why, sizeof(why),
             "uid %u has %u slices, the most one user may have (max_slices_per_user = %" PRIu64
             "); end one, or raise max_slices_per_user in gsliced's config (SIGHUP reloads it)",
             (unsigned)c->uid, owned, d->cfg.max_slices_per_user);
    conn_send_error(c, m->hdr.seq, -EUSERS, why);
    return false;
  }
  return true;
}

static void on_register(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  char why[GS_PROTO_TEXT_MAX];
  struct slice *s;
  uint64_t start = 0;
  int exited = 0, r;

  if (!register_allowed(d, c, m) || !register_fits(d, c, m))
    return;
  /* The slice lives as long as the peer that registered it (SO_PEERCRED, not
   * what the message claims). */
  gs_proc_identity(c->pid, &start, &exited);
  r = registry_add(&d->reg, &m->u.reg.spec, m->u.reg.flags, c->uid, c->gid, c->pid, start, &s);
  if (r < 0) {
    if (r == -ENOSPC)
      snprintf(why, sizeof(why), "the node has its maximum of %u slices (max_slices)",
               d->reg.max_slices);
    else
      snprintf(why, sizeof(why), "cannot add the slice: %s", strerror(-r));
    conn_send_error(c, m->hdr.seq, r, why);
    return;
  }
  schedule_slice(d, s);
  regions_apply_cap(d, s);
  if (s->flags & GS_REGISTER_ANY_UID)
    open_slice_region(s);
  r = registry_save(&d->reg);
  if (r < 0)
    gs_log(GS_LOG_ERROR, "cannot save %s/%s: %s (slices will not survive a restart)",
           d->reg.state_dir, REGISTRY_FILE, strerror(-r));
  gs_log(GS_LOG_INFO,
         "slice %u '%s' registered by pid %d: gpus 0x%x request %u%% limit %u%% memory %" PRIu64,
         s->id, s->spec.name, (int)c->pid, slice_mask(s), s->spec.compute_request,
         s->spec.compute_limit, s->spec.memory_cap);
  struct gs_msg_registered ok = {.slice_id = s->id, .flags = s->flags, .slice_nonce = s->nonce};
  snprintf(ok.state_dir, sizeof(ok.state_dir), "%s", s->dir);
  conn_send(c, GS_MSG_REGISTERED, m->hdr.seq, &ok, sizeof(ok));
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
  if (!s || !authz_may_change(d, c, s) ||
      (m->u.unregister.slice_nonce && m->u.unregister.slice_nonce != s->nonce)) {
    conn_send_error(c, m->hdr.seq, -ENOENT, "no such slice for this user");
    return;
  }
  char why[GS_PROTO_TEXT_MAX];
  int r = authz_unregister(d, c, s, why, sizeof(why));
  if (r < 0) {
    conn_send_error(c, m->hdr.seq, r, why);
    return;
  }
  gs_log(GS_LOG_INFO, "slice %u '%s' removed", s->id, s->spec.name);
  requests_remove_slice(d, s->id);
  conn_send_ok(c, m->hdr.seq);
}

/* s's spec with what the SET changes: per GPU when the SET says so, else one value for every
 * GPU of the slice (gslice set). */
static struct gs_slice_spec set_spec(const struct slice *s, const struct gs_msg_set *st) {
  struct gs_slice_spec spec = s->spec;

  for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
    if (!(slice_mask(s) & (1u << g)))
      continue;
    if (st->fields & GS_SET_REQUEST)
      spec.gpu_compute_request[g] = gs_spec_request(&st->spec, g);
    if (st->fields & GS_SET_MEMORY)
      spec.gpu_memory_cap[g] = gs_spec_memory_cap(&st->spec, g);
  }
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
  gs_spec_normalize(&spec);
  return spec;
}

/* A new memory cap below what the slice holds on a GPU: refused (-EBUSY, why), or with force
 * taken and *ret_force set (its new allocations then fail). */
static int check_caps(struct daemon *d, struct slice *s, const struct gs_slice_spec *spec,
                      bool force, uint32_t *ret_force, char *why, size_t why_len) {
  *ret_force = 0;
  for (uint32_t g = 0; g < d->ngpus; g++) {
    uint64_t used, cap = gs_spec_memory_cap(spec, g);
    if (!(slice_mask(s) & (1u << g)) || !cap)
      continue;
    used = regions_memory_used(d, s, g);
    if (used <= cap)
      continue;
    if (!force) {
      snprintf(why, why_len,
               "slice %u holds %" PRIu64 " bytes on GPU %u, more than the new cap %" PRIu64
               "; use force to lower it anyway (new allocations then fail)",
               s->id, used, g, cap);
      return -EBUSY;
    }
    *ret_force = 1;
  }
  return 0;
}

static void on_set(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  const struct gs_msg_set *st = &m->u.set;
  struct slice *s = registry_find(&d->reg, st->slice_id);
  char why[GS_PROTO_TEXT_MAX];
  uint32_t force = 0;
  int r;

  if (!s || !authz_may_change(d, c, s)) {
    conn_send_error(c, m->hdr.seq, -ENOENT, "no such slice for this user");
    return;
  }
  if ((st->fields & GS_SET_MEMORY) && s->region_broken) {
    snprintf(why, sizeof(why),
             "slice %u's memory region was truncated by one of its processes: its memory cap "
             "cannot change; run the slice again",
             s->id);
    conn_send_error(c, m->hdr.seq, -EBADMSG, why);
    return;
  }
  struct gs_slice_spec spec = set_spec(s, st);
  r = registry_admit(&d->reg, &spec, s->id, d->ngpus, why, sizeof(why));
  if (r < 0 || (r = authz_set(d, c, s, &spec, why, sizeof(why))) < 0) {
    if (r == -EPERM)
      gs_log(GS_LOG_WARNING, "pid %d (uid %u): SET of slice %u refused: %s", (int)c->pid,
             (unsigned)c->uid, s->id, why);
    conn_send_error(c, m->hdr.seq, r, why);
    return;
  }
  if ((st->fields & GS_SET_MEMORY) &&
      (r = check_caps(d, s, &spec, st->force, &force, why, sizeof(why))) < 0) {
    conn_send_error(c, m->hdr.seq, r, why);
    return;
  }
  s->spec = spec;
  if (st->fields & GS_SET_MEMORY) {
    s->memory_force = force;
    regions_apply_cap(d, s);
  }
  for (uint32_t g = 0; g < d->ngpus; g++) {
    struct sched_params p = slice_params(s, g);
    sched_set_params(&d->gpus[g].s, s->id, &p);
  }
  r = registry_save(&d->reg);
  if (r < 0)
    gs_log(GS_LOG_ERROR, "cannot save the registry: %s", strerror(-r));
  gs_log(GS_LOG_INFO, "slice %u set: request %u%% limit %u%% priority %d weight %u memory %" PRIu64,
         s->id, spec.compute_request, spec.compute_limit, spec.priority, spec.weight,
         spec.memory_cap);
  conn_send_ok(c, m->hdr.seq);
  for (uint32_t g = 0; g < d->ngpus; g++)
    token_dispatch(d, &d->gpus[g]);
}

static bool on_status(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  struct gs_status st;
  struct gs_msg_status_reply *r;
  size_t len;

  if (snapshot_take(d, &st) < 0) {
    conn_send_error(c, m->hdr.seq, -ENOMEM, "out of memory");
    return true;
  }
  len = sizeof(*r) + (size_t)st.nslices * sizeof(struct gs_slice_status);
  r = calloc(1, len);
  if (!r) {
    gs_status_free(&st);
    conn_send_error(c, m->hdr.seq, -ENOMEM, "out of memory");
    return true;
  }
  r->time_ns = st.time_ns;
  r->ngpus = st.ngpus;
  r->nslices = st.nslices;
  memcpy(r->gpus, st.gpus, sizeof(r->gpus));
  if (st.nslices)
    memcpy(r + 1, st.slices, (size_t)st.nslices * sizeof(struct gs_slice_status));
  /* A client that lets replies pile up is dropped by the caller. */
  bool ok = conn_send(c, GS_MSG_STATUS_REPLY, m->hdr.seq, r, len) == 0;
  free(r);
  gs_status_free(&st);
  return ok;
}

static bool handle_main(struct daemon *d, struct conn *c, const struct gs_msg *m);

/* A connection accepted on the hook socket (sock.c): the socket a container's processes reach,
 * mounted read-only into them. It serves what a Kubernetes slice's hook does and nothing else:
 * HELLO as HOOK of an existing any-uid slice with its nonce, then its token requests and releases
 * and PINGs (src/hook/compute*.c send no other message). Every other request is refused with
 * -EPERM and the connection stays; a message only the daemon sends closes it, as on the main
 * socket. Returns false when the connection must close. */
static bool hook_socket_handle(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  uint32_t t = m->hdr.type;
  char why[GS_PROTO_TEXT_MAX + 128]; /* cut to the ERROR's text */

  switch (t) {
  case GS_MSG_HELLO: {
    const struct slice *s =
        m->u.hello.slice_id ? registry_find(&d->reg, m->u.hello.slice_id) : NULL;
    if (c->hello)
      return false;
    if (m->u.hello.role != GS_ROLE_HOOK || !s || !(s->flags & GS_REGISTER_ANY_UID)) {
      snprintf(why, sizeof(why),
               "gsliced's hook socket serves only the hooks of a container's slice (HELLO as "
               "HOOK with that slice's id and nonce)%s; anything else goes to %s",
               m->u.hello.role != GS_ROLE_HOOK ? ""
               : !m->u.hello.slice_id          ? ": HELLO named no slice"
                                               : ": no such container slice",
               d->cfg.socket);
      conn_send_error(c, m->hdr.seq, -EPERM, why);
      return hello_refused(c);
    }
    return on_hello(d, c, m) || hello_refused(c);
  }
  case GS_MSG_TOKEN_REQUEST:
  case GS_MSG_TOKEN_RELEASE:
  case GS_MSG_PING:
    if (!c->hello)
      return false;
    return handle_main(d, c, m);
  case GS_MSG_REGISTER:
  case GS_MSG_UNREGISTER:
  case GS_MSG_SET:
  case GS_MSG_STATUS:
    gs_log(GS_LOG_WARNING, "pid %d (uid %u): %s on the hook socket refused", (int)c->pid,
           (unsigned)c->uid, gs_msg_type_name(t));
    snprintf(why, sizeof(why),
             "%s is refused on gsliced's hook socket, which serves only a container slice's "
             "hooks (token requests and releases); slices are made and changed on the host",
             gs_msg_type_name(t));
    conn_send_error(c, m->hdr.seq, -EPERM, why);
    return true;
  default: return false;
  }
}

static bool handle_main(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  uint32_t t = m->hdr.type;

  if (!c->hello) {
    if (t != GS_MSG_HELLO)
      return false;
    return on_hello(d, c, m) || hello_refused(c);
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
    conn_send(c, GS_MSG_PONG, m->hdr.seq, &m->u.ping, sizeof(m->u.ping));
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

/* conn_ops.handle: false when the connection must close (a protocol violation). */
static bool handle(void *data, struct conn *c, const struct gs_msg *m) {
  struct daemon *d = data;

  if (c->hook_only)
    return hook_socket_handle(d, c, m);
  return handle_main(d, c, m);
}

/* conn_ops.gone: it leaves the tokens it took part in. */
static void gone(void *data, struct conn *c) {
  token_conn_gone(data, c);
}

static const struct conn_ops requests_ops = {.handle = handle, .gone = gone};

void requests_attach(struct daemon *d) {
  d->conns.loop = d->loop;
  d->conns.ops = &requests_ops;
  d->conns.data = d;
}

void requests_adopt_slices(struct daemon *d) {
  for (uint32_t i = 0; i < d->reg.n; i++) {
    schedule_slice(d, d->reg.slices[i]);
    regions_apply_cap(d, d->reg.slices[i]);
  }
}
