/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-file reads with a bound and atomic, durable writes: the one way gslice's programs read
 * and write their state, records and specs.
 *
 * Every call takes a directory descriptor and a name below it (AT_FDCWD and a path work too), so
 * a root program working in a directory someone else can write resolves the directory once and
 * names only what is in it; GS_FILE_NOFOLLOW refuses a symlink as the last component (ELOOP).
 * All descriptors are opened O_CLOEXEC. Functions return 0 or a negative errno and never log. */
#pragma once
#include <stddef.h>
#include <sys/types.h>

enum {
  GS_FILE_NOFOLLOW = 1 << 0, /* the last component may not be a symlink */
  GS_FILE_REGULAR = 1 << 1,  /* read: refuse anything but a regular file (EINVAL) */
};

/* Reads all of fd (from its current offset) into a fresh NUL-terminated buffer (free() it).
 * More than max bytes is -EFBIG, and nothing is returned: a reader never sees a cut file as if it
 * were whole. ret_len may be NULL. */
int gs_fd_read_all(int fd, size_t max, char **ret, size_t *ret_len);

/* Opens dirfd/path read-only (flags: GS_FILE_*) and reads it as gs_fd_read_all does. */
int gs_file_read(int dirfd, const char *path, int flags, size_t max, char **ret, size_t *ret_len);

/* Writes all of data to fd, retrying short writes and EINTR. */
int gs_fd_write_all(int fd, const void *data, size_t len);

/* Replaces dirfd/name with data, atomically and durably: written to a temporary ".NAME.tmp"
 * beside it (O_CREAT|O_EXCL|O_NOFOLLOW, mode set with fchmod whatever the umask), fsync'd,
 * renamed over name, and the directory fsync'd, so a reader sees the old or the new whole file
 * and a crash keeps one of them. name is one component (no '/': -EINVAL). One writer per name at
 * a time: a stale temporary from a crash is removed first. */
int gs_file_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode);

/* The same for a path: its directory is opened (following links in it; give a trusted path)
 * and the file written there. */
int gs_file_write_atomic_path(const char *path, const void *data, size_t len, mode_t mode);

/* fsync()s the directory dirfd/path (NULL path: dirfd itself). */
int gs_dir_sync(int dirfd, const char *path);
