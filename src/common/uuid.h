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
