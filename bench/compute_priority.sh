#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Bench (issue 12, item 5): a high-priority slice of bursts (4 kernels of 1 ms, 50 ms apart)
# among three greedy best-effort slices of 2 ms kernels, DUR (10) s after a 1 s warm-up, REPS
# (3) times. The high slice's launch wait as its process sees it (compute_spin: how long the
# first launch of a batch blocked in the gate, p50/p99), and as the daemon sees it (request to
# grant, from the slice's wait histogram in gslice status --json: the share of waits within
# 1 ms and 2 ms). The difference is the processes' own wake-ups on a loaded machine.
source "$GSLICE_SRC/bench/compute_env.inc"
DUR=${DUR:-10}
REPS=${REPS:-3}
bench_daemon
# The hi slice's wait histogram, read before its runner exits: "le1 le2 count".
hist() {
  "$BIN/gslice" status --json | /usr/bin/python3 -c '
import json, sys
st = json.load(sys.stdin)
for s in st.get("slices", []):
    if s.get("priority") != "high":
        continue
    for g in s.get("gpus", []):
        b = {x["le"]: x["count"] for x in g["wait_buckets"]}
        n = g["wait_count"]
        print("%.1f %.1f %d" % (100.0 * b[0.001] / max(n, 1), 100.0 * b[0.002] / max(n, 1), n))
'
}
echo "| run | high: launch wait p50 / p99 (its process) | daemon: waits ≤ 1 ms / ≤ 2 ms (of n) | best effort shares | device busy |"
echo "|---|---|---|---|---:|"
for r in $(seq "$REPS"); do
  start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 0.5 }')
  "$BIN/gslice" run --priority high -- "$TBIN/compute_spin" --start "$start" --warmup 1 \
    --duration "$DUR" --label hi --kernel-us 1000 --batch 4 --pause-us 50000 >"$BT/hi" 2>>"$BT/err" &
  pids=($!)
  for i in 1 2 3; do
    "$BIN/gslice" run -- "$TBIN/compute_spin" --start "$start" --warmup 1 --duration "$DUR" \
      --label "be$i" >"$BT/be$i" 2>>"$BT/err" &
    pids+=($!)
  done
  sleep "$(awk -v s="$start" -v d="$DUR" -v now="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", s + 1 + d - 0.3 - now }')"
  h=$(hist)
  wait "${pids[@]}"
  hi=$(cat "$BT/hi")
  shares="" busy=$(field "$hi" share)
  for i in 1 2 3; do
    l=$(cat "$BT/be$i")
    shares+="$(awk -v s="$(field "$l" share)" 'BEGIN { printf "%.1f", s * 100 }')% "
    busy=$(awk -v a="$busy" -v b="$(field "$l" share)" 'BEGIN { print a + b }')
  done
  read -r le1 le2 n <<<"$h"
  echo "| $r | $(awk -v a="$(field "$hi" wait_p50_us)" -v b="$(field "$hi" wait_p99_us)" 'BEGIN { printf "%.2f / %.2f ms", a / 1000, b / 1000 }') | ${le1}% / ${le2}% (of $n) | ${shares% } | $(awk -v b="$busy" 'BEGIN { printf "%.1f", b * 100 }')% |"
done
