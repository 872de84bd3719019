#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The measurement behind the quantum bounds (docs/compute.md): device busy fraction and launch
# wait p99 against quantum_min_us, with four 25% slices of 0.2 ms kernels (the case the lower
# bound decides), over DUR (5) s.
source "$GSLICE_SRC/bench/compute_env.inc"
DUR=${DUR:-5}
echo "| quantum_min | device busy | wait p99 (ms) | token switches/s |"
echo "|---:|---:|---:|---:|"
for qmin in 500 1000 2000 5000 10000; do
  init=$((qmin > 10000 ? qmin : 10000))
  bench_daemon --set quantum_min_us=$qmin --set quantum_init_us=$init
  start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 0.5 }')
  pids=()
  for i in 0 1 2 3; do
    "$BIN/gslice" run --compute 25 -- "$TBIN/compute_spin" --start "$start" --warmup 1 \
      --duration "$DUR" --kernel-us 200 --label s$i >"$BT/q.$i" 2>>"$BT/err" &
    pids+=($!)
  done
  sleep 3
  t1=$("$BIN/gslice" status --json | grep -o '"tokens_total":[0-9]*' | awk -F: '{ s += $2 } END { print s }')
  sleep 1
  t2=$("$BIN/gslice" status --json | grep -o '"tokens_total":[0-9]*' | awk -F: '{ s += $2 } END { print s }')
  wait "${pids[@]}"
  busy=0; p99=0
  for i in 0 1 2 3; do
    l=$(cat "$BT/q.$i")
    busy=$(awk -v a="$busy" -v b="$(field "$l" share)" 'BEGIN { print a + b }')
    p99=$(awk -v a="$p99" -v b="$(field "$l" wait_p99_us)" 'BEGIN { print (b > a ? b : a) }')
  done
  echo "| $((qmin / 1000)).$(( (qmin % 1000) / 100 )) ms | $(awk -v b="$busy" 'BEGIN { printf "%.1f%%", b * 100 }') | $(awk -v p="$p99" 'BEGIN { printf "%.1f", p / 1000 }') | $((t2 - t1)) |"
done
