/* SPDX-License-Identifier: Apache-2.0 */
/* The programs' log (log.h): format, levels, journald detection and the repeat limit. */
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define LOG_KEYS 32
#define LOG_LINE_MAX 4096

/* The log is the programs' one piece of global state beside stderr itself. */
static struct {
  pthread_mutex_t lock;
  const char *program;
  enum gs_log_level min;
  bool journal;
  struct key {
    const char *fmt;
    enum gs_log_level level;
    uint64_t since; /* start of its interval, CLOCK_MONOTONIC ns */
    uint32_t lines; /* written in this interval */
    uint64_t suppressed;
  } keys[LOG_KEYS];
} lg = {.lock = PTHREAD_MUTEX_INITIALIZER, .program = "gslice", .min = GS_LOG_INFO};

static const char *const names[] = {"debug", "info", "warning", "error"};
/* sd-daemon(3) prefixes: LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR. */
static const char prefix[] = {'7', '6', '4', '3'};

const char *gs_log_level_name(enum gs_log_level level) {
  return (unsigned)level < sizeof(names) / sizeof(names[0]) ? names[level] : "unknown";
}

int gs_log_level_parse(const char *text, enum gs_log_level *ret) {
  for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (text && !strcmp(text, names[i])) {
      *ret = (enum gs_log_level)i;
      return 0;
    }
  return -EINVAL;
}

/* JOURNAL_STREAM is "DEV:INO" of the stream systemd connected; it counts only while stderr is
 * still that stream (a child whose stderr was redirected inherits the variable). */
static bool stderr_is_journal(void) {
  const char *v = getenv("JOURNAL_STREAM");
  unsigned long long dev, ino;
  struct stat st;
  if (!v || sscanf(v, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
    return false;
  return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void gs_log_open(const char *program, enum gs_log_level min) {
  pthread_mutex_lock(&lg.lock);
  lg.program = program;
  lg.min = min;
  lg.journal = stderr_is_journal();
  pthread_mutex_unlock(&lg.lock);
}

bool gs_log_enabled(enum gs_log_level level) {
  return level >= lg.min;
}

/* Formats and writes one line; lg.lock held. */
static void line_write(enum gs_log_level level, const char *fmt, va_list ap) {
  char line[LOG_LINE_MAX];
  size_t n;

  if (lg.journal) {
    n = (size_t)snprintf(line, sizeof(line), "<%c>", prefix[level]);
  } else {
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s[%d] %s: ", now.tv_nsec / 1000000,
                          lg.program, (int)getpid(), names[level]);
  }
  int m = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
  if (m > 0)
    n += (size_t)m;
  if (n > sizeof(line) - 2)
    n = sizeof(line) - 2; /* cut, with its newline kept */
  line[n++] = '\n';
  for (size_t off = 0; off < n;) {
    ssize_t w = write(STDERR_FILENO, line + off, n - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      break;
    off += (size_t)w;
  }
}

static void line_writef(enum gs_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  line_write(level, fmt, ap);
  va_end(ap);
}

/* Says how many lines of k were left out, and starts its next interval; lg.lock held. */
static void key_summary(struct key *k, uint64_t now) {
  if (k->suppressed)
    line_writef(k->level,
                "%" PRIu64 " more lines like \"%.60s\" in the last %" PRIu64 " ms, not written",
                k->suppressed, k->fmt, (now - k->since) / 1000000);
  k->since = now;
  k->lines = 0;
  k->suppressed = 0;
}

/* The message's key, a new one taking the slot quiet the longest; lg.lock held. */
static struct key *key_for(const char *fmt, enum gs_log_level level, uint64_t now) {
  struct key *oldest = &lg.keys[0];
  for (unsigned i = 0; i < LOG_KEYS; i++) {
    if (lg.keys[i].fmt == fmt)
      return &lg.keys[i];
    if (lg.keys[i].since < oldest->since)
      oldest = &lg.keys[i];
  }
  if (oldest->fmt)
    key_summary(oldest, now);
  *oldest = (struct key){.fmt = fmt, .level = level, .since = now};
  return oldest;
}

void gs_logv(enum gs_log_level level, const char *fmt, va_list ap) {
  if ((unsigned)level > GS_LOG_ERROR)
    level = GS_LOG_ERROR;
  if (level < lg.min)
    return;
  uint64_t now = gs_mono_ns();
  pthread_mutex_lock(&lg.lock);
  struct key *k = key_for(fmt, level, now);
  if (now - k->since >= (uint64_t)GS_LOG_INTERVAL_MS * 1000000)
    key_summary(k, now);
  if (k->lines < GS_LOG_BURST) {
    k->lines++;
    line_write(level, fmt, ap);
  } else {
    k->suppressed++;
  }
  pthread_mutex_unlock(&lg.lock);
}

void gs_log(enum gs_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gs_logv(level, fmt, ap);
  va_end(ap);
}

void gs_log_flush(void) {
  uint64_t now = gs_mono_ns();
  pthread_mutex_lock(&lg.lock);
  for (unsigned i = 0; i < LOG_KEYS; i++)
    if (lg.keys[i].fmt && now - lg.keys[i].since >= (uint64_t)GS_LOG_INTERVAL_MS * 1000000)
      key_summary(&lg.keys[i], now);
  pthread_mutex_unlock(&lg.lock);
}
