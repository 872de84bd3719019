/* SPDX-License-Identifier: Apache-2.0 */
/* KEY=VALUE lines: the one parser of gslice's text records (slice.env, gslice-node's records,
 * gsliced's state and config files, the hook's environment lists).
 *
 * The text is split in place at sep ('\n' for files, ',' for a list in one variable). With
 * GS_KV_FILE, blank items and those whose first non-blank is '#' are skipped and blanks around
 * key and value are trimmed (a config file a person writes); without it every item must be
 * exactly KEY=VALUE with a non-empty key (a record a program wrote, or an environment list:
 * anything else is malformed). The value is everything after the first '='. Never logs. */
#pragma once
#include <stddef.h>

enum {
  GS_KV_FILE = 1 << 0, /* comments, blank lines and blanks around key and value allowed */
};

/* Called for each item in order; line is its 1-based number. A negative return stops the parse
 * and is returned (the callback writes err itself then). */
typedef int (*gs_kv_fn)(const char *key, const char *value, unsigned line, void *user, char *err,
                        size_t err_len);

/* Parses text (modified in place). Returns 0; the callback's negative return; or -EBADMSG for a
 * malformed item, with err saying which ("line 3: expected KEY=VALUE"). */
int gs_kv_parse(char *text, char sep, int flags, gs_kv_fn fn, void *user, char *err,
                size_t err_len);
