/* The daemon's listening socket (sock.h): accepting within the limits, refusals, closing idle and
 * refused connections. */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"
#include "region.h"

/* One uid must not hold every connection of max_clients (idle after HELLO, or before it within
 * hello_timeout_ms). Counted at accept, before anything is allocated; the refused client gets
 * the reason as an ERROR if it reads before it sees the close, and the log says it, at most once
 * a second. */
static bool uid_over_limit(struct daemon *d, int cfd, uid_t uid, bool hook_only) {
  uint32_t n = 0;
  uint64_t now;

  /* Counted per socket: containers run as uid 0 as often as not, and their connections on the
   * hook socket must not use up root's on the main one (gslice-node's). */
  for (struct conn *c = d->conns; c; c = c->next)
    n += c->uid == uid && c->hook_only == hook_only;
  if (n < d->cfg.max_clients_per_user)
    return false;
  struct gs_msg_error e = {.code = -EUSERS};
  unsigned char buf[sizeof(struct gs_msg_hdr) + sizeof(e)];
  size_t len;
  snprintf(e.text, sizeof(e.text),
           "uid %u has %u connections to gsliced%s, the most one user may have "
           "(max_clients_per_user = %" PRIu64 "); close some, or raise max_clients_per_user "
           "in gsliced's config (SIGHUP reloads it)",
           (unsigned)uid, n, hook_only ? "'s hook socket" : "", d->cfg.max_clients_per_user);
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
    if (uid_over_limit(d, cfd, cred.uid, fd == d->hook_listen_fd))
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
    c->hook_only = fd == d->hook_listen_fd;
    if (loop_add_fd(l, cfd, EPOLLIN | EPOLLRDHUP, conn_cb, c) < 0) {
      free(c);
      close(cfd);
      continue;
    }
    c->next = d->conns;
    if (d->conns)
      d->conns->pprev = &c->next;
    d->conns = c;
    c->pprev = &d->conns;
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

/* The hook socket's dir: made by the daemon in the dir above it, 0755, its own. A link or
 * anything but a dir there is removed and the dir made (an old deployment mounted the socket's
 * dir read-write into containers, whose root could plant one); a dir of another user is refused.
 * Returns the dir's descriptor, or -errno with the reason in why. */
static int open_hook_dir(const char *dir, char *why, size_t why_len) {
  char parent[sizeof(((struct sockaddr_un *)0)->sun_path)];
  const char *name;
  struct stat st;
  int pfd, fd = -1, r = 0;

  snprintf(parent, sizeof(parent), "%s", dir);
  char *slash = strrchr(parent, '/');
  if (slash == parent) {
    name = dir + 1;
    snprintf(parent, sizeof(parent), "/");
  } else if (slash) {
    *slash = 0;
    name = dir + (slash - parent) + 1;
  } else {
    name = dir;
    snprintf(parent, sizeof(parent), ".");
  }
  pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (pfd < 0) {
    r = -errno;
    snprintf(why, why_len, "cannot open %s: %s", parent, strerror(errno));
    return r;
  }
  if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
    dlog("warning", "%s is not a directory (mode %06o): removed, and made again", dir,
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
    snprintf(why, why_len, "cannot open %s: %s", dir, strerror(errno));
    goto out;
  }
  if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
    r = -EPERM;
    snprintf(why, why_len,
             "%s belongs to uid %u, not to gsliced's (%u): remove it, and start gsliced again", dir,
             (unsigned)st.st_uid, (unsigned)geteuid());
    goto out;
  }
  if ((st.st_mode & 07777) != 0755 && fchmod(fd, 0755) < 0) {
    r = -errno;
    snprintf(why, why_len, "cannot make %s mode 0755: %s", dir, strerror(errno));
    goto out;
  }
out:
  if (r < 0 && fd >= 0)
    close(fd);
  close(pfd);
  return r < 0 ? r : fd;
}

int server_listen_hook(struct daemon *d, char *why, size_t why_len) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  char dir[sizeof(a.sun_path)];
  const char *path = d->cfg.hook_socket, *slash = strrchr(path, '/'), *name;
  int dfd, fd = -1, r = 0;

  if (!slash || !slash[1] || slash == path) {
    snprintf(why, why_len, "want an absolute path of a socket in a directory of its own");
    return -EINVAL;
  }
  name = slash + 1;
  snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
  dfd = open_hook_dir(dir, why, why_len);
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
  /* A container's process may run as any uid: anyone may connect, and what a connection here
   * may do is a container slice hook's (requests.c, hook_socket_handle). */
  if (fchmodat(dfd, name, 0666, 0) < 0 ||
      (r = loop_add_fd(d->loop, fd, EPOLLIN, accept_cb, d)) < 0) {
    r = r < 0 ? r : -errno;
    snprintf(why, why_len, "%s", strerror(-r));
    goto out;
  }
  d->hook_listen_fd = fd;
  fd = -1;
  r = 0;
out:
  if (fd >= 0)
    close(fd);
  close(dfd);
  return r;
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
  if (d->hook_listen_fd >= 0) {
    loop_del_fd(d->loop, d->hook_listen_fd);
    close(d->hook_listen_fd);
    unlink(d->cfg.hook_socket);
    d->hook_listen_fd = -1;
  }
  if (d->spare_fd >= 0)
    close(d->spare_fd);
  d->spare_fd = -1;
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

void sock_housekeeping(struct daemon *d) {
  close_idle_conns(d);
  close_refused(d, loop_now() - 100000000ull);
}
