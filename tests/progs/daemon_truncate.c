/* SPDX-License-Identifier: Apache-2.0 */
/* A slice process that breaks its own memory region under the daemon: one thread truncates the
 * region file to 0 and writes it back, as fast as it can, while the other asks the daemon for
 * STATUS (which reads every slice's region). Before the daemon guarded its region reads, a
 * read that fell between the two killed the whole daemon with SIGBUS.
 * Usage: daemon_truncate REGION_FILE SECONDS SOCKET. Leaves the file truncated to 0. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

static atomic_int stop;
static int fd;
static char *saved;
static size_t saved_len;
static unsigned long truncations;

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *truncator(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    if (ftruncate(fd, 0) == 0)
      truncations++;
    if (pwrite(fd, saved, saved_len, 0) != (ssize_t)saved_len)
      break;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: daemon_truncate REGION_FILE SECONDS SOCKET\n");
    return 2;
  }
  double seconds = atof(argv[2]);
  struct stat st;
  fd = open(argv[1], O_RDWR | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0) {
    fprintf(stderr, "daemon_truncate: %s: %s\n", argv[1], fd < 0 ? strerror(errno) : "empty");
    return 1;
  }
  saved_len = (size_t)st.st_size;
  saved = malloc(saved_len);
  if (!saved || pread(fd, saved, saved_len, 0) != (ssize_t)saved_len)
    return 1;
  int cfd;
  if (gs_client_connect(argv[3], &cfd) < 0 || gs_client_hello(cfd, GS_ROLE_CLI, 0, NULL) < 0) {
    fprintf(stderr, "daemon_truncate: no daemon on %s\n", argv[3]);
    return 1;
  }
  pthread_t t;
  pthread_create(&t, NULL, truncator, NULL);
  unsigned long served = 0;
  int r = 0;
  for (double end = mono_s() + seconds; mono_s() < end;) {
    struct gs_status s;
    r = gs_client_status(cfd, &s);
    if (r < 0)
      break;
    gs_status_free(&s);
    served++;
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  if (ftruncate(fd, 0) < 0)
    return 1;
  printf("truncate: %lu truncations, %lu statuses served%s%s\n", truncations, served,
         r < 0 ? "; then the daemon stopped answering: " : "", r < 0 ? strerror(-r) : "");
  return r < 0 ? 1 : 0;
}
