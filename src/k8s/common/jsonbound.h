/* SPDX-License-Identifier: Apache-2.0 */
/* Bounds on a JSON text before a parser builds a tree of it: one pass over the bytes counting
 * values (member names included), containers (objects and arrays) and nesting depth, with no
 * allocation. A parser's tree costs far more than the text (jansson: ~230 bytes for the three
 * bytes of "{},"), so a body bounded only in bytes is not bounded in memory; this is the cheap
 * refusal that comes first. It is no validator: malformed text is counted as it looks and left
 * to the parser to refuse. No I/O, no log. */
#pragma once
#include <stddef.h>

struct jsonbound {
  size_t values;     /* every value and member name: strings, numbers, literals, containers */
  size_t containers; /* objects and arrays */
  size_t depth;      /* nesting of containers */
};

/* Counts text (len bytes) into *ret_seen, stopping at the first bound of *max passed (a 0 in
 * *max is no bound). 0 when within every bound; -E2BIG when over one, err saying which, with
 * its figure and bound (the counts in *ret_seen are then those at the stop). ret_seen may be
 * NULL. */
int jsonbound_check(const char *text, size_t len, const struct jsonbound *max,
                    struct jsonbound *ret_seen, char *err, size_t errlen);
