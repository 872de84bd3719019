/* SPDX-License-Identifier: Apache-2.0 */
/* Process identity from /proc (proc.h): start time, exited or not, the caller's pid namespace. */
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint64_t gs_proc_pidns(void) {
  char buf[64];
  ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof(buf) - 1);
  if (n <= 0)
    return 0;
  buf[n] = 0;
  const char *p = strchr(buf, '[');
  return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* A zombie leader can still have live threads (its main thread called pthread_exit): the
 * process lives while /proc/<pid>/task lists more than the leader. */
static int zombie_with_live_threads(pid_t pid) {
  char path[64];
  if (pid == 0)
    snprintf(path, sizeof(path), "/proc/self/task");
  else
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d)
    return 0;
  int tasks = 0;
  for (struct dirent *e; (e = readdir(d)) && tasks < 2;)
    if (e->d_name[0] != '.')
      tasks++;
  closedir(d);
  return tasks > 1;
}

int gs_proc_identity(pid_t pid, uint64_t *ret_start_time, int *ret_exited) {
  char path[64], buf[1024];
  if (pid == 0)
    snprintf(path, sizeof(path), "/proc/self/stat");
  else
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT && errno != ESRCH)
      return -errno;
    if (ret_start_time)
      *ret_start_time = 0;
    *ret_exited = 1;
    return 0;
  }
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) {
    if (ret_start_time)
      *ret_start_time = 0;
    *ret_exited = 1;
    return 0;
  }
  buf[n] = 0;
  /* The command name may hold spaces and parentheses: fields start after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ')
    return -EINVAL;
  p += 2;
  char state = *p;
  /* p is at field 3 (state); start time is field 22. */
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p)
      return -EINVAL;
    p++;
  }
  if (ret_start_time)
    *ret_start_time = strtoull(p, NULL, 10);
  *ret_exited = state == 'X' || state == 'x' || (state == 'Z' && !zombie_with_live_threads(pid));
  return 0;
}

int gs_proc_stat(pid_t pid, pid_t *ret_ppid, uint64_t *ret_start_time, int *ret_exited) {
  char path[64], buf[1024];
  int ppid;

  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? -ESRCH : -errno;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return -ESRCH;
  buf[n] = 0;
  /* The command name may hold spaces and parentheses: fields start after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ')
    return -EINVAL;
  p += 2;
  char state = *p;
  if (sscanf(p + 1, " %d", &ppid) != 1)
    return -EINVAL;
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p)
      return -EINVAL;
    p++;
  }
  *ret_ppid = ppid;
  *ret_start_time = strtoull(p, NULL, 10);
  *ret_exited = state == 'X' || state == 'x' || (state == 'Z' && !zombie_with_live_threads(pid));
  return 0;
}
