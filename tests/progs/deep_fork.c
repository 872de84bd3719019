/* SPDX-License-Identifier: Apache-2.0 */
/* Runs a command DEPTH processes below itself: a chain of forks, each parent waiting for its
 * child and exiting with its status (the fifth attack run's `deep`): a GPU process further below
 * its slice's runner than an ancestor walk of fixed length reaches. Usage: deep_fork DEPTH CMD
 * [ARGS...] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: deep_fork DEPTH CMD [ARGS...]\n");
    return 2;
  }
  int depth = atoi(argv[1]);
  for (int i = 0; i < depth; i++) {
    pid_t p = fork();
    if (p < 0) {
      perror("deep_fork: fork");
      return 1;
    }
    if (p > 0) {
      int st = 0;
      while (waitpid(p, &st, 0) < 0 && errno == EINTR)
        ;
      _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
    }
  }
  execvp(argv[2], argv + 2);
  perror("deep_fork: exec");
  return 127;
}
