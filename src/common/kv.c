/* SPDX-License-Identifier: Apache-2.0 */
/* The KEY=VALUE parser of kv.h. */
#include "kv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r')
    s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
    *--e = 0;
  return s;
}

int gs_kv_parse(char *text, char sep, int flags, gs_kv_fn fn, void *user, char *err,
                size_t err_len) {
  unsigned line = 0;
  char *next = text;
  size_t tlen = strlen(text);

  if (!tlen)
    return 0;
  /* A final separator ends the last item; it does not start an empty one. */
  if (tlen && text[tlen - 1] == sep)
    text[tlen - 1] = 0;
  while (next) {
    char *item = next, *end = strchr(item, sep);
    next = end ? end + 1 : NULL;
    if (end)
      *end = 0;
    line++;
    if (flags & GS_KV_FILE) {
      item = trim(item);
      if (!*item || *item == '#')
        continue;
    }
    char *eq = strchr(item, '=');
    if (!eq || eq == item) {
      if (err && err_len)
        snprintf(err, err_len, "%s %u: expected KEY=VALUE, found \"%.40s\"",
                 sep == '\n' ? "line" : "item", line, item);
      return -EBADMSG;
    }
    *eq = 0;
    char *key = item, *value = eq + 1;
    if (flags & GS_KV_FILE) {
      key = trim(key);
      value = trim(value);
      if (!*key) {
        if (err && err_len)
          snprintf(err, err_len, "line %u: expected KEY=VALUE, found no key", line);
        return -EBADMSG;
      }
    }
    int r = fn(key, value, line, user, err, err_len);
    if (r < 0)
      return r;
  }
  return 0;
}
