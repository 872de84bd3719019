#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Bench (a): cost the compute gate adds per launch (zero-time kernels on the simulated GPU):
# direct, hook outside a slice, hook in a slice holding its token (fast path; mean includes the
# token round trips every budget of launches).
source "$GSLICE_SRC/bench/compute_env.inc"
N=${N:-300000}
bench_daemon
echo "| launch path | median ns | p99 ns | mean ns |"
echo "|---|---:|---:|---:|"
row() { echo "| $1 | $(field "$2" median_ns) | $(field "$2" p99_ns) | $(field "$2" mean_ns) |"; }
d=$("$TBIN/compute_launch" "$N" direct)
row "direct (no hook)" "$d"
h=$(LD_PRELOAD="$HOOK" "$TBIN/compute_launch" "$N" hook-no-slice)
row "hook, no slice (gate off)" "$h"
s=$("$BIN/gslice" run -- "$TBIN/compute_launch" "$N" hook-slice)
row "hook, slice with token" "$s"
dm=$(field "$d" median_ns); sm=$(field "$s" median_ns)
echo
echo "fast path adds $((sm - dm)) ns per launch (median, slice vs direct)"
