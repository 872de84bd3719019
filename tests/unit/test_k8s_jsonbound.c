/* SPDX-License-Identifier: Apache-2.0 */
/* The pre-scan of a JSON text (src/k8s/common/jsonbound.h): its counts are those of the tree
 * a parser would build (values with member names, containers, depth), whatever the strings
 * hold (braces, quotes, escapes); each bound refuses one past it and admits it exactly, with a
 * message naming the bound; 0 is no bound; malformed text is no error of its. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonbound.h"
#include "test.h"

static const struct jsonbound none = {0};

static void counts(const char *text, size_t values, size_t containers, size_t depth) {
  struct jsonbound seen = {9, 9, 9};
  char err[128] = "";
  CHECK_EQ_INT(jsonbound_check(text, strlen(text), &none, &seen, err, sizeof err), 0);
  if (seen.values != values || seen.containers != containers || seen.depth != depth)
    fprintf(stderr, "%s: %zu values, %zu containers, depth %zu\n", text, seen.values,
            seen.containers, seen.depth);
  CHECK_EQ_U64(seen.values, values);
  CHECK_EQ_U64(seen.containers, containers);
  CHECK_EQ_U64(seen.depth, depth);
  CHECK_STR(err, "");
}

static int bounded(const char *text, struct jsonbound max, char *err, size_t errlen) {
  return jsonbound_check(text, strlen(text), &max, NULL, err, errlen);
}

int main(void) {
  counts("", 0, 0, 0);
  counts("{}", 1, 1, 1);
  counts("[{},{},[]]", 4, 4, 2);
  counts(" 12 ", 1, 0, 0);
  counts("[1,-2.5e+3,true,false,null]", 6, 1, 1);
  counts("{\"a\":1,\"b\":[\"x\",{\"c\":null}]}", 9, 3, 3);
  /* What a string holds is no structure: braces, escaped quotes, backslashes. */
  counts("[\"{[\\\"]}\",\"\\\\\",\"\\\\\\\"{\"]", 4, 1, 1);
  counts("{\"k:{\\\"name\\\":\\\"V\\\"}\":{\".\":{}}}", 5, 3, 3);
  /* Malformed: counted as it looks, left to the parser. */
  counts("[\"open", 2, 1, 1);
  counts("]]]{", 1, 1, 1);

  char err[160];
  struct jsonbound seen;
  const char *t = "[{},{},{}]"; /* 4 values, 4 containers, depth 2 */
  CHECK_EQ_INT(bounded(t, (struct jsonbound){.values = 4}, err, sizeof err), 0);
  CHECK_EQ_INT(bounded(t, (struct jsonbound){.values = 3}, err, sizeof err), -E2BIG);
  CHECK(strstr(err, "more than 3 values") != NULL);
  CHECK_EQ_INT(bounded(t, (struct jsonbound){.containers = 4}, err, sizeof err), 0);
  CHECK_EQ_INT(bounded(t, (struct jsonbound){.containers = 3}, err, sizeof err), -E2BIG);
  CHECK(strstr(err, "more than 3 objects and arrays") != NULL);
  CHECK_EQ_INT(bounded(t, (struct jsonbound){.depth = 2}, err, sizeof err), 0);
  CHECK_EQ_INT(bounded(t, (struct jsonbound){.depth = 1}, err, sizeof err), -E2BIG);
  CHECK(strstr(err, "more than 1 levels of nesting") != NULL);
  /* It stops at the first one past: a flood is not read to its end. */
  size_t n = 3u << 20;
  char *flood = malloc(n);
  for (size_t i = 0; i < n; i += 3)
    memcpy(flood + i, "{},", 3);
  const struct jsonbound max = {.containers = 1000};
  CHECK_EQ_INT(jsonbound_check(flood, n, &max, &seen, err, sizeof err), -E2BIG);
  CHECK_EQ_U64(seen.containers, 1001);
  CHECK_EQ_INT(jsonbound_check(flood, n, &none, &seen, err, sizeof err), 0);
  CHECK_EQ_U64(seen.containers, n / 3);
  free(flood);
  return test_done();
}
