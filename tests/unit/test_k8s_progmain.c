/* SPDX-License-Identifier: Apache-2.0 */
/* The start of main() gslice-extender and gslice-webhook share: each flag to the program's
 * callback, --help, refusals said with the program's name and exit status 2, the signals. */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "progmain.h"
#include "test.h"

struct seen {
  char flags[8];
  const char *values[8];
  int n;
  int refuse_at; /* the nth flag (from 1) answers 3, as a refused value would */
};

static int helped;

static void help(void) {
  helped++;
}

static int flag(void *ctx, int opt, char *arg) {
  struct seen *s = ctx;
  if (s->n < 8) {
    s->flags[s->n] = (char)opt;
    s->values[s->n] = arg;
  }
  s->n++;
  return s->n == s->refuse_at ? 3 : 0;
}

static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                     {"insecure", no_argument, NULL, 'I'},
                                     {"help", no_argument, NULL, 'h'},
                                     {NULL, 0, NULL, 0}};

/* stderr into a file from capture() until captured(), which reads it into err. */
static FILE *cap;
static int cap_saved;

static void capture(void) {
  fflush(stderr);
  cap = tmpfile();
  cap_saved = dup(2);
  dup2(fileno(cap), 2);
}

static void captured(char *err, size_t errlen) {
  fflush(stderr);
  dup2(cap_saved, 2);
  close(cap_saved);
  rewind(cap);
  size_t n = fread(err, 1, errlen - 1, cap);
  err[n] = 0;
  fclose(cap);
}

/* Runs k8s_prog_parse over the NULL-ended words after "prog", stderr into err. */
static int parse(struct seen *s, char *err, size_t errlen, ...) {
  char *argv[16] = {"prog"};
  int argc = 1;
  va_list ap;
  va_start(ap, errlen);
  for (char *w; argc < 15 && (w = va_arg(ap, char *));)
    argv[argc++] = w;
  va_end(ap);
  capture();
  optind = 0; /* getopt_long starts over (glibc) */
  int rc = k8s_prog_parse("gslice-test", argc, argv, opts, help, flag, s);
  captured(err, errlen);
  return rc;
}

int main(void) {
  char err[512];
  struct seen s = {0};

  CHECK_EQ_INT(parse(&s, err, sizeof err, "--listen", "8765", "--insecure", "--listen=0", NULL),
               -1);
  CHECK_EQ_INT(s.n, 3);
  CHECK(s.flags[0] == 'l' && !strcmp(s.values[0], "8765"));
  CHECK(s.flags[1] == 'I' && s.values[1] == NULL);
  CHECK(s.flags[2] == 'l' && !strcmp(s.values[2], "0"));
  CHECK_STR(err, "");

  s = (struct seen){0};
  CHECK_EQ_INT(parse(&s, err, sizeof err, "--listen", "1", "--help", "--bogus", NULL), 0);
  CHECK_EQ_INT(helped, 1);
  CHECK_EQ_INT(s.n, 1);

  s = (struct seen){0};
  CHECK_EQ_INT(parse(&s, err, sizeof err, "--bogus", NULL), 2);
  CHECK_STR(err, "gslice-test: unknown option \"--bogus\"\n(gslice-test --help shows the usage)\n");
  CHECK_EQ_INT(parse(&s, err, sizeof err, "--listen", NULL), 2);
  CHECK_STR(err, "gslice-test: --listen needs a value\n(gslice-test --help shows the usage)\n");
  CHECK_EQ_INT(parse(&s, err, sizeof err, "--insecure", "stray", NULL), 2);
  CHECK_STR(err, "gslice-test: unexpected argument \"stray\"\n"
                 "(gslice-test --help shows the usage)\n");

  /* The callback's refusal is the exit status, and nothing after it is read. */
  s = (struct seen){.refuse_at = 1};
  CHECK_EQ_INT(parse(&s, err, sizeof err, "--listen", "x", "--insecure", NULL), 3);
  CHECK_EQ_INT(s.n, 1);

  capture();
  CHECK_EQ_INT(k8s_prog_bad("gslice-x", "--policy \"%s\": use binpack or spread", "pack"), 2);
  captured(err, sizeof err);
  CHECK_STR(err, "gslice-x: --policy \"pack\": use binpack or spread\n"
                 "(gslice-x --help shows the usage)\n");

  sigset_t sigs, now;
  k8s_prog_signals(&sigs);
  CHECK(sigismember(&sigs, SIGINT) == 1 && sigismember(&sigs, SIGTERM) == 1);
  CHECK(pthread_sigmask(SIG_BLOCK, NULL, &now) == 0);
  CHECK(sigismember(&now, SIGINT) == 1 && sigismember(&now, SIGTERM) == 1);
  struct sigaction pipe_act;
  CHECK(sigaction(SIGPIPE, NULL, &pipe_act) == 0 && pipe_act.sa_handler == SIG_IGN);
  return test_done();
}
