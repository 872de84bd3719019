/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded whole-file reads and atomic durable writes (fileio.h). */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"

int gs_fd_read_all(int fd, size_t max, char **ret, size_t *ret_len) {
  struct gs_buf b = GS_BUF_INIT(max);
  char chunk[16384];

  for (;;) {
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = -errno;
      gs_buf_free(&b);
      return e;
    }
    if (n == 0)
      break;
    int e = gs_buf_add(&b, chunk, (size_t)n);
    if (e < 0) {
      gs_buf_free(&b);
      return e;
    }
  }
  int err;
  char *p = gs_buf_steal(&b, ret_len, &err);
  if (!p)
    return err;
  *ret = p;
  return 0;
}

int gs_file_read(int dirfd, const char *path, int flags, size_t max, char **ret, size_t *ret_len) {
  int oflags = O_RDONLY | O_CLOEXEC | O_NOCTTY | (flags & GS_FILE_NOFOLLOW ? O_NOFOLLOW : 0);
  int fd = openat(dirfd, path, oflags | (flags & GS_FILE_REGULAR ? O_NONBLOCK : 0));
  if (fd < 0)
    return -errno;
  if (flags & GS_FILE_REGULAR) {
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return -EINVAL;
    }
  }
  int r = gs_fd_read_all(fd, max, ret, ret_len);
  close(fd);
  return r;
}

int gs_fd_write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    if (n == 0)
      return -EIO;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int gs_dir_sync(int dirfd, const char *path) {
  int fd = path ? openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : dirfd;
  if (fd < 0)
    return -errno;
  int r = fsync(fd) < 0 ? -errno : 0;
  if (path)
    close(fd);
  return r;
}

int gs_file_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode) {
  char tmp[NAME_MAX + 1];
  int r = 0;

  if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
    return -EINVAL;
  if ((size_t)snprintf(tmp, sizeof(tmp), ".%s.tmp", name) >= sizeof(tmp))
    return -ENAMETOOLONG;
  unlinkat(dirfd, tmp, 0);
  int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return -errno;
  if (fchmod(fd, mode) < 0)
    r = -errno;
  if (r == 0)
    r = gs_fd_write_all(fd, data, len);
  if (r == 0 && fsync(fd) < 0)
    r = -errno;
  if (close(fd) < 0 && r == 0)
    r = -errno;
  if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
    r = -errno;
  if (r < 0) {
    unlinkat(dirfd, tmp, 0);
    return r;
  }
  return gs_dir_sync(dirfd, ".");
}

int gs_file_write_atomic_path(const char *path, const void *data, size_t len, mode_t mode) {
  const char *slash = strrchr(path, '/');
  char dir[PATH_MAX];

  if (!slash)
    return gs_file_write_atomic(AT_FDCWD, path, data, len, mode);
  if ((size_t)(slash - path) >= sizeof(dir))
    return -ENAMETOOLONG;
  memcpy(dir, path, (size_t)(slash - path));
  dir[slash - path] = 0;
  int dfd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return -errno;
  int r = gs_file_write_atomic(dfd, slash + 1, data, len, mode);
  close(dfd);
  return r;
}
