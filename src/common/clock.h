/* SPDX-License-Identifier: Apache-2.0 */
/* The one monotonic clock of every program: CLOCK_MONOTONIC in ns (or ms). Owns no state. The
 * daemon's loop_now (loop.h) and gslice-node's node_now are this clock under their own names. */
#pragma once
#include <stdint.h>
#include <time.h>

static inline uint64_t gs_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The same clock in milliseconds. */
static inline uint64_t gs_mono_ms(void) {
  return gs_mono_ns() / 1000000;
}
