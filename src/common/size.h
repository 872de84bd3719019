/* Sizes as users write them: plain bytes or a binary suffix (KiB MiB GiB TiB, also K M G T). */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Parses "4GiB", "512M", "1048576", " 2 GiB" is rejected (no spaces).
 * Returns 0 and sets *ret_bytes, or -EINVAL (malformed) / -ERANGE (overflow);
 * *ret_bytes is untouched on failure. */
int gs_size_parse(const char *text, uint64_t *ret_bytes);

/* Formats bytes with the largest binary unit that keeps it exact to one
 * decimal ("1.5GiB", "256MiB", "17B"). Always NUL-terminates. */
void gs_size_format(uint64_t bytes, char *buf, size_t len);
