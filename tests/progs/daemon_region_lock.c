/* SPDX-License-Identifier: Apache-2.0 */
/* A slice's process against the daemon's handling of its region's lock (daemon_region_lock.sh).
 * The region is the slice's to write; its robust mutex is glibc's, and glibc keeps a robust mutex
 * it holds on the thread's robust list through pointers inside the mutex (__list), which it
 * follows at unlock. Reached through the region's private header.
 *
 *   daemon_region_lock scribble REGION SECONDS CLI SLICE BYTES
 *       rewrites the mutex's __list pointers and owner (never the lock word) with non-canonical
 *       values in a loop while it lowers its slice's cap with `CLI set SLICE --memory N`, N from
 *       BYTES down by 4 KiB a time, for SECONDS; prints "sets=N failed=N last=N" (the last cap
 *       set). A daemon that locks the region through glibc writes through those pointers.
 *   daemon_region_lock hold REGION
 *       holds the lock word with an owner no thread has, and raises its device 0's cap (no cap,
 *       as if from its environment); then obeys stdin: "show" prints "cap=N source=N lock=HEX",
 *       "release SECONDS" lets the lock word go and scribbles as above for SECONDS, then prints
 *       "released"; "quit" (or the end of stdin) ends it. */
#include "../../src/common/region_layout.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct region_layout *l;
static volatile int stop;

static void *scribble(void *arg) {
  (void)arg;
  pthread_mutex_t *m = &l->lock;
  while (!stop) {
    __atomic_store_n((uintptr_t *)&m->__data.__list.__prev, (uintptr_t)0x4242424242424240ull,
                     __ATOMIC_RELAXED);
    __atomic_store_n((uintptr_t *)&m->__data.__list.__next, (uintptr_t)0x4141414141414140ull,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&m->__data.__owner, 0x2345, __ATOMIC_RELAXED);
  }
  return NULL;
}

static int run_cli(const char *cli, const char *slice, uint64_t bytes) {
  char arg[32];
  snprintf(arg, sizeof(arg), "%" PRIu64, bytes);
  pid_t p = fork();
  if (p < 0)
    return -1;
  if (p == 0) {
    int dn = open("/dev/null", O_WRONLY);
    dup2(dn, 1);
    dup2(dn, 2);
    execl(cli, cli, "set", slice, "--memory", arg, (char *)NULL);
    _exit(127);
  }
  int st;
  if (waitpid(p, &st, 0) < 0)
    return -1;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: daemon_region_lock scribble|hold REGION ...\n");
    return 2;
  }
  int fd = open(argv[2], O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    perror(argv[2]);
    return 2;
  }
  l = mmap(NULL, sizeof(*l), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (l == MAP_FAILED) {
    perror("mmap");
    return 2;
  }
  pthread_t t;
  if (strcmp(argv[1], "scribble") == 0 && argc == 7) {
    double end = now() + atof(argv[3]);
    uint64_t bytes = strtoull(argv[6], NULL, 10), last = 0;
    long sets = 0, failed = 0;
    pthread_create(&t, NULL, scribble, NULL);
    while (now() < end && failed < 20) {
      bytes -= 4096;
      if (run_cli(argv[4], argv[5], bytes) == 0) {
        sets++;
        last = bytes;
      } else {
        failed++;
      }
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("sets=%ld failed=%ld last=%" PRIu64 "\n", sets, failed, last);
    return 0;
  }
  if (strcmp(argv[1], "hold") != 0 || argc != 3)
    return 2;
  int *word = &l->lock.__data.__lock;
  __atomic_store_n(word, 0x1234, __ATOMIC_SEQ_CST);
  __atomic_store_n(&l->dev[0].cap, GS_REGION_NO_CAP, __ATOMIC_SEQ_CST);
  __atomic_store_n(&l->dev[0].source, GS_CAP_FROM_ENV, __ATOMIC_SEQ_CST);
  printf("held\n");
  fflush(stdout);
  char line[128];
  while (fgets(line, sizeof(line), stdin)) {
    if (strncmp(line, "quit", 4) == 0)
      break;
    if (strncmp(line, "show", 4) == 0) {
      printf("cap=%" PRIu64 " source=%u lock=%#x\n",
             __atomic_load_n(&l->dev[0].cap, __ATOMIC_SEQ_CST),
             __atomic_load_n(&l->dev[0].source, __ATOMIC_SEQ_CST),
             (unsigned)__atomic_load_n(word, __ATOMIC_SEQ_CST));
    } else if (strncmp(line, "release ", 8) == 0) {
      double end = now() + atof(line + 8);
      __atomic_store_n(word, 0, __ATOMIC_SEQ_CST);
      stop = 0;
      pthread_create(&t, NULL, scribble, NULL);
      while (now() < end)
        usleep(10000);
      stop = 1;
      pthread_join(t, NULL);
      printf("released\n");
    }
    fflush(stdout);
  }
  return 0;
}
