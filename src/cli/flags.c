/* SPDX-License-Identifier: Apache-2.0 */
/* The flag table of `gslice run` and `gslice set` (flags.h). */
#include "flags.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "size.h"
#include "words.h"

struct cli_flag {
  const char *name;
  char letter;     /* short option, 0: none */
  const char *arg; /* the argument as usage shows it; NULL: the flag takes none */
  unsigned cmds;   /* CLI_RUN, CLI_SET */
  /* Bounds the parse checks and wants prints (a printf format taking lo and hi). */
  uint32_t lo, hi;
  int (*parse)(const struct cli_flag *fl, const char *text, struct cli_slice_flags *f);
  const char *wants;
  const char *help; /* a printf format like wants; '\n' goes on under the first line */
};

static int parse_gpus(const struct cli_flag *fl, const char *text, struct cli_slice_flags *f) {
  uint32_t mask = 0;
  char buf[128], *save = NULL;

  if (strlen(text) >= sizeof(buf))
    return -EINVAL;
  snprintf(buf, sizeof(buf), "%s", text);
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    uint64_t v;
    if (gs_uint_parse(t, 0, GS_MAX_GPUS - 1, &v) < 0)
      return -EINVAL;
    mask |= 1u << v;
  }
  if (!mask)
    return -EINVAL;
  /* In index order: the daemon maps CUDA ordinal k to the k-th GPU of the mask. */
  f->cvd[0] = 0;
  for (uint32_t g = 0; g < GS_MAX_GPUS; g++)
    if (mask & (1u << g)) {
      size_t n = strlen(f->cvd);
      snprintf(f->cvd + n, sizeof(f->cvd) - n, "%s%u", n ? "," : "", g);
    }
  f->set.spec.gpu_mask = mask;
  return 0;
}

static int parse_memory(const struct cli_flag *fl, const char *text, struct cli_slice_flags *f) {
  uint64_t bytes = 0;

  if (strcmp(text, "none") != 0 && (gs_size_parse(text, &bytes) < 0 || bytes == 0))
    return -EINVAL;
  f->set.spec.memory_cap = bytes;
  f->set.fields |= GS_SET_MEMORY;
  return 0;
}

static int parse_request(const struct cli_flag *fl, const char *text, struct cli_slice_flags *f) {
  int r = gs_percent_parse(text, fl->lo, fl->hi, &f->set.spec.compute_request);
  if (r == 0)
    f->set.fields |= GS_SET_REQUEST;
  return r;
}

static int parse_limit(const struct cli_flag *fl, const char *text, struct cli_slice_flags *f) {
  int r = gs_percent_parse(text, fl->lo, fl->hi, &f->set.spec.compute_limit);
  if (r == 0)
    f->set.fields |= GS_SET_LIMIT;
  return r;
}

static int parse_priority(const struct cli_flag *fl, const char *text, struct cli_slice_flags *f) {
  int r = gs_priority_parse(text, &f->set.spec.priority);
  if (r == 0)
    f->set.fields |= GS_SET_PRIORITY;
  return r;
}

static int parse_weight(const struct cli_flag *fl, const char *text, struct cli_slice_flags *f) {
  int r = gs_weight_parse(text, &f->set.spec.weight);
  if (r == 0)
    f->set.fields |= GS_SET_WEIGHT;
  return r;
}

static int parse_name(const struct cli_flag *fl, const char *text, struct cli_slice_flags *f) {
  if (strlen(text) > fl->hi || strlen(text) >= sizeof(f->set.spec.name))
    return -EINVAL;
  snprintf(f->set.spec.name, sizeof(f->set.spec.name), "%s", text);
  return 0;
}

static int parse_force(const struct cli_flag *fl, const char *text, struct cli_slice_flags *f) {
  f->set.force = 1;
  return 0;
}

static const struct cli_flag flags[] = {
    {"gpu", 'g', "IDX[,IDX...]", CLI_RUN, GS_MAX_GPUS, 0, parse_gpus,
     "GPU indexes like 0 or 0,1 (below %u)", "the GPUs of the slice (default: GPU 0)"},
    {"memory", 'm', "SIZE", CLI_RUN | CLI_SET, 0, 0, parse_memory,
     "a size like 2GiB, 512MiB or 1073741824 (at most " GS_SIZE_MAX_TEXT
     "), or 'none' to remove the cap",
     "memory cap per GPU (4GiB, 512MiB, bytes); 'none': no cap"},
    {"compute", 'c', "PCT", CLI_RUN | CLI_SET, 0, GS_PERCENT_MAX, parse_request,
     "a percent %u-%u, e.g. 60",
     "guaranteed percent of one GPU's device time, %u-%u\n"
     "(default 0: best effort, uses what others leave)"},
    {"compute-limit", 'l', "PCT", CLI_RUN | CLI_SET, 1, GS_PERCENT_MAX, parse_limit,
     "a percent %u-%u",
     "ceiling in percent, %1$u-%2$u (default %2$u: work-conserving);\n"
     "--compute 30 --compute-limit 30 is a hard 30%%"},
    {"priority", 'p', "PRIORITY", CLI_RUN | CLI_SET, 0, 0, parse_priority, GS_PRIORITY_WORDS,
     GS_PRIORITY_WORDS ": who gets the GPU first\n(default normal)"},
    {"weight", 'w', "N", CLI_RUN | CLI_SET, GS_WEIGHT_MIN, GS_WEIGHT_MAX, parse_weight,
     "a whole number %u-%u", "%1$u-%2$u: share of spare time among equals (default %1$u)"},
    {"name", 'n', "NAME", CLI_RUN, GS_NAME_MAX - 1, GS_NAME_MAX - 1, parse_name,
     "at most %u characters", "the slice's name, for gslice status and gslice set"},
    {"force", 0, NULL, CLI_SET, 0, 0, parse_force, "",
     "accept a memory cap below current use: new allocations\n"
     "fail until usage falls under the cap (nothing is freed)"},
};
#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

static const char *cmd_name(unsigned cmd) {
  return cmd == CLI_RUN ? "run" : "set";
}

static void usage_synopsis(unsigned cmd, FILE *out) {
  char head[32];
  int col = snprintf(head, sizeof(head), "usage: gslice %s%s", cmd_name(cmd),
                     cmd == CLI_SET ? " SLICE" : "");
  const int indent = (int)strlen("usage: gslice run");

  fputs(head, out);
  for (size_t i = 0; i < NFLAGS; i++) {
    const struct cli_flag *fl = &flags[i];
    if (!(fl->cmds & cmd))
      continue;
    char item[64];
    int n = snprintf(item, sizeof(item), " [--%s%s%s]", fl->name, fl->arg ? " " : "",
                     fl->arg ? fl->arg : "");
    if (col + n > 80) {
      col = fprintf(out, "\n%*s", indent, "") - 1;
    }
    fputs(item, out);
    col += n;
  }
  if (cmd == CLI_RUN)
    fputs(col + 16 > 80 ? "\n                   -- CMD [ARG...]\n" : " -- CMD [ARG...]\n", out);
  else
    fputc('\n', out);
}

void cli_flags_usage(unsigned cmd, FILE *out) {
  usage_synopsis(cmd, out);
  if (cmd == CLI_RUN)
    fputs("  Runs CMD in a new slice with the hook preloaded; the slice goes when CMD\n"
          "  and everything it started are gone.\n",
          out);
  else
    fputs("  Changes a running slice (SLICE: its name or id, see gslice status).\n"
          "  Compute changes apply at the slice's next token; every change is persisted.\n"
          "  Raising --memory applies at once; lowering it below what the slice already\n"
          "  uses is refused, unless --force. --compute above the slice's limit raises\n"
          "  the limit to it.\n",
          out);
  for (size_t i = 0; i < NFLAGS; i++) {
    const struct cli_flag *fl = &flags[i];
    if (!(fl->cmds & cmd))
      continue;
    char left[48];
    snprintf(left, sizeof(left), "--%s%s%s", fl->name, fl->arg ? " " : "", fl->arg ? fl->arg : "");
    char help[256];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(help, sizeof(help), fl->help, fl->lo, fl->hi);
#pragma GCC diagnostic pop
    fprintf(out, "  %-20s ", left);
    for (const char *h = help; *h;) {
      size_t n = strcspn(h, "\n");
      fprintf(out, "%.*s\n", (int)n, h);
      h += n;
      if (*h == '\n' && *++h)
        fprintf(out, "  %-20s ", "");
    }
  }
}

static void say_wants(unsigned cmd, const struct cli_flag *fl, const char *text) {
  fprintf(stderr, "gslice %s: bad --%s '%s': give ", cmd_name(cmd), fl->name, text);
  /* The table's own formats, each printing at most lo and hi. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  fprintf(stderr, fl->wants, fl->lo, fl->hi);
#pragma GCC diagnostic pop
  fputc('\n', stderr);
}

static void set_defaults(unsigned cmd, struct cli_slice_flags *f) {
  memset(f, 0, sizeof(*f));
  if (cmd == CLI_RUN) {
    f->set.spec.compute_limit = GS_PERCENT_MAX;
    f->set.spec.weight = GS_WEIGHT_MIN;
    f->set.spec.priority = GS_PRIORITY_NORMAL;
  }
}

int cli_flags_parse(unsigned cmd, int argc, char **argv, struct cli_slice_flags *ret) {
  struct option opts[NFLAGS + 2];
  char shorts[3 * NFLAGS + 8];
  size_t no = 0, ns = 0;

  /* '+': run's flags end at CMD; ':': a missing value is reported here, not by getopt. */
  if (cmd == CLI_RUN)
    shorts[ns++] = '+';
  shorts[ns++] = ':';
  shorts[ns++] = 'h';
  for (size_t i = 0; i < NFLAGS; i++) {
    if (!(flags[i].cmds & cmd))
      continue;
    opts[no++] = (struct option){flags[i].name, flags[i].arg ? required_argument : no_argument,
                                 NULL, 256 + (int)i};
    if (flags[i].letter) {
      shorts[ns++] = flags[i].letter;
      if (flags[i].arg)
        shorts[ns++] = ':';
    }
  }
  shorts[ns] = 0;
  opts[no++] = (struct option){"help", no_argument, NULL, 'h'};
  opts[no] = (struct option){NULL, 0, NULL, 0};

  set_defaults(cmd, ret);
  optind = 0; /* 0, not 1: glibc then reads the '+' (or its absence) of this optstring again */
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
    const struct cli_flag *fl = NULL;
    if (c >= 256)
      fl = &flags[c - 256];
    for (size_t i = 0; !fl && c > 0 && i < NFLAGS; i++)
      if (flags[i].letter == c && (flags[i].cmds & cmd))
        fl = &flags[i];
    if (fl) {
      if (fl->parse(fl, optarg, ret) < 0) {
        say_wants(cmd, fl, optarg);
        return 2;
      }
      continue;
    }
    if (c == 'h') {
      cli_flags_usage(cmd, stdout);
      return 1;
    }
    if (c == ':')
      fprintf(stderr, "gslice %s: option '%s' needs a value\n", cmd_name(cmd), argv[optind - 1]);
    else
      fprintf(stderr, "gslice %s: unknown option '%s'\n", cmd_name(cmd), argv[optind - 1]);
    cli_flags_usage(cmd, stderr);
    return 2;
  }
  return 0;
}
