/* SPDX-License-Identifier: Apache-2.0 */
/* `gslice top`: the status table, live, redrawn in place on a terminal (ANSI alternate
 * screen, raw keyboard via termios, `q` quits), or printed again and again when stdout
 * is not a terminal. The terminal is always given back as it was: on q, SIGINT, SIGTERM,
 * SIGHUP, while stopped by Ctrl-Z, and on every error path. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "render.h"
#include "ui.h"
#include "words.h"

#define ESC "\033"
#define SCREEN_ENTER ESC "[?1049h" ESC "[?25l" /* alternate screen, cursor hidden */
#define SCREEN_LEAVE ESC "[?25h" ESC "[?1049l"

/* Signal handlers only set flags and poke this pipe, so poll() wakes up at once. */
static volatile sig_atomic_t got_quit, got_winch, got_stop;
static int wake_pipe[2] = {-1, -1};

/* What must be undone on the way out; file scope because atexit() and the signal path
 * need it. Only top touches it. */
static struct {
  int raw;    /* termios changed: restore `saved` */
  int screen; /* alternate screen entered */
  struct termios saved;
} term;

static void on_signal(int sig) {
  int saved_errno = errno;
  if (sig == SIGWINCH)
    got_winch = 1;
  else if (sig == SIGTSTP)
    got_stop = 1;
  else
    got_quit = 1;
  if (wake_pipe[1] >= 0) {
    char c = 0;
    ssize_t n = write(wake_pipe[1], &c, 1);
    (void)n;
  }
  errno = saved_errno;
}

static void terminal_restore(void) {
  if (term.screen) {
    fputs(SCREEN_LEAVE, stdout);
    fflush(stdout);
    term.screen = 0;
  }
  if (term.raw) {
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &term.saved);
    term.raw = 0;
  }
}

/* Keys without Enter and without echo; Ctrl-C still raises SIGINT (ISIG kept) and output
 * processing stays on, so "\n" still returns the carriage. */
static int terminal_raw(void) {
  struct termios t;
  if (tcgetattr(STDIN_FILENO, &term.saved) < 0)
    return -errno;
  t = term.saved;
  t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) < 0)
    return -errno;
  term.raw = 1;
  return 0;
}

static void terminal_size(unsigned *ret_cols, unsigned *ret_rows) {
  struct winsize ws;
  *ret_cols = 80;
  *ret_rows = 24;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
    *ret_cols = ws.ws_col;
    *ret_rows = ws.ws_row;
  }
}

static int install_signals(void) {
  if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
    return -errno;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
    if (sigaction(sigs[i], &sa, NULL) < 0)
      return -errno;
  return 0;
}

/* Draws one frame over the previous one: home, each line cleared to its end, then the
 * rest of the screen cleared. No full clear, so the frame does not flicker. */
static void draw_frame(const char *text, unsigned cols, unsigned rows, double interval,
                       const char *err) {
  unsigned printed = 0;
  fputs(ESC "[H", stdout);
  char head[768]; /* the header, plus the daemon error (up to 512) */
  snprintf(head, sizeof(head), "gslice top: every %.1fs, q quits%s%s", interval, err ? "  |  " : "",
           err ? err : "");
  fprintf(stdout, ESC "[7m%.*s" ESC "[0m" ESC "[K\n", (int)cols, head);
  printed++;
  for (const char *l = text; l && *l && printed + 1 < rows;) {
    const char *nl = strchr(l, '\n');
    size_t len = nl ? (size_t)(nl - l) : strlen(l);
    fwrite(l, 1, len, stdout);
    fputs(ESC "[K\n", stdout);
    printed++;
    l = nl ? nl + 1 : l + len;
  }
  fputs(ESC "[J", stdout);
  fflush(stdout);
}

static void usage(FILE *f) {
  fprintf(f, "usage: gslice top [--interval SECONDS] [--iterations N]\n"
             "  The status table, refreshed. On a terminal it redraws in place; q quits.\n"
             "  When stdout is not a terminal, prints a snapshot per interval.\n"
             "  --interval SECONDS  between refreshes (default 1, at least 0.1)\n"
             "  --iterations N      stop after N refreshes (default: until q or Ctrl-C)\n");
}

static int parse_interval(const char *s, double *ret) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < 0.1 || v > 3600)
    return -EINVAL;
  *ret = v;
  return 0;
}

static int parse_count(const char *s, long *ret) {
  uint64_t v;
  if (gs_uint_parse(s, 1, LONG_MAX, &v) < 0)
    return -EINVAL;
  *ret = (long)v;
  return 0;
}

/* Not a terminal: a timestamped snapshot per interval, for logs and pipes. */
static int top_plain(double interval, long iterations) {
  struct gs_status prev = {0}, st;
  int have_prev = 0, rc = 0;
  char err[512];
  for (long i = 0; !iterations || i < iterations; i++) {
    if (i) {
      struct timespec ts = {(time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9)};
      while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !got_quit)
        ;
    }
    if (got_quit)
      break;
    if (gs_ui_fetch_status(&st, err, sizeof(err)) < 0) {
      fprintf(stderr, "gslice top: %s\n", err);
      rc = 1;
      break;
    }
    struct gs_render_opts o = {.prev = have_prev ? &prev : NULL, .now_column = 1};
    if (i)
      fputc('\n', stdout);
    if (gs_render_table(&st, &o, stdout) < 0 || fflush(stdout) != 0) {
      gs_status_free(&st);
      rc = 1; /* the reader went away (closed pipe): nothing more to say */
      break;
    }
    gs_status_free(&prev);
    prev = st;
    have_prev = 1;
  }
  gs_status_free(&prev);
  return rc;
}

/* Ctrl-Z: gives the shell its terminal back, stops for real, takes the terminal again on fg. */
static void tty_suspend(int *keyboard) {
  terminal_restore();
  struct sigaction dfl = {.sa_handler = SIG_DFL}, mine = {.sa_handler = on_signal};
  sigaction(SIGTSTP, &dfl, NULL);
  raise(SIGTSTP);
  sigaction(SIGTSTP, &mine, NULL);
  if (*keyboard && terminal_raw() < 0)
    *keyboard = 0;
  fputs(SCREEN_ENTER, stdout);
  term.screen = 1;
}

/* Reads the keys waiting; q quits. */
static void tty_keys(int *keyboard) {
  char key[16];
  ssize_t k = read(STDIN_FILENO, key, sizeof(key));
  if (k <= 0) {
    *keyboard = 0; /* terminal gone (ssh dropped): Ctrl-C/SIGHUP still end us */
    return;
  }
  for (ssize_t j = 0; j < k; j++)
    if (key[j] == 'q' || key[j] == 'Q')
      got_quit = 1;
}

/* Waits for the interval, a key, a resize or a signal. */
static void tty_wait(double interval, int *keyboard) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    double left = interval - ((double)(now.tv_sec - start.tv_sec) +
                              (double)(now.tv_nsec - start.tv_nsec) / 1e9);
    if (left <= 0 || got_quit)
      return;
    struct pollfd p[2] = {{.fd = wake_pipe[0], .events = POLLIN},
                          {.fd = *keyboard ? STDIN_FILENO : -1, .events = POLLIN}};
    int n = poll(p, 2, (int)(left * 1000) + 1);
    if (n < 0 && errno != EINTR)
      return;
    if (n > 0 && (p[0].revents & POLLIN)) {
      char drain[16];
      while (read(wake_pipe[0], drain, sizeof(drain)) > 0)
        ;
    }
    if (n > 0 && (p[1].revents & (POLLIN | POLLHUP)))
      tty_keys(keyboard);
    if (got_winch) {
      got_winch = 0;
      return; /* redraw at the new size now */
    }
    if (got_stop) {
      got_stop = 0;
      tty_suspend(keyboard);
      return;
    }
  }
}

/* One frame: a fresh snapshot drawn against the one before (*prev, replaced by it), or what
 * kept the daemon from answering (it may be restarting: said, and tried again, as top does). */
static void tty_frame(struct gs_status *prev, int *have_prev, double interval) {
  struct gs_status st;
  unsigned cols, rows;
  char err[512], *text = NULL;
  size_t len = 0;
  const char *problem = NULL;

  terminal_size(&cols, &rows);
  if (gs_ui_fetch_status(&st, err, sizeof(err)) < 0) {
    problem = err;
  } else {
    FILE *f = open_memstream(&text, &len);
    struct gs_render_opts o = {.width = cols, .prev = *have_prev ? prev : NULL, .now_column = 1};
    if (f) {
      gs_render_table(&st, &o, f);
      fclose(f);
    }
    gs_status_free(prev);
    *prev = st;
    *have_prev = 1;
  }
  draw_frame(text, cols, rows, interval, problem);
  free(text);
}

static int top_tty(double interval, long iterations) {
  struct gs_status prev = {0};
  int have_prev = 0, keyboard = isatty(STDIN_FILENO);

  if (keyboard && terminal_raw() < 0)
    keyboard = 0; /* still works; Ctrl-C quits */
  atexit(terminal_restore);
  fputs(SCREEN_ENTER, stdout);
  term.screen = 1;
  for (long i = 0; !got_quit && (!iterations || i < iterations); i++) {
    tty_frame(&prev, &have_prev, interval);
    tty_wait(interval, &keyboard);
  }
  gs_status_free(&prev);
  terminal_restore();
  return 0;
}

int cmd_top(int argc, char **argv) {
  static const struct option opts[] = {{"interval", required_argument, NULL, 'i'},
                                       {"iterations", required_argument, NULL, 'n'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  double interval = 1.0;
  long iterations = 0;
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:i:n:h", opts, NULL)) != -1) {
    switch (c) {
    case 'i':
      if (parse_interval(optarg, &interval) < 0) {
        fprintf(stderr,
                "gslice top: bad --interval '%s': give seconds between 0.1 and 3600, "
                "e.g. --interval 0.5\n",
                optarg);
        return 2;
      }
      break;
    case 'n':
      if (parse_count(optarg, &iterations) < 0) {
        fprintf(stderr, "gslice top: bad --iterations '%s': give a whole number >= 1\n", optarg);
        return 2;
      }
      break;
    case 'h': usage(stdout); return 0;
    case ':':
      fprintf(stderr, "gslice top: option '%s' needs a value\n", argv[optind - 1]);
      return 2;
    default:
      fprintf(stderr, "gslice top: unknown option '%s'\n", argv[optind - 1]);
      usage(stderr);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "gslice top: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  if (install_signals() < 0) {
    fprintf(stderr, "gslice top: cannot set up signal handling: %s\n", strerror(errno));
    return 1;
  }
  return isatty(STDOUT_FILENO) ? top_tty(interval, iterations) : top_plain(interval, iterations);
}
