/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's log: one line per write(2) to stderr or GSLICE_LOG_FILE; never the program's stdout.
 */
#include "hook.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_fd = 2;
static enum gs_log_level log_min = GS_LOG_WARN;

static void log_init(void) {
  const char *file = secure_getenv("GSLICE_LOG_FILE");
  if (file && *file) {
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
      log_fd = fd;
  }
  const char *level = secure_getenv("GSLICE_LOG_LEVEL");
  if (level && strcmp(level, "debug") == 0)
    log_min = GS_LOG_DEBUG;
  else if (level && strcmp(level, "info") == 0)
    log_min = GS_LOG_INFO;
  else if (level && strcmp(level, "error") == 0)
    log_min = GS_LOG_ERROR;
}

void gs_log(enum gs_log_level level, const char *fmt, ...) {
  pthread_once(&log_once, log_init);
  if (level < log_min)
    return;
  int saved = errno;
  char line[1024];
  /* Debug lines carry CLOCK_MONOTONIC (ms.us), the clock of the daemon's grants and of the
   * simulated GPU's record, so that a token switch can be followed across processes. */
  int n = level == GS_LOG_DEBUG ? snprintf(line, sizeof(line), "gslice[%d] %.3f: ", (int)getpid(),
                                           (double)gs_mono_ns() / 1e6)
                                : snprintf(line, sizeof(line), "gslice[%d]: ", (int)getpid());
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof(line) - 2)
    len = sizeof(line) - 2;
  line[len++] = '\n';
  ssize_t w = write(log_fd, line, len);
  (void)w;
  errno = saved;
}
