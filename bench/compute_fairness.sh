#!/bin/bash
# Bench (d): no starvation (issue 12, item 6) on the simulated GPU, best-effort slices only.
# 1. one slice of 20 ms kernels among 12 of 1 ms, window_ms=200: each one's share of the device
#    time over DUR (6) s after a 1 s warm-up, against the fair 1/13;
# 2. a best-effort slice alone, then a --compute 60 newcomer: the best-effort slice's share of
#    the device time in the newcomer's first second (fair: 20%).
source "$GSLICE_SRC/bench/compute_env.inc"
DUR=${DUR:-6}
bench_daemon --set window_ms=200 --set quantum_max_us=50000
start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 1 }')
pids=()
for i in $(seq 0 12); do
  k=1000; [ "$i" = 0 ] && k=20000
  "$BIN/gslice" run -- "$TBIN/compute_spin" --start "$start" --warmup 1 --duration "$DUR" \
    --kernel-us "$k" --batch 2 --label "s$i" >"$BT/f.$i" 2>>"$BT/err" &
  pids+=($!)
done
wait "${pids[@]}"
total=$(cat "$BT"/f.* | sed -n 's/.*device_s=\([0-9.]*\).*/\1/p' | awk '{ t += $1 } END { print t }')
long=$(field "$(cat "$BT/f.0")" device_s)
shorts=$(for i in $(seq 1 12); do field "$(cat "$BT/f.$i")" device_s; done | sort -n | awk '
  NR == 1 { lo = $1 } { hi = $1 } END { print lo, hi }')
echo "| 12 x 1 ms + 1 x 20 ms best effort, window 200 ms | 20 ms slice: $(awk -v l="$long" -v t="$total" 'BEGIN { printf "%.1f", 100 * l / t }')% of device time (fair 7.7%); 1 ms slices: $(awk -v s="$shorts" -v t="$total" 'BEGIN { split(s, a, " "); printf "%.1f–%.1f", 100 * a[1] / t, 100 * a[2] / t }')% |"
bench_daemon
start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 1 }')
new=$(awk -v s="$start" 'BEGIN { printf "%.3f", s + 2 }')
"$BIN/gslice" run -- "$TBIN/compute_spin" --start "$start" --warmup 2 --duration 1 --kernel-us 1000 \
  --batch 2 --label be >"$BT/n.be" 2>>"$BT/err" &
a=$!
"$BIN/gslice" run --compute 60 -- "$TBIN/compute_spin" --start "$new" --warmup 0 --duration 1 \
  --kernel-us 2000 --batch 2 --label new >"$BT/n.new" 2>>"$BT/err" &
b=$!
wait $a $b
be=$(field "$(cat "$BT/n.be")" device_s) nw=$(field "$(cat "$BT/n.new")" device_s)
echo "| best effort alone, then a --compute 60 newcomer | best effort: $(awk -v a="$be" -v b="$nw" 'BEGIN { printf "%.1f", (a + b > 0 ? 100 * a / (a + b) : 0) }')% of device time in the newcomer's first second (fair 20%), wait p99 $(awk -v w="$(field "$(cat "$BT/n.be")" wait_p99_us)" 'BEGIN { printf "%.0f", w / 1000 }') ms |"
