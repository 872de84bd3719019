/* SPDX-License-Identifier: Apache-2.0 */
/* The slice flags of `gslice run` and `gslice set`: one table holds each flag's name, argument,
 * parse (words.h, size.h), what it wants and its help line, so a flag parses, complains and
 * reads the same in both commands. */
#pragma once
#include <stdio.h>

#include "proto.h"

enum cli_flags_cmd {
  CLI_RUN = 1u << 0,
  CLI_SET = 1u << 1,
};

struct cli_slice_flags {
  /* spec, fields (GS_SET_* of the flags given) and force; slice_id is left 0 */
  struct gs_msg_set set;
  /* --gpu's indices in index order ("0,2"): CUDA_VISIBLE_DEVICES where the daemon knows no
   * UUID of them (run.c); "" without --gpu */
  char cvd[128];
};

/* Parses the flags of cmd (CLI_RUN or CLI_SET) in argv into *ret, which it first sets to the
 * command's defaults. CLI_RUN stops at the first operand (what follows is the command's own);
 * CLI_SET takes flags before or after its operand. Returns 0 with optind at the first operand,
 * 1 after printing the usage on stdout (--help), or 2 (the exit status) after saying on stderr
 * what was wrong and what the flag wants. */
int cli_flags_parse(unsigned cmd, int argc, char **argv, struct cli_slice_flags *ret);

/* The usage of cmd: its synopsis, what it does, and one help line per flag. */
void cli_flags_usage(unsigned cmd, FILE *out);
