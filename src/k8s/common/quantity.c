/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes quantity parsing (quantity.h): exact integer arithmetic, no floating point. */
#include "quantity.h"
#include "errtext.h"

#include <errno.h>
#include <stdbool.h>
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

/* A quantity as read: its value is mant * 10^exp10 * 2^exp2; inexact when digits past the
 * kept ones were not all zero (the value is then a little more than mant says). */
struct number {
  bool neg, inexact;
  u128 mant;
  int exp10;
  unsigned exp2;
};

/* The sign and the digits before and after the point; returns where they end, NULL when
 * there are none. */
static const char *read_mantissa(const char *p, struct number *n) {
  bool any_digit = false;

  if (*p == '+' || *p == '-')
    n->neg = *p++ == '-';
  for (; *p >= '0' && *p <= '9'; p++) {
    any_digit = true;
    if (n->mant < MANT_LIMIT)
      n->mant = n->mant * 10 + (unsigned)(*p - '0');
    else
      n->exp10++; /* integer digits past the kept ones still count */
  }
  if (*p == '.') {
    p++;
    for (; *p >= '0' && *p <= '9'; p++) {
      any_digit = true;
      if (n->mant < MANT_LIMIT) {
        n->mant = n->mant * 10 + (unsigned)(*p - '0');
        n->exp10--;
      } else if (*p != '0') {
        n->inexact = true;
      }
    }
  }
  return any_digit ? p : NULL;
}

/* What follows the number, p: a suffix, or an exponent ("e"/"E" then a sign or digit: "E"
 * alone is exa). */
static int read_suffix(const char *text, const char *p, struct number *n, char *err,
                       size_t errlen) {
  size_t i;

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
    n->exp10 += eneg ? -(int)e : (int)e;
    return 0;
  }
  for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
    if (strcmp(p, suffixes[i].name) == 0)
      break;
  if (i == sizeof(suffixes) / sizeof(suffixes[0]))
    return k8s_err(err, errlen, -EINVAL,
                   "\"%s\": unknown suffix \"%s\" (binary: Ki Mi Gi Ti Pi Ei; decimal: m k M G T "
                   "P E; or an exponent like e6)",
                   text, p);
  n->exp10 += suffixes[i].exp10;
  n->exp2 = suffixes[i].exp2;
  return 0;
}

/* The number's value as an int64, rounded away from zero. */
static int number_value(const char *text, struct number *n, int64_t *ret, char *err,
                        size_t errlen) {
  u128 mant = n->mant;
  bool inexact = n->inexact;

  if (mant == 0) {
    *ret = 0;
    return 0;
  }
  for (unsigned i = 0; i < n->exp2; i++) {
    if (mant > (((u128)1) << 126))
      goto too_large;
    mant <<= 1;
  }
  for (int e = n->exp10; e > 0; e--) {
    if (mant > (((u128)1) << 126) / 10)
      goto too_large;
    mant *= 10;
  }
  for (int e = n->exp10; e < 0; e++) {
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
    goto too_large;
  *ret = n->neg ? -(int64_t)mant : (int64_t)mant;
  return 0;
too_large:
  return k8s_err(err, errlen, -ERANGE, "\"%s\" is too large (more than 2^63-1)", text);
}

int k8s_quantity_parse(const char *text, int scale, int64_t *ret_value, char *err, size_t errlen) {
  struct number n = {.exp10 = scale};
  const char *p;
  int rc;

  if (!text || !*text)
    return k8s_err(err, errlen, -EINVAL, "empty quantity (write e.g. 3Gi, 500Mi or 3221225472)");
  if (strnlen(text, TEXT_MAX + 1) > TEXT_MAX)
    return k8s_err(err, errlen, -EINVAL, "quantity longer than %d characters", TEXT_MAX);
  if (scale < 0 || scale > 9)
    return k8s_err(err, errlen, -EINVAL, "internal: scale %d out of 0..9", scale);
  if (!(p = read_mantissa(text, &n)))
    return k8s_err(err, errlen, -EINVAL,
                   "\"%s\" is not a quantity: it needs digits (e.g. 3Gi, 1.5G, 100m)", text);
  if ((rc = read_suffix(text, p, &n, err, errlen)))
    return rc;
  return number_value(text, &n, ret_value, err, errlen);
}
