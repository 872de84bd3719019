/* SPDX-License-Identifier: Apache-2.0 */
/* The one size parser of gslice: every variable, flag and config value goes through it. */
#include "size.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct unit {
  const char *name;
  unsigned shift;
};

static const struct unit units[] = {
    {"", 0},     {"B", 0},  {"K", 10},   {"KiB", 10}, {"M", 20},
    {"MiB", 20}, {"G", 30}, {"GiB", 30}, {"T", 40},   {"TiB", 40},
};

int gs_size_parse(const char *text, uint64_t *ret_bytes) {
  if (!text || !*text)
    return -EINVAL;
  const char *p = text;
  uint64_t value = 0;
  int digits = 0;
  while (*p >= '0' && *p <= '9') {
    unsigned d = (unsigned)(*p - '0');
    if (value > (UINT64_MAX - d) / 10)
      return -ERANGE;
    value = value * 10 + d;
    digits++;
    p++;
  }
  if (digits == 0)
    return -EINVAL;
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    if (strcmp(p, units[i].name) != 0)
      continue;
    unsigned shift = units[i].shift;
    if (shift && value > (UINT64_MAX >> shift))
      return -ERANGE;
    if ((value << shift) > GS_SIZE_MAX)
      return -ERANGE;
    *ret_bytes = value << shift;
    return 0;
  }
  return -EINVAL;
}

void gs_size_format(uint64_t bytes, char *buf, size_t len) {
  static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned i = 0;
  while (i < 4 && bytes >= (1ULL << (10 * (i + 1))))
    i++;
  if (i == 0) {
    snprintf(buf, len, "%llu%s", (unsigned long long)bytes, names[0]);
    return;
  }
  uint64_t unit = 1ULL << (10 * i);
  uint64_t whole = bytes / unit;
  uint64_t tenth = (bytes % unit) * 10 / unit;
  if (tenth == 0 && bytes % unit == 0)
    snprintf(buf, len, "%llu%s", (unsigned long long)whole, names[i]);
  else
    snprintf(buf, len, "%llu.%llu%s", (unsigned long long)whole, (unsigned long long)tenth,
             names[i]);
}
