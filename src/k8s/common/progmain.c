/* SPDX-License-Identifier: Apache-2.0 */
/* The start of main() both Kubernetes servers share (progmain.h). */
#include "progmain.h"

#include <pthread.h>
#include <stdio.h>

int k8s_prog_bad(const char *prog, const char *fmt, const char *what) {
  fprintf(stderr, "%s: ", prog);
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\n(%s --help shows the usage)\n", prog);
  return 2;
}

int k8s_prog_parse(const char *prog, int argc, char **argv, const struct option *opts,
                   void (*help)(void), int (*flag)(void *ctx, int opt, char *arg), void *ctx) {
  int opt, rc;

  opterr = 0;
  while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (opt == 'h') {
      help();
      return 0;
    }
    if (opt == ':')
      return k8s_prog_bad(prog, "%s needs a value", argv[optind - 1]);
    if (opt == '?')
      return k8s_prog_bad(prog, "unknown option \"%s\"", argv[optind - 1]);
    if ((rc = flag(ctx, opt, optarg)))
      return rc;
  }
  if (optind < argc)
    return k8s_prog_bad(prog, "unexpected argument \"%s\"", argv[optind]);
  return -1;
}

void k8s_prog_signals(sigset_t *ret_sigs) {
  sigemptyset(ret_sigs);
  sigaddset(ret_sigs, SIGINT);
  sigaddset(ret_sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, ret_sigs, NULL);
  signal(SIGPIPE, SIG_IGN);
}
