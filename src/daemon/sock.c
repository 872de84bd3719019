/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's listening sockets (sock.h): their dirs, accepting within the limits, refusals,
 * closing idle and refused connections. */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"
#include "daemon.h"
#include "log.h"
#include "region.h"

/* Refuses cfd at accept, before anything is allocated for it: the client gets `text` as an ERROR
 * if it reads before it sees the close, and the log says it, at most once a second (*said_at). */
static void refuse(struct daemon *d, int cfd, int code, const char *text, uint64_t *said_at) {
  struct gs_msg_error e = {.code = code};
  unsigned char buf[sizeof(struct gs_msg_hdr) + sizeof(e)];
  size_t len;
  uint64_t now = loop_now();

  snprintf(e.text, sizeof(e.text), "%s", text);
  if (gs_msg_encode(buf, sizeof(buf), GS_MSG_ERROR, 0, &e, sizeof(e), &len) == 0 &&
      send(cfd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len &&
      shutdown(cfd, SHUT_WR) == 0) {
    /* Closed at once, the client's HELLO would fail with EPIPE before it reads the reason:
     * held (write side shut: it reads the ERROR, then end of file) until the next
     * housekeeping, at most REFUSED_MAX of them, the oldest closed first. */
    if (d->sock.nrefused == REFUSED_MAX) {
      close(d->sock.refused[0].fd);
      memmove(&d->sock.refused[0], &d->sock.refused[1],
              (REFUSED_MAX - 1) * sizeof(d->sock.refused[0]));
      d->sock.nrefused--;
    }
    d->sock.refused[d->sock.nrefused].fd = cfd;
    d->sock.refused[d->sock.nrefused++].at = now;
  } else {
    close(cfd);
  }
  if (now - *said_at >= 1000000000ull || !*said_at) {
    gs_log(GS_LOG_WARNING, "refusing a connection: %s", e.text);
    *said_at = now;
  }
}

/* One uid must not hold every connection of the main socket (idle after HELLO, or before it
 * within hello_timeout_ms). Not on the hook socket: a container's processes run as any uid they
 * choose, and uid 0 is every root container's (one of them held all of root's). */
static bool uid_over_limit(struct daemon *d, int cfd, uid_t uid) {
  char text[GS_PROTO_TEXT_MAX];
  uint32_t n = 0;

  for (struct conn *c = d->conns.head; c; c = c->next)
    n += c->uid == uid && !c->hook_only;
  if (n < d->cfg.max_clients_per_user)
    return false;
  snprintf(text, sizeof(text),
           "uid %u has %u connections to gsliced, the most one user may have "
           "(max_clients_per_user = %" PRIu64 "); close some, or raise max_clients_per_user "
           "in gsliced's config (SIGHUP reloads it)",
           (unsigned)uid, n, d->cfg.max_clients_per_user);
  refuse(d, cfd, -EUSERS, text, &d->sock.said_user_clients_at);
  return true;
}

uint64_t sock_hook_bound(const struct daemon *d, uint64_t configured) {
  uint64_t most = d->cfg.max_hook_clients / 4;

  /* config_check holds the configured bounds to a quarter; max_hook_clients may have been
   * lowered since to fit the open-file limit (main.c), and the quarter still holds. */
  return configured < most ? configured : most ? most : 1;
}

/* The pid namespace of pid (the inode of /proc/<pid>/ns/pid): 0, -ENOENT when the process is
 * gone, or another -errno when the daemon may not read it (a daemon that is not root) or cannot
 * see the peer (pid 0: a namespace outside the daemon's). */
/* The pid namespace a peer counts against: the outermost one below the daemon's own, so that a
 * container that makes pid namespaces of its own (unshare --pid, where user namespaces are
 * allowed) still counts as the one container it is. Walked up from the peer's with
 * NS_GET_PARENT; a namespace not below the daemon's (the ioctl refuses to go above the caller's
 * own) stays the peer's. */
static int pidns_of(uint64_t own, pid_t pid, uint64_t *ret) {
  char path[64];
  struct stat st;

  if (pid <= 0)
    return -EINVAL;
  snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ESRCH ? -ENOENT : -errno;
  if (fstat(fd, &st) < 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  *ret = st.st_ino;
  for (int depth = 0; own && *ret != own && depth < 32; depth++) {
    int parent = ioctl(fd, NS_GET_PARENT);
    if (parent < 0)
      break;
    if (fstat(parent, &st) < 0 || st.st_ino == own) {
      close(parent);
      break;
    }
    close(fd);
    fd = parent;
    *ret = st.st_ino;
  }
  close(fd);
  return 0;
}

/* Whether two hook-socket connections come from one container: one pid namespace, and in the
 * daemon's own one (the host's users, hostPID pods) or where it is unknown, one uid too: there
 * a uid is the kernel's word, not a container's choice. */
static bool same_container(const struct daemon *d, const struct conn *a, uint64_t pidns,
                           uid_t uid) {
  if (a->pidns != pidns)
    return false;
  return (pidns && pidns != d->sock.own_pidns) || a->uid == uid;
}

/* One container must not hold the hook socket's connections before HELLO: counted per pid
 * namespace (max_hook_pending_per_pidns) at accept, so that another slice's hook is never
 * refused for them. After HELLO a connection counts against its slice instead
 * (max_hook_clients_per_slice, requests.c). */
static bool hook_pending_over_limit(struct daemon *d, int cfd, uint64_t pidns, uid_t uid) {
  uint64_t most = sock_hook_bound(d, d->cfg.max_hook_pending_per_pidns);
  char text[GS_PROTO_TEXT_MAX], who[64];
  uint32_t n = 0;

  for (struct conn *c = d->conns.head; c; c = c->next)
    n += c->hook_only && !c->hello && same_container(d, c, pidns, uid);
  if (n < most)
    return false;
  if (pidns && pidns != d->sock.own_pidns)
    snprintf(who, sizeof(who), "pid namespace %" PRIu64, pidns);
  else
    snprintf(who, sizeof(who), "uid %u", (unsigned)uid);
  snprintf(text, sizeof(text),
           "%s has %u connections on gsliced's hook socket that have not said HELLO, the most "
           "one container may have (max_hook_pending_per_pidns = %" PRIu64
           "); a hook says HELLO as it connects",
           who, n, most);
  refuse(d, cfd, -EUSERS, text, &d->sock.said_hook_pending_at);
  return true;
}

/* One pending connection of the listening socket fd: its descriptor; -EINTR to go on with the
 * next, -EAGAIN when the turn is over. Out of descriptors, the pending connection would keep the
 * socket readable and the loop spinning: it is taken with the spare descriptor and closed (the
 * client sees its connection refused). */
static int accept_one(struct daemon *d, int fd) {
  int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

  if (cfd >= 0)
    return cfd;
  if (errno == EINTR)
    return -EINTR;
  if ((errno != EMFILE && errno != ENFILE) || d->sock.spare_fd < 0)
    return -EAGAIN;
  close(d->sock.spare_fd);
  cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
  if (cfd >= 0)
    close(cfd);
  d->sock.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (!d->sock.said_nofile)
    gs_log(GS_LOG_WARNING,
           "out of file descriptors at %u clients: refusing connections (raise the open-file "
           "limit, or lower max_clients)",
           d->conns.n);
  d->sock.said_nofile = true;
  return cfd >= 0 ? -EINTR : -EAGAIN;
}

/* Each socket within its own bound: containers' processes (any uid) filling the hook socket's
 * must leave the host's CLI, gslice run and gslice-node their main socket. */
static bool socket_full(struct daemon *d, bool hook) {
  uint32_t on_main = d->conns.n - d->conns.nhook;

  if (hook && d->conns.nhook >= d->cfg.max_hook_clients) {
    gs_log(GS_LOG_WARNING,
           "refusing a connection on the hook socket: %u clients there already "
           "(max_hook_clients)",
           d->conns.nhook);
    return true;
  }
  if (!hook && on_main >= d->cfg.max_clients) {
    gs_log(GS_LOG_WARNING, "refusing a connection: %u clients already (max_clients)", on_main);
    return true;
  }
  return false;
}

/* Whether cfd's peer may be served (else cfd is closed, or held as refused): its credentials
 * into *cred and, on the hook socket, the pid namespace it counts against into *ret_pidns
 * (0 unknown). */
static bool admit_peer(struct daemon *d, int cfd, bool hook, struct ucred *cred,
                       uint64_t *ret_pidns) {
  socklen_t cl = sizeof(*cred);

  *ret_pidns = 0;
  if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, cred, &cl) < 0) {
    close(cfd);
    return false;
  }
  if (!hook)
    return !uid_over_limit(d, cfd, cred->uid);
  if (!d->sock.own_pidns && pidns_of(0, getpid(), &d->sock.own_pidns) < 0)
    d->sock.own_pidns = 0;
  int r = pidns_of(d->sock.own_pidns, cred->pid, ret_pidns);
  if (r == -ENOENT) {
    close(cfd); /* gone already: nothing to serve, nobody to count it against */
    return false;
  }
  if (r < 0)
    *ret_pidns = 0;
  return !hook_pending_over_limit(d, cfd, *ret_pidns, cred->uid);
}

static void accept_cb(struct loop *l, int fd, uint32_t events, void *data) {
  struct daemon *d = data;

  (void)l;
  (void)events;
  /* ACCEPT_TURN_MAX at most: the rest wait for the next turn (the socket stays readable). */
  for (unsigned turn = 0; turn < ACCEPT_TURN_MAX; turn++) {
    bool hook = fd == d->sock.hook_listen_fd;
    struct ucred cred;
    uint64_t pidns;
    int cfd = accept_one(d, fd), exited = 1;

    if (cfd == -EINTR)
      continue;
    if (cfd < 0)
      return;
    if (socket_full(d, hook)) {
      close(cfd);
      continue;
    }
    if (!admit_peer(d, cfd, hook, &cred, &pidns))
      continue;
    struct conn *c = conn_new(&d->conns, cfd, hook);
    if (!c) {
      close(cfd);
      continue;
    }
    c->pid = cred.pid;
    if (gs_proc_identity(c->pid, &c->start, &exited) < 0 || exited)
      c->start = 0;
    c->uid = cred.uid;
    c->gid = cred.gid;
    c->pidns = pidns;
    /* A hook sends its HELLO as it connects: taken now, it counts against its slice at once
     * rather than against its container's pending bound until the next loop turn (a container
     * starting many processes at once would reach that bound otherwise). */
    if (hook)
      conn_serve(c);
  }
}

/* dir's parent into parent and its last component, returned (within dir; "." for "/"). */
static const char *split_dir(const char *dir, char *parent, size_t parent_len) {
  const char *name;

  snprintf(parent, parent_len, "%s", dir);
  char *slash = strrchr(parent, '/');
  if (slash == parent) {
    name = dir + 1;
    snprintf(parent, parent_len, "/");
  } else if (slash) {
    *slash = 0;
    name = dir + (slash - parent) + 1;
  } else {
    name = dir;
    snprintf(parent, parent_len, ".");
  }
  return *name ? name : "."; /* "/" itself */
}

/* The open dir fd is the daemon's, as hook wants it (see open_socket_dir): 0, or -errno with the
 * reason in why. */
static int check_socket_dir(int fd, const char *dir, bool hook, char *why, size_t why_len) {
  struct stat st;

  if (fstat(fd, &st) < 0) {
    int e = errno;
    snprintf(why, why_len, "cannot stat %s: %s", dir, strerror(e));
    return -e;
  }
  if (hook && st.st_uid != geteuid()) {
    snprintf(why, why_len,
             "%s belongs to uid %u, not to gsliced's (%u): remove it, and start gsliced again", dir,
             (unsigned)st.st_uid, (unsigned)geteuid());
    return -EPERM;
  }
  if (!hook && (st.st_uid != geteuid() || (st.st_mode & 022))) {
    snprintf(why, why_len,
             "refusing socket dir %s: it is owned by uid %u with mode %04o, and must be this "
             "daemon's (uid %u) and writable by no one else, or another user could replace the "
             "socket and answer gsliced's clients; remove it (if another user made it, they or "
             "root must) and start again, or give another --socket",
             dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
    return -EPERM;
  }
  if (hook && (st.st_mode & 07777) != 0755 && fchmod(fd, 0755) < 0) {
    int e = errno;
    snprintf(why, why_len, "cannot make %s mode 0755: %s", dir, strerror(e));
    return -e;
  }
  return 0;
}

/* A socket's dir, made by the daemon in the dir above it (0755; parents are not made) and
 * checked through its descriptor. Whoever can write in it can replace the socket and answer
 * gsliced's clients (gslice-node would take a fake daemon's word for a slice's dir), or have the
 * daemon unlink and bind where they point. The main socket's (hook false) must be a dir, not a
 * link, of the daemon's user and writable by no one else: anything else is refused with what
 * to do. The hook socket's (hook true): a link or anything but a dir there is removed and the dir
 * made (an old deployment mounted the socket's dir read-write into containers, whose root could
 * plant one); a dir of another user is refused; its mode is made 0755. Returns the dir's
 * descriptor, or -errno with the reason in why. */
static int open_socket_dir(const char *dir, bool hook, char *why, size_t why_len) {
  char parent[sizeof(((struct sockaddr_un *)0)->sun_path)];
  const char *name = split_dir(dir, parent, sizeof(parent));
  struct stat st;
  int pfd, fd = -1, r = 0;

  pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (pfd < 0) {
    r = -errno;
    snprintf(why, why_len, "cannot open %s: %s", parent, strerror(errno));
    return r;
  }
  if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
    if (!hook) {
      r = -ENOTDIR;
      snprintf(why, why_len,
               "%s is %s, not a directory: gsliced makes its socket's dir itself; remove it, or "
               "give another --socket",
               dir, S_ISLNK(st.st_mode) ? "a symbolic link" : "a file");
      goto out;
    }
    gs_log(GS_LOG_WARNING, "%s is not a directory (mode %06o): removed, and made again", dir,
           (unsigned)st.st_mode);
    unlinkat(pfd, name, 0);
  }
  if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST) {
    r = -errno;
    snprintf(why, why_len, "cannot make %s: %s", dir, strerror(errno));
    goto out;
  }
  fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    r = -errno;
    snprintf(why, why_len, "cannot open %s: %s%s", dir, strerror(errno),
             errno == ELOOP || errno == ENOTDIR ? " (a symbolic link or not a directory: remove "
                                                  "it, or give another --socket)"
                                                : "");
    goto out;
  }
  r = check_socket_dir(fd, dir, hook, why, why_len);
out:
  if (r < 0 && fd >= 0)
    close(fd);
  close(pfd);
  return r < 0 ? r : fd;
}

/* Listens on path (whose dir open_socket_dir makes and checks), 0666: into *ret_fd, with the
 * dir's descriptor kept in *ret_dir_fd (the socket is unlinked through it at exit). */
static int listen_at(struct daemon *d, const char *path, bool hook, int *ret_fd, int *ret_dir_fd,
                     char *why, size_t why_len) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  char dir[sizeof(a.sun_path)];
  const char *slash = strrchr(path, '/'), *name;
  int dfd, fd = -1, r = 0;

  if (!*path || (slash && !slash[1]) || strlen(path) >= sizeof(a.sun_path)) {
    snprintf(why, why_len, "want the path of a socket, under %zu bytes", sizeof(a.sun_path));
    return -EINVAL;
  }
  if (slash) {
    name = slash + 1;
    snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
  } else {
    name = path;
    snprintf(dir, sizeof(dir), ".");
  }
  dfd = open_socket_dir(dir, hook, why, why_len);
  if (dfd < 0)
    return dfd;
  /* Bound through the dir's descriptor: the path above it is not walked again. */
  if ((size_t)snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/%s", dfd, name) >=
      sizeof(a.sun_path)) {
    r = -ENAMETOOLONG;
    snprintf(why, why_len, "socket name too long");
    goto out;
  }
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    r = -errno;
    snprintf(why, why_len, "%s", strerror(errno));
    goto out;
  }
  /* The state-dir lock says no other daemon owns this state: a socket nobody answers on is a
   * dead daemon's. */
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
    r = -EADDRINUSE;
    snprintf(why, why_len, "another daemon answers there");
    goto out;
  }
  unlinkat(dfd, name, 0);
  close(fd);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0) {
    r = -errno;
    snprintf(why, why_len, "%s", strerror(errno));
    goto out;
  }
  /* Anyone may connect: SO_PEERCRED says who, and only an owner (or root) changes a slice. On
   * the hook socket a container's process may run as any uid, and what a connection there may
   * do is a container slice hook's (requests.c, hook_socket_handle). */
  if (fchmodat(dfd, name, 0666, 0) < 0 ||
      (r = loop_add_fd(d->loop, fd, EPOLLIN, accept_cb, d)) < 0) {
    r = r < 0 ? r : -errno;
    snprintf(why, why_len, "%s", strerror(-r));
    goto out;
  }
  *ret_fd = fd;
  *ret_dir_fd = dfd;
  return 0;
out:
  if (fd >= 0)
    close(fd);
  close(dfd);
  return r;
}

void sock_init(struct sock *s) {
  *s = (struct sock){.listen_fd = -1,
                     .listen_dir_fd = -1,
                     .hook_listen_fd = -1,
                     .hook_dir_fd = -1,
                     .spare_fd = -1};
}

int sock_listen(struct daemon *d, char *why, size_t why_len) {
  int r =
      listen_at(d, d->cfg.socket, false, &d->sock.listen_fd, &d->sock.listen_dir_fd, why, why_len);

  if (r < 0)
    return r;
  d->sock.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return 0;
}

int sock_listen_hook(struct daemon *d, char *why, size_t why_len) {
  const char *slash = strrchr(d->cfg.hook_socket, '/');

  if (!slash || !slash[1] || slash == d->cfg.hook_socket) {
    snprintf(why, why_len, "want an absolute path of a socket in a directory of its own");
    return -EINVAL;
  }
  return listen_at(d, d->cfg.hook_socket, true, &d->sock.hook_listen_fd, &d->sock.hook_dir_fd, why,
                   why_len);
}

/* Refused connections held since at least `before` (all with UINT64_MAX). */
static void close_refused(struct daemon *d, uint64_t before) {
  uint32_t k = 0;

  for (uint32_t i = 0; i < d->sock.nrefused; i++) {
    if (d->sock.refused[i].at < before)
      close(d->sock.refused[i].fd);
    else
      d->sock.refused[k++] = d->sock.refused[i];
  }
  d->sock.nrefused = k;
}

/* Unlinks the socket at path through its dir's descriptor (the path is not walked again), and
 * closes that. */
static void unlink_in(int dir_fd, const char *path) {
  const char *slash = strrchr(path, '/');

  unlinkat(dir_fd, slash ? slash + 1 : path, 0);
  close(dir_fd);
}

void sock_close_all(struct daemon *d) {
  close_refused(d, UINT64_MAX);
  while (d->conns.head)
    conn_close(d->conns.head, NULL);
  if (d->sock.listen_fd >= 0) {
    loop_del_fd(d->loop, d->sock.listen_fd);
    close(d->sock.listen_fd);
    unlink_in(d->sock.listen_dir_fd, d->cfg.socket);
    d->sock.listen_fd = d->sock.listen_dir_fd = -1;
  }
  if (d->sock.hook_listen_fd >= 0) {
    loop_del_fd(d->loop, d->sock.hook_listen_fd);
    close(d->sock.hook_listen_fd);
    unlink_in(d->sock.hook_dir_fd, d->cfg.hook_socket);
    d->sock.hook_listen_fd = d->sock.hook_dir_fd = -1;
  }
  if (d->sock.spare_fd >= 0)
    close(d->sock.spare_fd);
  d->sock.spare_fd = -1;
}

/* Connections that never said HELLO within hello_timeout_ms (hook_hello_timeout_ms on the hook
 * socket: they hold a slot of max_clients, or of their container's pending bound, for nothing),
 * and those whose replies piled up unread. */
static void close_idle_conns(struct daemon *d) {
  uint64_t now = loop_now(), main_limit = d->cfg.hello_timeout_ms * 1000000ull,
           hook_limit = d->cfg.hook_hello_timeout_ms * 1000000ull;
  bool again = true;

  while (again) {
    again = false;
    for (struct conn *c = d->conns.head; c; c = c->next) {
      uint64_t limit = c->hook_only ? hook_limit : main_limit;
      if (c->dropped || (!c->hello && now - c->accepted_at >= limit)) {
        conn_close(c, c->dropped ? "does not read its replies" : "no HELLO in time");
        again = true; /* the list changed under us */
        break;
      }
    }
  }
}

void sock_housekeeping(struct daemon *d) {
  close_idle_conns(d);
  close_refused(d, loop_now() - 100000000ull);
}
