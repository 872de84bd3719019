/* The one monotonic clock of the library code (region, hook): CLOCK_MONOTONIC in ns. Owns no
 * state. The daemon's loop_now (loop.h) reads the same clock. */
#pragma once
#include <stdint.h>
#include <time.h>

static inline uint64_t gs_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
