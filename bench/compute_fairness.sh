#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Bench (d): no starvation (issue 12, item 6) on the simulated GPU, best-effort slices only.
# 1. one slice of 20 ms kernels among 12 of 1 ms, window_ms=200: each one's share of the device
#    time over DUR (6) s after a 1 s warm-up, against the fair 1/13;
# 2. a best-effort slice alone, then a --compute 60 newcomer: the best-effort slice's share of
#    the device time in the newcomer's first second (fair: 20%);
# 3. a --compute 30 slice beside a best-effort one, then a --compute 50 newcomer: the 30% slice's
#    share of the device time in the newcomer's first second, and the longest it went without a
#    batch ending;
# 4. (default window) one slice of 20 ms kernels among 50 of 1 ms, and 5. 64 equal slices of
#    0.5 ms kernels, DUR5 (10) s: each one's share of the device time against the fair 1/n, the
#    longest a slice went without a batch ending. SKIP_MANY=1 leaves 4 and 5 out (51 and 64
#    processes on the machine).
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
# 3. A 30% slice and a best-effort one, then a 50% newcomer.
bench_daemon
start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 1 }')
new=$(awk -v s="$start" 'BEGIN { printf "%.3f", s + 2 }')
"$BIN/gslice" run --compute 30 -- "$TBIN/compute_spin" --start "$start" --warmup 2 --duration 1 \
  --kernel-us 2000 --batch 2 --label g30 >"$BT/g.30" 2>>"$BT/err" &
a=$!
"$BIN/gslice" run -- "$TBIN/compute_spin" --start "$start" --warmup 2 --duration 1 \
  --kernel-us 1000 --batch 2 --label be >"$BT/g.be" 2>>"$BT/err" &
b=$!
"$BIN/gslice" run --compute 50 -- "$TBIN/compute_spin" --start "$new" --warmup 0 --duration 1 \
  --kernel-us 2000 --batch 2 --label new >"$BT/g.new" 2>>"$BT/err" &
c=$!
wait $a $b $c
g=$(field "$(cat "$BT/g.30")" device_s) be=$(field "$(cat "$BT/g.be")" device_s)
nw=$(field "$(cat "$BT/g.new")" device_s)
echo "| 30% + best effort, then a --compute 50 newcomer | 30% slice: $(awk -v a="$g" -v b="$be" -v c="$nw" 'BEGIN { printf "%.1f", 100 * a / (a + b + c) }')% of device time in the newcomer's first second, longest without a batch ending $(field "$(cat "$BT/g.30")" gap_max_ms) ms; best effort $(awk -v a="$g" -v b="$be" -v c="$nw" 'BEGIN { printf "%.1f", 100 * b / (a + b + c) }')% (fair 6.7, floor 3.3) |"
[ -z "${SKIP_MANY:-}" ] || exit 0
DUR5=${DUR5:-10}
# many N KERNEL_US ODD_US NAME: N best-effort slices of KERNEL_US kernels, slice 0 of ODD_US.
many() {
  bench_daemon
  local start pids=() n=$1
  start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 2 }')
  rm -f "$BT"/m.*
  for i in $(seq 0 $((n - 1))); do
    # Slice 0 in batches of one: its share is counted in whole batches, and a fair part of a
    # 20 ms-kernel slice among 51 is a few of them.
    k=$2 b=2; [ "$i" = 0 ] && k=$3 b=1
    "$BIN/gslice" run -- "$TBIN/compute_spin" --start "$start" --warmup 1 --duration "$DUR5" \
      --kernel-us "$k" --batch $b --label "m$i" >"$BT/m.$i" 2>>"$BT/err" &
    pids+=($!)
  done
  wait "${pids[@]}"
  local total odd rest gap zero
  total=$(cat "$BT"/m.* | sed -n 's/.*device_s=\([0-9.]*\).*/\1/p' | awk '{ t += $1 } END { print t }')
  odd=$(field "$(cat "$BT/m.0")" device_s)
  rest=$(for i in $(seq 1 $((n - 1))); do field "$(cat "$BT/m.$i")" device_s; done | sort -n | awk '
    NR == 1 { lo = $1 } { hi = $1 } END { print lo, hi }')
  zero=$(for i in $(seq 0 $((n - 1))); do field "$(cat "$BT/m.$i")" kernels; done | awk '$1 == 0 { z++ } END { print z + 0 }')
  gap=$(for i in $(seq 0 $((n - 1))); do field "$(cat "$BT/m.$i")" gap_max_ms; done | sort -n | tail -1)
  echo "| $4 | slice 0: $(awk -v o="$odd" -v t="$total" -v n="$n" 'BEGIN { printf "%.0f", 100 * o / t * n }')% of fair; the others $(awk -v s="$rest" -v t="$total" -v n="$n" 'BEGIN { split(s, a, " "); printf "%.0f–%.0f", 100 * a[1] / t * n, 100 * a[2] / t * n }')% of fair; $zero with nothing; longest without a batch ending $gap ms; device busy $(awk -v t="$total" -v d="$DUR5" 'BEGIN { printf "%.1f", 100 * t / d }')% |"
}
many 51 1000 20000 "1 x 20 ms among 50 x 1 ms best effort, ${DUR5} s"
many 64 500 500 "64 x 0.5 ms best effort, ${DUR5} s"
