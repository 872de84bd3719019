/* SPDX-License-Identifier: Apache-2.0 */
/* log.h: the line format, levels, the journal's prefixes and the repeat limit, read back from
 * what a child process wrote on its stderr. */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "test.h"

/* Runs fn in a child whose stderr is a fresh file, and returns what it wrote. */
static char *capture(void (*fn)(void), int journal) {
  static char out[65536];
  char path[] = "/tmp/gs-log-XXXXXX";
  int fd = mkstemp(path);
  pid_t pid = fork();
  if (pid == 0) {
    struct stat st;
    dup2(fd, STDERR_FILENO);
    fstat(STDERR_FILENO, &st);
    char v[64];
    snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + (journal ? 0 : 1));
    setenv("JOURNAL_STREAM", v, 1);
    fn();
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  ssize_t n = pread(fd, out, sizeof(out) - 1, 0);
  out[n > 0 ? n : 0] = 0;
  close(fd);
  unlink(path);
  return out;
}

static void levels(void) {
  gs_log_open("gsliced", GS_LOG_INFO);
  gs_log(GS_LOG_DEBUG, "not written %d", 1);
  gs_log(GS_LOG_INFO, "serving %s", "/run/x.sock");
  gs_log(GS_LOG_ERROR, "cannot %s", "bind");
}

static void repeats(void) {
  gs_log_open("gslice-node", GS_LOG_DEBUG);
  for (int i = 0; i < 25; i++)
    gs_log(GS_LOG_WARNING, "closing connection %d", i);
  gs_log(GS_LOG_INFO, "another message");
  usleep(GS_LOG_INTERVAL_MS * 1000 + 100000);
  gs_log_flush();
  gs_log(GS_LOG_WARNING, "closing connection %d", 99);
}

static unsigned count(const char *text, const char *needle) {
  unsigned n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
    n++;
  return n;
}

int main(void) {
  regex_t re;
  const char *out = capture(levels, 0);
  CHECK_EQ_INT(regcomp(&re,
                       "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                       "gsliced\\[[0-9]+\\] info: serving /run/x\\.sock\n"
                       "[0-9T:.Z-]+ gsliced\\[[0-9]+\\] error: cannot bind\n$",
                       REG_EXTENDED),
               0);
  CHECK_EQ_INT(regexec(&re, out, 0, NULL, 0), 0);
  if (regexec(&re, out, 0, NULL, 0))
    fprintf(stderr, "got:\n%s", out);
  regfree(&re);

  out = capture(levels, 1);
  CHECK_STR(out, "<6>serving /run/x.sock\n<3>cannot bind\n");

  out = capture(repeats, 1);
  CHECK_EQ_INT(count(out, "<4>closing connection"), GS_LOG_BURST + 1);
  CHECK(strstr(out, "<4>closing connection 9\n") && !strstr(out, "closing connection 10\n"));
  CHECK(strstr(out, "<4>15 more lines like \"closing connection %d\"") != NULL);
  CHECK(strstr(out, "<6>another message\n") != NULL);
  CHECK(strstr(out, "<4>closing connection 99\n") != NULL);

  enum gs_log_level l;
  CHECK_EQ_INT(gs_log_level_parse("warning", &l), 0);
  CHECK_EQ_INT(l, GS_LOG_WARNING);
  CHECK_EQ_INT(gs_log_level_parse("warn", &l), -EINVAL);
  CHECK_STR(gs_log_level_name(GS_LOG_DEBUG), "debug");
  return test_done();
}
