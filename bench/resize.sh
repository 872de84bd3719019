#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Live resize: how fast and how exactly `gslice set SLICE --compute 60` moves a hard 30%
# slice (request = limit = 30), alone and next to a best-effort slice, on the simulated GPU.
# Prints a table; docs/benchmarks.md ("Live resize") keeps the results. TRIALS=3.
set -euo pipefail
: "${GSLICE_BUILD:?GSLICE_BUILD=path/to/build}" "${GSLICE_SRC:?GSLICE_SRC=path/to/repo}"
TRIALS=${TRIALS:-3}
W=$(mktemp -d "${TMPDIR:-/tmp}/gslice-bench.XXXXXX")
trap 'jobs -p | xargs -r kill 2> /dev/null; wait 2> /dev/null; rm -rf "$W"' EXIT
export LD_LIBRARY_PATH="$GSLICE_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GSLICE_SIM_STATE="$W/sim" GSLICE_SOCKET="$W/gsliced.sock"
UI_DAEMON_LOG="$W/gsliced.log"
source "$GSLICE_SRC/tests/integration/ui_lib.sh"
ui_start_daemon

# One trial: share at 30% (2 s), then the set; shares in 0.25 s steps for 2 s after it.
trial() { # CASE
  local name="r$RANDOM" other=""
  "$GSLICE" run --name "$name" --compute 30 --compute-limit 30 \
    -- "$SPIN" --ptx "$SPIN_PTX" --kernel-us 1000 --seconds 7 > /dev/null 2>&1 &
  local p=$! q=""
  if [ "$1" = contended ]; then
    other="be$RANDOM"
    "$GSLICE" run --name "$other" -- "$SPIN" --ptx "$SPIN_PTX" --kernel-us 1000 --seconds 7 \
      > /dev/null 2>&1 &
    q=$!
    ui_wait_slice "$other" > /dev/null
  fi
  ui_wait_slice "$name" > /dev/null
  sleep 1
  local before steps="" reach="not in 2 s" i s t
  before=$(ui_share "$name" 2)
  "$GSLICE" set "$name" --compute 60 > /dev/null
  local a b
  a=$(ui_busy "$name")
  for i in 1 2 3 4 5 6 7 8; do
    s=$(ui_share "$name" 0.25)
    steps="$steps $s"
    if [ "$reach" = "not in 2 s" ] && ui_within "$s" 60 3; then reach="$(awk -v i="$i" 'BEGIN { print i * 0.25 }') s"; fi
  done
  b=$(ui_busy "$name")
  # Over [0.5 s, 2 s] after the set, from the 0.25 s steps 3..8.
  local settled
  settled=$(echo "$steps" | awk '{ s = 0; for (i = 3; i <= 8; i++) s += $i; printf "%.1f", s / 6 }')
  printf '| %s | %s%% | %s%% | %s | %s |\n' "$1" "$before" "$settled" "$reach" "$(echo $steps | tr ' ' '/')"
  wait "$p" $q 2> /dev/null || true
}

echo "| case | share at 30% (2 s) | share 0.5–2 s after set --compute 60 | first 0.25 s step within 60±3 | 0.25 s steps after the set (%) |"
echo "|---|---:|---:|---:|---|"
for c in alone contended; do
  for t in $(seq "$TRIALS"); do trial "$c"; done
done
