/* SPDX-License-Identifier: Apache-2.0 */
/* The running DRA plugin (dra.h): the registration and service servers, Prepare and Unprepare
 * of one claim (its slice in gsliced through slices.c, its start directory, its CDI spec through
 * cdi.h, its record in state_dir/claims/), the reconciliation with gsliced and the health
 * stream. The records are n->dra's, under n->lock; the kubelet's batches run on the service
 * server's workers (--dra-workers of them at once: one slow call holds up only its own), GetInfo
 * and the health stream on the serving threads. The claims of a batch are prepared or
 * unprepared DRA_PREPARE_PARALLEL at a time, each on a thread of its own that holds n->lock only
 * to look and to record: its record is marked in flight meanwhile (struct dra_rec), which the
 * reconciliation and dra_gc leave alone and another call's Prepare or Unprepare of the same
 * claim waits for (settle: one claim, one call at a time). Before it has a record, a Prepare
 * is registered from the moment its call is served (struct dra_prepare, struct dra_call),
 * waiting its turn or reading its claim from the API server: an Unprepare then answers at once
 * and every Prepare of the claim begun before it makes nothing, so that an Unprepare never
 * answers before a slice it does not remove is made. Lock order: n->lock, then seq_mu (around
 * node_next_seq, which start directories and slice names take). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdi.h"
#include "client.h"
#include "dra.h"
#include "dra.pb-c.h"
#include "fileio.h"
#include "log.h"
#include "node.h"
#include "pluginregistration.pb-c.h"
#include "rpc.h"

/* A Prepare of a claim that has no record of it in flight yet (its call's, struct dra_call; in
 * node_dra's list from the call's coming until its record goes in flight or it answers): waiting
 * its turn (in the batch, or in settle) or reading the claim from the API server (reading). An
 * Unprepare of the same claim meanwhile marks every one (nothing is made yet) and answers at once;
 * each, once its wait or read is over, makes nothing and answers that the claim was unprepared. A
 * Prepare that begins after the Unprepare is not marked and prepares the claim. Another Prepare of
 * the claim waits for the one reading it. */
struct dra_prepare {
  char uid[DRA_UID_MAX];
  bool listed; /* in node_dra's list */
  bool reading;
  bool unprepared;
  struct dra_prepare *next;
};

/* One call of the kubelet's, the ctx its claims' ops get (dra_ops). A NodePrepareResources has
 * every claim registered (claims[i] for the request's claims[i]) from the moment it is served,
 * all in one hold of n->lock, before the batch takes them DRA_PREPARE_PARALLEL at a time: an
 * Unprepare after the call wins over the claims still waiting their turn in it too. */
struct dra_call {
  struct node *n;
  size_t nclaims;
  struct dra_prepare *claims;
};

struct node_dra {
  struct rpc_server *reg_srv, *srv;
  uint32_t nrecs;
  struct dra_rec *recs[DRA_MAX_CLAIMS];
  struct dra_prepare *preparing; /* with n->lock */
  bool reconciled;               /* with gsliced, since the start or its last restart */
  pthread_cond_t settled;        /* with n->lock: a record is no longer in flight */
  pthread_mutex_t seq_mu; /* node_next_seq's n->start_seq, for every thread, n->lock or not */
  bool registered_event;  /* the kubelet said so; taken by dra_registered_event */
  char last_reg_err[512]; /* the kubelet's last refusal, said once */
};

/* ---- records ---- */

static struct dra_rec *rec_find(struct node_dra *d, const char *uid, uint32_t *ret_i) {
  for (uint32_t i = 0; i < d->nrecs; i++)
    if (!strcmp(d->recs[i]->uid, uid)) {
      if (ret_i)
        *ret_i = i;
      return d->recs[i];
    }
  return NULL;
}

static int rec_save(struct node *n, const struct dra_rec *r) {
  char *text;
  size_t len;
  int e = dra_rec_format(r, &text, &len);
  if (e < 0)
    return e;
  e = gs_file_write_atomic(n->claims_fd, r->uid, text, len, 0600);
  free(text);
  return e;
}

static int recs_load(struct node *n) {
  struct node_dra *d = n->dra;
  struct dirent *e;
  int ret = 0, dfd = openat(n->claims_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;

  if (!dir) {
    if (dfd >= 0)
      close(dfd);
    return -errno;
  }
  while ((e = readdir(dir)) && d->nrecs < DRA_MAX_CLAIMS) {
    char *text = NULL, err[256];
    if (e->d_name[0] == '.' || dra_claim_ids_check("ns", "name", e->d_name, err, sizeof(err)) < 0)
      continue;
    int rd = gs_file_read(n->claims_fd, e->d_name, GS_FILE_NOFOLLOW | GS_FILE_REGULAR, DRA_REC_MAX,
                          &text, NULL);
    struct dra_rec *r = calloc(1, sizeof(*r));
    if (!r) {
      free(text);
      break;
    }
    if (rd < 0 || dra_rec_parse(text, r) < 0 || strcmp(r->uid, e->d_name)) {
      gs_log(GS_LOG_WARNING,
             "claim record %s/claims/%s is unreadable or corrupt: ignored (left "
             "in place)",
             n->cfg.state_dir, e->d_name);
      ret = -EBADMSG;
      free(r);
    } else {
      d->recs[d->nrecs++] = r;
    }
    free(text);
  }
  closedir(dir);
  return ret;
}

/* ---- the claim's slice, directory and CDI spec ---- */

/* The CDI spec of r: one device "claim-<uid>" holding the container to r's slice. held: the
 * caller has n->lock (else it is taken to read n->gpus, not to write the spec). */
static int cdi_write(struct node *n, const struct dra_rec *r, bool held, char *err,
                     size_t err_len) {
  struct cdi_slice_storage *st = malloc(sizeof(*st));
  struct gs_slice_spec spec;
  struct cdi_edits edits;
  char key[DRA_KEY_MAX], file[DRA_KEY_MAX + 32], dir[PATH_MAX], region[PATH_MAX];
  uint32_t idx[GS_MAX_GPUS];
  size_t k = 0;
  int e;

  if (!st)
    return -ENOMEM;
  dra_rec_spec(r, &spec);
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++)
    if (spec.gpu_mask & (1u << g))
      idx[k++] = g;
  dra_key(r->uid, key, sizeof(key));
  dra_cdi_file(r->uid, file, sizeof(file));
  /* The stable links, not the start directory itself: a slice made anew (gsliced lost it)
   * moves them, and a container started later mounts the new one with the same spec. */
  node_alloc_dir(n, key, dir, sizeof(dir));
  node_alloc_region(n, key, region, sizeof(region));
  if (!held)
    pthread_mutex_lock(&n->lock);
  e = cdi_slice_edits(n, dir, region, key, idx, k, st, &edits, err, err_len);
  if (!held)
    pthread_mutex_unlock(&n->lock);
  if (e == 0) {
    struct cdi_device dev = {.name = key, .edits = edits};
    e = cdi_spec_write(n->cfg.cdi_dir, file, NODE_CDI_KIND_CLAIM, &dev, 1, NULL, err, err_len);
  }
  free(st);
  return e;
}

/* After REGISTER answered: r's slice directory checked, its start directory and CDI spec
 * written, the record saved. 0 or -errno with err (the caller undoes the slice). held: as
 * cdi_write's. */
static int slice_finish(struct node *n, struct dra_rec *r, const struct gs_msg_registered *reg,
                        bool held, char *err, size_t err_len) {
  char region[PATH_MAX], env[4096], key[DRA_KEY_MAX];
  int e;

  r->slice_id = reg->slice_id;
  r->nonce = reg->slice_nonce;
  snprintf(r->slice_dir, sizeof(r->slice_dir), "%s", reg->state_dir);
  if ((e = node_slice_region(n, r->slice_dir, region, sizeof(region), err, err_len)) < 0)
    return e;
  dra_key(r->uid, key, sizeof(key));
  node_slice_env(r->slice_id, r->nonce, r->memory, r->compute_limit, r->devices, env, sizeof(env));
  pthread_mutex_lock(&n->dra->seq_mu);
  e = node_start_dir_make(n, key, env, region, r->start, sizeof(r->start));
  pthread_mutex_unlock(&n->dra->seq_mu);
  if (e < 0) {
    snprintf(err, err_len, "cannot write the claim's start directory: %s", strerror(-e));
    return e;
  }
  if ((e = cdi_write(n, r, held, err, err_len)) < 0)
    return e;
  r->pending = false;
  if ((e = rec_save(n, r)) < 0)
    snprintf(err, err_len, "cannot write the claim's record: %s", strerror(-e));
  return e;
}

/* GSLICE_NODE_TEST_CRASH_AT=<at> (tests only): gslice-node dies there. */
static void crash_point(const char *at) {
  const char *crash = secure_getenv("GSLICE_NODE_TEST_CRASH_AT");
  if (crash && !strcmp(crash, at)) {
    gs_log(GS_LOG_WARNING, "GSLICE_NODE_TEST_CRASH_AT=%s: exiting (test)", at);
    _exit(99);
  }
}

/* r's slice, directories, spec and record file taken away, in that order (the record last: a
 * crash before it leaves a record the next start makes the slice of again, and the kubelet's
 * Unprepare, tried again, removes). -EAGAIN (all left in place) when gsliced cannot be asked.
 * Without n->lock: r is in flight. */
static int rec_undo(struct node *n, const struct dra_rec *r, char *err, size_t err_len) {
  char derr[GS_PROTO_TEXT_MAX] = "", key[DRA_KEY_MAX], file[DRA_KEY_MAX + 32], cerr[256];
  int fd, e;

  if (r->slice_id && !r->pending) {
    e = node_daemon_connect(n, &fd);
    if (e == 0) {
      e = gs_client_unregister(fd, r->slice_id, r->nonce, derr, sizeof(derr));
      close(fd);
    }
    if (e < 0 && !(e == -ENOENT && derr[0])) {
      snprintf(err, err_len, "cannot remove slice %u of claim %s/%s yet: %s (try again)",
               r->slice_id, r->ns, r->name, derr[0] ? derr : strerror(-e));
      return -EAGAIN;
    }
    crash_point("unregistered");
  }
  dra_key(r->uid, key, sizeof(key));
  dra_cdi_file(r->uid, file, sizeof(file));
  if (cdi_spec_remove(n->cfg.cdi_dir, file, cerr, sizeof(cerr)) < 0)
    gs_log(GS_LOG_WARNING, "claim %s/%s: %s", r->ns, r->name, cerr);
  node_start_dirs_remove(n, key);
  unlinkat(n->claims_fd, r->uid, 0);
  return 0;
}

static void rec_forget(struct node_dra *d, const struct dra_rec *r);

/* Takes record i's slice, directories, spec and record away (rec_undo), with n->lock, which is
 * dropped meanwhile (the record in flight): look records up again afterwards. */
static int rec_drop(struct node *n, uint32_t i, const char *why, char *err, size_t err_len) {
  struct node_dra *d = n->dra;
  struct dra_rec *r = d->recs[i];

  r->inflight = true;
  pthread_mutex_unlock(&n->lock);
  int e = rec_undo(n, r, err, err_len);
  pthread_mutex_lock(&n->lock);
  r->inflight = false;
  pthread_cond_broadcast(&d->settled);
  if (e < 0)
    return e;
  gs_log(GS_LOG_INFO, "claim %s/%s (uid %s): slice %u removed: %s", r->ns, r->name, r->uid,
         r->slice_id, why);
  rec_forget(d, r);
  free(r);
  return 0;
}

static void slice_name(struct node *n, struct dra_rec *r) {
  char raw[GS_NAME_MAX + 400];
  size_t i;
  pthread_mutex_lock(&n->dra->seq_mu);
  uint64_t seq = node_next_seq(n);
  pthread_mutex_unlock(&n->dra->seq_mu);
  snprintf(raw, sizeof(raw), DRA_SLICE_PREFIX "%" PRIx64 ".%s.%s", seq, r->ns, r->name);
  for (i = 0; raw[i] && i < GS_NAME_MAX - 1; i++)
    r->slice_name[i] = raw[i];
  r->slice_name[i] = 0;
}

/* r's slice made in gsliced (r filled but for the slice, its name given by slice_name), with its
 * directory and spec: the record first, pending, naming the slice (a crash after REGISTER leaves
 * a slice the next start finds by its name), then REGISTER, then the rest. 0, -EAGAIN (gsliced
 * could not be reached: nothing made, no record), -EINPROGRESS (it did not answer REGISTER: the
 * pending record stays for the reconciliation, which the caller asks for), or -errno; err says
 * why. held: with n->lock (the reconciliation's); else r is in flight (prepare's thread). */
static int slice_make(struct node *n, struct dra_rec *r, bool held, char *err, size_t err_len) {
  struct gs_slice_spec spec;
  struct gs_msg_registered reg;
  char derr[GS_PROTO_TEXT_MAX] = "";
  int fd = -1, e;

  if (dra_rec_spec(r, &spec) < 0) {
    snprintf(err, err_len, "claim %s/%s: no slice can be made of its shares", r->ns, r->name);
    return -EINVAL;
  }
  r->pending = true;
  r->slice_id = 0;
  if ((e = rec_save(n, r)) < 0) {
    snprintf(err, err_len, "cannot write the record of claim %s/%s: %s", r->ns, r->name,
             strerror(-e));
    return e;
  }
  e = node_slice_register(n, &spec, &fd, &reg, derr, sizeof(derr));
  if (fd < 0 || (e < 0 && !derr[0] && e != -EPROTONOSUPPORT)) {
    snprintf(err, err_len, "gsliced on %s does not answer: %s (the kubelet tries again)",
             n->cfg.socket, strerror(-e));
    if (fd < 0)
      unlinkat(n->claims_fd, r->uid, 0); /* nothing was made */
    else
      close(fd); /* the slice may be made or not: found by its name */
    return fd < 0 ? -EAGAIN : -EINPROGRESS;
  }
  if (e < 0) {
    unlinkat(n->claims_fd, r->uid, 0);
    snprintf(err, err_len, "gsliced refused the slice of claim %s/%s: %s", r->ns, r->name,
             derr[0] ? derr : strerror(-e));
    close(fd);
    return e;
  }
  if ((e = slice_finish(n, r, &reg, held, err, err_len)) < 0) {
    char key[DRA_KEY_MAX], file[DRA_KEY_MAX + 32], cerr[64];
    gs_client_unregister(fd, reg.slice_id, reg.slice_nonce, NULL, 0);
    dra_key(r->uid, key, sizeof(key));
    dra_cdi_file(r->uid, file, sizeof(file));
    cdi_spec_remove(n->cfg.cdi_dir, file, cerr, sizeof(cerr));
    node_start_dirs_remove(n, key);
    unlinkat(n->claims_fd, r->uid, 0);
  }
  close(fd);
  return e;
}

/* ---- Prepare and Unprepare of one claim ---- */

/* With n->lock: whether a Prepare is reading uid's claim. */
static bool being_read(const struct node_dra *d, const char *uid) {
  for (const struct dra_prepare *p = d->preparing; p; p = p->next)
    if (p->reading && !strcmp(p->uid, uid))
      return true;
  return false;
}

/* With n->lock: every Prepare of uid's claim begun before now (waiting or reading) makes
 * nothing; one waiting its turn answers at once. */
static void preparing_unprepared(struct node *n, const char *uid) {
  for (struct dra_prepare *p = n->dra->preparing; p; p = p->next)
    if (!strcmp(p->uid, uid))
      p->unprepared = true;
  pthread_cond_broadcast(&n->dra->settled);
}

/* With n->lock: uid's record in flight (readers: or a Prepare reading the claim). */
static bool busy(struct node_dra *d, const char *uid, bool readers) {
  struct dra_rec *r = rec_find(d, uid, NULL);
  return (r && r->inflight) || (readers && being_read(d, uid));
}

/* With n->lock: until no other call has uid's claim in flight (readers: a Prepare's read of it
 * counts; the lock is dropped meanwhile: look records up again afterwards), at most
 * DRA_SETTLE_S, or until self (the caller's Prepare, or NULL) is unprepared. 0, or -EAGAIN with
 * err when it still is (the kubelet asks again). Never within one batch: a UID is in it once. */
static int settle(struct node *n, const char *ns, const char *name, const char *uid,
                  const struct dra_prepare *self, bool readers, char *err, size_t err_len) {
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += DRA_SETTLE_S;
  if (busy(n->dra, uid, readers))
    gs_log(GS_LOG_INFO,
           "claim %s/%s (uid %s) waits for another call that has it in flight (at most %d s)", ns,
           name, uid, DRA_SETTLE_S);
  while (!(self && self->unprepared) && busy(n->dra, uid, readers))
    if (pthread_cond_timedwait(&n->dra->settled, &n->lock, &dl) == ETIMEDOUT &&
        !(self && self->unprepared) && busy(n->dra, uid, readers)) {
      snprintf(err, err_len,
               "claim %s/%s is being prepared or unprepared by another call for %d s (the "
               "kubelet tries again)",
               ns, name, DRA_SETTLE_S);
      return -EAGAIN;
    }
  return 0;
}

/* Takes r (in d->recs, wherever it is now) out of the records; the caller frees it. */
static void rec_forget(struct node_dra *d, const struct dra_rec *r) {
  for (uint32_t i = 0; i < d->nrecs; i++)
    if (d->recs[i] == r) {
      d->recs[i] = d->recs[--d->nrecs];
      return;
    }
}

/* r (read from the claim now) recorded in flight, its slice made without n->lock, the outcome
 * recorded. With n->lock, which it drops meanwhile. 0 with *out, or -errno; *keep: r is
 * d->recs' now (prepared, or pending for the reconciliation). */
static int prepare_make(struct node *n, struct dra_rec *r, struct dra_rec *out, bool *keep,
                        char *err, size_t err_len) {
  struct node_dra *d = n->dra;
  slice_name(n, r);
  r->pending = r->inflight = true;
  r->slice_id = 0;
  d->recs[d->nrecs++] = r;
  pthread_mutex_unlock(&n->lock);
  int e = slice_make(n, r, false, err, err_len);
  pthread_mutex_lock(&n->lock);
  r->inflight = false;
  pthread_cond_broadcast(&d->settled);
  *keep = e == 0 || e == -EINPROGRESS;
  if (e == 0) {
    *out = *r;
    gs_log(GS_LOG_INFO,
           "claim %s/%s (uid %s) prepared: slice %u '%s', gpus %s, memory %s, "
           "compute ..%u%%, priority %s, weight %u",
           r->ns, r->name, r->uid, r->slice_id, r->slice_name, r->gpus, r->memory, r->compute_limit,
           r->priority, r->weight);
  } else if (e == -EINPROGRESS) {
    d->reconciled = false; /* the pending record's slice is found by its name */
  } else {
    rec_forget(d, r);
  }
  return e;
}

static void preparing_add(struct node_dra *d, struct dra_prepare *p, const char *uid) {
  snprintf(p->uid, sizeof(p->uid), "%s", uid);
  p->listed = true;
  p->reading = p->unprepared = false;
  p->next = d->preparing;
  d->preparing = p;
}

/* p out of the list, if it is there (n->lock held); a Prepare of its claim waiting in settle
 * goes on. */
static void preparing_remove(struct node *n, struct dra_prepare *p) {
  if (!p->listed)
    return;
  p->listed = false;
  for (struct dra_prepare **at = &n->dra->preparing; *at; at = &(*at)->next)
    if (*at == p) {
      *at = p->next;
      break;
    }
  pthread_cond_broadcast(&n->dra->settled);
}

/* The answer of a Prepare that an Unprepare of its claim came after: -ECANCELED with err. */
static int unprepared_meanwhile(const char *ns, const char *name, const char *uid, char *err,
                                size_t err_len) {
  snprintf(err, err_len,
           "claim %s/%s was unprepared while this call read it from the API server or waited "
           "its turn: nothing made (the kubelet prepares it again when a pod needs it)",
           ns, name);
  gs_log(GS_LOG_INFO, "claim %s/%s (uid %s): unprepared during its Prepare: not prepared", ns, name,
         uid);
  return -ECANCELED;
}

/* The rest of prepare once the claim c was read (read: dra_claim_read's answer), with n->lock
 * (dropped meanwhile by settle or prepare_make). p leaves the list only just before the record
 * goes in flight (prepare_make), both under the lock held throughout: an Unprepare finds one or
 * the other, never neither. */
static int prepare_read(struct node *n, int read, const struct dra_claim *c, struct dra_rec *r,
                        struct dra_prepare *p, struct dra_rec *out, bool *keep, char *err,
                        size_t err_len) {
  struct node_dra *d = n->dra;
  struct dra_rec *have;
  uint32_t hi;
  int e = read;

  if (e == 0 && !d->reconciled) {
    snprintf(err, err_len,
             "gsliced on %s has not answered since gslice-node started or it "
             "restarted (the kubelet tries again)",
             n->cfg.socket);
    e = -EAGAIN;
  }
  if (e == 0)
    e = dra_rec_from_claim(c, n->gpus, n->ngpus, r, err, err_len);
  /* Another call may have the claim in flight (an Unprepare undoing an older record): after it. */
  if (e == 0)
    e = settle(n, r->ns, r->name, p->uid, p, false, err, err_len);
  preparing_remove(n, p);
  if (e == 0 && p->unprepared)
    return unprepared_meanwhile(r->ns, r->name, p->uid, err, err_len);
  if (e == 0 && (have = rec_find(d, p->uid, &hi)) && have->pending) {
    /* Since the reconciliation no slice of it is left in gsliced: made anew below. */
    free(have);
    d->recs[hi] = d->recs[--d->nrecs];
    have = NULL;
  }
  if (e == 0 && have)
    *out = *have; /* made meanwhile (the reconciliation) */
  else if (e == 0 && d->nrecs >= DRA_MAX_CLAIMS) {
    snprintf(err, err_len, "gslice-node holds %u prepared claims, its most", d->nrecs);
    e = -ENOSPC;
  } else if (e == 0)
    e = prepare_make(n, r, out, keep, err, err_len);
  return e;
}

/* With n->lock: the registration of claim uid of call (registered when the call came), or own
 * registered now. */
static struct dra_prepare *call_claim(struct dra_call *call, const char *uid,
                                      struct dra_prepare *own) {
  for (size_t i = 0; i < call->nclaims; i++)
    if (call->claims[i].listed && !strcmp(call->claims[i].uid, uid))
      return &call->claims[i];
  preparing_add(call->n->dra, own, uid);
  return own;
}

static int prepare(void *ctx, const char *ns, const char *name, const char *uid,
                   struct dra_rec *out, char *err, size_t err_len) {
  struct dra_call *call = ctx;
  struct node *n = call->n;
  struct node_dra *d = n->dra;
  struct dra_claim *c = calloc(1, sizeof(*c));
  struct dra_rec *r = calloc(1, sizeof(*r)), *have;
  struct dra_prepare own = {.listed = false}, *p;
  bool keep = false;
  int e;

  if (!c || !r) {
    free(c);
    free(r);
    snprintf(err, err_len, "out of memory");
    return -ENOMEM;
  }
  pthread_mutex_lock(&n->lock);
  /* From the call's coming until its record goes in flight or it answers, an Unprepare of the
   * claim is not missed (struct dra_prepare): one that came while the claim waited its turn in
   * the batch or comes while it waits below or reads the claim wins over it. */
  p = call_claim(call, uid, &own);
  /* Prepared already (another pod of the claim, a kubelet restart), or by the call that has it
   * in flight (reading it included): the same answer, and every pod and container of the claim
   * joins the same slice. */
  e = settle(n, ns, name, uid, p, true, err, err_len);
  if (e == 0 && p->unprepared)
    e = unprepared_meanwhile(ns, name, uid, err, err_len);
  have = rec_find(d, uid, NULL);
  bool done = e < 0 || (have && !have->pending) || n->cfg.no_api;
  if (e == 0 && have && !have->pending) {
    *out = *have;
  } else if (e == 0 && n->cfg.no_api) {
    snprintf(err, err_len,
             "claim %s/%s: gslice-node runs without an API server "
             "(--no-api-server) and cannot read it",
             ns, name);
    e = -ENOTCONN;
  }
  if (done)
    preparing_remove(n, p);
  else
    p->reading = true; /* another Prepare of the claim waits for this read */
  pthread_mutex_unlock(&n->lock);
  if (!done) {
    /* Read without the lock: the API server may be slow, and nothing else waits on it. */
    e = dra_claim_read(n, ns, name, uid, c, err, err_len);
    pthread_mutex_lock(&n->lock);
    if (p->unprepared) { /* whatever the read answered (it may have timed out meanwhile) */
      preparing_remove(n, p);
      e = unprepared_meanwhile(ns, name, uid, err, err_len);
    } else {
      e = prepare_read(n, e, c, r, p, out, &keep, err, err_len);
    }
    pthread_mutex_unlock(&n->lock);
  }
  free(c);
  if (!keep)
    free(r);
  return e;
}

static int unprepare(void *ctx, const char *ns, const char *name, const char *uid, char *err,
                     size_t err_len) {
  struct node *n = ((struct dra_call *)ctx)->n;
  uint32_t i;
  int e = 0;

  pthread_mutex_lock(&n->lock);
  /* Every Prepare of the claim begun before now, waiting its turn or reading the claim, makes
   * nothing of it (struct dra_prepare): nothing to wait for there. After a call that has its
   * record in flight; a pending record's slice is found by its name first (the
   * reconciliation). */
  preparing_unprepared(n, uid);
  e = settle(n, ns, name, uid, NULL, false, err, err_len);
  bool have = e == 0 && rec_find(n->dra, uid, &i);
  if (have && n->dra->recs[i]->pending && !n->dra->reconciled) {
    snprintf(err, err_len, "gsliced on %s does not answer (the kubelet tries again)",
             n->cfg.socket);
    e = -EAGAIN;
  } else if (have) {
    e = rec_drop(n, i, "unprepared by the kubelet", err, err_len);
  }
  pthread_mutex_unlock(&n->lock);
  return e;
}

static const struct dra_ops ops = {prepare, unprepare, DRA_PREPARE_PARALLEL};

/* ---- gsliced: slices without a claim go, claims without their slice get it again ---- */

static bool slice_is(const struct gs_status *st, const struct dra_rec *r) {
  for (uint32_t i = 0; i < st->nslices; i++)
    if (st->slices[i].id == r->slice_id && !strcmp(st->slices[i].name, r->slice_name))
      return true;
  return false;
}

/* gsliced lost r's slice (its state gone): made again, with a new start directory and spec;
 * the containers started since mount the new one. */
static void slice_remake(struct node *n, uint32_t i) {
  struct dra_rec *r = n->dra->recs[i];
  char err[512] = "";
  uint32_t old = r->slice_id;
  slice_name(n, r);
  int e = slice_make(n, r, true, err, sizeof(err));
  if (e == 0)
    gs_log(GS_LOG_INFO, "claim %s/%s: gsliced had lost slice %u: made again as slice %u '%s'",
           r->ns, r->name, old, r->slice_id, r->slice_name);
  else
    gs_log(GS_LOG_ERROR,
           "claim %s/%s: gsliced had lost slice %u and it cannot be made again: "
           "%s",
           r->ns, r->name, old, err);
  /* Kept, pending: made at the claim's next Prepare, or at gsliced's next return. */
  if (e < 0 && e != -EINPROGRESS)
    rec_save(n, r);
  if (e == -EAGAIN || e == -EINPROGRESS)
    n->dra->reconciled = false;
}

static int reconcile_daemon(struct node *n) {
  struct node_dra *d = n->dra;
  struct gs_status st;
  int fd, e = node_daemon_connect(n, &fd);

  if (e < 0)
    return e;
  if ((e = gs_client_status(fd, &st)) < 0) {
    close(fd);
    return e;
  }
  for (uint32_t i = 0; i < st.nslices; i++) {
    const struct gs_slice_status *s = &st.slices[i];
    bool kept = false;
    if (strncmp(s->name, DRA_SLICE_PREFIX, strlen(DRA_SLICE_PREFIX)))
      continue;
    /* A claim in flight may have made its slice since: kept by its name. */
    for (uint32_t k = 0; k < d->nrecs; k++)
      kept |= d->recs[k]->inflight ? !strcmp(d->recs[k]->slice_name, s->name)
                                   : !d->recs[k]->pending && d->recs[k]->slice_id == s->id &&
                                         !strcmp(d->recs[k]->slice_name, s->name);
    if (kept)
      continue;
    char err[GS_PROTO_TEXT_MAX] = "";
    int u = gs_client_unregister(fd, s->id, 0, err, sizeof(err));
    gs_log(u < 0 ? GS_LOG_WARNING : GS_LOG_INFO,
           "slice %u '%s' is of no prepared claim (a crash "
           "between REGISTER and its record?): %s%s",
           s->id, s->name, u < 0 ? "cannot remove it: " : "removed",
           u < 0 ? (err[0] ? err : strerror(-u)) : "");
  }
  close(fd);
  d->reconciled = true;
  for (uint32_t i = 0; i < d->nrecs; i++)
    if (!d->recs[i]->inflight && (d->recs[i]->pending || !slice_is(&st, d->recs[i]))) {
      /* A pending record's slice (if any) went just above: made anew, as a lost one is. */
      d->recs[i]->pending = false;
      slice_remake(n, i);
    }
  gs_status_free(&st);
  return 0;
}

/* ---- the servers ---- */

static void sock_path(const struct node *n, bool reg, char *out, size_t len) {
  if (reg)
    snprintf(out, len, "%s/%s", n->cfg.plugins_registry, NODE_DRA_REG_SOCK);
  else
    snprintf(out, len, "%s/%s", n->cfg.plugin_dir, NODE_DRA_SOCK);
}

static int get_info(struct node *n, uint8_t **ret, size_t *ret_len) {
  Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
  char endpoint[PATH_MAX + 16];
  char *versions[] = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};

  sock_path(n, false, endpoint, sizeof(endpoint));
  info.type = DRA_PLUGIN_TYPE;
  info.name = NODE_DRA_DRIVER;
  info.endpoint = endpoint;
  info.n_supported_versions = 2;
  info.supported_versions = versions;
  *ret_len = pluginregistration__plugin_info__get_packed_size(&info);
  if (!(*ret = malloc(*ret_len ? *ret_len : 1)))
    return -ENOMEM;
  pluginregistration__plugin_info__pack(&info, *ret);
  return 0;
}

static int notify(struct node *n, const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
                  char *err, size_t err_len) {
  Pluginregistration__RegistrationStatus *st =
      pluginregistration__registration_status__unpack(NULL, len, req);
  if (!st) {
    snprintf(err, err_len, "NotifyRegistrationStatus: malformed request");
    return 3;
  }
  pthread_mutex_lock(&n->lock);
  if (st->plugin_registered) {
    gs_log(GS_LOG_INFO,
           "the kubelet registered DRA driver " NODE_DRA_DRIVER " (%u GPU(s), %u "
           "prepared claim(s))",
           n->ngpus, n->dra->nrecs);
    n->dra->registered_event = true;
    n->dra->last_reg_err[0] = 0;
    __atomic_store_n(&n->registered, true, __ATOMIC_RELAXED); /* read by /readyz */
  } else {
    if (strncmp(n->dra->last_reg_err, st->error, sizeof(n->dra->last_reg_err) - 1))
      gs_log(GS_LOG_ERROR,
             "the kubelet refused to register DRA driver " NODE_DRA_DRIVER ": %s "
             "(is the kubelet older than 1.32, or another plugin of that name there?)",
             st->error[0] ? st->error : "(no reason given)");
    snprintf(n->dra->last_reg_err, sizeof(n->dra->last_reg_err), "%s", st->error);
    __atomic_store_n(&n->registered, false, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&n->lock);
  pluginregistration__registration_status__free_unpacked(st, NULL);
  *ret_len = 0;
  return (*ret = malloc(1)) ? 0 : (snprintf(err, err_len, "out of memory"), 8);
}

/* A NodePrepareResources: its claims registered (struct dra_call), then the batch. A request
 * that is not one is the batch's to refuse. */
static int prepare_call(struct node *n, const uint8_t *req, size_t len, uint8_t **ret,
                        size_t *ret_len, char *err, size_t err_len) {
  Dra__NodePrepareResourcesRequest *rq =
      dra__node_prepare_resources_request__unpack(NULL, len, req);
  struct dra_call call = {.n = n};

  if (rq && rq->n_claims <= DRA_MAX_BATCH &&
      !(call.claims = calloc(rq->n_claims ? rq->n_claims : 1, sizeof(*call.claims)))) {
    dra__node_prepare_resources_request__free_unpacked(rq, NULL);
    snprintf(err, err_len, "NodePrepareResources: out of memory");
    return 8; /* RESOURCE_EXHAUSTED */
  }
  if (call.claims) {
    call.nclaims = rq->n_claims;
    pthread_mutex_lock(&n->lock);
    for (size_t i = 0; i < call.nclaims; i++)
      preparing_add(n->dra, &call.claims[i], rq->claims[i]->uid);
    pthread_mutex_unlock(&n->lock);
  }
  if (rq)
    dra__node_prepare_resources_request__free_unpacked(rq, NULL);
  int st = dra_prepare_batch(&ops, &call, req, len, ret, ret_len, err, err_len);
  /* The claims the batch never gave to prepare (refused before, a UID named twice). */
  pthread_mutex_lock(&n->lock);
  for (size_t i = 0; i < call.nclaims; i++)
    preparing_remove(n, &call.claims[i]);
  pthread_mutex_unlock(&n->lock);
  free(call.claims);
  return st;
}

/* The registration socket's calls and the service socket's: GetInfo and
 * NotifyRegistrationStatus on the serving thread (n->lock only briefly), the batches on the
 * worker (they wait on the API server and gsliced). */
static int serve(void *ctx, const char *method, const uint8_t *req, size_t len, uint8_t **ret,
                 size_t *ret_len, char *err, size_t err_len) {
  struct node *n = ctx;
  if (!strcmp(method, DRA_M_GET_INFO))
    return get_info(n, ret, ret_len) < 0 ? (snprintf(err, err_len, "out of memory"), 8) : 0;
  if (!strcmp(method, DRA_M_NOTIFY))
    return notify(n, req, len, ret, ret_len, err, err_len);
  if (!strcmp(method, DRA_M_PREPARE_V1) || !strcmp(method, DRA_M_PREPARE_V1BETA1))
    return prepare_call(n, req, len, ret, ret_len, err, err_len);
  if (!strcmp(method, DRA_M_UNPREPARE_V1) || !strcmp(method, DRA_M_UNPREPARE_V1BETA1)) {
    struct dra_call call = {.n = n};
    return dra_unprepare_batch(&ops, &call, req, len, ret, ret_len, err, err_len);
  }
  snprintf(err, err_len, "%s is not a method of gslice-node's DRA plugin", method);
  return 12; /* UNIMPLEMENTED */
}

void dra_health_publish(struct node *n) {
  Dra__NodeWatchResourcesResponse m = DRA__NODE_WATCH_RESOURCES_RESPONSE__INIT;
  Dra__DeviceHealth h[GS_MAX_GPUS], *hp[GS_MAX_GPUS];
  Dra__DeviceIdentifier id[GS_MAX_GPUS];
  char names[GS_MAX_GPUS][32];
  uint8_t *buf;

  if (!n->dra || !n->dra->srv)
    return;
  pthread_mutex_lock(&n->lock);
  for (uint32_t i = 0; i < n->ngpus && i < GS_MAX_GPUS; i++) {
    dra__device_health__init(&h[i]);
    dra__device_identifier__init(&id[i]);
    snprintf(names[i], sizeof(names[i]), "gpu-%u", n->gpus[i].index);
    id[i].pool_name = n->cfg.node_name;
    id[i].device_name = names[i];
    h[i].device = &id[i];
    h[i].health = n->daemon_up ? DRA__HEALTH_STATUS__HEALTHY : DRA__HEALTH_STATUS__UNHEALTHY;
    h[i].last_updated_time = (int64_t)time(NULL);
    h[i].message = n->daemon_up ? ""
                                : "gsliced is not answering on this node: nothing holds "
                                  "its slices to their shares";
    hp[i] = &h[i];
  }
  m.n_devices = n->ngpus < GS_MAX_GPUS ? n->ngpus : GS_MAX_GPUS;
  m.devices = hp;
  size_t len = dra__node_watch_resources_response__get_packed_size(&m);
  if ((buf = malloc(len ? len : 1))) {
    dra__node_watch_resources_response__pack(&m, buf);
    rpc_server_publish(n->dra->srv, buf, len);
    free(buf);
  }
  pthread_mutex_unlock(&n->lock);
}

static int servers_start(struct node *n, bool reg, char *err, size_t err_len) {
  static const char *const streams[] = {DRA_M_WATCH_V1, DRA_M_WATCH_V1BETA1, DRA_M_WATCH_V1ALPHA1,
                                        NULL};
  static const char *const workers[] = {DRA_M_PREPARE_V1, DRA_M_UNPREPARE_V1, DRA_M_PREPARE_V1BETA1,
                                        DRA_M_UNPREPARE_V1BETA1, NULL};
  char path[PATH_MAX + 32];
  struct rpc_server **s = reg ? &n->dra->reg_srv : &n->dra->srv;

  sock_path(n, reg, path, sizeof(path));
  if (*s) {
    rpc_server_stop(*s);
    *s = NULL;
  }
  int e = rpc_server_start_pool(path, reg ? NULL : streams, reg ? NULL : workers,
                                reg ? 1 : n->cfg.dra_workers, serve, n, s, err, err_len);
  if (e == 0 && !reg)
    dra_health_publish(n);
  return e;
}

int dra_start(struct node *n, char *err, size_t err_len) {
  int e;
  if (!(n->dra = calloc(1, sizeof(*n->dra))))
    return -ENOMEM;
  pthread_mutex_init(&n->dra->seq_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&n->dra->settled, &ca);
  pthread_condattr_destroy(&ca);
  /* The service socket's directory is the plugin's own: made when the kubelet's plugins
   * directory is there but it is not. */
  if (mkdir(n->cfg.plugin_dir, 0750) < 0 && errno != EEXIST) {
    e = -errno;
    snprintf(err, err_len, "cannot make --plugin-dir %s: %s", n->cfg.plugin_dir, strerror(-e));
    return e;
  }
  if ((e = recs_load(n)) < 0)
    gs_log(GS_LOG_WARNING, "cannot read all claim records in %s/claims", n->cfg.state_dir);
  gs_log(GS_LOG_INFO, "DRA driver " NODE_DRA_DRIVER ": %u prepared claim(s) recorded",
         n->dra->nrecs);
  /* The service first: the kubelet connects to it as soon as it finds the registration. */
  if ((e = servers_start(n, false, err, err_len)) < 0 ||
      (e = servers_start(n, true, err, err_len)) < 0)
    return e;
  return 0;
}

/* The socket of server s is still ours at its path (someone may have removed it). */
static bool sock_there(const struct node *n, bool reg) {
  char path[PATH_MAX + 32];
  struct stat st;
  sock_path(n, reg, path, sizeof(path));
  return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

void dra_tick(struct node *n, bool daemon_back) {
  struct node_dra *d = n->dra;
  char err[512];

  for (int reg = 0; reg < 2; reg++)
    if (!(reg ? d->reg_srv : d->srv) || !sock_there(n, reg)) {
      gs_log(GS_LOG_WARNING, "the %s socket is gone: serving it again",
             reg ? "registration" : "service");
      if (servers_start(n, reg, err, sizeof(err)) < 0)
        gs_log(GS_LOG_ERROR, "%s", err);
    }
  pthread_mutex_lock(&n->lock);
  if (daemon_back)
    d->reconciled = false;
  if (n->daemon_up && !d->reconciled)
    reconcile_daemon(n);
  pthread_mutex_unlock(&n->lock);
}

void dra_gc(struct node *n) {
  struct dra_claim *c = malloc(sizeof(*c));
  struct claim_id {
    char uid[DRA_UID_MAX], ns[64], name[256];
  } *ids = NULL;
  uint32_t k = 0;
  char err[512];

  if (!c || n->cfg.no_api)
    goto out;
  pthread_mutex_lock(&n->lock);
  if ((ids = calloc(n->dra->nrecs ? n->dra->nrecs : 1, sizeof(*ids))))
    for (uint32_t i = 0; i < n->dra->nrecs; i++)
      if (!n->dra->recs[i]->inflight && !n->dra->recs[i]->pending) {
        snprintf(ids[k].uid, sizeof(ids[k].uid), "%s", n->dra->recs[i]->uid);
        snprintf(ids[k].ns, sizeof(ids[k].ns), "%s", n->dra->recs[i]->ns);
        snprintf(ids[k].name, sizeof(ids[k].name), "%s", n->dra->recs[i]->name);
        k++;
      }
  pthread_mutex_unlock(&n->lock);
  for (uint32_t i = 0; ids && i < k; i++) {
    /* Only a claim that is not there (404) or is another now (its UID): every other answer,
     * an unallocated claim included, leaves it to the kubelet's Unprepare. A ResourceClaim is
     * not deleted while a pod has it reserved, so no pod uses the slice any more. */
    int e = dra_claim_read(n, ids[i].ns, ids[i].name, ids[i].uid, c, err, sizeof(err));
    if (e != -ENOENT && e != -ESTALE)
      continue;
    uint32_t at;
    pthread_mutex_lock(&n->lock);
    if (rec_find(n->dra, ids[i].uid, &at) && !n->dra->recs[at]->inflight &&
        !n->dra->recs[at]->pending &&
        rec_drop(n, at,
                 e == -ENOENT ? "its ResourceClaim is gone from the API server"
                              : "its ResourceClaim was replaced (another uid)",
                 err, sizeof(err)) < 0)
      gs_log(GS_LOG_WARNING, "%s", err);
    pthread_mutex_unlock(&n->lock);
  }
out:
  free(ids);
  free(c);
}

bool dra_registered_event(struct node *n) {
  pthread_mutex_lock(&n->lock);
  bool ev = n->dra && n->dra->registered_event;
  if (ev)
    n->dra->registered_event = false;
  pthread_mutex_unlock(&n->lock);
  return ev;
}

void dra_stop(struct node *n) {
  char path[PATH_MAX + 32];
  if (!n->dra)
    return;
  /* The registration goes first: the kubelet stops finding us before the service stops. */
  for (int reg = 1; reg >= 0; reg--) {
    struct rpc_server **s = reg ? &n->dra->reg_srv : &n->dra->srv;
    if (*s)
      rpc_server_stop(*s);
    *s = NULL;
    sock_path(n, reg, path, sizeof(path));
    unlink(path);
  }
  for (uint32_t i = 0; i < n->dra->nrecs; i++)
    free(n->dra->recs[i]);
  pthread_mutex_destroy(&n->dra->seq_mu);
  pthread_cond_destroy(&n->dra->settled);
  free(n->dra);
  n->dra = NULL;
}
