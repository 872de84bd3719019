/* SPDX-License-Identifier: Apache-2.0 */
/* kv.h: strict records and lists, forgiving config files, errors that name the line. */
#include <errno.h>

#include "kv.h"
#include "test.h"

struct seen {
  char text[512];
  unsigned n;
};

static int collect(const char *key, const char *value, unsigned line, void *user, char *err,
                   size_t err_len) {
  struct seen *s = user;
  size_t l = strlen(s->text);
  snprintf(s->text + l, sizeof(s->text) - l, "%u:[%s]=[%s];", line, key, value);
  s->n++;
  if (!strcmp(key, "stop")) {
    snprintf(err, err_len, "stop at line %u", line);
    return -ENOENT;
  }
  return 0;
}

static int parse(const char *text, char sep, int flags, struct seen *s, char *err) {
  char copy[512];
  snprintf(copy, sizeof(copy), "%s", text);
  memset(s, 0, sizeof(*s));
  err[0] = 0;
  return gs_kv_parse(copy, sep, flags, collect, s, err, 128);
}

int main(void) {
  struct seen s;
  char err[128];

  CHECK_EQ_INT(parse("a=1\nb=x=y\nc=\n", '\n', 0, &s, err), 0);
  CHECK_STR(s.text, "1:[a]=[1];2:[b]=[x=y];3:[c]=[];");
  CHECK_EQ_INT(parse("", '\n', 0, &s, err), 0);
  CHECK_EQ_U64(s.n, 0);
  /* Strict: no blank line, no comment, no key-less item, blanks kept as written. */
  CHECK_EQ_INT(parse("a=1\n\nb=2", '\n', 0, &s, err), -EBADMSG);
  CHECK(strstr(err, "line 2") != NULL);
  CHECK_EQ_INT(parse("# c\na=1", '\n', 0, &s, err), -EBADMSG);
  CHECK_EQ_INT(parse("=1", '\n', 0, &s, err), -EBADMSG);
  CHECK_EQ_INT(parse(" a = 1 ", '\n', 0, &s, err), 0);
  CHECK_STR(s.text, "1:[ a ]=[ 1 ];");
  /* Lists: "0=4GiB,1=2GiB"; an empty item is malformed, a trailing separator is not one. */
  CHECK_EQ_INT(parse("0=4GiB,1=2GiB", ',', 0, &s, err), 0);
  CHECK_STR(s.text, "1:[0]=[4GiB];2:[1]=[2GiB];");
  CHECK_EQ_INT(parse("0=1,,1=2", ',', 0, &s, err), -EBADMSG);
  CHECK(strstr(err, "item 2") != NULL);
  /* Files: comments, blank lines and blanks around both sides. */
  CHECK_EQ_INT(
      parse("# gsliced\n\n  mode = weighted \t\r\nquantum_ms=5\n", '\n', GS_KV_FILE, &s, err), 0);
  CHECK_STR(s.text, "3:[mode]=[weighted];4:[quantum_ms]=[5];");
  CHECK_EQ_INT(parse("mode weighted", '\n', GS_KV_FILE, &s, err), -EBADMSG);
  CHECK(strstr(err, "line 1") != NULL && strstr(err, "mode weighted") != NULL);
  CHECK_EQ_INT(parse(" = 3", '\n', GS_KV_FILE, &s, err), -EBADMSG);
  /* The callback's error stops the parse and comes back as it is. */
  CHECK_EQ_INT(parse("a=1\nstop=1\nb=2", '\n', 0, &s, err), -ENOENT);
  CHECK_EQ_U64(s.n, 2);
  CHECK_STR(err, "stop at line 2");
  return test_done();
}
