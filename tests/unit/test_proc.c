/* SPDX-License-Identifier: Apache-2.0 */
/* gs_proc_stat (proc.h): parent, start time and exit from one read of /proc/<pid>/stat, for a
 * child, its zombie, a reaped pid, and a command name with spaces and parentheses. */
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"
#include "test.h"

static void test_self_and_child(void) {
  pid_t ppid = -1;
  uint64_t start = 0, want = 0;
  int exited = 1, wexited = 1;

  CHECK_EQ_INT(gs_proc_stat(getpid(), &ppid, &start, &exited), 0);
  CHECK_EQ_INT(ppid, getppid());
  CHECK_EQ_INT(exited, 0);
  CHECK_EQ_INT(gs_proc_identity(getpid(), &want, &wexited), 0);
  CHECK_EQ_U64(start, want);

  int go[2];
  CHECK_EQ_INT(pipe(go), 0);
  pid_t child = fork();
  if (child == 0) {
    char c;
    /* A name the stat line's parser must not split on: spaces and a ')'. */
    prctl(PR_SET_NAME, "a) b (c", 0, 0, 0);
    close(go[1]);
    if (read(go[0], &c, 1) < 0)
      _exit(1);
    _exit(0);
  }
  close(go[0]);
  usleep(20000);
  CHECK_EQ_INT(gs_proc_stat(child, &ppid, &start, &exited), 0);
  CHECK_EQ_INT(ppid, getpid());
  CHECK_EQ_INT(exited, 0);
  CHECK_EQ_INT(gs_proc_identity(child, &want, &wexited), 0);
  CHECK_EQ_U64(start, want);
  close(go[1]); /* the child exits: a zombie until reaped */
  for (int i = 0; i < 200; i++) {
    if (gs_proc_stat(child, &ppid, &start, &exited) == 0 && exited)
      break;
    usleep(5000);
  }
  CHECK_EQ_INT(exited, 1);
  CHECK_EQ_INT(waitpid(child, NULL, 0), child);
  CHECK_EQ_INT(gs_proc_stat(child, &ppid, &start, &exited), -ESRCH);
}

int main(void) {
  test_self_and_child();
  return test_done();
}
