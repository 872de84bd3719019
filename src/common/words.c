/* SPDX-License-Identifier: Apache-2.0 */
/* Priority names, percents, weights and counts (words.h). */
#include "words.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static const struct {
  int32_t value;
  const char *name;
} priorities[] = {
    {GS_PRIORITY_HIGH, "high"},
    {GS_PRIORITY_NORMAL, "normal"},
    {GS_PRIORITY_LOW, "low"},
};

const char *gs_priority_name(int32_t priority) {
  for (size_t i = 0; i < sizeof(priorities) / sizeof(priorities[0]); i++)
    if (priorities[i].value == priority)
      return priorities[i].name;
  return "unknown";
}

int gs_priority_parse(const char *text, int32_t *ret) {
  for (size_t i = 0; text && i < sizeof(priorities) / sizeof(priorities[0]); i++)
    if (!strcmp(text, priorities[i].name)) {
      *ret = priorities[i].value;
      return 0;
    }
  return -EINVAL;
}

static int uint_parsen(const char *text, size_t n, uint64_t min, uint64_t max, uint64_t *ret) {
  uint64_t v = 0;
  bool range = false;

  if (!n)
    return -EINVAL;
  for (const char *p = text; p < text + n; p++) {
    if (*p < '0' || *p > '9')
      return -EINVAL;
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      range = true;
    else
      v = v * 10 + d;
  }
  if (range || v < min || v > max)
    return -ERANGE;
  *ret = v;
  return 0;
}

int gs_uint_parse(const char *text, uint64_t min, uint64_t max, uint64_t *ret) {
  return uint_parsen(text, text ? strlen(text) : 0, min, max, ret);
}

int gs_percent_parse(const char *text, uint32_t min, uint32_t max, uint32_t *ret) {
  size_t n = text ? strlen(text) : 0;
  uint64_t v;

  if (n && text[n - 1] == '%')
    n--;
  int r = uint_parsen(text, n, min, max > GS_PERCENT_MAX ? GS_PERCENT_MAX : max, &v);
  if (r < 0)
    return r;
  *ret = (uint32_t)v;
  return 0;
}

int gs_weight_parse(const char *text, uint32_t *ret) {
  uint64_t v;
  int r = gs_uint_parse(text, GS_WEIGHT_MIN, GS_WEIGHT_MAX, &v);
  if (r < 0)
    return r;
  *ret = (uint32_t)v;
  return 0;
}
