/* SPDX-License-Identifier: Apache-2.0 */
/* The pre-scan of a JSON text (jsonbound.h): a byte loop with three states (between tokens,
 * inside a string, inside a bare scalar). */
#include "jsonbound.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool over(size_t seen, size_t max) {
  return max && seen > max;
}

/* The end of the string whose opening quote is at p (the byte after its closing quote), or
 * end when it is not closed. */
static const char *string_end(const char *p, const char *end) {
  for (p++; p < end; p++) {
    const char *q = memchr(p, '"', (size_t)(end - p));
    if (!q)
      return end;
    size_t bs = 0; /* backslashes right before the quote: an odd count escapes it */
    while (q - bs > p && q[-1 - (ptrdiff_t)bs] == '\\')
      bs++;
    if (bs % 2 == 0)
      return q + 1;
    p = q;
  }
  return end;
}

static bool structural(char c) {
  return c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ',' || c == '"' ||
         c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int refuse(const char *what, size_t seen, size_t max, char *err, size_t errlen) {
  snprintf(err, errlen, "the JSON text holds more than %zu %s (at least %zu)", max, what, seen);
  return -E2BIG;
}

int jsonbound_check(const char *text, size_t len, const struct jsonbound *max,
                    struct jsonbound *ret_seen, char *err, size_t errlen) {
  struct jsonbound n = {0};
  const char *p = text, *end = text + len;
  size_t open = 0; /* containers open now */
  int rc = 0;

  while (p < end && !rc) {
    char c = *p;
    if (c == '"') {
      n.values++;
      p = string_end(p, end);
    } else if (c == '{' || c == '[') {
      n.values++;
      n.containers++;
      if (++open > n.depth)
        n.depth = open;
      p++;
    } else if (c == '}' || c == ']') {
      open -= open > 0;
      p++;
    } else if (!structural(c)) {
      n.values++; /* a number or literal: its bytes up to the next structural one */
      while (++p < end && !structural(*p))
        ;
    } else {
      p++;
    }
    if (over(n.values, max->values))
      rc = refuse("values (member names included)", n.values, max->values, err, errlen);
    else if (over(n.containers, max->containers))
      rc = refuse("objects and arrays", n.containers, max->containers, err, errlen);
    else if (over(n.depth, max->depth))
      rc = refuse("levels of nesting", n.depth, max->depth, err, errlen);
  }
  if (ret_seen)
    *ret_seen = n;
  return rc;
}
