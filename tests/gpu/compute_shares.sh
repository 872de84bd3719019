#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compute isolation on a real GPU, in one command, with the real spin kernel:
#   bash tests/gpu/compute_shares.sh [BUILD_DIR]      (default: build; run `make` first)
# Builds the workloads against the machine's libcuda.so.1, starts a private gsliced, runs each
# case for DUR (10) s after a 1 s warm-up (about DUR + 3 s a case), and prints requested vs
# achieved share, PASS/FAIL (tests/gpu/lib_shares.sh says how shares are measured). ONLY=REGEX
# runs the cases whose name matches (grep -E).
# Cases and bounds: 70/30 and hard 30 alone (issue 4: within 3 points; 27..33 for hard 30);
# 50/30/20 with 0.2/2/20 ms kernels and the demo's 40/40/10/10 with priorities (the cases of
# bench/compute_accuracy.sh; on a GPU, as 70/30, within 3 points of each request); a CUDA graph's
# replays (compute_graph share: 10 nodes of 0.2 ms, 4 replays a batch) under a hard 30 alone,
# 29..31, and next to a 70% slice of single launches, 70/30 +-1 of the device time they got
# (issue 20, item 2).
# Dry run on the sim: GSLICE_GPU_LIBDIR=build/sim LD_LIBRARY_PATH=build/sim bash tests/gpu/compute_shares.sh
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd) || { echo "no build dir; run make first" >&2; exit 1; }
# shellcheck source=tests/gpu/lib_shares.sh
source "$SRC/tests/gpu/lib_shares.sh"
shares_setup compute || exit 1

want() { [ -z "${ONLY:-}" ] || grep -qE -- "$ONLY" <<<"$1"; }
GRAPH="graph --nodes 10 --kernel-us 200 --replays 4"
shares_header
want 70/30 && run_case 70/30 67 73 "--compute 70" 27 33 "--compute 30"
want "hard 30 alone" && run_case "hard 30 alone" 27 33 "--compute 30 --compute-limit 30"
want 50/30/20 && run_case "50/30/20 mixed kernels" 47 53 "--compute 50|spin --kernel-us 200" \
  27 33 "--compute 30|spin --kernel-us 2000" 17 23 "--compute 20|spin --kernel-us 20000"
want 40/40/10/10 && run_case "40/40/10/10 with priorities" \
  37 43 "--compute 40 --compute-limit 60 --priority high|spin --batch 4" \
  37 43 "--compute 40|spin --batch 4" \
  7 13 "--compute 10 --compute-limit 30 --priority low|spin --batch 4" \
  7 13 "--compute 10|spin --batch 4"
want "graph hard 30" && run_case "graph hard 30 alone" 29 31 "--compute 30 --compute-limit 30|$GRAPH"
want "graph 70/30" && SPLIT=1 run_case "graph 70/30" 69 71 "--compute 70" \
  29 31 "--compute 30 --compute-limit 30|$GRAPH"
[ "$fails" = 0 ] || { echo "--- gsliced.log"; tail -20 "$W/gsliced.log"; tail -20 "$W/err"; }
[ "$fails" = 0 ]
