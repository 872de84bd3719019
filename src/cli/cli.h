/* The gslice CLI: its subcommands (one file each) and the helpers they share. */
#pragma once
#include <stddef.h>

struct cli_command {
  const char *name;
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
  const char *summary;
};

/* Subcommands. status, top and set live in their own files (status.c, top.c,
 * set.c); until those exist the weak declarations leave them NULL and the
 * dispatcher says so. */
int cmd_run(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_status(int argc, char **argv) __attribute__((weak));
int cmd_top(int argc, char **argv) __attribute__((weak));
int cmd_set(int argc, char **argv) __attribute__((weak));

/* Connects to the daemon at gs_client_socket_path() and says hello (role
 * CLI or RUNNER). With autostart, starts gsliced in the background when no
 * daemon answers, and says so once on stderr. Returns 0 and the fd, or
 * -errno after printing why. */
int cli_connect(unsigned role, int autostart, int *ret_fd);

/* The directory holding this gslice binary (for gsliced and ../lib/libgslice.so). */
int cli_self_dir(char *buf, size_t len);
