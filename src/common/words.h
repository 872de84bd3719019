/* SPDX-License-Identifier: Apache-2.0 */
/* A slice's words and numbers as people write and read them: priority names, percents, weights
 * and plain counts, parsed strictly and printed one way, with the bounds of proto.h. The CLI,
 * the daemon, its metrics and the Kubernetes codecs all go through here, so "high" and 1..1000
 * mean the same everywhere. Sizes ("4GiB") are size.h's. Never logs. */
#pragma once
#include <stdint.h>

#include "proto.h"
#include "status.h"

/* For messages: what gs_priority_parse takes. */
#define GS_PRIORITY_WORDS "high, normal or low"

/* "high", "normal", "low"; any other value "unknown" (a reader shows it as it is, never as a
 * valid class). */
const char *gs_priority_name(int32_t priority);

/* "high" / "normal" / "low" -> enum gs_priority; -EINVAL for anything else, *ret untouched. */
int gs_priority_parse(const char *text, int32_t *ret);

/* Decimal digits only (no sign, blanks or base prefix): -EINVAL when malformed, -ERANGE outside
 * min..max; *ret untouched on failure. */
int gs_uint_parse(const char *text, uint64_t min, uint64_t max, uint64_t *ret);

/* A percent of one GPU, "60" or "60%", within min..max (both within 0..GS_PERCENT_MAX). */
int gs_percent_parse(const char *text, uint32_t min, uint32_t max, uint32_t *ret);

/* A weight, GS_WEIGHT_MIN..GS_WEIGHT_MAX. */
int gs_weight_parse(const char *text, uint32_t *ret);
