/* SPDX-License-Identifier: Apache-2.0 */
/* uuid.h: GPU UUIDs as text and back, and lists of them. */
#include <errno.h>

#include "test.h"
#include "uuid.h"

#define A "GPU-00112233-4455-6677-8899-aabbccddeeff"
#define B "GPU-ffeeddcc-bbaa-9988-7766-554433221100"

static void test_one(void) {
  uint8_t u[GS_UUID_LEN];
  char text[GS_UUID_STR_LEN];
  CHECK_EQ_INT(gs_uuid_parse(A, u), 0);
  CHECK_EQ_U64(u[0], 0x00);
  CHECK_EQ_U64(u[15], 0xff);
  gs_uuid_format(u, text);
  CHECK_STR(text, A);
  CHECK_EQ_INT(gs_uuid_parse("00112233445566778899aabbccddeeff", u), 0);
  CHECK_EQ_INT(gs_uuid_parse("GPU-0011", u), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse(A "00", u), -EINVAL);
}

static void test_list(void) {
  uint8_t l[3][GS_UUID_LEN];
  unsigned n = 99;
  char text[GS_UUID_STR_LEN];
  CHECK_EQ_INT(gs_uuid_parse_list(A "," B, l, 3, &n), 0);
  CHECK_EQ_U64(n, 2);
  gs_uuid_format(l[1], text);
  CHECK_STR(text, B);
  CHECK_EQ_INT(gs_uuid_parse_list(A, l, 3, &n), 0);
  CHECK_EQ_U64(n, 1);
  CHECK_EQ_INT(gs_uuid_parse_list("", l, 3, &n), 0);
  CHECK_EQ_U64(n, 0);
  n = 7; /* untouched on failure */
  CHECK_EQ_INT(gs_uuid_parse_list("0", l, 3, &n), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse_list(A ",1", l, 3, &n), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse_list("00112233-4455-6677-8899-aabbccddeeff", l, 3, &n), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse_list("GPU-00112233", l, 3, &n), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse_list("MIG-00112233-4455-6677-8899-aabbccddeeff", l, 3, &n), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse_list(A ",," B, l, 3, &n), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse_list("," A, l, 3, &n), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse_list(A ",", l, 3, &n), -EINVAL);
  CHECK_EQ_INT(gs_uuid_parse_list(A "," B "," A "," B, l, 3, &n), -E2BIG);
  CHECK_EQ_U64(n, 7);
}

int main(void) {
  test_one();
  test_list();
  return test_done();
}
