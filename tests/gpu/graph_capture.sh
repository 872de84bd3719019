#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CUDA graph capture under a slice on a real GPU (issue 20, item 2), in one command:
#   bash tests/gpu/graph_capture.sh [BUILD_DIR]      (default: build; run `make` first)
# tests/progs/compute_graph.c built against the machine's libcuda.so.1 runs the pattern PyTorch
# and vLLM use: warm-up on a side stream, a capture there in MODE while another thread launches
# and synchronizes on its own stream (or, with --per-thread, its per-thread default stream),
# instantiate, 1000 replays of 10 kernels of 0.1 ms. Each mode (global, thread-local, relaxed,
# and global beside a per-thread stream) first without gslice (the driver's own verdict on the
# pattern), then under `--compute 30` (a token) and `--compute 30 --compute-limit 30` (hard):
# every call must succeed, the capture end with its graph, the replays take their device time.
# Under the hard 30 the replays' part of their wall time is printed (REPLAYS: about 30%; the
# share itself is judged by compute_shares.sh). About 30 s on an H200.
# Exit: 0 all passed, 1 one failed. Dry run on the sim: as compute_shares.sh.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd) || { echo "no build dir; run make first" >&2; exit 1; }
# shellcheck source=tests/gpu/lib_shares.sh
source "$SRC/tests/gpu/lib_shares.sh"
shares_setup capture || exit 1

fails=0 n=0
printf '%-34s %-34s %-8s %s\n' PATTERN SLICE REPLAYS RESULT
for pattern in global thread-local relaxed "global --per-thread"; do
  for slice in "" "--compute 30" "--compute 30 --compute-limit 30"; do
    n=$((n + 1))
    run=()
    # shellcheck disable=SC2206
    [ -z "$slice" ] || run=(gsrun $slice --)
    # shellcheck disable=SC2086
    "${run[@]}" timeout -k 5 120 "$W/compute_graph" capture $pattern >"$W/cap.$n" 2>&1
    rc=$?
    line=$(grep -m1 '^mode=' "$W/cap.$n")
    part=$(sed -n 's/.*wall_s=\([0-9.]*\) graph_s=\([0-9.]*\).*/\2 \1/p' <<<"$line" |
      awk '$2 > 0 { printf "%.1f%%", 100 * $1 / $2 }')
    if [ $rc = 0 ] && [ -n "$line" ]; then
      res=PASS note="replays ${part:-?} of their wall time"
    else
      res=FAIL note="exit $rc: $(grep -m1 -v '^mode=' "$W/cap.$n" | cut -c1-120)"
    fi
    printf '%-34s %-34s %-8s %s\n' "capture $pattern" "${slice:-none (the driver alone)}" \
      "${part:-?}" "$res$([ "$res" = PASS ] || echo " ($note)")"
    check_row "compute_graph capture $pattern" "${slice:-none}" "$note" "$res"
  done
done
[ "$fails" = 0 ] || { echo "--- gsliced.log"; tail -20 "$W/gsliced.log"; }
[ "$fails" = 0 ]
