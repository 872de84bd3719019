/* SPDX-License-Identifier: Apache-2.0 */
/* buf.h and prom.h: growth, the bound, sticky errors, JSON and Prometheus escaping. */
#include <errno.h>
#include <math.h>

#include "buf.h"
#include "prom.h"
#include "test.h"

static void growth_and_bound(void) {
  struct gs_buf b = GS_BUF_INIT(0);
  for (int i = 0; i < 10000; i++)
    gs_buf_printf(&b, "%d,", i);
  CHECK_EQ_INT(b.err, 0);
  CHECK(b.len > 40000 && b.p[b.len] == 0);
  CHECK(!strncmp(b.p, "0,1,2,", 6));
  gs_buf_consume(&b, 2);
  CHECK(!strncmp(b.p, "1,2,", 4));
  gs_buf_clear(&b);
  CHECK_EQ_U64(b.len, 0);
  CHECK_STR(b.p, "");
  gs_buf_free(&b);

  struct gs_buf small = GS_BUF_INIT(8);
  CHECK_EQ_INT(gs_buf_puts(&small, "12345678"), 0);
  CHECK_EQ_INT(gs_buf_putc(&small, '9'), -EFBIG);
  /* Sticky: a later append that would fit does nothing and says why. */
  gs_buf_consume(&small, 4);
  CHECK_EQ_INT(gs_buf_puts(&small, "x"), -EFBIG);
  CHECK_STR(small.p, "5678");
  int err = 0;
  CHECK(gs_buf_steal(&small, NULL, &err) == NULL);
  CHECK_EQ_INT(err, -EFBIG);
  CHECK(small.p == NULL && small.err == 0 && small.max == 8);

  struct gs_buf big = GS_BUF_INIT(4);
  CHECK_EQ_INT(gs_buf_printf(&big, "%s", "far more than four bytes"), -EFBIG);
  gs_buf_free(&big);

  struct gs_buf e = GS_BUF_INIT(0);
  size_t len = 9;
  char *s = gs_buf_steal(&e, &len, &err);
  CHECK(s && !s[0] && len == 0 && err == 0);
  free(s);
}

static void json_escaping(void) {
  struct gs_buf b = GS_BUF_INIT(0);
  gs_buf_json_str(&b, "a\"b\\c\n\t\x01");
  CHECK_STR(b.p, "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  gs_buf_clear(&b);
  /* Valid UTF-8 passes as it is; anything else becomes U+FFFD. */
  gs_buf_json_str(&b, "gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK_STR(b.p, "\"gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80\"");
  gs_buf_clear(&b);
  gs_buf_json_str(&b, "\xff\xc0\xaf\xed\xa0\x80x\xe2\x82");
  CHECK_STR(b.p, "\"\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffdx\\ufffd\\ufffd\"");
  gs_buf_clear(&b);
  gs_buf_json_strn(&b, "a\0b", 3);
  CHECK_STR(b.p, "\"a\\u0000b\"");
  gs_buf_free(&b);
}

static void prometheus(void) {
  struct gs_buf b = GS_BUF_INIT(0);
  gs_prom_family(&b, "m_total", "counter", "Lines\\ of\ntext.");
  CHECK_STR(b.p, "# HELP m_total Lines\\\\ of\\ntext.\n# TYPE m_total counter\n");
  gs_buf_clear(&b);
  const char *labels[] = {"ns", "a\"b\\c\nd", "slice", "s", NULL};
  gs_prom_sample_u64(&b, "m_total", NULL, labels, 18446744073709551615ull);
  CHECK_STR(b.p, "m_total{ns=\"a\\\"b\\\\c\\nd\",slice=\"s\"} 18446744073709551615\n");
  gs_buf_clear(&b);
  gs_prom_sample(&b, "m", "_sum", NULL, 0.1);
  gs_prom_sample(&b, "m", NULL, NULL, NAN);
  gs_prom_sample(&b, "m", NULL, NULL, -INFINITY);
  gs_prom_sample(&b, "m", NULL, NULL, 1e21);
  CHECK_STR(b.p, "m_sum 0.1\nm NaN\nm -Inf\nm 1e+21\n");
  gs_buf_free(&b);
}

int main(void) {
  growth_and_bound();
  json_escaping();
  prometheus();
  return test_done();
}
