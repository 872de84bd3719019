#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The sim's cost of a launch + synchronize (and friends), on a private simulated machine.
set -euo pipefail
: "${GSLICE_BUILD:?run through make bench}"
T=$(mktemp -d "${TMPDIR:-/tmp}/gslice-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT
export GSLICE_SIM_STATE="$T/sim-state"
export LD_LIBRARY_PATH="$GSLICE_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "sim launch cost: $(nproc) CPU(s), $(uname -r)"
"$GSLICE_BUILD/bench/sim_launch_bench" "${SIM_BENCH_RUNS:-20000}"
