/* SPDX-License-Identifier: Apache-2.0 */
/* The start of main() that gslice-extender and gslice-webhook share: a refused flag said
 * alike, the getopt_long loop over their option tables, and the signals they wait for. Owns
 * no state. */
#pragma once
#include <getopt.h>
#include <signal.h>

/* Writes "PROG: " fmt (with what) and the --help hint to stderr; returns 2 (the exit status
 * of a usage error). */
int k8s_prog_bad(const char *prog, const char *fmt, const char *what);

/* Runs getopt_long over argv with opts: --help (opts' 'h') calls help; an option missing its
 * value, an unknown one or a leftover argument is refused (k8s_prog_bad); every other one goes
 * to flag(ctx, opt, optarg), which returns 0 or an exit status. -1 when all were taken, else
 * the exit status (0 after --help). */
int k8s_prog_parse(const char *prog, int argc, char **argv, const struct option *opts,
                   void (*help)(void), int (*flag)(void *ctx, int opt, char *arg), void *ctx);

/* SIGINT and SIGTERM blocked (for sigwait on *ret_sigs; threads started after this inherit the
 * mask), SIGPIPE ignored. */
void k8s_prog_signals(sigset_t *ret_sigs);
