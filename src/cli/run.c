/* SPDX-License-Identifier: Apache-2.0 */
/* gslice run: register a slice, run the command in it with the hook preloaded, forward signals,
 * remove the slice when all is gone. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "size.h"

/* The child's pid, for the signal handlers: the one global the handlers need. */
static volatile pid_t run_child;

static void forward(int sig) {
  if (run_child > 0)
    kill(run_child, sig);
}

static void run_usage(FILE *out) {
  fprintf(out,
          "usage: gslice run [--gpu IDX[,IDX...]] [--memory SIZE] [--compute PCT]\n"
          "                  [--compute-limit PCT] [--priority high|normal|low] [--weight N]\n"
          "                  [--name NAME] -- CMD [ARG...]\n"
          "  --compute        request: guaranteed percent of one GPU's device time (default 0:\n"
          "                   best effort, uses what others leave)\n"
          "  --compute-limit  ceiling in percent (default 100: work-conserving);\n"
          "                   --compute 30 --compute-limit 30 is a hard 30%%\n"
          "  --memory         device memory cap per GPU (4GiB, 512MiB, bytes)\n");
}

static int parse_pct(const char *s, uint32_t *ret) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  /* Digits first: strtoul takes " 60", "+60" and "-1"; whitespace is refused on both sides. */
  if (s[0] < '0' || s[0] > '9' || errno || end == s || (*end && strcmp(end, "%")) || v > 100)
    return -EINVAL;
  *ret = (uint32_t)v;
  return 0;
}

static int parse_gpus(const char *s, uint32_t *ret_mask, char *cvd, size_t cvd_len) {
  uint32_t mask = 0;
  char buf[128], *save = NULL;

  if (strlen(s) >= sizeof(buf))
    return -EINVAL;
  snprintf(buf, sizeof(buf), "%s", s);
  cvd[0] = 0;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char *end;
    unsigned long v = strtoul(t, &end, 10);
    if (t[0] < '0' || t[0] > '9' || *end || end == t || v >= GS_MAX_GPUS)
      return -EINVAL;
    mask |= 1u << v;
  }
  if (!mask)
    return -EINVAL;
  /* CUDA_VISIBLE_DEVICES in index order: the daemon maps ordinal k to the
   * k-th GPU of the mask. */
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++)
    if (mask & (1u << g)) {
      size_t n = strlen(cvd);
      snprintf(cvd + n, cvd_len - n, "%s%u", n ? "," : "", g);
    }
  *ret_mask = mask;
  return 0;
}

static int find_hook(char *buf, size_t len) {
  const char *env = secure_getenv("GSLICE_HOOK");
  char dir[PATH_MAX], path[PATH_MAX + 32];

  if (env && *env) {
    snprintf(path, sizeof(path), "%s", env);
  } else {
    if (cli_self_dir(dir, sizeof(dir)) < 0)
      return -ENOENT;
    snprintf(path, sizeof(path), "%s/../lib/libgslice.so", dir);
  }
  if (!realpath(path, buf) || access(buf, R_OK) < 0)
    return -ENOENT;
  (void)len;
  return 0;
}

static void set_env(const char *name, const char *value) {
  if (setenv(name, value, 1) < 0)
    fprintf(stderr, "gslice: cannot set %s\n", name);
}

static void unregister(int fd, uint32_t id, uint64_t nonce) {
  char err[GS_PROTO_TEXT_MAX] = "";
  int r = fd >= 0 ? gs_client_unregister(fd, id, nonce, err, sizeof(err)) : -ENOTCONN;

  if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) {
    /* The daemon restarted meanwhile: a fresh connection; if none answers,
     * the next daemon drops the slice once it sees this runner gone. */
    int nfd;
    if (fd >= 0)
      close(fd);
    fd = -1;
    if (gs_client_connect(gs_client_socket_path(), &nfd) == 0) {
      fd = nfd;
      if (gs_client_hello(fd, GS_ROLE_RUNNER, 0, NULL) == 0)
        r = gs_client_unregister(fd, id, nonce, err, sizeof(err));
    }
  }
  if (r < 0 && r != -ENOENT && r != -ECONNREFUSED && r != -EPIPE && r != -ECONNRESET &&
      r != -ENOTCONN)
    fprintf(stderr, "gslice: cannot remove slice %u: %s\n", id, *err ? err : strerror(-r));
  if (fd >= 0)
    close(fd);
}

int cmd_run(int argc, char **argv) {
  static const struct option opts[] = {{"gpu", required_argument, NULL, 'g'},
                                       {"memory", required_argument, NULL, 'm'},
                                       {"compute", required_argument, NULL, 'c'},
                                       {"compute-limit", required_argument, NULL, 'l'},
                                       {"priority", required_argument, NULL, 'p'},
                                       {"weight", required_argument, NULL, 'w'},
                                       {"name", required_argument, NULL, 'n'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  struct gs_slice_spec spec = {.compute_limit = 100, .weight = 1};
  char cvd[128] = "", hook[PATH_MAX], why[GS_PROTO_TEXT_MAX], num[32];
  struct gs_msg_registered reg;
  int o, fd, r, status = 0, have_status = 0;

  optind = 1;
  while ((o = getopt_long(argc, argv, "+g:m:c:l:p:w:n:h", opts, NULL)) != -1) {
    switch (o) {
    case 'g':
      if (parse_gpus(optarg, &spec.gpu_mask, cvd, sizeof(cvd)) < 0) {
        fprintf(stderr, "gslice: --gpu wants indexes like 0 or 0,1 (below %d)\n", GS_MAX_GPUS);
        return 2;
      }
      break;
    case 'm':
      if (gs_size_parse(optarg, &spec.memory_cap) < 0 || spec.memory_cap == 0) {
        fprintf(
            stderr,
            "gslice: --memory wants a size like 4GiB, 512MiB or bytes (at most " GS_SIZE_MAX_TEXT
            ")\n");
        return 2;
      }
      break;
    case 'c':
    case 'l':
      if (parse_pct(optarg, o == 'c' ? &spec.compute_request : &spec.compute_limit) < 0) {
        fprintf(stderr, "gslice: --%s wants a percent 0..100\n",
                o == 'c' ? "compute" : "compute-limit");
        return 2;
      }
      break;
    case 'p':
      if (!strcmp(optarg, "high"))
        spec.priority = GS_PRIORITY_HIGH;
      else if (!strcmp(optarg, "normal"))
        spec.priority = GS_PRIORITY_NORMAL;
      else if (!strcmp(optarg, "low"))
        spec.priority = GS_PRIORITY_LOW;
      else {
        fprintf(stderr, "gslice: --priority is high, normal or low\n");
        return 2;
      }
      break;
    case 'w': {
      char *end;
      unsigned long v = strtoul(optarg, &end, 10);
      if (optarg[0] < '0' || optarg[0] > '9' || *end || end == optarg || v < 1 || v > 1000) {
        fprintf(stderr, "gslice: --weight wants 1..1000\n");
        return 2;
      }
      spec.weight = (uint32_t)v;
      break;
    }
    case 'n':
      if (strlen(optarg) >= sizeof(spec.name)) {
        fprintf(stderr, "gslice: --name is at most %zu characters\n", sizeof(spec.name) - 1);
        return 2;
      }
      snprintf(spec.name, sizeof(spec.name), "%s", optarg);
      break;
    case 'h': run_usage(stdout); return 0;
    default: run_usage(stderr); return 2;
    }
  }
  if (optind >= argc) {
    run_usage(stderr);
    return 2;
  }
  if (gs_slice_spec_check(&spec, why, sizeof(why)) < 0) {
    fprintf(stderr, "gslice: %s\n", why);
    return 2;
  }
  if (find_hook(hook, sizeof(hook)) < 0) {
    fprintf(stderr, "gslice: cannot find libgslice.so next to gslice (../lib); set GSLICE_HOOK\n");
    return 1;
  }
  if (cli_connect(GS_ROLE_RUNNER, 1, &fd) < 0)
    return 1;
  r = gs_client_register(fd, &spec, &reg, why, sizeof(why));
  if (r < 0) {
    fprintf(stderr, "gslice: the daemon refused the slice: %s\n",
            r == -EPROTO ? "protocol error" : why);
    close(fd);
    return 1;
  }

  /* Orphans of the command are reparented to us, so "the command and its
   * children are gone" is waitpid() saying ECHILD. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const char *pre = secure_getenv("LD_PRELOAD");
  char *ld = malloc(strlen(hook) + (pre ? strlen(pre) : 0) + 3);
  if (!ld) {
    unregister(fd, reg.slice_id, reg.slice_nonce);
    return 1;
  }
  /* The hook goes first, except behind a sanitizer runtime, which must
   * stay the first library loaded. */
  size_t keep = 0;
  if (pre) {
    size_t first = strcspn(pre, ": ");
    const char *base = memrchr(pre, '/', first);
    base = base ? base + 1 : pre;
    if (!strncmp(base, "libasan", 7) || !strncmp(base, "libclang_rt.asan", 16))
      keep = first;
  }
  if (keep)
    sprintf(ld, "%.*s:%s%s%s", (int)keep, pre, hook, pre[keep] ? ":" : "",
            pre[keep] ? pre + keep + 1 : "");
  else
    sprintf(ld, "%s%s%s", hook, pre && *pre ? ":" : "", pre && *pre ? pre : "");
  set_env("LD_PRELOAD", ld);
  free(ld);
  set_env("GSLICE_STATE_DIR", reg.state_dir);
  snprintf(num, sizeof(num), "%" PRIu32, reg.slice_id);
  set_env("GSLICE_SLICE", num);
  snprintf(num, sizeof(num), "%016" PRIx64, reg.slice_nonce);
  set_env("GSLICE_SLICE_NONCE", num);
  char sock[PATH_MAX];
  if (!realpath(gs_client_socket_path(), sock))
    snprintf(sock, sizeof(sock), "%s", gs_client_socket_path());
  set_env("GSLICE_SOCKET", sock);
  if (spec.memory_cap) {
    snprintf(num, sizeof(num), "%" PRIu64, spec.memory_cap);
    set_env("GSLICE_MEMORY_LIMIT", num);
  }
  if (cvd[0])
    set_env("CUDA_VISIBLE_DEVICES", cvd);
  /* The hook paces itself at the limit while the daemon is away. */
  snprintf(num, sizeof(num), "%" PRIu32, spec.compute_limit);
  set_env("GSLICE_COMPUTE_LIMIT", num);

  sigset_t block, old;
  sigemptyset(&block);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
    sigaddset(&block, sigs[i]);
  sigprocmask(SIG_BLOCK, &block, &old);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "gslice: fork: %s\n", strerror(errno));
    unregister(fd, reg.slice_id, reg.slice_nonce);
    return 1;
  }
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    execvp(argv[optind], argv + optind);
    fprintf(stderr, "gslice: cannot run %s: %s\n", argv[optind], strerror(errno));
    _exit(127);
  }
  run_child = pid;
  struct sigaction sa = {.sa_handler = forward};
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
    sigaction(sigs[i], &sa, NULL);
  sigprocmask(SIG_SETMASK, &old, NULL);

  for (;;) {
    int st;
    pid_t w = waitpid(-1, &st, 0);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      break; /* ECHILD: the command and everything it left behind are gone */
    }
    if (w == pid) {
      status = st;
      have_status = 1;
      run_child = 0;
    }
  }
  unregister(fd, reg.slice_id, reg.slice_nonce);
  if (!have_status)
    return 1;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}
