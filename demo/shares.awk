# SPDX-License-Identifier: Apache-2.0
# Turns status samples into shares over time. Input (one line per slice per sample):
#   TIME NAME BUSY_SECONDS_TOTAL REQUEST_PCT LIMIT_PCT
# Output: TIME NAME SHARE_PCT REQUEST_PCT LIMIT_PCT, TIME relative to the first sample,
# SHARE the device time the slice got over the last `span` seconds (default 1).
BEGIN { if (span == "") span = 1.0 }
{
  t = $1; n = $2; busy = $3
  if (t0 == "") t0 = t
  k = ++cnt[n]; ts[n, k] = t; bs[n, k] = busy
  # Oldest sample at least `span` back; the delta over it is the share.
  j = first[n] ? first[n] : 1
  while (j < k && ts[n, j + 1] <= t - span) j++
  first[n] = j
  if (j < k && t > ts[n, j]) {
    share = 100 * (busy - bs[n, j]) / (t - ts[n, j])
    if (share < 0) share = 0
    printf "%.3f %s %.2f %s %s\n", t - t0, n, share, $4, $5
  }
}
