/* SPDX-License-Identifier: Apache-2.0 */
/* Unit test of the flag table `gslice run` and `gslice set` share (src/cli/flags.c): one value
 * parses the same in both, a bad one is refused by both with what the flag wants, run's flags
 * end at the command, set's go before or after the slice. */
#include "test.h"

#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

#include "flags.h"

static char said[1024];

/* cli_flags_parse over the words of line (split at blanks), stderr kept in said. */
static int parse(unsigned cmd, const char *line, struct cli_slice_flags *f) {
  char buf[512], *argv[32], *save = NULL;
  int argc = 0;

  snprintf(buf, sizeof(buf), "%s", line);
  for (char *w = strtok_r(buf, " ", &save); w && argc < 31; w = strtok_r(NULL, " ", &save))
    argv[argc++] = w;
  argv[argc] = NULL;
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  int r = cli_flags_parse(cmd, argc, argv, f);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  rewind(tmp);
  size_t n = fread(said, 1, sizeof(said) - 1, tmp);
  said[n] = 0;
  fclose(tmp);
  return r;
}

static void test_same_in_both(void) {
  static const char *const good[] = {"--compute 60",        "--compute 60%",  "--compute 0",
                                     "--compute-limit 1",   "--weight 1000",  "--weight 1",
                                     "--priority low",      "--memory 4GiB",  "--memory none",
                                     "-c 30 -l 30 -p high", "--memory=512MiB"};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    struct cli_slice_flags r, s;
    char line[128];
    snprintf(line, sizeof(line), "run %s -- true", good[i]);
    CHECK_EQ_INT(parse(CLI_RUN, line, &r), 0);
    snprintf(line, sizeof(line), "set x %s", good[i]);
    CHECK_EQ_INT(parse(CLI_SET, line, &s), 0);
    CHECK_EQ_U64(r.set.fields, s.set.fields);
    CHECK_EQ_U64(r.set.spec.memory_cap, s.set.spec.memory_cap);
    CHECK_EQ_U64(r.set.spec.compute_request, s.set.spec.compute_request);
    if (s.set.fields & GS_SET_LIMIT)
      CHECK_EQ_U64(r.set.spec.compute_limit, s.set.spec.compute_limit);
    if (s.set.fields & GS_SET_PRIORITY)
      CHECK_EQ_INT(r.set.spec.priority, s.set.spec.priority);
    if (s.set.fields & GS_SET_WEIGHT)
      CHECK_EQ_U64(r.set.spec.weight, s.set.spec.weight);
  }

  /* Refused by both, each saying what the flag wants. */
  static const char *const bad[][2] = {
      {"--compute 101", "give a percent 0-100"},
      {"--compute +60", "give a percent 0-100"},
      {"--compute 6O", "give a percent 0-100"},
      {"--compute-limit 0", "give a percent 1-100"},
      {"--weight 0", "give a whole number 1-1000"},
      {"--weight 1001", "give a whole number 1-1000"},
      {"--priority urgent", "give high, normal or low"},
      {"--memory 12XB", "give a size like 2GiB"},
      {"--memory 0", "give a size like 2GiB"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct cli_slice_flags f;
    char line[128];
    snprintf(line, sizeof(line), "run %s -- true", bad[i][0]);
    CHECK_EQ_INT(parse(CLI_RUN, line, &f), 2);
    CHECK(strstr(said, "gslice run: bad --") && strstr(said, bad[i][1]));
    snprintf(line, sizeof(line), "set x %s", bad[i][0]);
    CHECK_EQ_INT(parse(CLI_SET, line, &f), 2);
    CHECK(strstr(said, "gslice set: bad --") && strstr(said, bad[i][1]));
  }
}

static void test_each_command(void) {
  struct cli_slice_flags f;

  /* run: defaults, its own flags, and the command's flags left alone. */
  CHECK_EQ_INT(parse(CLI_RUN, "run --gpu 2,0 --name job -- cmd --compute 5", &f), 0);
  CHECK_EQ_U64(f.set.spec.gpu_mask, 5);
  CHECK_STR(f.cvd, "0,2");
  CHECK_STR(f.set.spec.name, "job");
  CHECK_EQ_U64(f.set.spec.compute_limit, GS_PERCENT_MAX);
  CHECK_EQ_U64(f.set.spec.weight, GS_WEIGHT_MIN);
  CHECK_EQ_U64(f.set.spec.compute_request, 0);
  CHECK_EQ_INT(optind, 6); /* at cmd: "--" and what follows are not run's */
  CHECK_EQ_INT(parse(CLI_RUN, "run --gpu 16 -- true", &f), 2);
  CHECK(strstr(said, "below 16") != NULL);
  CHECK_EQ_INT(parse(CLI_RUN, "run --force -- true", &f), 2);
  CHECK(strstr(said, "unknown option '--force'") != NULL);
  CHECK_EQ_INT(parse(CLI_RUN, "run --memory", &f), 2);
  CHECK(strstr(said, "option '--memory' needs a value") != NULL);

  /* set: flags on both sides of the slice; --gpu and --name are run's. */
  CHECK_EQ_INT(parse(CLI_SET, "set --weight 5 x --force", &f), 0);
  CHECK_EQ_U64(f.set.spec.weight, 5);
  CHECK_EQ_INT(f.set.force, 1);
  CHECK_EQ_U64(f.set.fields, GS_SET_WEIGHT);
  CHECK_EQ_INT(optind, 4); /* the slice, moved after the flags */
  CHECK_EQ_INT(parse(CLI_SET, "set x --gpu 0", &f), 2);
  CHECK_EQ_INT(parse(CLI_SET, "set x --name y", &f), 2);
}

int main(void) {
  test_same_in_both();
  test_each_command();
  return test_done();
}
