/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's housekeeping, each second on the loop's timer: idle and refused connections
 * closed, slices whose runner and processes are gone removed, missed token wakeups granted,
 * the slices' regions looked at, the heap trimmed after big replies, the log's left-out counts
 * written and the snapshot published to /metrics. */
#pragma once

struct daemon;

/* Arms the first run, a second from now; each run arms the next. 0 or -errno. */
int housekeeping_start(struct daemon *d);
