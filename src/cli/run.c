/* SPDX-License-Identifier: Apache-2.0 */
/* gslice run: register a slice, run the command in it with the hook preloaded, forward signals,
 * remove the slice when all is gone. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "client.h"
#include "flags.h"
#include "uuid.h"

/* The child's pid, for the signal handlers: the one global the handlers need. */
static volatile pid_t run_child;

static void forward(int sig) {
  if (run_child > 0)
    kill(run_child, sig);
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

/* LD_PRELOAD with the hook first, except behind a sanitizer runtime, which must stay the first
 * library loaded. */
static int preload_hook(const char *hook) {
  const char *pre = secure_getenv("LD_PRELOAD");
  char *ld = malloc(strlen(hook) + (pre ? strlen(pre) : 0) + 3);
  size_t keep = 0;

  if (!ld)
    return -ENOMEM;
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
  return 0;
}

/* What the hook in the command reads: its slice, the daemon, and the limit it paces itself at
 * while the daemon is away. */
static void slice_env(const struct cli_slice_flags *f, const struct gs_msg_registered *reg) {
  char num[32], sock[PATH_MAX];

  set_env("GSLICE_STATE_DIR", reg->state_dir);
  snprintf(num, sizeof(num), "%" PRIu32, reg->slice_id);
  set_env("GSLICE_SLICE", num);
  snprintf(num, sizeof(num), "%016" PRIx64, reg->slice_nonce);
  set_env("GSLICE_SLICE_NONCE", num);
  if (!realpath(gs_client_socket_path(), sock))
    snprintf(sock, sizeof(sock), "%s", gs_client_socket_path());
  set_env("GSLICE_SOCKET", sock);
  if (f->set.spec.memory_cap) {
    snprintf(num, sizeof(num), "%" PRIu64, f->set.spec.memory_cap);
    set_env("GSLICE_MEMORY_LIMIT", num);
  }
  snprintf(num, sizeof(num), "%" PRIu32, f->set.spec.compute_limit);
  set_env("GSLICE_COMPUTE_LIMIT", num);
}

/* The slice's GPUs (mask) in index order as CUDA_VISIBLE_DEVICES names them by UUID, "GPU-...,"
 * from the daemon's STATUS into *b. 0; -ENODATA with *ret_gpu the first GPU the daemon gave no
 * UUID for (NVML without it, or no NVML); another -errno when STATUS failed. */
static int slice_uuids(int fd, uint32_t mask, struct gs_buf *b, uint32_t *ret_gpu) {
  struct gs_status st;
  int r = gs_client_status(fd, &st);

  if (r < 0)
    return r;
  for (uint32_t g = 0; g < GS_MAX_GPUS && r == 0; g++) {
    char text[GS_UUID_MAX + 1], canon[GS_UUID_STR_LEN];
    uint8_t u[GS_UUID_LEN];
    if (!(mask & (1u << g)))
      continue;
    snprintf(text, sizeof(text), "%.*s", (int)GS_UUID_MAX, g < st.ngpus ? st.gpus[g].uuid : "");
    if (g >= st.ngpus || st.gpus[g].index != g || gs_uuid_parse(text, u) < 0) {
      *ret_gpu = g;
      r = -ENODATA;
      break;
    }
    /* The canonical text, as NVML prints it: what the hook matches without CUDA. */
    gs_uuid_format(u, canon);
    r = gs_buf_printf(b, "%s%s", b->len ? "," : "", canon);
  }
  gs_status_free(&st);
  return r;
}

/* CUDA_VISIBLE_DEVICES: the slice's GPUs by UUID, which CUDA and the hook's NVML read the same
 * whatever CUDA_DEVICE_ORDER says (a daemon index read in CUDA's default order, FASTEST_FIRST,
 * can be another GPU on a mixed node). Where the daemon has no UUID, their indices, with
 * CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA numbers them as NVML does, said once. Without --gpu a
 * CUDA_VISIBLE_DEVICES of the user's is theirs and kept; with it, the slice's GPUs win.
 * GSLICE_GPUS: the same UUIDs, for the hook, which refuses a CUDA device that is not the slice's
 * (the command may change CUDA_VISIBLE_DEVICES for the programs it starts); unset where there
 * are none (an outer gslice run's would name another slice's GPUs). */
static void visible_env(int fd, const struct cli_slice_flags *f) {
  uint32_t mask = f->set.spec.gpu_mask ? f->set.spec.gpu_mask : 1u, gpu = 0;
  struct gs_buf b = GS_BUF_INIT(4096);
  const char *index = f->cvd[0] ? f->cvd : "0";

  unsetenv("GSLICE_GPUS");
  if (!f->cvd[0] && secure_getenv("CUDA_VISIBLE_DEVICES"))
    return;
  int r = slice_uuids(fd, mask, &b, &gpu);
  if (r == 0) {
    set_env("CUDA_VISIBLE_DEVICES", b.p);
    set_env("GSLICE_GPUS", b.p);
  } else {
    if (r == -ENODATA)
      fprintf(stderr, "gslice: the daemon knows no UUID of GPU %u (gsliced without NVML?): ", gpu);
    else
      fprintf(stderr, "gslice: cannot ask the daemon for its GPUs' UUIDs (%s): ", strerror(-r));
    fprintf(stderr,
            "CUDA_VISIBLE_DEVICES=%s names the slice's GPUs by index, with "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA numbers them as NVML does\n",
            index);
    set_env("CUDA_VISIBLE_DEVICES", index);
    set_env("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  }
  gs_buf_free(&b);
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define NFORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))

/* Starts argv, the forwarded signals passed on to it; returns its pid or -errno. */
static pid_t start_command(char **argv) {
  sigset_t block, old;

  sigemptyset(&block);
  for (size_t i = 0; i < NFORWARDED; i++)
    sigaddset(&block, forwarded[i]);
  sigprocmask(SIG_BLOCK, &block, &old);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    return -e;
  }
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    execvp(argv[0], argv);
    fprintf(stderr, "gslice: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  run_child = pid;
  struct sigaction sa = {.sa_handler = forward};
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < NFORWARDED; i++)
    sigaction(forwarded[i], &sa, NULL);
  sigprocmask(SIG_SETMASK, &old, NULL);
  return pid;
}

/* Waits until the command and everything it left behind are gone (orphans are reparented to us,
 * the subreaper, so that is waitpid's ECHILD); returns the command's status as a shell does. */
static int wait_all(pid_t pid) {
  int status = 0, have_status = 0;

  for (;;) {
    int st;
    pid_t w = waitpid(-1, &st, 0);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (w == pid) {
      status = st;
      have_status = 1;
      run_child = 0;
    }
  }
  if (!have_status)
    return 1;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

int cmd_run(int argc, char **argv) {
  struct cli_slice_flags f;
  char hook[PATH_MAX], why[GS_PROTO_TEXT_MAX];
  struct gs_msg_registered reg;
  int fd, r;

  r = cli_flags_parse(CLI_RUN, argc, argv, &f);
  if (r)
    return r == 1 ? 0 : r;
  if (optind >= argc) {
    cli_flags_usage(CLI_RUN, stderr);
    return 2;
  }
  if (gs_slice_spec_check(&f.set.spec, why, sizeof(why)) < 0) {
    fprintf(stderr, "gslice: %s\n", why);
    return 2;
  }
  if (find_hook(hook, sizeof(hook)) < 0) {
    fprintf(stderr, "gslice: cannot find libgslice.so next to gslice (../lib); set GSLICE_HOOK\n");
    return 1;
  }
  if (cli_connect(GS_ROLE_RUNNER, 1, &fd) < 0)
    return 1;
  r = gs_client_register(fd, &f.set.spec, &reg, why, sizeof(why));
  if (r < 0) {
    fprintf(stderr, "gslice: the daemon refused the slice: %s\n",
            r == -EPROTO ? "protocol error" : why);
    close(fd);
    return 1;
  }

  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (preload_hook(hook) < 0) {
    unregister(fd, reg.slice_id, reg.slice_nonce);
    return 1;
  }
  slice_env(&f, &reg);
  visible_env(fd, &f);
  pid_t pid = start_command(argv + optind);
  if (pid < 0) {
    fprintf(stderr, "gslice: fork: %s\n", strerror((int)-pid));
    unregister(fd, reg.slice_id, reg.slice_nonce);
    return 1;
  }
  int status = wait_all(pid);
  unregister(fd, reg.slice_id, reg.slice_nonce);
  return status;
}
