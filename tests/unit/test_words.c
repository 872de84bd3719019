/* SPDX-License-Identifier: Apache-2.0 */
/* words.h: priority names, percents, weights and counts, strict both ways. */
#include <errno.h>

#include "test.h"
#include "words.h"

int main(void) {
  int32_t p = 7;
  CHECK_STR(gs_priority_name(GS_PRIORITY_HIGH), "high");
  CHECK_STR(gs_priority_name(GS_PRIORITY_NORMAL), "normal");
  CHECK_STR(gs_priority_name(GS_PRIORITY_LOW), "low");
  CHECK_STR(gs_priority_name(5), "unknown");
  CHECK_EQ_INT(gs_priority_parse("low", &p), 0);
  CHECK_EQ_INT(p, GS_PRIORITY_LOW);
  CHECK_EQ_INT(gs_priority_parse("High", &p), -EINVAL);
  CHECK_EQ_INT(gs_priority_parse("unknown", &p), -EINVAL);
  CHECK_EQ_INT(gs_priority_parse(NULL, &p), -EINVAL);
  CHECK_EQ_INT(p, GS_PRIORITY_LOW);

  uint64_t v = 3;
  CHECK_EQ_INT(gs_uint_parse("18446744073709551615", 0, UINT64_MAX, &v), 0);
  CHECK_EQ_U64(v, UINT64_MAX);
  CHECK_EQ_INT(gs_uint_parse("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
  CHECK_EQ_INT(gs_uint_parse("", 0, 9, &v), -EINVAL);
  CHECK_EQ_INT(gs_uint_parse("+1", 0, 9, &v), -EINVAL);
  CHECK_EQ_INT(gs_uint_parse(" 1", 0, 9, &v), -EINVAL);
  CHECK_EQ_INT(gs_uint_parse("1 ", 0, 9, &v), -EINVAL);
  CHECK_EQ_INT(gs_uint_parse("0x1", 0, 9, &v), -EINVAL);
  CHECK_EQ_INT(gs_uint_parse("10", 0, 9, &v), -ERANGE);
  CHECK_EQ_U64(v, UINT64_MAX);

  uint32_t u = 9;
  CHECK_EQ_INT(gs_percent_parse("60", 0, 100, &u), 0);
  CHECK_EQ_U64(u, 60);
  CHECK_EQ_INT(gs_percent_parse("100%", 1, 100, &u), 0);
  CHECK_EQ_U64(u, 100);
  CHECK_EQ_INT(gs_percent_parse("0", 1, 100, &u), -ERANGE);
  CHECK_EQ_INT(gs_percent_parse("101", 0, 100, &u), -ERANGE);
  CHECK_EQ_INT(gs_percent_parse("101", 0, 1000, &u), -ERANGE);
  CHECK_EQ_INT(gs_percent_parse("%", 0, 100, &u), -EINVAL);
  CHECK_EQ_INT(gs_percent_parse("5%%", 0, 100, &u), -EINVAL);
  CHECK_EQ_INT(gs_percent_parse("-1", 0, 100, &u), -EINVAL);
  CHECK_EQ_INT(gs_percent_parse("99999999999999999999999", 0, 100, &u), -ERANGE);
  CHECK_EQ_U64(u, 100);

  CHECK_EQ_INT(gs_weight_parse("1", &u), 0);
  CHECK_EQ_U64(u, 1);
  CHECK_EQ_INT(gs_weight_parse("1000", &u), 0);
  CHECK_EQ_U64(u, GS_WEIGHT_MAX);
  CHECK_EQ_INT(gs_weight_parse("0", &u), -ERANGE);
  CHECK_EQ_INT(gs_weight_parse("1001", &u), -ERANGE);
  CHECK_EQ_INT(gs_weight_parse("1.5", &u), -EINVAL);
  return test_done();
}
