/* SPDX-License-Identifier: Apache-2.0 */
/* `gslice status [--json]`: one snapshot of every GPU and slice, as a table or as JSON. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "render.h"
#include "ui.h"

static void usage(FILE *f) {
  fprintf(f, "usage: gslice status [--json]\n"
             "  Every GPU (busy, memory) and every slice on it: processes, memory used/cap,\n"
             "  compute request/limit/priority, achieved share, time spent waiting for a token.\n"
             "  --json   machine-readable, stable (schema: docs/cli.md)\n");
}

int cmd_status(int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
  int json = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+jh", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = 1; break;
    case 'h': usage(stdout); return 0;
    default:
      fprintf(stderr, "gslice status: unknown option '%s'\n", argv[optind - 1]);
      usage(stderr);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr,
            "gslice status: unexpected argument '%s' (status takes no slice; "
            "use --json and filter, e.g. with jq)\n",
            argv[optind]);
    return 2;
  }

  struct gs_status st;
  char err[512];
  if (gs_ui_fetch_status(&st, err, sizeof(err)) < 0) {
    fprintf(stderr, "gslice status: %s\n", err);
    return 1;
  }
  int r = json ? gs_render_json(&st, stdout) : gs_render_table(&st, NULL, stdout);
  gs_status_free(&st);
  if (r < 0 || fflush(stdout) != 0) {
    fprintf(stderr, "gslice status: cannot write the output: %s\n", strerror(errno ? errno : EIO));
    return 1;
  }
  return 0;
}
