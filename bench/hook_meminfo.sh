#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Memory: what one cuMemGetInfo costs through the hook, in a slice alone and beside another
# process holding memory (then the view's figure holds bytes not the caller's, and the hook's
# full liveness check of the slice's processes comes into it: at most every 10 ms, not per call).
# HOOK_BENCH_OLD_HOOK=path/libgslice.so adds the same rows for another build of the hook, to
# compare; the simulated driver from the build either way.
set -euo pipefail
: "${GSLICE_BUILD:?run through make bench (scripts/bench.sh), which sets GSLICE_BUILD}"
CALLS=${HOOK_BENCH_CALLS:-5000}
REPS=${HOOK_BENCH_REPS:-3}
T=$(mktemp -d "${TMPDIR:-/tmp}/gslice-bench.XXXXXX")
holder=""
trap '[ -n "$holder" ] && kill "$holder" 2> /dev/null; rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$GSLICE_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GSLICE_SIM_STATE="$T/sim" GSLICE_SIM_MEMORY=64GiB
export GSLICE_STATE_DIR="$T/slice" GSLICE_MEMORY_LIMIT=32GiB
CLIENT="$GSLICE_BUILD/tests/hook_client"
HOOK="$GSLICE_BUILD/lib/libgslice.so"

# us_per_call LIB: the median over REPS rounds of CALLS calls, in microseconds.
us_per_call() {
  local i ms
  for i in $(seq "$REPS"); do
    ms=$(LD_PRELOAD="$1" "$CLIENT" --lookup dlsym --path alloc --chunk 256MiB \
      --script "alloc 1;infos $CALLS" | sed -n 's/^infos .*ms=\([0-9]*\).*/\1/p')
    awk -v m="$ms" -v n="$CALLS" 'BEGIN { printf "%.1f\n", m * 1000 / n }'
  done | sort -n | sed -n "$(((REPS + 1) / 2))p"
}

rows() {
  echo "| $1 | $(us_per_call "$HOOK") |$([ -n "${HOOK_BENCH_OLD_HOOK:-}" ] && echo " $(us_per_call "$HOOK_BENCH_OLD_HOOK") |")"
}

echo "cuMemGetInfo through the hook, $CALLS calls in a row, median of $REPS rounds, us per call"
if [ -n "${HOOK_BENCH_OLD_HOOK:-}" ]; then
  echo "| case | this hook | $HOOK_BENCH_OLD_HOOK |"
  echo "|---|---:|---:|"
else
  echo "| case | us per call |"
  echo "|---|---:|"
fi
rows "alone in the slice"
"$GSLICE_BUILD/tests/hook_region" "$GSLICE_STATE_DIR" hold 256MiB > "$T/holder.out" &
holder=$!
for _ in $(seq 100); do grep -q held "$T/holder.out" && break; sleep 0.05; done
rows "beside a process holding memory"
