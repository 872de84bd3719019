/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes quantities ("3Gi", "1.5G", "100m", "3221225472", "12e6") as integers. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* The format is the one the API documents for resource.Quantity:
 *   quantity ::= [+-] number suffix
 *   number   ::= digits | digits "." digits | digits "." | "." digits
 *   suffix   ::= "" | Ki Mi Gi Ti Pi Ei | m k M G T P E | (e|E) [+-] digits
 * Parses text and returns its value times 10^scale (scale 0: bytes or units,
 * the API's Value(); scale 3: thousandths, MilliValue()), rounded away from
 * zero as the API rounds. Returns 0, -EINVAL (malformed) or -ERANGE (beyond
 * int64); on failure *ret_value is untouched and err (if given) says what was
 * wrong in a sentence naming the text. */
int k8s_quantity_parse(const char *text, int scale, int64_t *ret_value, char *err, size_t errlen);
