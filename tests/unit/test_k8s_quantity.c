/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes quantities: every form the API documents, rounding as the API rounds, and refusals. */
#include <errno.h>

#include "quantity.h"
#include "test.h"

static int64_t q(const char *text, int scale) {
  int64_t v = -777;
  char err[256] = "";
  int rc = k8s_quantity_parse(text, scale, &v, err, sizeof err);
  if (rc) {
    fprintf(stderr, "unexpected failure on \"%s\": %s\n", text, err);
    return -777;
  }
  return v;
}

static int bad(const char *text, int want_rc) {
  int64_t v = 42;
  char err[256] = "";
  int rc = k8s_quantity_parse(text, 0, &v, err, sizeof err);
  if (rc != want_rc || v != 42 || !err[0]) {
    fprintf(stderr, "\"%s\": rc %d (want %d), v %lld, err \"%s\"\n", text ? text : "(null)", rc,
            want_rc, (long long)v, err);
    return 0;
  }
  return 1;
}

int main(void) {
  /* Plain, binary and decimal suffixes. */
  CHECK_EQ_INT(q("3221225472", 0), 3221225472LL);
  CHECK_EQ_INT(q("3Gi", 0), 3LL << 30);
  CHECK_EQ_INT(q("500Mi", 0), 500LL << 20);
  CHECK_EQ_INT(q("1Ki", 0), 1024);
  CHECK_EQ_INT(q("2Ti", 0), 2LL << 40);
  CHECK_EQ_INT(q("1Pi", 0), 1LL << 50);
  CHECK_EQ_INT(q("7Ei", 0), 7LL << 60);
  CHECK_EQ_INT(q("1.5G", 0), 1500000000LL);
  CHECK_EQ_INT(q("1.5Gi", 0), 3LL << 29);
  CHECK_EQ_INT(q("2k", 0), 2000);
  CHECK_EQ_INT(q("3M", 0), 3000000);
  CHECK_EQ_INT(q("1T", 0), 1000000000000LL);
  CHECK_EQ_INT(q("1P", 0), 1000000000000000LL);
  CHECK_EQ_INT(q("9E", 0), 9000000000000000000LL);
  CHECK_EQ_INT(q("0", 0), 0);
  CHECK_EQ_INT(q("+5", 0), 5);
  CHECK_EQ_INT(q("-5", 0), -5);
  CHECK_EQ_INT(q(".5Ki", 0), 512);
  CHECK_EQ_INT(q("5.", 0), 5);
  CHECK_EQ_INT(q("0003", 0), 3);
  /* Exponents (e and E followed by digits; "E" alone is exa). */
  CHECK_EQ_INT(q("12e6", 0), 12000000);
  CHECK_EQ_INT(q("12E6", 0), 12000000);
  CHECK_EQ_INT(q("1e+3", 0), 1000);
  CHECK_EQ_INT(q("15e-1", 0), 2); /* 1.5 rounds up */
  CHECK_EQ_INT(q("1.5e3", 0), 1500);
  /* Milli: rounding away from zero, and scale 3 as MilliValue(). */
  CHECK_EQ_INT(q("100m", 0), 1);
  CHECK_EQ_INT(q("100m", 3), 100);
  CHECK_EQ_INT(q("1", 3), 1000);
  CHECK_EQ_INT(q("1.0001", 3), 1001);
  CHECK_EQ_INT(q("-1.5", 0), -2);
  CHECK_EQ_INT(q("1.5", 0), 2);
  CHECK_EQ_INT(q("0.000000000000000000000000000000000000000000001", 0), 1);
  CHECK_EQ_INT(q("30", 0), 30);
  /* Limits of int64. */
  CHECK_EQ_INT(q("9223372036854775807", 0), INT64_MAX);
  CHECK(bad("9223372036854775808", -ERANGE));
  CHECK(bad("8Ei", -ERANGE));
  CHECK(bad("10E", -ERANGE));
  CHECK(bad("1e19", -ERANGE));
  CHECK(bad("1e99999", -ERANGE));
  CHECK(bad("100000000000000000000000000000000000000000000000000", -ERANGE));
  /* Malformed. */
  CHECK(bad("", -EINVAL));
  CHECK(bad(NULL, -EINVAL));
  CHECK(bad("Gi", -EINVAL));
  CHECK(bad(".", -EINVAL));
  CHECK(bad("+", -EINVAL));
  CHECK(bad("3 Gi", -EINVAL));
  CHECK(bad(" 3Gi", -EINVAL));
  CHECK(bad("3GiB", -EINVAL));
  CHECK(bad("3gi", -EINVAL));
  CHECK(bad("3K", -EINVAL));
  CHECK(bad("3KiB", -EINVAL));
  CHECK(bad("1.2.3", -EINVAL));
  CHECK(bad("1e", -EINVAL));
  CHECK(bad("1e3Gi", -EINVAL));
  CHECK(bad("1e-", -EINVAL));
  CHECK(bad("--1", -EINVAL));
  CHECK(bad("0x10", -EINVAL));
  CHECK(bad("1,5Gi", -EINVAL));
  CHECK(bad("3Gi\n", -EINVAL));

  /* The message names the text and what to write. */
  char err[256];
  int64_t v;
  CHECK_EQ_INT(k8s_quantity_parse("3GB", 0, &v, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "3GB") && strstr(err, "Gi"));
  return test_done();
}
