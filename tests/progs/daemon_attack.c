/* SPDX-License-Identifier: Apache-2.0 */
/* Clients of gsliced that attack it the way a careless or hostile process could: never say
 * hello, lie about a length, flood token requests, hold a token and stop, open a thousand
 * connections, register slices in a loop, sit idle after hello; and one that reports kernel lengths
 * (quanta). One mode per run; each prints what
 * it saw. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"

static const char *path;

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time a process has run, ns (/proc/PID/schedstat), or 0. */
static uint64_t cpu_ns(long pid) {
  char file[64];
  unsigned long long ns = 0;
  snprintf(file, sizeof(file), "/proc/%ld/schedstat", pid);
  FILE *f = fopen(file, "re");
  if (f) {
    if (fscanf(f, "%llu", &ns) != 1)
      ns = 0;
    fclose(f);
  }
  return ns;
}

static int conn(void) {
  int fd;
  int r = gs_client_connect(path, &fd);
  return r < 0 ? r : fd;
}

/* Whether the daemon closed fd within ms (what it sent first is drained). */
static int closed_within(int fd, int ms) {
  char buf[4096];
  double end = mono_s() + ms / 1000.0;
  for (;;) {
    int left = (int)((end - mono_s()) * 1000);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, left) <= 0)
      return 0;
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return 1;
  }
}

static int good_client(void) {
  int fd = conn();
  struct gs_status st;
  if (fd < 0 || gs_client_hello(fd, GS_ROLE_CLI, 0, NULL) < 0 || gs_client_status(fd, &st) < 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  gs_status_free(&st);
  close(fd);
  return 0;
}

static uint32_t my_slice(void) {
  const char *s = getenv("GSLICE_SLICE");
  return s ? (uint32_t)strtoul(s, NULL, 10) : 0;
}

static uint64_t my_nonce(void) {
  const char *s = getenv("GSLICE_SLICE_NONCE");
  return s ? strtoull(s, NULL, 16) : 0;
}

static int hook_conn(void) {
  int fd = conn();
  if (fd < 0 ||
      gs_client_hello_slice(fd, GS_ROLE_HOOK, my_slice(), my_nonce(), NULL, NULL, 0) < 0) {
    fprintf(stderr, "daemon_attack: cannot connect as the hook of slice %u\n", my_slice());
    exit(1);
  }
  return fd;
}

static void request(int fd) {
  struct gs_msg_token_request q = {0};
  gs_client_send(fd, GS_MSG_TOKEN_REQUEST, 0, &q, sizeof(q));
}

/* The next message of a given type (others are skipped); -1 on timeout or close. */
static int wait_for(int fd, uint32_t type, int ms, struct gs_msg *m) {
  static unsigned char buf[1 << 20] __attribute__((aligned(8)));
  double end = mono_s() + ms / 1000.0;
  for (;;) {
    int left = (int)((end - mono_s()) * 1000);
    if (left <= 0 || gs_client_recv(fd, buf, sizeof(buf), left, m) < 0)
      return -1;
    if (m->hdr.type == type)
      return 0;
  }
}

static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: daemon_attack SOCKET nohello N WAIT_MS | biglen | many N | flood N |\n"
                    "       hold | grants SECONDS | holdloop SECONDS | register N ROUNDS |\n"
                    "       idle N SECONDS | statusflood CONNS SECONDS [SLICES] |\n"
                    "       nonreaders N HOLD_SECONDS | garbage SECONDS | quanta\n");
    return 2;
  }
  path = argv[1];
  const char *mode = argv[2];
  int n = argc > 3 ? atoi(argv[3]) : 0;

  if (!strcmp(mode, "nohello")) {
    /* Connections that never say hello: the daemon closes them after hello_timeout_ms. */
    int ms = argc > 4 ? atoi(argv[4]) : 3000, *fds = calloc((size_t)n, sizeof(int)), closed = 0;
    raise_nofile();
    for (int i = 0; i < n; i++)
      fds[i] = conn();
    double t0 = mono_s();
    for (int i = 0; i < n; i++)
      closed += fds[i] >= 0 && closed_within(fds[i], (int)(ms - (mono_s() - t0) * 1000));
    printf("nohello: %d of %d closed by the daemon within %d ms\n", closed, n, ms);
    int ok = good_client() == 0;
    printf("nohello: good client %s\n", ok ? "served" : "NOT served");
    return closed == n && ok ? 0 : 1;
  }
  if (!strcmp(mode, "biglen")) {
    /* A length prefix of 4 GiB - 1, then as much as the socket takes. */
    int fd = conn();
    struct gs_msg_hdr h = {GS_PROTO_MAGIC, GS_PROTO_VERSION, GS_MSG_HELLO, 0xffffffffu, 0};
    static char junk[1 << 16];
    send(fd, &h, sizeof(h), MSG_NOSIGNAL);
    for (int i = 0; i < 64; i++)
      if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        break;
    int c = closed_within(fd, 3000), ok = good_client() == 0;
    printf("biglen: %s; good client %s\n", c ? "closed" : "NOT closed",
           ok ? "served" : "NOT served");
    return c && ok ? 0 : 1;
  }
  if (!strcmp(mode, "many")) {
    /* n connections that say hello and stay; a newcomer is still served, and the daemon
     * does not spin (the test watches its CPU time meanwhile). */
    int *fds = calloc((size_t)n, sizeof(int)), open_ok = 0, refused = 0;
    raise_nofile();
    for (int i = 0; i < n; i++) {
      struct gs_msg_hello h = {.role = GS_ROLE_CLI};
      struct gs_msg m;
      fds[i] = conn();
      /* Not gs_client_hello: an answer that never comes must not hang the test. */
      if (fds[i] >= 0 && gs_client_send(fds[i], GS_MSG_HELLO, 1, &h, sizeof(h)) == 0 &&
          wait_for(fds[i], GS_MSG_HELLO_OK, 2000, &m) == 0)
        open_ok++;
      else if (++refused >= 3)
        break; /* the daemon takes no more: no use waiting 2 s for each of the rest */
    }
    printf("many: %d of %d connections said hello, %d refused\n", open_ok, n, refused);
    fflush(stdout);
    sleep(2);
    for (int i = 0; i < n; i++)
      if (fds[i] >= 0)
        close(fds[i]);
    usleep(200000);
    int ok = good_client() == 0;
    printf("many: good client after %s\n", ok ? "served" : "NOT served");
    return ok ? 0 : 1;
  }
  if (!strcmp(mode, "idle")) {
    /* Up to n connections that say hello and then sit idle for argv[4] seconds; stops at the
     * first the daemon refuses, and prints its reason. */
    int secs = argc > 4 ? atoi(argv[4]) : 3, held = 0;
    char why[GS_PROTO_TEXT_MAX] = "";
    static unsigned char buf[4096] __attribute__((aligned(8)));
    for (int i = 0; i < n; i++) {
      struct gs_msg_hello h = {.role = GS_ROLE_CLI};
      struct gs_msg m;
      int fd = conn();
      /* The refusal may come before our hello is sent, or instead of its answer. */
      if (fd >= 0)
        gs_client_send(fd, GS_MSG_HELLO, 1, &h, sizeof(h));
      int r = fd < 0 ? fd : gs_client_recv(fd, buf, sizeof(buf), 2000, &m);
      if (r == 0 && m.hdr.type == GS_MSG_HELLO_OK) {
        held++;
        continue;
      }
      if (r == 0 && m.hdr.type == GS_MSG_ERROR)
        snprintf(why, sizeof(why), "%s", m.u.error.text);
      else
        snprintf(why, sizeof(why), "%s", strerror(r < 0 ? -r : EPROTO));
      break;
    }
    printf("idle: %d connections said hello; refused: %s\n", held, why);
    fflush(stdout);
    sleep((unsigned)secs);
    return 0;
  }
  if (!strcmp(mode, "flood")) {
    /* n token requests, never reading a reply: dropped once replies pile up, or served. */
    int fd = hook_conn(), sent = 0;
    struct gs_msg_token_request q = {0};
    for (int i = 0; i < n; i++) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      if (poll(&p, 1, 2000) <= 0 || (p.revents & (POLLHUP | POLLERR)))
        break;
      if (gs_client_send(fd, GS_MSG_TOKEN_REQUEST, 0, &q, sizeof(q)) < 0)
        break;
      sent++;
    }
    int c = closed_within(fd, 3000);
    printf("flood: %d requests sent, connection %s\n", sent, c ? "closed" : "open");
    close(fd);
    return 0;
  }
  if (!strcmp(mode, "statusflood")) {
    /* n connections (one process each) writing STATUS without pause for argv[4] seconds, and
     * reading the replies as they come, so that none is dropped for not reading. First argv[5]
     * slices with a memory cap are registered (each has a region the snapshot reads): the more
     * slices, the longer each STATUS takes the daemon. */
    int seconds = argc > 4 ? atoi(argv[4]) : 3, nslices = argc > 5 ? atoi(argv[5]) : 0;
    int cfd = conn();
    if (cfd < 0 || gs_client_hello(cfd, GS_ROLE_CLI, 0, NULL) < 0)
      return 1;
    for (int i = 0; i < nslices; i++) {
      struct gs_slice_spec spec = {
          .gpu_mask = 1, .compute_limit = 100, .weight = 1, .memory_cap = 1ull << 30};
      struct gs_msg_registered reg;
      char err[GS_PROTO_TEXT_MAX];
      snprintf(spec.name, sizeof(spec.name), "bulk%d", i);
      if (gs_client_register(cfd, &spec, &reg, err, sizeof(err)) < 0) {
        fprintf(stderr, "statusflood: register %d: %s\n", i, err);
        return 1;
      }
    }
    for (int k = 0; k < n; k++) {
      if (fork() != 0)
        continue;
      int fd = conn();
      unsigned long sent = 0;
      static unsigned char sink[1 << 20];
      struct gs_msg_status st = {0};
      /* 64 requests per write: the daemon's socket always has more waiting. */
      enum { BATCH = 64 };
      unsigned char msg[BATCH * (sizeof(struct gs_msg_hdr) + sizeof(st))];
      size_t len, off = 0;
      double end = mono_s() + seconds;
      if (fd < 0 || gs_client_hello(fd, GS_ROLE_CLI, 0, NULL) < 0 ||
          gs_msg_encode(msg, sizeof(msg), GS_MSG_STATUS, 1, &st, sizeof(st), &len) < 0)
        _exit(1);
      for (int b = 1; b < BATCH; b++)
        memcpy(msg + (size_t)b * len, msg, len);
      len *= BATCH;
      /* A reader process drains the replies; this one writes and never waits for them. */
      pid_t reader = fork();
      if (reader == 0) {
        while (recv(fd, sink, sizeof(sink), 0) > 0) {
        }
        _exit(0);
      }
      struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      while (mono_s() < end) {
        ssize_t w = send(fd, msg + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
          break;
        if (w > 0 && (off += (size_t)w) == len) {
          off = 0;
          sent += BATCH;
        }
      }
      shutdown(fd, SHUT_RDWR);
      waitpid(reader, NULL, 0);
      printf("statusflood: connection %d wrote %lu STATUS in %d s\n", k, sent, seconds);
      fflush(stdout);
      _exit(0);
    }
    int ok = 1, st;
    while (wait(&st) > 0)
      ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    close(cfd);
    return ok ? 0 : 1;
  }
  if (!strcmp(mode, "garbage")) {
    /* Connections that send 16 bytes of garbage and go, as fast as they can for n seconds. */
    static const unsigned char junk[16] = "not a gsliced hi";
    unsigned long count = 0;
    double end = mono_s() + n;
    while (mono_s() < end) {
      int fd = conn();
      if (fd < 0) {
        usleep(1000);
        continue;
      }
      if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) == (ssize_t)sizeof(junk))
        count++;
      close(fd);
    }
    printf("garbage: %lu connections in %d s\n", count, n);
    return 0;
  }
  if (!strcmp(mode, "nonreaders")) {
    /* n connections that say hello, then write STATUS and never read a reply; held open argv[4]
     * seconds ("holding" is printed when they are all written), then closed. Each writes as
     * many as make 3.5 MiB of replies (with no slice), just under the 4 MiB after which an old
     * daemon dropped a reader: what piles up is the daemon's to bound. */
    int hold = argc > 4 ? atoi(argv[4]) : 3, *fds = calloc((size_t)n, sizeof(int)), closed = 0;
    unsigned long sent = 0, per = (7ul << 19) /
                                  (sizeof(struct gs_msg_hdr) + sizeof(struct gs_msg_status_reply));
    unsigned long *left = calloc((size_t)n, sizeof(*left));
    struct gs_msg_status st = {0};
    unsigned char msg[sizeof(struct gs_msg_hdr) + sizeof(st)];
    size_t len;
    raise_nofile();
    if (!fds || !left ||
        gs_msg_encode(msg, sizeof(msg), GS_MSG_STATUS, 1, &st, sizeof(st), &len) < 0)
      return 1;
    for (int i = 0; i < n; i++) {
      left[i] = per;
      fds[i] = conn();
      if (fds[i] < 0 || gs_client_hello(fds[i], GS_ROLE_CLI, 0, NULL) < 0) {
        fprintf(stderr, "nonreaders: connection %d refused\n", i);
        return 1;
      }
    }
    /* Round after round, each writes until its socket is full; done when a whole round wrote
     * nothing for 300 ms (the daemon stopped taking requests, or closed them). */
    double quiet_since = mono_s();
    while (mono_s() - quiet_since < 0.3) {
      int wrote = 0;
      for (int i = 0; i < n; i++) {
        if (fds[i] < 0)
          continue;
        while (left[i]) {
          ssize_t w = send(fds[i], msg, len, MSG_NOSIGNAL | MSG_DONTWAIT);
          if (w == (ssize_t)len) {
            sent++;
            left[i]--;
            wrote = 1;
            continue;
          }
          if (w < 0 && errno != EAGAIN) {
            close(fds[i]);
            fds[i] = -1;
            closed++;
          }
          break;
        }
      }
      if (wrote)
        quiet_since = mono_s();
      else
        usleep(20000);
    }
    /* A closed connection shows when written to: one more try each. */
    for (int i = 0; i < n; i++)
      if (fds[i] >= 0 && send(fds[i], msg, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
          errno != EAGAIN) {
        close(fds[i]);
        fds[i] = -1;
        closed++;
      }
    printf("nonreaders: %d connections, %lu STATUS written, %d closed by the daemon; holding\n", n,
           sent, closed);
    fflush(stdout);
    sleep((unsigned)hold);
    for (int i = 0; i < n; i++)
      if (fds[i] >= 0)
        close(fds[i]);
    return 0;
  }
  if (!strcmp(mode, "hold")) {
    /* Takes the token and stops, reading nothing more: SIGSTOP on itself. */
    int fd = hook_conn();
    struct gs_msg m;
    request(fd);
    if (wait_for(fd, GS_MSG_TOKEN_GRANT, 5000, &m) < 0)
      return 1;
    printf("hold: granted, pid %d stopping\n", (int)getpid());
    fflush(stdout);
    raise(SIGSTOP);
    pause();
    return 0;
  }
  if (!strcmp(mode, "grants")) {
    /* Asks, takes, gives back at once, for n seconds: the longest gap between two grants
     * is how long someone else kept the GPU from it. With GSLICE_TEST_DAEMON_PID, also the most
     * CPU time the daemon ran between two grants: the work it did for others while this one
     * waited, which a loaded machine stretches in wall time but does not add to. */
    int fd = hook_conn();
    double end = mono_s() + n, last = 0, worst = 0;
    const char *dpid = getenv("GSLICE_TEST_DAEMON_PID");
    uint64_t cpu_last = 0, cpu_worst = 0;
    unsigned grants = 0;
    while (mono_s() < end) {
      struct gs_msg m;
      request(fd);
      if (wait_for(fd, GS_MSG_TOKEN_GRANT, 5000, &m) < 0) {
        /* No grant in 5 s: that wait is the longest gap (at least). */
        if (last && mono_s() - last > worst)
          worst = mono_s() - last;
        break;
      }
      double t = mono_s();
      uint64_t cpu = dpid ? cpu_ns(atol(dpid)) : 0;
      if (last && t - last > worst)
        worst = t - last;
      if (last && cpu - cpu_last > cpu_worst)
        cpu_worst = cpu - cpu_last;
      last = t;
      cpu_last = cpu;
      grants++;
      struct gs_msg_token_release rl = {.gpu = m.u.token_grant.gpu,
                                        .generation = m.u.token_grant.generation,
                                        .start_ns = mono_ns()};
      gs_client_send(fd, GS_MSG_TOKEN_RELEASE, 0, &rl, sizeof(rl));
      usleep(2000);
    }
    printf("grants: %u, longest gap %.0f ms\n", grants, worst * 1000);
    if (dpid)
      printf("grants: most daemon CPU between two grants %.1f ms\n", (double)cpu_worst / 1e6);
    return 0;
  }
  if (!strcmp(mode, "quanta")) {
    /* Two processes of one slice report their kernel lengths with their releases: prints the
     * quantum of each grant, ms. The daemon makes quanta of what the hooks report (the slice's
     * time per launch over its latest token's processes: their launch rates add), not of
     * charges; a report of an hour is held to the largest quantum. */
    int a = hook_conn(), st;
    struct gs_msg m;
    uint64_t q[5];
    uint32_t gen;
    const uint64_t ms = 1000000;
#define GRANT(fd, i)                                                                               \
  do {                                                                                             \
    if (wait_for(fd, GS_MSG_TOKEN_GRANT, 5000, &m) < 0) {                                          \
      fprintf(stderr, "quanta: no grant %d\n", i);                                                 \
      return 1;                                                                                    \
    }                                                                                              \
    q[i] = m.u.token_grant.quantum_ns / ms;                                                        \
    gen = m.u.token_grant.generation;                                                              \
  } while (0)
#define RELEASE(fd, used, kernel, more_)                                                           \
  do {                                                                                             \
    struct gs_msg_token_release rl = {.generation = gen,                                           \
                                      .used_ns = (used),                                           \
                                      .launches = 1,                                               \
                                      .more = (more_),                                             \
                                      .start_ns = mono_ns() - (used),                              \
                                      .kernel_ns = (kernel)};                                      \
    gs_client_send(fd, GS_MSG_TOKEN_RELEASE, 0, &rl, sizeof(rl));                                  \
  } while (0)
    request(a);
    GRANT(a, 0);
    /* One launch charged 1 s, no kernel length reported. */
    RELEASE(a, 1000 * ms, 0, 1);
    GRANT(a, 1);
    /* Another process of the slice joins the token and reports 300 ms; this one 150 ms. */
    pid_t child = fork();
    if (child == 0) {
      int b = hook_conn();
      request(b);
      if (wait_for(b, GS_MSG_TOKEN_GRANT, 5000, &m) < 0 || m.u.token_grant.generation != gen) {
        fprintf(stderr, "quanta: the second process did not join the token\n");
        _exit(1);
      }
      RELEASE(b, 300 * ms, 300 * ms, 0);
      _exit(0);
    }
    if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
      return 1;
    RELEASE(a, 150 * ms, 150 * ms, 1);
    GRANT(a, 2);
    /* Alone on its next token, 40 ms. */
    RELEASE(a, 40 * ms, 40 * ms, 1);
    GRANT(a, 3);
    RELEASE(a, 40 * ms, 3600000 * ms, 1);
    GRANT(a, 4);
    RELEASE(a, 40 * ms, 40 * ms, 0);
#undef GRANT
#undef RELEASE
    printf("quanta: %llu %llu %llu %llu %llu\n", (unsigned long long)q[0], (unsigned long long)q[1],
           (unsigned long long)q[2], (unsigned long long)q[3], (unsigned long long)q[4]);
    return 0;
  }
  if (!strcmp(mode, "holdloop")) {
    /* Never releases: takes every token it can and sits on it until revoked. */
    int fd = hook_conn();
    double end = mono_s() + n;
    unsigned grants = 0, revokes = 0;
    request(fd);
    while (mono_s() < end) {
      static unsigned char buf[4096] __attribute__((aligned(8)));
      struct gs_msg m;
      if (gs_client_recv(fd, buf, sizeof(buf), 200, &m) < 0)
        continue;
      if (m.hdr.type == GS_MSG_TOKEN_GRANT)
        grants++;
      if (m.hdr.type == GS_MSG_TOKEN_REVOKE) {
        revokes++;
        request(fd);
      }
    }
    printf("holdloop: %u grants, %u revokes\n", grants, revokes);
    return 0;
  }
  if (!strcmp(mode, "register")) {
    /* Registers best-effort slices until refused, removes them, argv[4] rounds. */
    int rounds = argc > 4 ? atoi(argv[4]) : 1, fd = conn(), first_err = 0, most = 0;
    char err[GS_PROTO_TEXT_MAX] = "";
    if (fd < 0 || gs_client_hello(fd, GS_ROLE_CLI, 0, NULL) < 0)
      return 1;
    uint32_t *ids = calloc((size_t)n, sizeof(uint32_t));
    for (int r = 0; r < rounds; r++) {
      int k = 0;
      for (int i = 0; i < n; i++) {
        struct gs_slice_spec spec = {.gpu_mask = 1, .compute_limit = 100, .weight = 1};
        struct gs_msg_registered reg;
        snprintf(spec.name, sizeof(spec.name), "atk%d-%d", r, i);
        int e = gs_client_register(fd, &spec, &reg, err, sizeof(err));
        if (e < 0) {
          if (!first_err)
            first_err = e;
          break;
        }
        ids[k++] = reg.slice_id;
      }
      if (k > most)
        most = k;
      for (int i = 0; i < k; i++)
        gs_client_unregister(fd, ids[i], 0, NULL, 0);
    }
    printf("register: at most %d slices at once, refused with %d (%s)\n", most, first_err, err);
    close(fd);
    return good_client() == 0 ? 0 : 1;
  }
  fprintf(stderr, "daemon_attack: unknown mode %s\n", mode);
  return 2;
}
