/* SPDX-License-Identifier: Apache-2.0 */
/* One slice per container: PreStartContainer finds the container its slots were given to
 * (the kubelet's PodResources List), reads its pod's gslice.io/assigned and makes the slice in
 * gsliced; the records of what was made survive gslice-node restarts (state_dir/records), the
 * slices themselves live in gsliced (held: not tied to gslice-node's life); a slice goes when
 * the kubelet no longer lists its container, or the API server says its pod is gone or done. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "annot.h"
#include "cdi.h"
#include "client.h"
#include "fileio.h"
#include "kube.h"
#include "log.h"
#include "node.h"
#include "podcheck.h"
#include "podresources.pb-c.h"
#include "rpc.h"
#include "sign.h"

#define POD_CHECK_NS 10000000000ull
#define START_ENV_MAX 4096

void node_alloc_dir(const struct node *n, const char *key, char *out, size_t len) {
  snprintf(out, len, "%s/alloc/%s", n->cfg.state_dir, key);
}

void node_alloc_region(const struct node *n, const char *key, char *out, size_t len) {
  snprintf(out, len, "%s/alloc/%s.region", n->cfg.state_dir, key);
}

/* ---- gslice-node's own state directory: everything through descriptors ---- */

/* The subdirectory `name` of dfd, made 0700 and gslice-node's own, never through a link. */
static int own_subdir(int dfd, const char *name, mode_t mode, int *ret_fd) {
  struct stat st;
  if (mkdirat(dfd, name, mode) < 0 && errno != EEXIST)
    return -errno;
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || fchmod(fd, mode) < 0) {
    int e = errno ? -errno : -EPERM;
    close(fd);
    return e == 0 ? -EPERM : e;
  }
  *ret_fd = fd;
  return 0;
}

/* Makes dfd/name, which must not exist yet (O_EXCL|O_NOFOLLOW: never a file or link someone
 * else put there), holding data, fsync'd. The caller syncs dfd. */
static int create_new(int dfd, const char *name, const void *data, size_t len, mode_t mode) {
  int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return -errno;
  int r = fchmod(fd, mode) < 0 ? -errno : gs_fd_write_all(fd, data, len);
  if (r == 0 && fsync(fd) < 0)
    r = -errno;
  if (close(fd) < 0 && r == 0)
    r = -errno;
  return r;
}

int node_state_open(struct node *n, char *err, size_t err_len) {
  char path[PATH_MAX];
  int r = 0;

  n->state_fd = n->records_fd = n->alloc_fd = n->starts_fd = n->claims_fd = -1;
  /* mkdir -p: the parents as the admin would make them (0755), the state dir itself 0700. */
  snprintf(path, sizeof(path), "%s", n->cfg.state_dir);
  for (char *p = path + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
      r = -errno;
      snprintf(err, err_len, "cannot make %s: %s (give --state-dir)", path, strerror(-r));
      return r;
    }
    *p = '/';
  }
  if (mkdir(n->cfg.state_dir, 0700) < 0 && errno != EEXIST) {
    r = -errno;
    snprintf(err, err_len, "cannot make %s: %s (give --state-dir)", n->cfg.state_dir, strerror(-r));
    return r;
  }
  n->state_fd = open(n->cfg.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  if (n->state_fd < 0 || fstat(n->state_fd, &st) < 0) {
    r = -errno;
    snprintf(err, err_len, "cannot open %s: %s", n->cfg.state_dir, strerror(-r));
    return r;
  }
  /* Containers' start directories lie below it: no one else may walk in (0700, ours). */
  if (st.st_uid != geteuid()) {
    snprintf(err, err_len, "%s belongs to uid %u, not to gslice-node's uid %u", n->cfg.state_dir,
             (unsigned)st.st_uid, (unsigned)geteuid());
    return -EPERM;
  }
  if (fchmod(n->state_fd, 0700) < 0) {
    r = -errno;
    snprintf(err, err_len, "cannot make %s 0700: %s", n->cfg.state_dir, strerror(-r));
    return r;
  }
  const char *const subs[] = {"records", "alloc", "starts", "claims"};
  int *fds[] = {&n->records_fd, &n->alloc_fd, &n->starts_fd, &n->claims_fd};
  for (size_t i = 0; i < 4; i++)
    if ((r = own_subdir(n->state_fd, subs[i], 0700, fds[i])) < 0) {
      snprintf(err, err_len, "cannot make %s/%s: %s", n->cfg.state_dir, subs[i], strerror(-r));
      return r;
    }
  /* The container's /etc/ld.so.preload: names the hook's path inside the container. */
  static const char preload[] = NODE_CTR_HOOK "\n";
  if ((r = gs_file_write_atomic(n->state_fd, NODE_PRELOAD, preload, sizeof(preload) - 1, 0644)) <
      0) {
    snprintf(err, err_len, "cannot write %s/%s: %s", n->cfg.state_dir, NODE_PRELOAD, strerror(-r));
    return r;
  }
  n->start_seq = (uint64_t)time(NULL) * 1000000ull;
  return 0;
}

/* A number no earlier start directory or slice name of this state dir has: microseconds of the
 * wall clock, or one more than the last. */
uint64_t node_next_seq(struct node *n) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
  n->start_seq = now > n->start_seq ? now : n->start_seq + 1;
  return n->start_seq;
}

/* Removes dfd/name: a directory's entries (files and links; nothing is followed, nothing below
 * a subdirectory entered) and the directory, or the file or link itself. */
static int remove_at(int dfd, const char *name) {
  if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -errno;
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -errno;
  }
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      unlinkat(dirfd(d), e->d_name, 0);
  closedir(d);
  return unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

/* Start directories of key other than keep ("" none). */
static void starts_remove(struct node *n, const char *key, const char *keep) {
  size_t kl = strlen(key);
  int fd = openat(n->starts_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  struct dirent *e;
  char names[16][NAME_MAX + 1];
  size_t nn = 0;
  /* Collected first: removing while reading may skip entries. */
  while ((e = readdir(d)) && nn < 16)
    if (!strncmp(e->d_name, key, kl) && e->d_name[kl] == '.' && strcmp(e->d_name, keep))
      snprintf(names[nn++], sizeof(names[0]), "%s", e->d_name);
  closedir(d);
  for (size_t i = 0; i < nn; i++) {
    int r = remove_at(n->starts_fd, names[i]);
    if (r < 0)
      gs_log(GS_LOG_WARNING, "cannot remove %s/starts/%s: %s", n->cfg.state_dir, names[i],
             strerror(-r));
  }
}

/* Points alloc/<name> at target, atomically (a new link renamed over the old). */
static int link_at(struct node *n, const char *name, const char *target) {
  char tmp[NAME_MAX + 1];
  if ((size_t)snprintf(tmp, sizeof(tmp), ".%s.tmp", name) >= sizeof(tmp))
    return -ENAMETOOLONG;
  unlinkat(n->alloc_fd, tmp, 0);
  if (symlinkat(target, n->alloc_fd, tmp) < 0)
    return -errno;
  if (renameat(n->alloc_fd, tmp, n->alloc_fd, name) < 0) {
    int e = -errno;
    unlinkat(n->alloc_fd, tmp, 0);
    /* An old-style container directory (a real one the container could write, before start
     * directories): moved aside (a rename follows nothing), its files removed, and the link
     * made again; what the container may have left below a subdirectory stays there. */
    if (e == -EISDIR) {
      char aside[NAME_MAX + 1];
      snprintf(aside, sizeof(aside), ".old.%.200s.%" PRIu64, name, node_next_seq(n));
      if (renameat(n->alloc_fd, name, n->alloc_fd, aside) < 0)
        return -errno;
      remove_at(n->alloc_fd, aside);
      return link_at(n, name, target);
    }
    return e;
  }
  return 0;
}

/* A fresh start directory for r's container: slice.env holding env, and the empty placeholder the
 * region's file mount goes over; alloc/<key> points at it and alloc/<key>.region at region (NULL:
 * the placeholder), then the key's older start directories go. Never reused: a container that
 * planted anything in an old one (it cannot: it is mounted read-only) would find it gone. */
int node_start_dir_make(struct node *n, const char *key, const char *env, const char *region,
                        char *start, size_t start_len) {
  char name[128], target[PATH_MAX + 160], rtarget[PATH_MAX + 192];
  int e = -EEXIST, dfd = -1;

  for (int attempt = 0; attempt < 8 && e == -EEXIST; attempt++) {
    int nl = snprintf(name, sizeof(name), "%s.%" PRIu64, key, node_next_seq(n));
    if (nl < 0 || (size_t)nl >= sizeof(name) || (size_t)nl >= start_len)
      return -ENAMETOOLONG;
    e = mkdirat(n->starts_fd, name, 0755) < 0 ? -errno : 0;
  }
  if (e < 0)
    return e;
  dfd = openat(n->starts_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0 || fchmod(dfd, 0755) < 0) {
    e = -errno;
    goto fail;
  }
  if ((e = create_new(dfd, NODE_SLICE_ENV, env, strlen(env), 0644)) < 0 ||
      (e = create_new(dfd, NODE_REGION_FILE, "", 0, 0644)) < 0 || (e = gs_dir_sync(dfd, NULL)) < 0)
    goto fail;
  snprintf(target, sizeof(target), "%s/starts/%s", n->cfg.state_dir, name);
  snprintf(rtarget, sizeof(rtarget), "%s/%s", target, NODE_REGION_FILE);
  char rname[NAME_MAX + 1];
  if ((size_t)snprintf(rname, sizeof(rname), "%s.region", key) >= sizeof(rname)) {
    e = -ENAMETOOLONG;
    goto fail;
  }
  /* The region first: while alloc/<key> still names the old directory, nothing mounts the pair
   * half new (the kubelet starts this container only once PreStartContainer answered). */
  if ((e = link_at(n, rname, region ? region : rtarget)) < 0 || (e = link_at(n, key, target)) < 0)
    goto fail;
  gs_dir_sync(n->alloc_fd, NULL);
  close(dfd);
  snprintf(start, start_len, "%s", name);
  starts_remove(n, key, name);
  return 0;
fail:
  if (dfd >= 0)
    close(dfd);
  remove_at(n->starts_fd, name);
  return e;
}

static int start_dir_make(struct node *n, struct node_rec *r, const char *env, const char *region) {
  return node_start_dir_make(n, r->key, env, region, r->start, sizeof(r->start));
}

void node_start_dirs_remove(struct node *n, const char *key) {
  char rname[NAME_MAX + 1];
  remove_at(n->alloc_fd, key);
  if ((size_t)snprintf(rname, sizeof(rname), "%s.region", key) < sizeof(rname))
    unlinkat(n->alloc_fd, rname, 0);
  starts_remove(n, key, "");
}

/* ---- gsliced: the one we trust, and the slice directories it names ---- */

int node_hook_socket(const struct node *n, char *out, size_t len) {
  return gs_hook_socket_path(n->cfg.socket, out, len);
}

int node_daemon_connect(struct node *n, int *ret_fd) {
  struct ucred cr = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
  socklen_t cl = sizeof(cr);
  int fd, r = gs_client_connect(n->cfg.socket, &fd);
  if (r < 0)
    return r;
  /* Whoever listens on the socket's path is believed only when it is root or gslice-node's own
   * user: what it answers decides which host directory becomes a container's. */
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
      (cr.uid != 0 && cr.uid != geteuid())) {
    /* Read and set by the main loop's inventory and by PreStartContainer's worker alike. */
    if (!__atomic_exchange_n(&n->daemon_untrusted, true, __ATOMIC_RELAXED))
      gs_log(GS_LOG_ERROR,
             "%s is served by uid %u (pid %d), not by root or gslice-node's uid %u: not "
             "believed, no slices are made (is another program listening there?)",
             n->cfg.socket, (unsigned)cr.uid, (int)cr.pid, (unsigned)geteuid());
    close(fd);
    return -EPERM;
  }
  if (__atomic_exchange_n(&n->daemon_untrusted, false, __ATOMIC_RELAXED))
    gs_log(GS_LOG_INFO, "%s is served by uid %u again: believed", n->cfg.socket, (unsigned)cr.uid);
  r = gs_client_hello(fd, GS_ROLE_CLI, 0, NULL);
  if (r < 0) {
    close(fd);
    return r;
  }
  *ret_fd = fd;
  return 0;
}

/* The memory region of the slice whose directory gsliced named (REGISTERED.state_dir): only a
 * directory below gsliced's state root, reached component by component without following a
 * link, none of them writable by others, holding a regular memory.region. Its path (canonical:
 * no link on the way) goes into region. */
int node_slice_region(struct node *n, const char *dir, char *region, size_t len, char *why,
                      size_t why_len) {
  char root[PATH_MAX], rest[GS_PROTO_PATH_MAX], *save = NULL;
  struct stat st;
  int fd, r = 0;

  if (!realpath(n->cfg.daemon_state, root)) {
    snprintf(why, why_len, "gsliced's state root %.300s: %s (give --daemon-state-dir)",
             n->cfg.daemon_state, strerror(errno));
    return -ENOENT;
  }
  size_t rl = strlen(root);
  if (strncmp(dir, root, rl) || dir[rl] != '/' || strlen(dir) >= sizeof(rest)) {
    snprintf(why, why_len,
             "gsliced named the slice directory %.200s, which is not below its "
             "state root %.200s (--daemon-state-dir)",
             dir, root);
    return -EPERM;
  }
  snprintf(rest, sizeof(rest), "%s", dir + rl + 1);
  fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, why_len, "cannot open %s: %s", root, strerror(errno));
    return -errno;
  }
  for (char *c = strtok_r(rest, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
    if (!strcmp(c, ".") || !strcmp(c, "..")) {
      r = -EPERM;
      break;
    }
    int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
    if (fd < 0) {
      r = -errno;
      break;
    }
    if (fstat(fd, &st) < 0 || (st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 022)) {
      r = -EPERM;
      break;
    }
  }
  if (r == 0 && (fstatat(fd, NODE_REGION_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                 !S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid())))
    r = errno == ENOENT ? -ENOENT : -EPERM;
  if (fd >= 0)
    close(fd);
  if (r < 0) {
    snprintf(why, why_len, "gsliced's slice directory %.200s is not one of its own: %s", dir,
             r == -ENOENT ? "it (or its memory region) is missing"
                          : "a link, or a directory others may write, on the way");
    return r;
  }
  if ((size_t)snprintf(region, len, "%s/%s/%s", root, dir + rl + 1, NODE_REGION_FILE) >= len)
    return -ENAMETOOLONG;
  return 0;
}

int node_slice_register(struct node *n, const struct gs_slice_spec *spec, int *fd,
                        struct gs_msg_registered *reg, char *derr, size_t derr_len) {
  int e;
  if (*fd < 0 && (e = node_daemon_connect(n, fd)) < 0)
    return e;
  e = gs_client_register_flags(*fd, spec, GS_REGISTER_HELD | GS_REGISTER_ANY_UID, reg, derr,
                               derr_len);
  /* GSLICE_NODE_TEST_CRASH_AT=registered (tests only: node_attack_restart.sh): gslice-node dies
   * here, between REGISTER and its record, the worst moment for a leak. */
  const char *crash = secure_getenv("GSLICE_NODE_TEST_CRASH_AT");
  if (e == 0 && crash && !strcmp(crash, "registered")) {
    gs_log(GS_LOG_WARNING, "GSLICE_NODE_TEST_CRASH_AT=registered: exiting after REGISTER (test)");
    _exit(99);
  }
  return e;
}

/* ---- records ---- */

static int rec_save(const struct node *n, const struct node_rec *r) {
  char *text;
  size_t len;
  int e = node_rec_format(r, &text, &len);
  if (e < 0)
    return e;
  e = gs_file_write_atomic(n->records_fd, r->key, text, len, 0600);
  free(text);
  return e;
}

int node_recs_load(struct node *n) {
  struct dirent *e;
  int ret = 0, dfd = openat(n->records_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;

  if (!d) {
    ret = -errno;
    if (dfd >= 0)
      close(dfd);
    return ret;
  }
  while ((e = readdir(d)) && n->nrecs < sizeof(n->recs) / sizeof(n->recs[0])) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= NODE_SLOT_ID_MAX || strchr(e->d_name, '.'))
      continue;
    char *text = NULL;
    int rd = gs_file_read(n->records_fd, e->d_name, GS_FILE_NOFOLLOW | GS_FILE_REGULAR,
                          NODE_REC_MAX, &text, NULL);
    struct node_rec *r = calloc(1, sizeof(*r));
    if (!r) {
      free(text);
      break;
    }
    snprintf(r->key, sizeof(r->key), "%s", e->d_name);
    if (rd < 0 || node_rec_parse(text, r) < 0) {
      gs_log(GS_LOG_WARNING,
             "record %s/records/%s is unreadable or corrupt: ignored (left in place)",
             n->cfg.state_dir, e->d_name);
      free(text);
      free(r);
      ret = -EBADMSG;
      continue;
    }
    free(text);
    n->recs[n->nrecs++] = r;
  }
  closedir(d);
  return ret;
}

static struct node_rec *rec_find(struct node *n, const char *key, uint32_t *ret_i) {
  for (uint32_t i = 0; i < n->nrecs; i++)
    if (!strcmp(n->recs[i]->key, key)) {
      if (ret_i)
        *ret_i = i;
      return n->recs[i];
    }
  return NULL;
}

void node_slots_allocated(struct node *n, const char *key) {
  struct node_rec *r = rec_find(n, key, NULL);
  if (!r || r->superseded)
    return;
  r->superseded = true;
  int e = rec_save(n, r);
  if (e < 0)
    gs_log(GS_LOG_WARNING, "cannot save the record of slots %s: %s", r->slots, strerror(-e));
}

/* Takes a record's slice, its container's links and start directories away; the record too.
 * Leaves all in place (trying again later) when gsliced cannot be asked. */
static void rec_remove(struct node *n, uint32_t i, const char *why) {
  struct node_rec *r = n->recs[i];
  char err[GS_PROTO_TEXT_MAX] = "";
  int fd;

  if (r->slice_id) {
    int e = node_daemon_connect(n, &fd);
    if (e == 0) {
      e = gs_client_unregister(fd, r->slice_id, r->nonce, err, sizeof(err));
      close(fd);
    }
    if (e < 0 && !(e == -ENOENT && err[0])) {
      gs_log(GS_LOG_WARNING, "cannot remove slice %u of %s/%s/%s yet: %s (trying again)",
             r->slice_id, r->ns, r->pod, r->container, err[0] ? err : strerror(-e));
      return;
    }
  }
  node_start_dirs_remove(n, r->key);
  unlinkat(n->records_fd, r->key, 0);
  /* Said once it is done: whoever reads the line finds the record and the directories gone. */
  gs_log(GS_LOG_INFO, "slice %u of %s/%s container %s (slots %s) removed: %s", r->slice_id, r->ns,
         r->pod, r->container, r->slots, why);
  free(r);
  n->recs[i] = n->recs[--n->nrecs];
}

int node_recs_reconcile_daemon(struct node *n) {
  struct gs_status st;
  int fd, e = node_daemon_connect(n, &fd);

  if (e < 0)
    return e;
  e = gs_client_status(fd, &st);
  if (e < 0) {
    close(fd);
    return e;
  }
  for (uint32_t i = 0; i < st.nslices; i++) {
    const struct gs_slice_status *s = &st.slices[i];
    bool kept = false;
    if (strncmp(s->name, "k8s.", 4))
      continue;
    for (uint32_t k = 0; k < n->nrecs; k++)
      kept |= !n->recs[k]->pending && n->recs[k]->slice_id == s->id &&
              !strcmp(n->recs[k]->name, s->name);
    if (kept)
      continue;
    char err[GS_PROTO_TEXT_MAX] = "";
    int u = gs_client_unregister(fd, s->id, 0, err, sizeof(err));
    gs_log(u < 0 ? GS_LOG_WARNING : GS_LOG_INFO,
           "slice %u '%s' was made by gslice-node but has no record (a crash between REGISTER "
           "and its record?): %s%s",
           s->id, s->name, u < 0 ? "cannot remove it: " : "removed",
           u < 0 ? (err[0] ? err : strerror(-u)) : "");
  }
  gs_status_free(&st);
  close(fd);
  /* Pending records name slices that are gone now: their containers start afresh. */
  for (uint32_t i = 0; i < n->nrecs; i++)
    if (n->recs[i]->pending) {
      n->recs[i]->slice_id = 0;
      rec_remove(n, i, "it was being made when gslice-node stopped");
      i--;
    }
  n->daemon_reconciled = true;
  return 0;
}

/* ---- PodResources ---- */

static int pod_resources(struct node *n, V1__ListPodResourcesResponse **ret, char *err,
                         size_t err_len) {
  V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
  uint8_t buf[16], *reply = NULL;
  size_t len = v1__list_pod_resources_request__pack(&req, buf), reply_len = 0;
  char target[PATH_MAX + 8];

  snprintf(target, sizeof(target), "unix:%s", n->cfg.pod_resources);
  int r = rpc_call(target, "/v1.PodResourcesLister/List", buf, len, 5000, &reply, &reply_len, err,
                   err_len);
  if (r < 0)
    return r;
  *ret = v1__list_pod_resources_response__unpack(NULL, reply_len, reply);
  free(reply);
  if (!*ret) {
    snprintf(err, err_len, "PodResources List: malformed reply");
    return -EPROTO;
  }
  return 0;
}

/* The container holding exactly these slots of gslice.io/gpu (the kubelet's record). */
static int find_container(V1__ListPodResourcesResponse *l, const char *slots, const char **ns,
                          const char **pod, const char **ctr) {
  for (size_t p = 0; p < l->n_pod_resources; p++)
    for (size_t c = 0; c < l->pod_resources[p]->n_containers; c++) {
      V1__ContainerResources *cr = l->pod_resources[p]->containers[c];
      for (size_t d = 0; d < cr->n_devices; d++) {
        V1__ContainerDevices *dev = cr->devices[d];
        char joined[sizeof(((struct node_rec *)0)->slots)], key[NODE_SLOT_ID_MAX];
        if (strcmp(dev->resource_name, NODE_RESOURCE) ||
            node_slots_join(dev->device_ids, dev->n_device_ids, joined, sizeof(joined), key,
                            sizeof(key)) < 0 ||
            strcmp(joined, slots))
          continue;
        *ns = l->pod_resources[p]->namespace_;
        *pod = l->pod_resources[p]->name;
        *ctr = cr->name;
        return 0;
      }
    }
  return -ENOENT;
}

/* ---- the slice ---- */

static void slice_name(char *out, size_t len, uint64_t seq, const char *ns, const char *pod,
                       const char *ctr) {
  char raw[3 * NODE_NAME_MAX + 32];
  size_t i;
  snprintf(raw, sizeof(raw), "k8s.%" PRIx64 ".%s.%s.%s", seq, ns, pod, ctr);
  for (i = 0; raw[i] && i + 1 < len && i < GS_NAME_MAX - 1; i++) {
    char ch = raw[i];
    out[i] = ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-')
                 ? ch
                 : '_';
  }
  out[i] = 0;
}

/* From the assignment's entry for this container: the spec (each GPU's own request and cap, as
 * assigned), and what slice.env says of it (into r). */
static int make_spec(struct node *n, const struct k8s_assigned_container *a,
                     struct gs_slice_spec *spec, struct node_rec *r, char *err, size_t err_len) {
  char mem[512] = "", cvd[1024] = "";
  uint32_t order[GS_MAX_GPUS], k = 0;

  if (a->ngpus == 0 || a->ngpus > GS_MAX_GPUS) {
    snprintf(err, err_len, "its assignment names %u GPUs", a->ngpus);
    return -EINVAL;
  }
  spec->compute_limit = a->compute_limit ? a->compute_limit : 100;
  spec->weight = a->weight ? a->weight : 1;
  spec->priority = a->priority == K8S_PRIO_HIGH  ? GS_PRIORITY_HIGH
                   : a->priority == K8S_PRIO_LOW ? GS_PRIORITY_LOW
                                                 : GS_PRIORITY_NORMAL;
  spec->per_gpu = GS_SPEC_GPU_REQUEST | GS_SPEC_GPU_MEMORY;
  for (uint32_t i = 0; i < a->ngpus; i++) {
    const struct k8s_assigned_gpu *g = &a->gpus[i];
    uint32_t idx = UINT32_MAX;
    /* The uuid is what the extender saw in our inventory; the index may differ after a reboot. */
    for (uint32_t j = 0; j < n->ngpus; j++)
      if (!strcmp(n->gpus[j].uuid, g->uuid))
        idx = n->gpus[j].index;
    if (idx == UINT32_MAX || idx >= GS_MAX_GPUS) {
      snprintf(err, err_len, "its assignment names GPU %s, which this node does not have", g->uuid);
      return -ENODEV;
    }
    if (spec->gpu_mask & (1u << idx)) {
      snprintf(err, err_len, "its assignment names GPU %s twice", g->uuid);
      return -EINVAL;
    }
    /* A Kubernetes slice is never uncapped: memory 0 would mean "no cap" to gsliced. */
    if (g->memory == 0) {
      snprintf(err, err_len, "its assignment gives GPU %s no memory", g->uuid);
      return -EINVAL;
    }
    spec->gpu_mask |= 1u << idx;
    spec->gpu_compute_request[idx] = g->compute;
    spec->gpu_memory_cap[idx] = g->memory;
    if (g->compute > spec->compute_request)
      spec->compute_request = g->compute;
    if (g->memory > spec->memory_cap)
      spec->memory_cap = g->memory;
  }
  if (spec->compute_limit < spec->compute_request)
    spec->compute_limit = spec->compute_request;
  /* CUDA ordinal k is the k-th GPU of the mask, in index order (as gsliced maps tokens). */
  for (uint32_t idx = 0; idx < GS_MAX_GPUS; idx++)
    if (spec->gpu_mask & (1u << idx))
      order[k++] = idx;
  for (uint32_t o = 0; o < k; o++)
    for (uint32_t i = 0; i < a->ngpus; i++) {
      const struct k8s_assigned_gpu *g = &a->gpus[i];
      bool here = false;
      for (uint32_t j = 0; j < n->ngpus; j++)
        here |= n->gpus[j].index == order[o] && !strcmp(n->gpus[j].uuid, g->uuid);
      if (!here)
        continue;
      size_t ml = strlen(mem), cl = strlen(cvd);
      snprintf(mem + ml, sizeof(mem) - ml, "%s%u=%" PRIu64, ml ? "," : "", o, g->memory);
      snprintf(cvd + cl, sizeof(cvd) - cl, "%s%s", cl ? "," : "", g->uuid);
    }
  snprintf(r->memory, sizeof(r->memory), "%s", mem);
  snprintf(r->devices, sizeof(r->devices), "%s", cvd);
  r->compute_limit = spec->compute_limit;
  return 0;
}

void node_slice_env(uint32_t slice_id, uint64_t nonce, const char *memory, uint32_t compute_limit,
                    const char *devices, char *out, size_t len) {
  snprintf(out, len,
           "GSLICE_SLICE=%" PRIu32 "\nGSLICE_SLICE_NONCE=%016" PRIx64
           "\nGSLICE_MEMORY_LIMIT=%s\nGSLICE_COMPUTE_LIMIT=%" PRIu32 "\nCUDA_VISIBLE_DEVICES=%s\n",
           slice_id, nonce, memory, compute_limit, devices);
}

static void slice_env(const struct node_rec *r, char *out, size_t len) {
  node_slice_env(r->slice_id, r->nonce, r->memory, r->compute_limit, r->devices, out, len);
}

/* The container's start directory says why it has no slice; gslice-node's log too. r is the
 * key's only record afterwards (the caller made sure no other is left). */
static int refuse(struct node *n, struct node_rec *r, const char *why) {
  char text[1024];

  gs_log(GS_LOG_ERROR, "container %s/%s/%s (slots %s) gets no GPU: %s", r->ns[0] ? r->ns : "?",
         r->pod[0] ? r->pod : "?", r->container[0] ? r->container : "?", r->slots, why);
  snprintf(text, sizeof(text), "GSLICE_K8S_ERROR=%.900s\n", why);
  for (char *p = text; *p && p[1]; p++)
    if (*p == '\n')
      *p = ' ';
  r->slice_id = 0;
  r->nonce = 0;
  r->pending = r->superseded = false;
  r->name[0] = r->slice_dir[0] = 0;
  int e = start_dir_make(n, r, text, NULL);
  return e < 0 ? e : rec_save(n, r);
}

/* Whether the pod's assignment is to be honoured here: made by the extender for this pod's UID
 * and this node (its signature), for this node, and agreeing with the pod as written. 0 with
 * *as decoded (owned by the caller once *have is true), or -EPERM with why. */
static int assignment_trusted(struct node *n, const json_t *pod, const char *ns, const char *name,
                              const char *uid, struct k8s_assigned *as, bool *have, char *why,
                              size_t why_len) {
  const char *text = kube_annotation(pod, K8S_ANNOT_ASSIGNED);
  char perr[512] = "";
  int e;

  if (!text) {
    snprintf(why, why_len,
             "pod %s/%s has no gslice.io/assigned annotation (was it scheduled through "
             "gslice-extender? its scheduler must be one that uses the extender)",
             ns, name);
    return -EPERM;
  }
  e = k8s_assigned_decode(text, as, perr, sizeof(perr));
  if (e < 0) {
    snprintf(why, why_len, "pod %s/%s: gslice.io/assigned is %s: %s", ns, name,
             e == -EPROTONOSUPPORT ? "of a newer version than this gslice-node reads" : "malformed",
             perr);
    return -EPERM;
  }
  *have = true;
  if (strcmp(as->node, n->cfg.node_name)) {
    snprintf(why, why_len, "pod %s/%s is assigned to node %s, not this node %s", ns, name, as->node,
             n->cfg.node_name);
    return -EPERM;
  }
  if (!n->keys) {
    snprintf(why, why_len, "gslice-node has no signing key to verify gslice.io/assigned with");
    return -EPERM;
  }
  if ((e = k8s_assigned_verify(n->keys, uid, n->cfg.node_name, text,
                               kube_annotation(pod, K8S_ANNOT_ASSIGNED_SIG), perr, sizeof(perr))) <
      0) {
    snprintf(why, why_len, "pod %s/%s: gslice.io/assigned is not the extender's: %s", ns, name,
             perr);
    return -EPERM;
  }
  if ((e = k8s_assigned_check_pod(as, pod, perr, sizeof(perr))) < 0) {
    snprintf(why, why_len, "pod %s/%s: gslice.io/assigned does not agree with the pod: %s", ns,
             name, perr);
    return -EPERM;
  }
  return 0;
}

/* A restart of the container r was made for: the same slice, in a fresh start directory. */
static int restart(struct node *n, struct node_rec *r, char *why, size_t why_len) {
  char region[PATH_MAX], env[START_ENV_MAX];
  int e = node_slice_region(n, r->slice_dir, region, sizeof(region), why, why_len);
  if (e < 0)
    return e;
  slice_env(r, env, sizeof(env));
  r->superseded = false;
  if ((e = start_dir_make(n, r, env, region)) < 0 || (e = rec_save(n, r)) < 0) {
    snprintf(why, why_len, "cannot write its start directory: %s", strerror(-e));
    return e;
  }
  gs_log(GS_LOG_INFO, "slice %" PRIu32 " for %s/%s container %s (slots %s): restarted, as recorded",
         r->slice_id, r->ns, r->pod, r->container, r->slots);
  return 0;
}

/* PreStartContainer's steps for one container, what each found and what it owns. */
struct prestart {
  struct node *n;
  struct node_rec *r; /* the new record: freed at the end unless it went into n->recs */
  V1__ListPodResourcesResponse *pl;
  const char *ns, *pod, *ctr; /* into pl; ctr into r->container once the starting one is known */
  json_t *pj;
  struct k8s_assigned as;
  bool have_as, as_ok;
  struct gs_slice_spec spec;
  struct gs_msg_registered reg;
  int fd;            /* gsliced, from REGISTER on */
  char why[1024];    /* the refusal the start directory says */
  char why_as[1024]; /* why the assignment is not honoured */
  char *err;         /* a failed call's reason */
  size_t err_len;
};

/* A step's answer besides 0 (next step) and -errno (the call fails, err says why). */
enum { PRESTART_REFUSE = 1, PRESTART_DONE = 2 };

static bool recs_full(const struct node *n) {
  return n->nrecs >= sizeof(n->recs) / sizeof(n->recs[0]);
}

/* Find the pod: the container PodResources lists with these slots, and its pod in the cache. */
static int prestart_find_pod(struct prestart *ps) {
  struct node *n = ps->n;
  struct node_rec *r = ps->r;
  char perr[512] = "";
  int e;

  /* Slices a crash left without a record go before any new one is made. */
  if (!n->daemon_reconciled && (e = node_recs_reconcile_daemon(n)) < 0) {
    snprintf(ps->err, ps->err_len, "gsliced on %s does not answer: %s (the kubelet tries again)",
             n->cfg.socket, strerror(-e));
    return -EAGAIN;
  }
  /* The kubelet records an allocation when Allocate returns, so by PreStartContainer its
   * PodResources lists the container with these slots. Asked without n->lock (held by the
   * caller: serve_unary), so that Allocate and ListAndWatch's updates never wait on it;
   * nothing of the records is looked at before. */
  pthread_mutex_unlock(&n->lock);
  e = pod_resources(n, &ps->pl, perr, sizeof(perr));
  pthread_mutex_lock(&n->lock);
  if (e < 0) {
    snprintf(ps->err, ps->err_len, "the kubelet's PodResources API did not answer: %s", perr);
    return -EAGAIN;
  }
  if (find_container(ps->pl, r->slots, &ps->ns, &ps->pod, &ps->ctr) < 0) {
    snprintf(ps->why, sizeof(ps->why),
             "the kubelet's PodResources lists no container with slots %.512s", r->slots);
    return PRESTART_REFUSE;
  }
  snprintf(r->ns, sizeof(r->ns), "%s", ps->ns);
  snprintf(r->pod, sizeof(r->pod), "%s", ps->pod);
  snprintf(r->container, sizeof(r->container), "%s", ps->ctr);
  if (n->cfg.no_api) {
    snprintf(ps->why, sizeof(ps->why), "gslice-node runs without an API server (--no-api-server)");
    return PRESTART_REFUSE;
  }
  /* The pod cache (pods.c) lets n->lock go while it waits: records are looked up after. */
  e = node_pods_get(n, ps->ns, ps->pod, NODE_POD_WAIT_MS, &ps->pj, perr, sizeof(perr));
  if (e == -ENOENT || e == -EINVAL) {
    snprintf(ps->why, sizeof(ps->why), "pod %s/%s is not in the API server: %s", ps->ns, ps->pod,
             perr);
    /* The uid these slots were started for stays known: a pod made again under the name later
     * is still not this container's. */
    struct node_rec *was = rec_find(n, r->key, NULL);
    if (was && !strcmp(was->ns, ps->ns) && !strcmp(was->pod, ps->pod) && !was->superseded)
      snprintf(r->pod_uid, sizeof(r->pod_uid), "%s", was->pod_uid);
    return PRESTART_REFUSE;
  }
  if (e < 0) {
    snprintf(ps->err, ps->err_len,
             "cannot read pod %s/%s from the API server: %s (the kubelet tries again)", ps->ns,
             ps->pod, perr);
    return -EAGAIN;
  }
  const char *uid = kube_meta_str(ps->pj, "uid");
  snprintf(r->pod_uid, sizeof(r->pod_uid), "%s", uid ? uid : "");
  return 0;
}

/* Check the pod: whether its assignment is honoured, and which container starts (for init
 * containers the pod's status decides, read from an assignment only when it is the extender's). */
static int prestart_check(struct prestart *ps) {
  struct node *n = ps->n;
  struct node_rec *r = ps->r, *old = rec_find(n, r->key, NULL);
  char prev[NODE_NAME_MAX] = "", which[NODE_NAME_MAX], perr[512] = "";

  ps->as_ok = assignment_trusted(n, ps->pj, ps->ns, ps->pod, r->pod_uid, &ps->as, &ps->have_as,
                                 ps->why_as, sizeof(ps->why_as)) == 0;
  if (old && !strcmp(old->ns, ps->ns) && !strcmp(old->pod, ps->pod) &&
      !strcmp(old->pod_uid, r->pod_uid))
    snprintf(prev, sizeof(prev), "%s", old->container);
  if (!ps->as_ok)
    return 0;
  if (node_kube_which(n, ps->ns, ps->pod, &ps->as, ps->ctr, prev, which, sizeof(which), perr,
                      sizeof(perr)) < 0) {
    snprintf(ps->err, ps->err_len, "cannot read pod %s/%s from the API server: %s", ps->ns, ps->pod,
             perr);
    return -EAGAIN;
  }
  if (strcmp(which, ps->ctr)) {
    gs_log(GS_LOG_INFO,
           "slots %s of %s/%s: listed under container %s, started for init container %s", r->slots,
           ps->ns, ps->pod, ps->ctr, which);
    snprintf(r->container, sizeof(r->container), "%s", which);
    ps->ctr = r->container;
  }
  return 0;
}

/* What was recorded for these slots: a restart of the container it was made for keeps its slice
 * (PRESTART_DONE); anything else recorded goes. */
static int prestart_old_record(struct prestart *ps) {
  struct node *n = ps->n;
  struct node_rec *r = ps->r;
  uint32_t old_i;
  struct node_rec *old = rec_find(n, r->key, &old_i);
  bool same_pod = old && !strcmp(old->ns, ps->ns) && !strcmp(old->pod, ps->pod);

  /* No Allocate since the record: this is a restart of the container it was made for (a
   * record without a uid, of a pod the API server did not know then, tells nothing). */
  if (old && !old->superseded && !old->pending && same_pod && old->pod_uid[0]) {
    if (strcmp(old->pod_uid, r->pod_uid)) {
      /* The pod was deleted and made again under its name: the old one's container restarting
       * must not take the new one's assignment (nor keep its own slice: its pod is gone). */
      snprintf(ps->why, sizeof(ps->why),
               "slots %.200s were given to pod %.100s/%.200s with uid %s; the API server's pod "
               "of that name is uid %s (deleted and made again): this is the old pod's container",
               r->slots, ps->ns, ps->pod, old->pod_uid, r->pod_uid);
      snprintf(r->pod_uid, sizeof(r->pod_uid), "%s", old->pod_uid);
      return PRESTART_REFUSE;
    }
    if (old->slice_id && old->name[0] && old->slice_dir[0] && !strcmp(old->container, ps->ctr)) {
      if (restart(n, old, ps->why, sizeof(ps->why)) == 0)
        return PRESTART_DONE;
      gs_log(GS_LOG_WARNING, "slots %s: the recorded slice %u cannot be reused (%s): made anew",
             r->slots, old->slice_id, ps->why);
    }
  }
  if (old) {
    rec_remove(n, old_i, "its slots start another container");
    if (rec_find(n, r->key, NULL)) {
      snprintf(ps->err, ps->err_len,
               "the previous slice of slots %s cannot be removed yet (gsliced?)", r->slots);
      return -EAGAIN;
    }
  }
  return 0;
}

/* The slice the assignment's entry for this container asks for, into ps->spec. */
static int prestart_spec(struct prestart *ps) {
  const struct k8s_assigned_container *ac = NULL;
  char perr[512];

  if (!ps->as_ok) {
    snprintf(ps->why, sizeof(ps->why), "%s", ps->why_as);
    return PRESTART_REFUSE;
  }
  for (uint32_t i = 0; i < ps->as.ncontainers; i++)
    if (!strcmp(ps->as.containers[i].name, ps->ctr))
      ac = &ps->as.containers[i];
  if (!ac) {
    snprintf(ps->why, sizeof(ps->why),
             "pod %s/%s: gslice.io/assigned has no entry for container %s", ps->ns, ps->pod,
             ps->ctr);
    return PRESTART_REFUSE;
  }
  if (make_spec(ps->n, ac, &ps->spec, ps->r, perr, sizeof(perr)) < 0) {
    snprintf(ps->why, sizeof(ps->why), "pod %s/%s container %s: %s", ps->ns, ps->pod, ps->ctr,
             perr);
    return PRESTART_REFUSE;
  }
  return 0;
}

/* Make the slice: the record first, pending, naming the slice (a crash after REGISTER leaves a
 * slice the next start finds by its name and removes), then REGISTER. */
static int prestart_make_slice(struct prestart *ps) {
  struct node *n = ps->n;
  struct node_rec *r = ps->r;
  char derr[GS_PROTO_TEXT_MAX] = "";
  int e;

  if (recs_full(n)) {
    snprintf(ps->err, ps->err_len, "gslice-node holds %u containers' slices, its most", n->nrecs);
    return -ENOSPC;
  }
  slice_name(r->name, sizeof(r->name), node_next_seq(n), ps->ns, ps->pod, ps->ctr);
  snprintf(ps->spec.name, sizeof(ps->spec.name), "%s", r->name);
  r->pending = true;
  if ((e = rec_save(n, r)) < 0) {
    snprintf(ps->err, ps->err_len, "cannot write the record of slots %s: %s", r->slots,
             strerror(-e));
    return e;
  }
  n->recs[n->nrecs++] = r;
  ps->r = NULL;
  e = node_slice_register(n, &ps->spec, &ps->fd, &ps->reg, derr, sizeof(derr));
  if (ps->fd < 0) {
    snprintf(ps->err, ps->err_len, "gsliced on %s does not answer: %s (the kubelet tries again)",
             n->cfg.socket, strerror(-e));
    rec_remove(n, n->nrecs - 1, "gsliced did not answer");
    return -EAGAIN;
  }
  if (e < 0 && !derr[0] && e != -EPROTONOSUPPORT) {
    /* No answer: the slice may be made or not. The pending record stays; the next start
     * reconciles with gsliced first. */
    snprintf(ps->err, ps->err_len, "gsliced did not answer REGISTER: %s (the kubelet tries again)",
             strerror(-e));
    n->daemon_reconciled = false;
    return -EAGAIN;
  }
  ps->r = r;
  n->recs[--n->nrecs] = NULL;
  if (e < 0) {
    unlinkat(n->records_fd, r->key, 0);
    r->pending = false;
    snprintf(ps->why, sizeof(ps->why), "gsliced refused the slice of %s/%s container %s: %s",
             ps->ns, ps->pod, ps->ctr, derr[0] ? derr : strerror(-e));
    return PRESTART_REFUSE;
  }
  return 0;
}

/* A slice REGISTER made that this container does not get after all: gone, and its record. */
static void prestart_undo(struct prestart *ps) {
  gs_client_unregister(ps->fd, ps->reg.slice_id, ps->reg.slice_nonce, NULL, 0);
  unlinkat(ps->n->records_fd, ps->r->key, 0);
  ps->r->pending = false;
}

/* Write its directory: the slice's region checked, the start directory and the record. */
static int prestart_write_dir(struct prestart *ps) {
  struct node *n = ps->n;
  struct node_rec *r = ps->r;
  char region[PATH_MAX], env[START_ENV_MAX];
  int e;

  r->slice_id = ps->reg.slice_id;
  r->nonce = ps->reg.slice_nonce;
  snprintf(r->slice_dir, sizeof(r->slice_dir), "%s", ps->reg.state_dir);
  if (node_slice_region(n, ps->reg.state_dir, region, sizeof(region), ps->why, sizeof(ps->why)) <
      0) {
    prestart_undo(ps);
    return PRESTART_REFUSE;
  }
  r->pending = false;
  slice_env(r, env, sizeof(env));
  if ((e = start_dir_make(n, r, env, region)) < 0 || (e = rec_save(n, r)) < 0) {
    snprintf(ps->err, ps->err_len, "cannot write the start directory of slots %s: %s", r->slots,
             strerror(-e));
    prestart_undo(ps);
    return e;
  }
  gs_log(GS_LOG_INFO,
         "slice %" PRIu32 " '%s' for %s/%s container %s (slots %s): gpus 0x%x memory %s "
         "compute %u%%..%u%% priority %d weight %u",
         ps->reg.slice_id, r->name, ps->ns, ps->pod, ps->ctr, r->slots, ps->spec.gpu_mask,
         r->memory, ps->spec.compute_request, ps->spec.compute_limit, ps->spec.priority,
         ps->spec.weight);
  n->recs[n->nrecs++] = r;
  r->checked = node_now();
  ps->r = NULL;
  return 0;
}

/* A refusal: the key's records go, and the start directory says why. */
static int prestart_refuse(struct prestart *ps) {
  struct node *n = ps->n;
  struct node_rec *r = ps->r;

  for (uint32_t oi; rec_find(n, r->key, &oi);) {
    uint32_t before = n->nrecs;
    rec_remove(n, oi, "its slots start a container again");
    if (n->nrecs == before) {
      snprintf(ps->err, ps->err_len,
               "the previous slice of slots %s cannot be removed yet (gsliced?)", r->slots);
      return -EAGAIN;
    }
  }
  if (!r->container[0])
    snprintf(r->container, sizeof(r->container), "?");
  int e = refuse(n, r, ps->why);
  if (e < 0) {
    snprintf(ps->err, ps->err_len, "cannot write the container's start directory: %s",
             strerror(-e));
    return e;
  }
  node_kube_refused(n, r, ps->why);
  if (!recs_full(n)) {
    n->recs[n->nrecs++] = r;
    r->checked = node_now();
    ps->r = NULL;
  }
  return 0;
}

int node_prestart(struct node *n, char **ids, size_t nids, char *err, size_t err_len) {
  struct prestart ps = {.n = n, .fd = -1, .err = err, .err_len = err_len};
  int e;

  if (!(ps.r = calloc(1, sizeof(*ps.r))))
    return -ENOMEM;
  if (node_slots_join(ids, nids, ps.r->slots, sizeof(ps.r->slots), ps.r->key, sizeof(ps.r->key)) <
      0) {
    snprintf(err, err_len, "PreStartContainer: %zu device ids, not ids of %s", nids, NODE_RESOURCE);
    free(ps.r);
    return -EINVAL;
  }
  e = prestart_find_pod(&ps);
  if (e == 0)
    e = prestart_check(&ps);
  if (e == 0)
    e = prestart_old_record(&ps);
  if (e == 0)
    e = prestart_spec(&ps);
  if (e == 0)
    e = prestart_make_slice(&ps);
  if (e == 0)
    e = prestart_write_dir(&ps);
  if (e == PRESTART_REFUSE)
    e = prestart_refuse(&ps);
  if (ps.fd >= 0)
    close(ps.fd);
  if (ps.have_as)
    k8s_assigned_free(&ps.as);
  json_decref(ps.pj);
  if (ps.pl)
    v1__list_pod_resources_response__free_unpacked(ps.pl, NULL);
  free(ps.r);
  return e < 0 ? e : 0;
}

void node_reconcile(struct node *n) {
  V1__ListPodResourcesResponse *pl = NULL;
  char err[512];

  if (n->nrecs == 0)
    return;
  /* No answer (the kubelet restarting): nothing is removed on a guess. */
  if (pod_resources(n, &pl, err, sizeof(err)) < 0)
    return;
  for (uint32_t i = 0; i < n->nrecs; i++) {
    struct node_rec *r = n->recs[i];
    const char *ns, *pod, *ctr;
    /* Slots are the pod's while any of its containers holds them: an init container's are
     * listed under the container they are handed on to. */
    if (find_container(pl, r->slots, &ns, &pod, &ctr) < 0 || strcmp(ns, r->ns) ||
        strcmp(pod, r->pod)) {
      if (strcmp(r->container, "?") == 0 && find_container(pl, r->slots, &ns, &pod, &ctr) == 0)
        continue;
      uint32_t before = n->nrecs;
      cdi_slot_spec_drop(n, r);
      rec_remove(n, i, "the kubelet no longer lists its container");
      if (n->nrecs < before)
        i--;
      continue;
    }
    if (n->cfg.no_api || !r->pod_uid[0] || node_now() - r->checked < POD_CHECK_NS)
      continue;
    r->checked = node_now();
    char uid[64] = "", phase[32] = "", *assigned = NULL;
    int e = node_kube_pod(n, r->ns, r->pod, &assigned, uid, sizeof(uid), phase, sizeof(phase), err,
                          sizeof(err));
    free(assigned);
    const char *why = e == -ENOENT                        ? "its pod was deleted"
                      : e == 0 && strcmp(uid, r->pod_uid) ? "its pod was replaced"
                      : e == 0 && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))
                          ? "its pod finished"
                          : NULL;
    bool gone = e == -ENOENT || (e == 0 && strcmp(uid, r->pod_uid));
    if (why && gone && r->slice_id) {
      /* Its slice goes; the record stays (no slice) while the kubelet lists the old pod's
       * container, so that a restart of it is known as the old pod's, not taken for a pod
       * made again under its name (PreStartContainer refuses it). */
      int fd, u = node_daemon_connect(n, &fd);
      char uerr[GS_PROTO_TEXT_MAX] = "";
      if (u == 0) {
        u = gs_client_unregister(fd, r->slice_id, r->nonce, uerr, sizeof(uerr));
        close(fd);
      }
      if (u == 0 || (u == -ENOENT && uerr[0])) {
        gs_log(GS_LOG_INFO, "slice %u of %s/%s container %s (slots %s) removed: %s", r->slice_id,
               r->ns, r->pod, r->container, r->slots, why);
        r->slice_id = 0;
        r->nonce = 0;
        rec_save(n, r);
      }
    } else if (why && !gone) {
      uint32_t before = n->nrecs;
      cdi_slot_spec_drop(n, r);
      rec_remove(n, i, why);
      if (n->nrecs < before)
        i--;
    }
  }
  v1__list_pod_resources_response__free_unpacked(pl, NULL);
}
