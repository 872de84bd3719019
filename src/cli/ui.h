/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's see-and-steer commands (status, top, set) and the few daemon calls they share. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "proto.h"
#include "status.h"

/* cmd_status, cmd_top, cmd_set (cli.h) are main.c's entries for these commands; they
 * return the exit status: 0 ok, 1 failure, 2 bad usage. */

/* Asks gsliced for the node snapshot. On failure returns -errno and leaves a sentence
 * for the user in err (what failed, what to do). */
int gs_ui_fetch_status(struct gs_status *ret, char *err, size_t errlen);

/* Finds a slice by name or by numeric id in a snapshot. Returns its index, or -ENOENT
 * (no such slice) / -EEXIST (the name is shared: use the id), with a sentence in err. */
int gs_ui_find_slice(const struct gs_status *st, const char *which, char *err, size_t errlen);

/* Sends SET (change a live slice). On refusal returns -errno with the daemon's reason
 * (figures included) in err. */
int gs_ui_set(const struct gs_msg_set *req, char *err, size_t errlen);
