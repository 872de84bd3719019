/* SPDX-License-Identifier: Apache-2.0 */
/* A tiny assertion header for unit tests: one binary per module, exit status says it all. */
#pragma once
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures;
static int test_checks;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    test_checks++;                                                                                 \
    if (!(cond)) {                                                                                 \
      test_failures++;                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                     \
    }                                                                                              \
  } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
  do {                                                                                             \
    uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                               \
    test_checks++;                                                                                 \
    if (a_ != b_) {                                                                                \
      test_failures++;                                                                             \
      fprintf(stderr, "%s:%d: %s == %s failed: %" PRIu64 " != %" PRIu64 "\n", __FILE__, __LINE__,  \
              #a, #b, a_, b_);                                                                     \
    }                                                                                              \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    test_checks++;                                                                                 \
    if (a_ != b_) {                                                                                \
      test_failures++;                                                                             \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, a_,    \
              b_);                                                                                 \
    }                                                                                              \
  } while (0)

#define CHECK_STR(a, b)                                                                            \
  do {                                                                                             \
    const char *a_ = (a), *b_ = (b);                                                               \
    test_checks++;                                                                                 \
    if (strcmp(a_, b_) != 0) {                                                                     \
      test_failures++;                                                                             \
      fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a, #b,    \
              a_, b_);                                                                             \
    }                                                                                              \
  } while (0)

/* A binary that ran no check fails: a test that checks nothing cannot pass. */
static inline int test_done(void) {
  printf("%d checks, %d failed\n", test_checks, test_failures);
  if (!test_checks)
    fprintf(stderr, "no check ran: the test tests nothing\n");
  return test_failures || !test_checks ? 1 : 0;
}
