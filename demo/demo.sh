#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make demo: two processes share one simulated GPU — what each asked for, what each got,
# and what the device did (memory, busy time), read from the machine itself.
set -euo pipefail
: "${GSLICE_BUILD:?run through make demo, which sets GSLICE_BUILD}"
: "${GSLICE_SRC:?run through make demo, which sets GSLICE_SRC}"
# On a machine with a real GPU the slices demo runs there; the sim's showcase is skipped
# (and its LD_LIBRARY_PATH must not leak into the slices demo).
if [ "${GSLICE_DEMO_SIM:-0}" != 1 ] && command -v nvidia-smi >/dev/null 2>&1 &&
  nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "== A real GPU answers: the demo runs on it (GSLICE_DEMO_SIM=1 for the simulated one)."
  exec bash "$GSLICE_SRC/demo/slices.sh"
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/gslice-demo.XXXXXX")
trap 'jobs -p | xargs -r kill 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
export LD_LIBRARY_PATH="$GSLICE_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GSLICE_SIM_STATE="$W/sim-state" GSLICE_SIM_MEMORY=16GiB
CLIENT="$GSLICE_BUILD/tests/sim_client_linked"
PTX="$GSLICE_SRC/tests/gpu/spin.ptx"
SIM="$GSLICE_BUILD/bin/gslice-sim"

echo "== One simulated GPU (16 GiB, one kernel at a time), two processes:"
echo "   A: holds 6 GiB, runs 40 kernels of 25 ms   (1.0 s of device time)"
echo "   B: holds 2 GiB, runs 100 kernels of 5 ms   (0.5 s of device time)"
start=$(date +%s.%N)
"$CLIENT" spin "$PTX" 25000 40 $((6 << 30)) >"$W/a" &
pa=$!
"$CLIENT" spin "$PTX" 5000 100 $((2 << 30)) >"$W/b" &
pb=$!
for _ in $(seq 100); do
  [ "$("$SIM" info | grep -c ' pid ')" = 2 ] && break
  sleep 0.02
done
echo
echo "== While they run (gslice-sim info):"
"$SIM" info | sed 's/^/   /'
wait $pa $pb
end=$(date +%s.%N)
echo
echo "== What each got (device clock, ms from the first kernel)"
t0=$(awk '/^interval/ { if (lo == "" || $2 < lo) lo = $2 } END { print lo }' "$W/a" "$W/b")
printf '   %-8s %8s %12s %12s %12s\n' process kernels "device time" "first start" "last end"
for p in A:a B:b; do
  awk -v who="${p%%:*}" -v t0="$t0" '/^interval/ { n++; if (n == 1 || $2 < lo) lo = $2; if ($3 > hi) hi = $3 }
    /^busy_ms/ { busy = $2 }
    END { printf "   %-8s %8d %9.0f ms %9.0f ms %9.0f ms\n", who, n, busy, lo - t0, hi - t0 }' "$W/${p#*:}"
done
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
busy=$("$SIM" info --json | grep -o '"busy_ns":[0-9]*' | head -1 | cut -d: -f2)
echo
echo "== What the device did"
echo "   busy $(awk -v b="$busy" 'BEGIN { printf "%.3f", b / 1e9 }') s of device time in ${wall} s of wall time:"
echo "   one kernel at a time, in the order they were queued: whoever queues first holds"
echo "   the device until its queue drains. Compute shares (gsliced) are what change that."
echo "   memory used now that both exited: $("$SIM" info --json | grep -o '"memory_used":[0-9]*' | head -1 | cut -d: -f2) bytes"

# Slices: the daemon, compute shares and memory caps, a live resize, table and plot.
echo
bash "$GSLICE_SRC/demo/slices.sh"
