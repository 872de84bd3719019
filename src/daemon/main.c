/* SPDX-License-Identifier: Apache-2.0 */
/* gsliced: the node daemon's entry point: options and config, lock, state, socket, background,
 * signals. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "gpu.h"
#include "guard.h"
#include "housekeeping.h"
#include "log.h"
#include "metrics.h"
#include "requests.h"
#include "sock.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: gsliced [--socket PATH] [--state-dir DIR] [--foreground] [--config FILE]\n"
          "               [--metrics ADDR] [--set NAME=VALUE]... [--print-config]\n"
          "The gslice node daemon: slice registry and per-GPU compute-token scheduler.\n"
          "Settings (config file lines 'NAME = VALUE'; --set overrides; [SIGHUP]: reloadable):\n");
  config_print(NULL, out);
}

static int mkdirs(const char *path, mode_t mode) {
  char buf[CONFIG_STR_MAX];

  snprintf(buf, sizeof(buf), "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
      return -errno;
    *p = '/';
  }
  if (mkdir(buf, mode) < 0 && errno != EEXIST)
    return -errno;
  return 0;
}

/* A relative state dir is the working directory's at start: every slice's dir is handed out as
 * a path under it (GSLICE_STATE_DIR), which must be absolute (the processes it is handed to
 * run elsewhere, and take a relative one as malformed). */
static int absolute_state_dir(struct config *c, char *why, size_t why_len) {
  char cwd[CONFIG_STR_MAX], abs[CONFIG_STR_MAX];
  const char *rel = c->state_dir;

  if (rel[0] == '/')
    return 0;
  while (rel[0] == '.' && rel[1] == '/')
    rel += 2;
  if (!getcwd(cwd, sizeof(cwd)) ||
      (size_t)snprintf(abs, sizeof(abs), "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", rel) >=
          sizeof(abs)) {
    snprintf(why, why_len,
             "state_dir '%s' is relative and cannot be made absolute (%s); give an absolute path",
             c->state_dir, errno == ERANGE || !errno ? "too long" : strerror(errno));
    return -EINVAL;
  }
  /* "." alone, or a trailing "/.": the working directory itself. */
  size_t n = strlen(abs);
  if (n > 2 && !strcmp(abs + n - 2, "/."))
    abs[n - 2] = 0;
  snprintf(c->state_dir, sizeof(c->state_dir), "%s", abs);
  return 0;
}

/* The state dir holds the lock, the log, the registry and every slice's dir: whoever can write
 * in it can point those names at other files (a non-root daemon's default sits in a shared
 * /tmp, where another user can make it first, with symlinks in it). It must be a directory
 * itself, not a link to one, owned by this daemon's user, writable by no one else. Kept open:
 * the lock and the log are opened relative to it, never following a link. */
static int open_state_dir(struct daemon *d, int *ret_fd) {
  const char *dir = d->cfg.state_dir;
  struct stat st;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0) {
    int e = errno;
    fprintf(stderr, "gsliced: cannot open state dir %s: %s%s\n", dir, strerror(e),
            e == ELOOP || e == ENOTDIR
                ? " (it is a symbolic link or not a directory: remove it, or give another "
                  "--state-dir)"
                : "");
    return -e;
  }
  if (fstat(fd, &st) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 022)) {
    fprintf(stderr,
            "gsliced: refusing state dir %s: it is owned by uid %u with mode %04o, and must be "
            "this daemon's (uid %u) and writable by no one else, or another user could plant "
            "files in it; remove it (if another user made it, they or root must) and start "
            "again, or give another --state-dir\n",
            dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
    close(fd);
    return -EPERM;
  }
  *ret_fd = fd;
  return 0;
}

static int take_lock(struct daemon *d, int dir_fd) {
  char path[CONFIG_STR_MAX + 16], pid[32] = "";
  int fd;

  snprintf(path, sizeof(path), "%s/gsliced.lock", d->cfg.state_dir);
  fd = openat(dir_fd, "gsliced.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    fprintf(stderr, "gsliced: cannot open %s: %s\n", path, strerror(e));
    return -e;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    ssize_t n = read(fd, pid, sizeof(pid) - 1);
    pid[n > 0 ? n : 0] = 0;
    pid[strcspn(pid, "\n")] = 0;
    fprintf(stderr, "gsliced: another gsliced (pid %s) owns %s; stop it first\n", *pid ? pid : "?",
            d->cfg.state_dir);
    close(fd);
    return -EBUSY;
  }
  d->lock_fd = fd;
  return 0;
}

static void write_pid(struct daemon *d) {
  char pid[32];
  int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
  if (ftruncate(d->lock_fd, 0) == 0 && pwrite(d->lock_fd, pid, (size_t)n, 0) < 0)
    gs_log(GS_LOG_WARNING, "cannot write the pid into the lock file");
}

/* Goes to the background once the socket answers, so whoever started us
 * can connect as soon as we return. */
static int background(struct daemon *d, int dir_fd) {
  char log[CONFIG_STR_MAX + 16];
  int p[2], fd;
  pid_t pid;

  /* 0600: the log names slices, their users and processes. */
  snprintf(log, sizeof(log), "%s/gsliced.log", d->cfg.state_dir);
  fd = openat(dir_fd, "gsliced.log", O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    fprintf(stderr, "gsliced: cannot open log %s: %s\n", log, strerror(e));
    return -e;
  }
  /* One made 0644 by an earlier daemon is narrowed too. */
  if (fchmod(fd, 0600) < 0)
    gs_log(GS_LOG_WARNING, "cannot make %s mode 0600: %s", log, strerror(errno));
  if (pipe2(p, O_CLOEXEC) < 0)
    return -errno;
  pid = fork();
  if (pid < 0)
    return -errno;
  if (pid > 0) {
    char c;
    close(p[1]);
    _exit(read(p[0], &c, 1) == 1 ? 0 : 1);
  }
  close(p[0]);
  setsid();
  int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (nul >= 0) {
    dup2(nul, 0);
    dup2(nul, 1);
    close(nul);
  }
  dup2(fd, 2);
  close(fd);
  if (write(p[1], "1", 1) != 1)
    return -EIO;
  close(p[1]);
  return 0;
}

/* Every client is a descriptor: raise the soft open-file limit to the hard one (systemd's
 * soft default is 1024, max_clients' too), and where even that is short, lower the sockets'
 * bounds so that refusing a client is a decision, not an accept() failing in a loop. The hook
 * socket's goes first, to half of what fits at most: the main socket is the host's. */
#define FDS_RESERVED 64 /* listening sockets, epoll, signals, state, log, metrics, spare */
static void fit_open_files(struct daemon *d) {
  struct rlimit rl;

  if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
    return;
  if (rl.rlim_cur < rl.rlim_max) {
    rlim_t want = rl.rlim_max == RLIM_INFINITY ? 1048576 : rl.rlim_max;
    struct rlimit nr = {want, rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &nr) == 0)
      rl.rlim_cur = want;
  }
  /* Each container slice's region is held open too (snapshot.c, region_hold). */
  uint64_t reserved = FDS_RESERVED + d->cfg.max_slices;
  if (rl.rlim_cur == RLIM_INFINITY ||
      d->cfg.max_clients + d->cfg.max_hook_clients + reserved <= rl.rlim_cur)
    return;
  uint64_t fit = rl.rlim_cur > reserved + 8 ? rl.rlim_cur - reserved : 8;
  uint64_t hook = d->cfg.max_hook_clients, host = d->cfg.max_clients;
  if (hook > fit / 2 && host + hook > fit)
    hook = host < fit / 2 ? fit - host : fit / 2;
  if (host > fit - hook)
    host = fit - hook;
  if (hook != d->cfg.max_hook_clients)
    gs_log(GS_LOG_WARNING, "open-file limit %llu: max_hook_clients lowered from %llu to %llu",
           (unsigned long long)rl.rlim_cur, (unsigned long long)d->cfg.max_hook_clients,
           (unsigned long long)hook);
  if (host != d->cfg.max_clients)
    gs_log(GS_LOG_WARNING, "open-file limit %llu: max_clients lowered from %llu to %llu",
           (unsigned long long)rl.rlim_cur, (unsigned long long)d->cfg.max_clients,
           (unsigned long long)host);
  d->cfg.max_hook_clients = hook;
  d->cfg.max_clients = host;
}

static void reload(struct daemon *d) {
  struct config c = d->cfg;
  char why[CONFIG_STR_MAX];

  if (!d->config_path[0]) {
    gs_log(GS_LOG_INFO, "SIGHUP: no --config file to reload");
    return;
  }
  if (config_load_file(&c, d->config_path, why, sizeof(why)) < 0 ||
      config_derive(&c, why, sizeof(why)) < 0 || config_check(&c, why, sizeof(why)) < 0) {
    gs_log(GS_LOG_ERROR, "SIGHUP: %s; keeping the running settings", why);
    return;
  }
  /* Only settings marked runtime change; the rest need a restart. */
  for (unsigned i = 0; i < config_table_len; i++) {
    const struct config_entry *e = &config_table[i];
    size_t size = e->type == CONFIG_U64 ? sizeof(uint64_t) : e->size;
    if (e->runtime)
      memcpy((char *)&d->cfg + e->offset, (char *)&c + e->offset, size);
    else if (memcmp((char *)&d->cfg + e->offset, (char *)&c + e->offset, size))
      gs_log(GS_LOG_WARNING, "SIGHUP: %s changes only at restart", e->name);
  }
  gpus_apply_sched_cfg(d);
  charge_reload(d);
  gs_log(GS_LOG_INFO, "SIGHUP: settings reloaded from %s", d->config_path);
}

static void signal_cb(struct loop *l, int fd, uint32_t events, void *data) {
  struct daemon *d = data;
  struct signalfd_siginfo si;

  (void)events;
  while (read(fd, &si, sizeof(si)) == sizeof(si)) {
    if (si.ssi_signo == SIGHUP) {
      reload(d);
      continue;
    }
    gs_log(GS_LOG_INFO, "signal %u: shutting down (slices are kept in %s)", si.ssi_signo,
           d->cfg.state_dir);
    loop_stop(l);
  }
}

/* What the command line says, beside the settings it sets. */
struct args {
  const char *socket, *state_dir, *metrics;
  char *sets[64]; /* NAME=VALUE of each --set, in order */
  int nsets;
  bool foreground, print;
};

/* -1 to go on, else the exit status (--help, a bad option). */
static int parse_args(int argc, char **argv, struct daemon *d, struct args *a) {
  static const struct option opts[] = {{"socket", required_argument, NULL, 's'},
                                       {"state-dir", required_argument, NULL, 'd'},
                                       {"foreground", no_argument, NULL, 'f'},
                                       {"config", required_argument, NULL, 'c'},
                                       {"metrics", required_argument, NULL, 'm'},
                                       {"set", required_argument, NULL, 'S'},
                                       {"print-config", no_argument, NULL, 'P'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int o;

  while ((o = getopt_long(argc, argv, "s:d:fc:m:S:Ph", opts, NULL)) != -1) {
    switch (o) {
    case 's': a->socket = optarg; break;
    case 'd': a->state_dir = optarg; break;
    case 'f': a->foreground = true; break;
    case 'c': snprintf(d->config_path, sizeof(d->config_path), "%s", optarg); break;
    case 'm': a->metrics = optarg; break;
    case 'S':
      if (a->nsets < 64)
        a->sets[a->nsets++] = optarg;
      break;
    case 'P': a->print = true; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    usage(stderr);
    return 2;
  }
  return -1;
}

/* The settings: the file first, then the command line over it; 0, or -EINVAL with why. */
static int settle_config(struct daemon *d, struct args *a, char *why, size_t why_len) {
  struct config *c = &d->cfg;

  if (d->config_path[0] && config_load_file(c, d->config_path, why, why_len) < 0)
    return -EINVAL;
  for (int i = 0; i < a->nsets; i++) {
    char *eq = strchr(a->sets[i], '=');
    if (!eq) {
      snprintf(why, why_len, "--set wants NAME=VALUE, got '%s'", a->sets[i]);
      return -EINVAL;
    }
    *eq = 0;
    if (config_set(c, a->sets[i], eq + 1, why, why_len) < 0)
      return -EINVAL;
  }
  if ((a->socket && config_set(c, "socket", a->socket, why, why_len) < 0) ||
      (a->state_dir && config_set(c, "state_dir", a->state_dir, why, why_len) < 0) ||
      (a->metrics && config_set(c, "metrics", a->metrics, why, why_len) < 0) ||
      absolute_state_dir(c, why, why_len) < 0 || config_derive(c, why, why_len) < 0 ||
      config_check(c, why, why_len) < 0)
    return -EINVAL;
  return 0;
}

/* The state dir made and checked, its lock taken and its registry read: 0 and the dir's
 * descriptor in *ret_dir_fd, or -1 (said on stderr). */
static int open_state(struct daemon *d, int *ret_dir_fd) {
  char why[CONFIG_STR_MAX * 2];
  int r = mkdirs(d->cfg.state_dir, geteuid() == 0 ? 0755 : 0700);

  if (r < 0) {
    fprintf(stderr, "gsliced: cannot create state dir %s: %s\n", d->cfg.state_dir, strerror(-r));
    return -1;
  }
  if (open_state_dir(d, ret_dir_fd) < 0 || take_lock(d, *ret_dir_fd) < 0)
    return -1;
  r = registry_load(&d->reg, d->cfg.state_dir, (uint32_t)d->cfg.max_slices, why, sizeof(why));
  if (r < 0) {
    fprintf(stderr,
            "gsliced: %s\n"
            "gsliced: refusing to start over it; move it away (the slices it names are then "
            "forgotten) or repair it\n",
            why);
    return -1;
  }
  return 0;
}

/* The loop, the GPUs and their slices, and both sockets listening: 0, or -1 (said on stderr). */
static int start_serving(struct daemon *d) {
  char why[CONFIG_STR_MAX * 2];
  int r;

  if ((r = loop_new(&d->loop)) < 0 || (r = gpus_discover(d)) < 0) {
    fprintf(stderr, "gsliced: cannot start: %s\n", strerror(-r));
    return -1;
  }
  requests_attach(d);
  requests_adopt_slices(d);
  fit_open_files(d);
  r = sock_listen(d, why, sizeof(why));
  if (r < 0) {
    if (r == -EADDRINUSE)
      fprintf(stderr, "gsliced: another daemon answers on %s\n", d->cfg.socket);
    else
      fprintf(stderr, "gsliced: cannot listen on %s: %s\n", d->cfg.socket, why);
    return -1;
  }
  r = sock_listen_hook(d, why, sizeof(why));
  if (r < 0) {
    fprintf(stderr, "gsliced: cannot listen on the hook socket %s: %s\n", d->cfg.hook_socket, why);
    return -1;
  }
  return 0;
}

static int watch_signals(struct daemon *d) {
  sigset_t mask;

  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  d->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (d->signal_fd < 0 || loop_add_fd(d->loop, d->signal_fd, EPOLLIN, signal_cb, d) < 0) {
    gs_log(GS_LOG_ERROR, "cannot watch signals: %s", strerror(errno));
    return -1;
  }
  return 0;
}

/* Asked for and not served is a misconfiguration, not a detail: -1 (logged), and gsliced stops. */
static int start_metrics(struct daemon *d) {
  if (!strcmp(d->cfg.metrics, "off") || !d->cfg.metrics[0])
    return 0;
  int r = gs_metrics_start(d->cfg.metrics, &d->metrics);
  if (r < 0) {
    gs_log(GS_LOG_ERROR,
           "cannot serve /metrics on '%s': %s (give PORT, HOST:PORT or [V6]:PORT, "
           "HOST numeric or localhost, and a free port)",
           d->cfg.metrics, r == -EINVAL ? "not an address" : strerror(-r));
    return -1;
  }
  gs_log(GS_LOG_INFO, "serving /metrics on port %u%s", gs_metrics_port(d->metrics),
         gs_metrics_loopback(d->metrics) ? " (loopback)"
                                         : ": NOT loopback, reachable from other hosts");
  return 0;
}

static void shut_down(struct daemon *d) {
  sock_close_all(d);
  gs_metrics_stop(d->metrics);
  registry_save(&d->reg);
  registry_free(&d->reg);
  gpus_close(d);
  close(d->signal_fd);
  loop_free(d->loop);
  close(d->lock_fd);
  free(d);
}

int main(int argc, char **argv) {
  struct daemon *d = calloc(1, sizeof(*d));
  struct args a = {0};
  char why[CONFIG_STR_MAX * 2];
  int dir_fd = -1, r;

  if (!d)
    return 1;
  gs_log_open("gsliced", GS_LOG_INFO);
  sock_init(&d->sock);
  d->signal_fd = d->lock_fd = -1;
  config_defaults(&d->cfg);
  if ((r = parse_args(argc, argv, d, &a)) >= 0)
    return r;
  if (settle_config(d, &a, why, sizeof(why)) < 0) {
    fprintf(stderr, "gsliced: %s\n", why);
    return 2;
  }
  if (a.print) {
    config_print(&d->cfg, stdout);
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);
  if (open_state(d, &dir_fd) < 0 || start_serving(d) < 0)
    return 1;
  if (!a.foreground && background(d, dir_fd) < 0)
    return 1;
  gs_log_open("gsliced", GS_LOG_INFO); /* stderr may be the log file now, not the journal */
  close(dir_fd);
  write_pid(d);
  d->started = loop_now();
  /* The SIGBUS guard before any thread: a slice truncating its region under a read must not
   * kill the daemon (guard.c). Threads do not survive fork: the metrics server starts after it. */
  if (watch_signals(d) < 0)
    return 1;
  if (guard_install() < 0) {
    gs_log(GS_LOG_ERROR, "cannot install the SIGBUS guard: %s", strerror(errno));
    return 1;
  }
  if (start_metrics(d) < 0)
    return 1;
  housekeeping_start(d);
  if (charge_start(d) < 0)
    gs_log(GS_LOG_WARNING, "cannot arm the charge check: slices' charges are not checked");
  gs_log(GS_LOG_INFO,
         "serving %s (hooks of container slices: %s), state %s, %u GPU(s), %u slice(s) "
         "recovered",
         d->cfg.socket, d->cfg.hook_socket, d->cfg.state_dir, d->ngpus, d->reg.n);
  r = loop_run(d->loop);
  shut_down(d);
  return r < 0 ? 1 : 0;
}
