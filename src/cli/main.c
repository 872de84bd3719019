/* SPDX-License-Identifier: Apache-2.0 */
/* gslice: the CLI's entry point: a table of subcommands and the connection helper they share. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"

static const struct cli_command commands[] = {
    {"run", cmd_run, "run a command in a new slice (memory cap, compute share)"},
    {"status", cmd_status, "show GPUs and slices"},
    {"top", cmd_top, "watch GPUs and slices live"},
    {"set", cmd_set, "change a live slice"},
    {"daemon", cmd_daemon, "run gsliced (the node daemon) with the arguments given"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: gslice COMMAND [ARG...]\n\n");
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    if (commands[i].run)
      fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\nThe daemon's socket: GSLICE_SOCKET (default %s).\n", GS_DEFAULT_SOCKET);
}

int cli_self_dir(char *buf, size_t len) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

  if (n <= 0)
    return -errno;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash)
    return -ENOENT;
  *slash = 0;
  if ((size_t)snprintf(buf, len, "%s", exe) >= len)
    return -ENAMETOOLONG;
  return 0;
}

static int start_daemon(const char *socket_path) {
  char dir[PATH_MAX], exe[PATH_MAX + 16];
  const char *state = secure_getenv("GSLICE_DAEMON_STATE_DIR");
  pid_t pid;
  int status;

  if (cli_self_dir(dir, sizeof(dir)) < 0)
    return -ENOENT;
  snprintf(exe, sizeof(exe), "%s/gsliced", dir);
  pid = fork();
  if (pid < 0)
    return -errno;
  if (pid == 0) {
    if (state && *state)
      execl(exe, "gsliced", "--socket", socket_path, "--state-dir", state, (char *)NULL);
    else
      execl(exe, "gsliced", "--socket", socket_path, (char *)NULL);
    _exit(127);
  }
  /* gsliced returns once its socket answers (it goes to the background). */
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return -EIO;
  return 0;
}

int cli_connect(unsigned role, int autostart, int *ret_fd) {
  const char *path = gs_client_socket_path();
  int fd = -1, r;

  r = gs_client_connect(path, &fd);
  if (r < 0 && autostart && (r == -ENOENT || r == -ECONNREFUSED)) {
    r = start_daemon(path);
    if (r < 0) {
      fprintf(stderr,
              "gslice: no daemon answers on %s and starting gsliced failed "
              "(see its log in its state dir); start it with: gslice daemon\n",
              path);
      return r;
    }
    fprintf(stderr,
            "gslice: no daemon answered on %s; started gsliced in the background "
            "(its log: gsliced.log in its state dir)\n",
            path);
    r = gs_client_connect(path, &fd);
  }
  if (r < 0) {
    fprintf(stderr, "gslice: cannot reach the daemon on %s: %s\n", path, strerror(-r));
    return r;
  }
  char why[256] = "";
  r = gs_client_hello_err(fd, role, 0, NULL, why, sizeof(why));
  if (r < 0) {
    if (why[0])
      fprintf(stderr, "gslice: the daemon on %s refused us: %s\n", path, why);
    else if (r == -ETIMEDOUT)
      fprintf(stderr,
              "gslice: gsliced at %s did not answer within %d s; is it stopped (SIGSTOP) or "
              "hung? (kill -CONT it, or restart it)\n",
              path, GS_CLIENT_HELLO_TIMEOUT_MS / 1000);
    else
      fprintf(stderr, "gslice: the daemon on %s did not answer hello: %s\n", path, strerror(-r));
    close(fd);
    return r;
  }
  *ret_fd = fd;
  return 0;
}

int cmd_daemon(int argc, char **argv) {
  char dir[PATH_MAX], exe[PATH_MAX + 16];

  if (cli_self_dir(dir, sizeof(dir)) < 0) {
    fprintf(stderr, "gslice: cannot find my own directory\n");
    return 1;
  }
  snprintf(exe, sizeof(exe), "%s/gsliced", dir);
  argv[0] = "gsliced";
  (void)argc;
  execv(exe, argv);
  fprintf(stderr, "gslice: cannot run %s: %s\n", exe, strerror(errno));
  return 127;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
      !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
    if (strcmp(argv[1], commands[i].name) != 0)
      continue;
    return commands[i].run(argc - 1, argv + 1);
  }
  fprintf(stderr, "gslice: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
