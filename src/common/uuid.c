/* SPDX-License-Identifier: Apache-2.0 */
/* GPU UUIDs as text (uuid.h): "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" and back. */
#include "uuid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void gs_uuid_format(const uint8_t u[GS_UUID_LEN], char buf[GS_UUID_STR_LEN]) {
  snprintf(buf, GS_UUID_STR_LEN,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
           u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
           u[15]);
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

int gs_uuid_parse(const char *text, uint8_t ret_uuid[GS_UUID_LEN]) {
  uint8_t u[GS_UUID_LEN];
  if (strncmp(text, "GPU-", 4) == 0)
    text += 4;
  unsigned n = 0;
  for (const char *p = text; *p; p++) {
    if (*p == '-')
      continue;
    int hi = hexval(p[0]), lo = hi < 0 ? -1 : hexval(p[1]);
    if (hi < 0 || lo < 0 || n >= GS_UUID_LEN)
      return -EINVAL;
    u[n++] = (uint8_t)(hi << 4 | lo);
    p++;
  }
  if (n != GS_UUID_LEN)
    return -EINVAL;
  memcpy(ret_uuid, u, sizeof(u));
  return 0;
}

int gs_uuid_parse_list(const char *text, uint8_t (*ret_uuids)[GS_UUID_LEN], unsigned max,
                       unsigned *ret_n) {
  char item[GS_UUID_STR_LEN + 8];
  unsigned n = 0;
  for (const char *p = text; *p;) {
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof(item))
      return -EINVAL;
    memcpy(item, p, len);
    item[len] = 0;
    if (n == max)
      return -E2BIG;
    if (strncmp(item, "GPU-", 4) != 0 || gs_uuid_parse(item, ret_uuids[n]) < 0)
      return -EINVAL;
    n++;
    p += len;
    if (*p == ',' && !*++p)
      return -EINVAL; /* a trailing comma: an empty item */
  }
  *ret_n = n;
  return 0;
}
