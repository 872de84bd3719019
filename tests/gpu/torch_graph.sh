#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# torch.cuda.graph under a slice on a real GPU (issue 20, item 5), in one command:
#   bash tests/gpu/torch_graph.sh [BUILD_DIR]      (default: build; run `make` first)
# With the first python that has PyTorch with CUDA ($TORCH_PY, python3, python, /opt/conda):
# 1. tests/gpu/torch_graph.py calibrate, alone without gslice: the capture with another thread at
#    work (the driver's own verdict on the pattern) and one replay's device time from the wall
#    clock of 200 replays back to back, nothing else on the GPU;
# 2. the capture pattern under a hard 30 in each mode (global, thread_local, relaxed), global
#    under a token (--compute 30), and global with the other thread relaxed (should the driver
#    refuse the plain pattern, 1., this one tells whether the hook is at fault), and global under
#    a hard 30 with an 8 GiB memory cap (PyTorch allocates its graph pool during the capture,
#    through the hook's memory accounting): no error, 1000 replays, the result right;
# 3. shares (lib_shares.sh's run_case; replays x that time over the window): best effort alone
#    (90..102: the measure itself), hard 30 alone (28..32), and next to a 70% slice of single
#    launches, 70/30 +-2 of the device time they got (the calibration's own error on top of
#    compute_shares.sh's +-1 for compute_graph's replays).
# About 2 minutes on an H200 (PyTorch's import and setup, about 5-10 s a process, is most of it).
# Exit: 0 all passed, 1 one failed, 77 no PyTorch with CUDA here.
# Dry run on the sim, with a stand-in for PyTorch's few calls (tests/gpu/dryrun/torch: spin
# kernels through the driver API; here only, not in hook_gpu.sh's PyTorch row):
#   GSLICE_GPU_DRYRUN_TORCH=1 GSLICE_GPU_LIBDIR=build/sim LD_LIBRARY_PATH=build/sim \
#   bash tests/gpu/torch_graph.sh
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd) || { echo "no build dir; run make first" >&2; exit 1; }
TORCH_PY=${TORCH_PY:-}
[ -z "${GSLICE_GPU_DRYRUN_TORCH:-}" ] || export PYTHONPATH="$SRC/tests/gpu/dryrun${PYTHONPATH:+:$PYTHONPATH}"
for py in $TORCH_PY python3 python /usr/bin/python3 /usr/local/bin/python3 /opt/conda/bin/python; do
  if command -v "$py" >/dev/null &&
    "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    TORCH_PY=$(command -v "$py")
    break
  fi
  TORCH_PY=""
done
[ -n "$TORCH_PY" ] || { echo "SKIP: no python with PyTorch and a CUDA device (pip install torch)"; exit 77; }
# shellcheck source=tests/gpu/lib_shares.sh
source "$SRC/tests/gpu/lib_shares.sh"
shares_setup torch || exit 1
export TORCH_PY
PYG="$SRC/tests/gpu/torch_graph.py"
echo "PyTorch: $("$TORCH_PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))')"
row() { # RESULT WHAT SLICE NOTE
  printf '%-5s %-42s %s\n' "$1" "$2${3:+, gslice run $3}" "$4"
  check_row "$2" "${3:-none}" "$4" "$1"
}

cal=$(timeout -k 5 180 "$TORCH_PY" "$PYG" calibrate 2>"$W/cal.err" | grep '^replay_s=')
T=$(sed -n 's/^replay_s=\([0-9.]*\).*/\1/p' <<<"$cal")
if [ -z "$T" ]; then
  row FAIL "torch.cuda.graph calibrate" "" "$(tail -1 "$W/cal.err")"
  exit 1
fi
capture=$(sed -n 's/.* capture=//p' <<<"$cal")
[ "$capture" = ok ] && res=PASS || res=FAIL
row "$res" "torch.cuda.graph capture global" "" "$cal"

HARD="--compute 30 --compute-limit 30"
for spec in "thread_local|$HARD" "relaxed|$HARD" "global|$HARD" "global|--compute 30" \
  "global --worker-mode relaxed|$HARD" "global|$HARD --memory 8GiB"; do
  mode=${spec%%|*} slice=${spec#*|}
  # shellcheck disable=SC2086
  if out=$(gsrun $slice -- timeout -k 5 180 "$TORCH_PY" "$PYG" capture --mode $mode 2>&1); then
    row PASS "torch.cuda.graph capture $mode" "$slice" "$(grep '^mode=' <<<"$out")"
  else
    row FAIL "torch.cuda.graph capture $mode" "$slice" "$(tail -1 <<<"$out")"
  fi
done

# Setup (import torch, cuBLAS, the capture) must end before the window: start that much later.
init=$(sed -n 's/.* init_s=\([0-9.]*\).*/\1/p' <<<"$cal")
LEAD=$(awk -v i="${init:-10}" 'BEGIN { l = int(i * 1.5) + 3; print (l < 5 ? 5 : l) }')
echo "one replay: $T s of device time; setup ${init:-?} s, so each share case starts ${LEAD} s ahead"
shares_header
run_case "torch graph best effort alone" 90 102 "--compute 0|torch --replay-s $T"
run_case "torch graph hard 30 alone" 28 32 "--compute 30 --compute-limit 30|torch --replay-s $T"
SPLIT=1 run_case "torch graph 70/30" 68 72 "--compute 70" \
  28 32 "--compute 30 --compute-limit 30|torch --replay-s $T"
grep -h 'late_s=[1-9]' "$W"/out.* 2>/dev/null | sed 's/^/late (its share is low by that much): /'
[ "$fails" = 0 ] || { echo "--- gsliced.log"; tail -20 "$W/gsliced.log"; tail -20 "$W/err"; }
[ "$fails" = 0 ]
