/* SPDX-License-Identifier: Apache-2.0 */
/* GPU UUIDs: 16 bytes, and their text form as NVML and CUDA_VISIBLE_DEVICES write it. Pure; owns
 * no state. */
#pragma once
#include <stdint.h>

#define GS_UUID_LEN 16
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (41 bytes with the NUL) and back. */
#define GS_UUID_STR_LEN 41
void gs_uuid_format(const uint8_t uuid[GS_UUID_LEN], char buf[GS_UUID_STR_LEN]);
/* Accepts the "GPU-" prefix or not, dashes anywhere; -EINVAL unless 16 bytes of hex. */
int gs_uuid_parse(const char *text, uint8_t ret_uuid[GS_UUID_LEN]);
/* A comma-separated list of full GPU UUIDs, each with its "GPU-" prefix (as gslice run writes
 * CUDA_VISIBLE_DEVICES and GSLICE_GPUS): 0 and ret_uuids[0..*ret_n); -EINVAL when an item is
 * anything else (an index, a MIG device, a UUID's prefix, an empty item), -E2BIG past `max`.
 * "" is a list of none. */
int gs_uuid_parse_list(const char *text, uint8_t (*ret_uuids)[GS_UUID_LEN], unsigned max,
                       unsigned *ret_n);
