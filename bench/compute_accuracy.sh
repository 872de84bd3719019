#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Bench (c): requested vs achieved share per slice and the device's busy fraction, each case over
# DUR (10) s on the simulated GPU, after a 1 s warm-up; kernels in batches of 8, synchronized.
# ONLY=PATTERN runs the cases whose name matches (grep -E), e.g. ONLY=greedy.
source "$GSLICE_SRC/bench/compute_env.inc"
DUR=${DUR:-10}
bench_daemon
# case NAME SPEC... where SPEC is "run-args|compute_spin-args"
case_run() {
  local name=$1; shift
  if [ -n "${ONLY:-}" ] && ! grep -qE -- "$ONLY" <<<"$name"; then return 0; fi
  local start i=0 pids=() outs=()
  start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 0.5 }')
  for spec in "$@"; do
    local ra=${spec%%|*} pa=${spec#*|}
    # shellcheck disable=SC2086
    "$BIN/gslice" run $ra -- "$TBIN/compute_spin" --start "$start" --warmup 1 --duration "$DUR" $pa \
      >"$BT/out.$i" 2>>"$BT/err" &
    pids+=($!); outs+=("$BT/out.$i"); i=$((i + 1))
  done
  wait "${pids[@]}"
  local busy=0 cells="" j=0
  for spec in "$@"; do
    local line; line=$(cat "${outs[$j]}")
    local ra=${spec%%|*} share
    share=$(field "$line" share)
    busy=$(awk -v a="$busy" -v b="$share" 'BEGIN { print a + b }')
    local req; req=$(sed -n 's/.*--compute \([0-9]*\).*/\1/p' <<<"$ra"); req=${req:-0}
    local lim; lim=$(sed -n 's/.*--compute-limit \([0-9]*\).*/\1/p' <<<"$ra"); lim=${lim:-100}
    local pr; pr=$(sed -n 's/.*--priority \([a-z]*\).*/\1/p' <<<"$ra")
    local k; k=$(sed -n 's/.*--kernel-us \([0-9]*\).*/\1/p' <<<"${spec#*|}"); k=${k:-2000}
    cells+="$(field "$line" label): ${req}/${lim}${pr:+ $pr} $(awk -v k="$k" 'BEGIN{printf "%g", k/1000}')ms → $(awk -v s="$share" 'BEGIN { printf "%.1f", s * 100 }')% (wait p99 $(awk -v w="$(field "$line" wait_p99_us)" 'BEGIN{printf "%.1f", w/1000}') ms)<br>"
    j=$((j + 1))
  done
  echo "| $name | ${cells%<br>} | $(awk -v b="$busy" 'BEGIN { printf "%.1f", b * 100 }')% |"
}
echo "| case | slice: request/limit, kernel → achieved share (launch wait p99) | device busy |"
echo "|---|---|---:|"
case_run "70/30" "--compute 70|--label a" "--compute 30|--label b"
case_run "10/90" "--compute 10|--label a" "--compute 90|--label b"
case_run "hard 30 alone" "--compute 30 --compute-limit 30|--label a"
case_run "hard 30 next to a greedy best-effort slice" \
  "--compute 30 --compute-limit 30|--label a --kernel-us 1000" "|--label be --kernel-us 1000"
case_run "soft 30 alone" "--compute 30|--label a"
case_run "50/30/20 mixed kernels" "--compute 50|--label a --kernel-us 200" \
  "--compute 30|--label b --kernel-us 2000" "--compute 20|--label c --kernel-us 20000"
case_run "4 x 25, 1 ms kernels" "--compute 25|--label a --kernel-us 1000" \
  "--compute 25|--label b --kernel-us 1000" "--compute 25|--label c --kernel-us 1000" \
  "--compute 25|--label d --kernel-us 1000"
# The demo's slices after `gslice set infer --compute 40`: requests add up to 100%.
case_run "demo 40/40/10/10 with priorities" \
  "--compute 40 --compute-limit 60 --priority high|--label train --batch 4" \
  "--compute 40|--label infer --batch 4" \
  "--compute 10 --compute-limit 30 --priority low|--label batch --batch 4" \
  "--compute 10|--label capped --batch 4"
case_run "high-priority bursts among best effort" \
  "--priority high|--label hi --kernel-us 1000 --batch 4 --pause-us 50000" \
  "|--label be1" "|--label be2" "|--label be3"
case_run "same bursts at normal priority (reference)" \
  "|--label hi --kernel-us 1000 --batch 4 --pause-us 50000" \
  "|--label be1" "|--label be2" "|--label be3"
