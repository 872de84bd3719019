#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compute isolation on a real GPU, in one command: 70/30 and hard 30 with the real spin kernel.
#   bash tests/gpu/compute_shares.sh [BUILD_DIR]      (default: build; run `make` first)
# Builds the workload against the machine's libcuda.so.1, starts a private gsliced, runs each
# case for DUR (10) s after a 1 s warm-up, and prints requested vs achieved share, PASS/FAIL.
# Share = kernels x their length / wall time: spin kernels busy-wait on the global timer, so
# they measure wall time on the device; with gslice only one slice runs at a time.
# Dry run on the sim: GSLICE_GPU_LIBDIR=build/sim LD_LIBRARY_PATH=build/sim bash tests/gpu/compute_shares.sh
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd) || { echo "no build dir; run make first" >&2; exit 1; }
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
DUR=${DUR:-10}
W=$(mktemp -d "${TMPDIR:-/tmp}/gslice-gpu-compute.XXXXXX")
trap 'jobs -p | xargs -r kill 2>/dev/null; sleep 0.2; rm -rf "$W"' EXIT
export GSLICE_SRC="$SRC" GSLICE_SOCKET="$W/gsliced.sock" GSLICE_DAEMON_STATE_DIR="$W/daemon"
LIBDIR=${GSLICE_GPU_LIBDIR:+-L$GSLICE_GPU_LIBDIR}
if ! ${CC:-cc} -O2 -I"$CUDA_HOME/include" -o "$W/compute_spin" "$SRC/tests/progs/compute_spin.c" \
    $LIBDIR -l:libcuda.so.1 2>"$W/build.log"; then
  cat "$W/build.log" >&2
  echo "cannot build the workload against libcuda.so.1 (is a driver installed?)" >&2
  exit 1
fi
"$BUILD/bin/gsliced" --state-dir "$W/daemon" --foreground 2>"$W/gsliced.log" &
for _ in $(seq 100); do [ -S "$GSLICE_SOCKET" ] && break; sleep 0.05; done

fails=0
printf '%-14s %-8s %-10s %-9s %s\n' CASE SLICE REQ/LIMIT ACHIEVED RESULT
run_case() { # NAME LO HI "run args" [LO HI "run args"]...
  local name=$1; shift
  local start i=0 specs=("$@") pids=()
  start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 1 }')
  while [ $i -lt ${#specs[@]} ]; do
    # shellcheck disable=SC2086
    "$BUILD/bin/gslice" run ${specs[$((i + 2))]} -- "$W/compute_spin" --start "$start" --warmup 1 \
      --duration "$DUR" --label s$((i / 3)) >"$W/out.$i" 2>>"$W/err" &
    pids+=($!)
    i=$((i + 3))
  done
  wait "${pids[@]}"
  i=0
  while [ $i -lt ${#specs[@]} ]; do
    local lo=${specs[$i]} hi=${specs[$((i + 1))]} args=${specs[$((i + 2))]} got res
    got=$(sed -n 's/.*share=\([0-9.]*\).*/\1/p' "$W/out.$i" | awk '{ printf "%.1f", $1 * 100 }')
    if [ -n "$got" ] && awk -v g="$got" -v l="$lo" -v h="$hi" 'BEGIN { exit !(g >= l && g <= h) }'; then
      res=PASS
    else
      res="FAIL (want $lo..$hi)"; fails=$((fails + 1))
    fi
    printf '%-14s %-8s %-10s %-9s %s\n' "$name" "s$((i / 3))" "$(sed -n 's/.*--compute \([0-9]*\).*/\1/p' <<<"$args")/$(sed -n 's/.*--compute-limit \([0-9]*\).*/\1/p' <<<"$args" | grep . || echo 100)" "${got:-?}%" "$res"
    i=$((i + 3))
  done
}
# The issue's goals: each within 3 points of its request; hard 30 between 27 and 33.
run_case 70/30 67 73 "--compute 70" 27 33 "--compute 30"
run_case "hard 30 alone" 27 33 "--compute 30 --compute-limit 30"
[ $fails = 0 ] || { echo "--- gsliced.log"; tail -20 "$W/gsliced.log"; cat "$W/err" | tail -20; }
[ $fails = 0 ]
