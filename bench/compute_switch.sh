#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Bench: device idle time per token switch on the simulated GPU, from one holder's last kernel
# end to the next holder's first kernel start (the sim's own record of what ran, read by
# compute_switch), beside the daemon's own estimate (switch_lost_seconds_total in
# gslice status --json). Greedy slices of compute_spin, DUR (5) s after a 1 s warm-up.
# ONLY=PATTERN runs the cases whose name matches (grep -E).
source "$GSLICE_SRC/bench/compute_env.inc"
DUR=${DUR:-5}
bench_daemon
lost_total() { "$BIN/gslice" status --json | sed -n 's/.*"switch_lost_seconds_total": *\([0-9.e+-]*\).*/\1/p' | head -1; }
case_run() {
  local name=$1; shift
  if [ -n "${ONLY:-}" ] && ! grep -qE -- "$ONLY" <<<"$name"; then return 0; fi
  local start i=0 pids=()
  start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 0.5 }')
  for spec in "$@"; do
    local ra=${spec%%|*} pa=${spec#*|}
    # shellcheck disable=SC2086
    "$BIN/gslice" run $ra -- "$TBIN/compute_spin" --start "$start" --warmup 1 --duration "$DUR" $pa \
      >"$BT/out.$i" 2>>"$BT/err" &
    pids+=($!); i=$((i + 1))
  done
  "$TBIN/compute_switch" "$start" 1 "$DUR" >"$BT/switch" &
  local sw=$!
  # The daemon's estimate over the same window.
  sleep "$(awk -v s="$start" -v now="$(date +%s.%N)" 'BEGIN { d = s + 1 - now; printf "%.3f\n", (d > 0 ? d : 0) }')"
  local l0; l0=$(lost_total)
  sleep "$DUR"
  local l1; l1=$(lost_total)
  wait "${pids[@]}" "$sw"
  local r; r=$(cat "$BT/switch")
  local dl; dl=$(awk -v a="$l0" -v b="$l1" -v d="$DUR" 'BEGIN { printf "%.2f", (b - a) / d * 100 }')
  echo "| $name | $(field "$r" switches) ($(field "$r" per_s)/s) | $(field "$r" idle_p50_us) | $(field "$r" idle_p99_us) | $(field "$r" idle_mean_us) | $(field "$r" switch_idle_pct)% | ${dl}% | $(field "$r" busy_pct)% |"
}
echo "| case | switches | idle per switch p50 µs | p99 µs | mean µs | switch idle, of the window | daemon's switch_lost | device busy |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
case_run "70/30, 2 ms" "--compute 70|--label a" "--compute 30|--label b"
case_run "4 x 25, 1 ms" "--compute 25|--label a --kernel-us 1000" \
  "--compute 25|--label b --kernel-us 1000" "--compute 25|--label c --kernel-us 1000" \
  "--compute 25|--label d --kernel-us 1000"
case_run "50/30/20, 0.2/2/20 ms" "--compute 50|--label a --kernel-us 200" \
  "--compute 30|--label b --kernel-us 2000" "--compute 20|--label c --kernel-us 20000"
case_run "3 best effort 2 ms + high-priority bursts" \
  "--priority high|--label hi --kernel-us 1000 --batch 4 --pause-us 50000" \
  "|--label be1" "|--label be2" "|--label be3"
