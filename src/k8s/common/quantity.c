/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes quantity parsing (quantity.h): exact integer arithmetic, no floating point. */
#include "quantity.h"
#include "errtext.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef unsigned __int128 u128;

/* Significant digits kept exactly; 10^36 < 2^127, so a mantissa below that
 * times 10 still fits. Digits past it only make the value inexact. */
#define MANT_LIMIT ((u128)1000000000000000000ull * (u128)1000000000000000000ull)
#define TEXT_MAX 128

struct suffix {
  const char *name;
  int exp10;     /* power of ten */
  unsigned exp2; /* power of two */
};

static const struct suffix suffixes[] = {
    {"", 0, 0},    {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},   {"G", 9, 0},
    {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
    {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
};

int k8s_quantity_parse(const char *text, int scale, int64_t *ret_value, char *err, size_t errlen) {
  const char *p = text;
  bool neg = false, inexact = false, any_digit = false;
  u128 mant = 0;
  int exp10 = scale;
  unsigned exp2 = 0;

  if (!text || !*text)
    return k8s_err(err, errlen, -EINVAL, "empty quantity (write e.g. 3Gi, 500Mi or 3221225472)");
  if (strnlen(text, TEXT_MAX + 1) > TEXT_MAX)
    return k8s_err(err, errlen, -EINVAL, "quantity longer than %d characters", TEXT_MAX);
  if (scale < 0 || scale > 9)
    return k8s_err(err, errlen, -EINVAL, "internal: scale %d out of 0..9", scale);
  if (*p == '+' || *p == '-')
    neg = *p++ == '-';
  for (; *p >= '0' && *p <= '9'; p++) {
    any_digit = true;
    if (mant < MANT_LIMIT)
      mant = mant * 10 + (unsigned)(*p - '0');
    else
      exp10++; /* integer digits past the kept ones still count */
  }
  if (*p == '.') {
    p++;
    for (; *p >= '0' && *p <= '9'; p++) {
      any_digit = true;
      if (mant < MANT_LIMIT) {
        mant = mant * 10 + (unsigned)(*p - '0');
        exp10--;
      } else if (*p != '0') {
        inexact = true;
      }
    }
  }
  if (!any_digit)
    return k8s_err(err, errlen, -EINVAL,
                   "\"%s\" is not a quantity: it needs digits (e.g. 3Gi, 1.5G, 100m)", text);

  /* An "e"/"E" followed by a sign or digit is an exponent; "E" alone is exa. */
  if ((*p == 'e' || *p == 'E') && (p[1] == '+' || p[1] == '-' || (p[1] >= '0' && p[1] <= '9'))) {
    const char *q = p + 1;
    bool eneg = false;
    long e = 0;
    if (*q == '+' || *q == '-')
      eneg = *q++ == '-';
    if (!(*q >= '0' && *q <= '9'))
      return k8s_err(err, errlen, -EINVAL, "\"%s\": exponent needs digits after %c", text, *p);
    for (; *q >= '0' && *q <= '9'; q++) {
      e = e * 10 + (*q - '0');
      if (e > 1000)
        return k8s_err(err, errlen, -ERANGE, "\"%s\": exponent out of range", text);
    }
    if (*q)
      return k8s_err(err, errlen, -EINVAL, "\"%s\": unexpected \"%s\" after the exponent", text, q);
    exp10 += eneg ? -(int)e : (int)e;
  } else {
    size_t i;
    for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
      if (strcmp(p, suffixes[i].name) == 0)
        break;
    if (i == sizeof(suffixes) / sizeof(suffixes[0]))
      return k8s_err(err, errlen, -EINVAL,
                     "\"%s\": unknown suffix \"%s\" (binary: Ki Mi Gi Ti Pi Ei; decimal: m k M G T "
                     "P E; or an exponent like e6)",
                     text, p);
    exp10 += suffixes[i].exp10;
    exp2 = suffixes[i].exp2;
  }

  /* value = mant * 10^exp10 * 2^exp2, rounded away from zero. */
  if (mant == 0) {
    *ret_value = 0;
    return 0;
  }
  for (unsigned i = 0; i < exp2; i++) {
    if (mant > (((u128)1) << 126))
      return k8s_err(err, errlen, -ERANGE, "\"%s\" is too large (more than 2^63-1)", text);
    mant <<= 1;
  }
  for (; exp10 > 0; exp10--) {
    if (mant > (((u128)1) << 126) / 10)
      return k8s_err(err, errlen, -ERANGE, "\"%s\" is too large (more than 2^63-1)", text);
    mant *= 10;
  }
  for (; exp10 < 0; exp10++) {
    if (mant % 10)
      inexact = true;
    mant /= 10;
    if (mant == 0) {
      inexact = true;
      break;
    }
  }
  if (inexact)
    mant++;
  if (mant > (u128)INT64_MAX)
    return k8s_err(err, errlen, -ERANGE, "\"%s\" is too large (more than 2^63-1)", text);
  *ret_value = neg ? -(int64_t)mant : (int64_t)mant;
  return 0;
}
