/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "size.h"
#include "test.h"

int main(void) {
  uint64_t v = 7;
  CHECK_EQ_INT(gs_size_parse("0", &v), 0);
  CHECK_EQ_U64(v, 0);
  CHECK_EQ_INT(gs_size_parse("1048576", &v), 0);
  CHECK_EQ_U64(v, 1048576);
  CHECK_EQ_INT(gs_size_parse("4GiB", &v), 0);
  CHECK_EQ_U64(v, 4ULL << 30);
  CHECK_EQ_INT(gs_size_parse("4G", &v), 0);
  CHECK_EQ_U64(v, 4ULL << 30);
  CHECK_EQ_INT(gs_size_parse("256MiB", &v), 0);
  CHECK_EQ_U64(v, 256ULL << 20);
  CHECK_EQ_INT(gs_size_parse("512K", &v), 0);
  CHECK_EQ_U64(v, 512ULL << 10);
  CHECK_EQ_INT(gs_size_parse("2TiB", &v), 0);
  CHECK_EQ_U64(v, 2ULL << 40);
  CHECK_EQ_INT(gs_size_parse("12B", &v), 0);
  CHECK_EQ_U64(v, 12);

  /* Failures leave the output alone. */
  v = 99;
  CHECK_EQ_INT(gs_size_parse("", &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse(NULL, &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse("GiB", &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse("4 GiB", &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse("4gib", &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse("4GB", &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse("-1", &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse("1.5GiB", &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse("4GiBx", &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse("99999999999999999999", &v), -ERANGE);
  CHECK_EQ_INT(gs_size_parse("16777216TiB", &v), -ERANGE);
  /* Nothing above 1 EiB: 2^64-1 is how the region says "no cap". */
  CHECK_EQ_INT(gs_size_parse("18446744073709551615", &v), -ERANGE);
  CHECK_EQ_INT(gs_size_parse("1048577TiB", &v), -ERANGE);
  CHECK_EQ_INT(gs_size_parse("1152921504606846977", &v), -ERANGE);
  CHECK_EQ_INT(gs_size_parse("2GiB ", &v), -EINVAL);
  CHECK_EQ_INT(gs_size_parse(" 2GiB", &v), -EINVAL);
  CHECK_EQ_U64(v, 99);
  CHECK_EQ_INT(gs_size_parse("1048576TiB", &v), 0);
  CHECK_EQ_U64(v, 1ull << 60);

  char buf[32];
  gs_size_format(256ULL << 20, buf, sizeof buf);
  CHECK_STR(buf, "256MiB");
  gs_size_format(3ULL << 29, buf, sizeof buf);
  CHECK_STR(buf, "1.5GiB");
  gs_size_format(17, buf, sizeof buf);
  CHECK_STR(buf, "17B");
  gs_size_format(1ULL << 40, buf, sizeof buf);
  CHECK_STR(buf, "1TiB");
  return test_done();
}
