/* SPDX-License-Identifier: Apache-2.0 */
/* fileio.h: bounded reads that never return a cut file, atomic writes that never follow a
 * planted link, and what each says when it refuses. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "test.h"

int main(void) {
  char dir[] = "/tmp/gs-fileio-XXXXXX", path[128];
  char *text = NULL;
  size_t len = 0;
  struct stat st;

  CHECK(mkdtemp(dir) != NULL);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK(dfd >= 0);

  /* Written whole, mode as asked whatever the umask, no temporary left behind. */
  umask(077);
  CHECK_EQ_INT(gs_file_write_atomic(dfd, "a.env", "K=V\n", 4, 0644), 0);
  CHECK_EQ_INT(fstatat(dfd, "a.env", &st, 0), 0);
  CHECK_EQ_INT(st.st_mode & 0777, 0644);
  CHECK(faccessat(dfd, ".a.env.tmp", F_OK, 0) < 0);
  CHECK_EQ_INT(gs_file_read(dfd, "a.env", GS_FILE_NOFOLLOW, 64, &text, &len), 0);
  CHECK_STR(text, "K=V\n");
  CHECK_EQ_U64(len, 4);
  free(text);

  /* Replaced whole; a stale temporary from a crash is no obstacle. */
  CHECK_EQ_INT(close(openat(dfd, ".a.env.tmp", O_CREAT | O_WRONLY, 0600)), 0);
  CHECK_EQ_INT(gs_file_write_atomic(dfd, "a.env", "K=W\n", 4, 0600), 0);
  CHECK_EQ_INT(gs_file_read(dfd, "a.env", 0, 64, &text, NULL), 0);
  CHECK_STR(text, "K=W\n");
  free(text);

  /* One byte over the bound: refused, nothing returned. */
  text = (char *)"untouched";
  CHECK_EQ_INT(gs_file_read(dfd, "a.env", 0, 3, &text, &len), -EFBIG);
  CHECK_STR(text, "untouched");
  CHECK_EQ_INT(gs_file_read(dfd, "a.env", 0, 4, &text, &len), 0);
  free(text);

  /* A planted symlink is neither read nor written through. */
  snprintf(path, sizeof(path), "%s/victim", dir);
  CHECK_EQ_INT(gs_file_write_atomic_path(path, "host", 4, 0600), 0);
  CHECK_EQ_INT(symlinkat("victim", dfd, "link"), 0);
  CHECK_EQ_INT(gs_file_read(dfd, "link", GS_FILE_NOFOLLOW, 64, &text, &len), -ELOOP);
  CHECK_EQ_INT(symlinkat("victim", dfd, ".b.tmp"), 0);
  CHECK_EQ_INT(gs_file_write_atomic(dfd, "b", "x", 1, 0600), 0);
  CHECK_EQ_INT(gs_file_read(dfd, "victim", 0, 64, &text, NULL), 0);
  CHECK_STR(text, "host");
  free(text);
  CHECK_EQ_INT(gs_file_write_atomic(dfd, "../escape", "x", 1, 0600), -EINVAL);
  CHECK_EQ_INT(gs_file_write_atomic(dfd, "", "x", 1, 0600), -EINVAL);

  /* Only regular files when asked (a FIFO would block a reader forever). */
  CHECK_EQ_INT(mkfifoat(dfd, "fifo", 0600), 0);
  CHECK_EQ_INT(gs_file_read(dfd, "fifo", GS_FILE_REGULAR, 64, &text, &len), -EINVAL);
  CHECK_EQ_INT(gs_file_read(dfd, ".", GS_FILE_REGULAR, 64, &text, &len), -EINVAL);
  CHECK_EQ_INT(gs_file_read(dfd, "missing", 0, 64, &text, &len), -ENOENT);

  /* Empty files read as "". */
  CHECK_EQ_INT(gs_file_write_atomic(dfd, "empty", "", 0, 0600), 0);
  CHECK_EQ_INT(gs_file_read(dfd, "empty", 0, 0, &text, &len), 0);
  CHECK(text && !text[0] && len == 0);
  free(text);

  const char *names[] = {"a.env", "b", "victim", "link", ".b.tmp", "fifo", "empty"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    unlinkat(dfd, names[i], 0);
  close(dfd);
  CHECK_EQ_INT(rmdir(dir), 0);
  return test_done();
}
