/* SPDX-License-Identifier: Apache-2.0 */
/* Unit test of the hook's configuration parser: GSLICE_MEMORY_LIMIT forms and GSLICE_STATE_DIR. */
#include "test.h"

#include <errno.h>
#include <unistd.h>

#include "hook.h"

static const char *vars[8][2];

static char *fake_env(const char *name) {
  for (int i = 0; i < 8 && vars[i][0]; i++)
    if (strcmp(vars[i][0], name) == 0)
      return (char *)vars[i][1];
  return NULL;
}

static void set_env(const char *limit, const char *dir, const char *tmp) {
  memset(vars, 0, sizeof(vars));
  int n = 0;
  if (limit)
    vars[n][0] = "GSLICE_MEMORY_LIMIT", vars[n++][1] = limit;
  if (dir)
    vars[n][0] = "GSLICE_STATE_DIR", vars[n++][1] = dir;
  if (tmp)
    vars[n][0] = "TMPDIR", vars[n++][1] = tmp;
}

static int parse(struct gs_config *c, char *err) {
  return gs_config_parse(fake_env, c, err, 256);
}

int main(void) {
  struct gs_config c;
  char err[256];
  uint64_t v;

  set_env(NULL, NULL, NULL);
  CHECK_EQ_INT(parse(&c, err), 0);
  CHECK_EQ_INT(gs_config_cap(&c, 0, &v), 0);
  char want[64];
  snprintf(want, sizeof(want), "/tmp/gslice-%u", (unsigned)getuid());
  CHECK_STR(c.state_dir, want);
  CHECK_EQ_INT(c.state_dir_default, 1);

  set_env("4GiB", "/run/slice", "/var/tmp");
  CHECK_EQ_INT(parse(&c, err), 0);
  CHECK_EQ_INT(gs_config_cap(&c, 0, &v), 1);
  CHECK_EQ_U64(v, 4ull << 30);
  CHECK_EQ_INT(gs_config_cap(&c, 63, &v), 1);
  CHECK_STR(c.state_dir, "/run/slice");
  CHECK_EQ_INT(c.state_dir_default, 0);

  set_env("0=1GiB,3=512MiB", NULL, "/var/tmp");
  CHECK_EQ_INT(parse(&c, err), 0);
  CHECK_EQ_INT(gs_config_cap(&c, 0, &v), 1);
  CHECK_EQ_U64(v, 1ull << 30);
  CHECK_EQ_INT(gs_config_cap(&c, 3, &v), 1);
  CHECK_EQ_U64(v, 512ull << 20);
  CHECK_EQ_INT(gs_config_cap(&c, 1, &v), 0);
  CHECK_EQ_INT(gs_config_cap(&c, -1, &v), 0);
  snprintf(want, sizeof(want), "/var/tmp/gslice-%u", (unsigned)getuid());
  CHECK_STR(c.state_dir, want);

  /* A relative TMPDIR falls back to /tmp rather than a path that moves with the cwd. */
  set_env(NULL, NULL, "relative");
  CHECK_EQ_INT(parse(&c, err), 0);
  snprintf(want, sizeof(want), "/tmp/gslice-%u", (unsigned)getuid());
  CHECK_STR(c.state_dir, want);

  const char *bad[] = {
      "", "4GB", "abc", "0", "0=", "=1GiB", "0=1GiB,0=2GiB", "0=1GiB,x", "1GiB,0=2GiB", "-1",
      "64=1GiB", "0=0", "0=1GiB,,1=1GiB", "0=1GiB,", " 1GiB", "1GiB ", " 0=1GiB", "0=1GiB, 1=1GiB",
      "0=1GiB ,1=1GiB", "+0=1GiB", "0=1GiB,1= 1GiB",
      /* 2^64-1 is the region's "no cap": it must not pass as a cap that
       * silently caps nothing (issue 8), nor anything above 1 EiB. */
      "18446744073709551615", "0=18446744073709551615", "1048577TiB", "99999999999999999999GiB"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    set_env(bad[i], NULL, NULL);
    err[0] = 0;
    int rc = parse(&c, err);
    if (rc != -EINVAL)
      fprintf(stderr, "accepted GSLICE_MEMORY_LIMIT=\"%s\"\n", bad[i]);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK(strstr(err, "GSLICE_MEMORY_LIMIT") != NULL);
  }
  /* The largest size is exactly GS_SIZE_MAX and means what it says. */
  set_env("1048576TiB", NULL, NULL);
  CHECK_EQ_INT(parse(&c, err), 0);
  CHECK_EQ_INT(gs_config_cap(&c, 0, &v), 1);
  CHECK_EQ_U64(v, 1ull << 60);
  set_env("1GiB", "relative/dir", NULL);
  CHECK_EQ_INT(parse(&c, err), -EINVAL);
  CHECK(strstr(err, "GSLICE_STATE_DIR") != NULL);
  set_env("1GiB", "", NULL);
  CHECK_EQ_INT(parse(&c, err), -EINVAL);
  return test_done();
}
