#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Memory: allocation overhead. The added cost of a cuMemAlloc + cuMemFree pair through the hook
# versus straight to the driver, with 1 and 8 processes of one slice allocating at once.
# Driver: the next libcuda.so.1 on the library path (the simulated one from the build, unless
# HOOK_BENCH_REAL_DRIVER=1 keeps LD_LIBRARY_PATH as it is, for a real GPU).
set -euo pipefail
: "${GSLICE_BUILD:?run through make bench (scripts/bench.sh), which sets GSLICE_BUILD}"
PAIRS=${HOOK_BENCH_PAIRS:-20000}
SIZE=${HOOK_BENCH_SIZE:-1MiB}
T=$(mktemp -d "${TMPDIR:-/tmp}/gslice-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT
if [ "${HOOK_BENCH_REAL_DRIVER:-0}" != 1 ]; then
  export LD_LIBRARY_PATH="$GSLICE_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export GSLICE_SIM_STATE="$T/sim" GSLICE_SIM_MEMORY=64GiB
fi
export GSLICE_STATE_DIR="$T/slice" GSLICE_MEMORY_LIMIT=32GiB
BENCH="$GSLICE_BUILD/bench/hook_bench"
HOOK="$GSLICE_BUILD/lib/libgslice.so"

REPS=${HOOK_BENCH_REPS:-3}

# run MODE PROCS REP: one round, every process's samples appended to $T/all.MODE.PROCS.
run() {
  local mode=$1 procs=$2 rep=$3 pids="" i
  rm -f "$T/go"
  for i in $(seq "$procs"); do
    if [ "$mode" = hook ]; then
      LD_PRELOAD="$HOOK" "$BENCH" "$PAIRS" "$SIZE" "$T/s.$rep.$i" "$T/go" &
    else
      "$BENCH" "$PAIRS" "$SIZE" "$T/s.$rep.$i" "$T/go" &
    fi
    pids="$pids $!"
  done
  sleep 0.5
  touch "$T/go"
  for p in $pids; do wait "$p"; done
  cat "$T"/s.$rep.* >> "$T/all.$mode.$procs"
  rm -f "$T"/s.$rep.*
}

# stats MODE PROCS: "median p99" in ns over every pair of every process and round.
stats() {
  sort -n "$T/all.$1.$2" | awk '{v[NR] = $1} END {print v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1]}'
}

us() { awk -v n="$1" 'BEGIN {printf "%.2f", n / 1000}'; }
echo "cuMemAlloc($SIZE) + cuMemFree pairs, $PAIRS per process x $REPS interleaved rounds, times in us"
printf "| processes | driver median | driver p99 | hook median | hook p99 | added median | added p99 |\n"
printf "|---|---|---|---|---|---|---|\n"
for procs in 1 8; do
  for rep in $(seq "$REPS"); do # interleaved, so drift in the machine hits both alike
    run direct "$procs" "$rep"
    run hook "$procs" "$rep"
  done
  read -r dm dp < <(stats direct "$procs")
  read -r hm hp < <(stats hook "$procs")
  printf "| %d | %s | %s | %s | %s | %s | %s |\n" "$procs" "$(us "$dm")" "$(us "$dp")" \
    "$(us "$hm")" "$(us "$hp")" "$(us $((hm - dm)))" "$(us $((hp - dp)))"
done
