/* SPDX-License-Identifier: Apache-2.0 */
/* Sizes as users write them: plain bytes or a binary suffix (KiB MiB GiB TiB, also K M G T). */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* The largest size any gslice input takes, 1 EiB (1048576TiB): far above any device, and below
 * UINT64_MAX, which the memory region reserves for "no cap" (a cap of 2^64-1 bytes read back as
 * no cap at all). */
#define GS_SIZE_MAX (1ull << 60)
#define GS_SIZE_MAX_TEXT "1048576TiB"

/* Parses "4GiB", "512M", "1048576"; whitespace anywhere (" 2GiB", "2GiB ", "2 GiB") is rejected.
 * Returns 0 and sets *ret_bytes, or -EINVAL (malformed) / -ERANGE (above GS_SIZE_MAX);
 * *ret_bytes is untouched on failure. */
int gs_size_parse(const char *text, uint64_t *ret_bytes);

/* Formats bytes with the largest binary unit that keeps it exact to one
 * decimal ("1.5GiB", "256MiB", "17B"). Always NUL-terminates. */
void gs_size_format(uint64_t bytes, char *buf, size_t len);
