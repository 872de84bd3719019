/* SPDX-License-Identifier: Apache-2.0 */
/* The gslice CLI: its subcommands (one file each) and the helpers they share. */
#pragma once
#include <stddef.h>

struct cli_command {
  const char *name;
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
  const char *summary;
};

/* Subcommands, one file each. */
int cmd_run(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_set(int argc, char **argv);

/* Connects to the daemon at gs_client_socket_path() and says hello (role
 * CLI or RUNNER). With autostart, starts gsliced in the background when no
 * daemon answers, and says so once on stderr. Returns 0 and the fd, or
 * -errno after printing why. */
int cli_connect(unsigned role, int autostart, int *ret_fd);

/* The directory holding this gslice binary (for gsliced and ../lib/libgslice.so). */
int cli_self_dir(char *buf, size_t len);
