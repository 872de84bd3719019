#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The sim's checks on a real GPU: builds the same client programs against the machine's
# libcuda.so.1 / libnvidia-ml.so.1 and runs them, printing a PASS/FAIL table. Run by
# hand where a GPU exists (never in CI):  bash tests/gpu/run.sh
# Then, with the gslice build in $GSLICE_BUILD (default build/), one row each:
#   compute-isolation  compute_shares.sh: 70/30, hard 30, 50/30/20 mixed kernels, 40/40/10/10
#                      with priorities, a CUDA graph's replays under hard 30 and next to 70%
#   graph-capture      graph_capture.sh: the PyTorch/vLLM capture pattern in every mode, with
#                      and without a slice (tests/progs/compute_graph.c)
#   torch-graph        torch_graph.sh: torch.cuda.graph captured and replayed under hard 30
#                      and 70/30 (SKIP without PyTorch)
#   nvidia-smi         nvidia_smi.sh: the real nvidia-smi inside a slice
#   memory-isolation   hook_gpu.sh: every allocation path, the CUDA runtime, PyTorch (needs nvcc)
# About 5 minutes on an H200 with DUR=8 (the share cases' window; each part's time is in the
# results block). GSLICE_GPU_SKIP="torch-graph memory-isolation" leaves parts out (SKIP rows).
# At the end a results block for docs/benchmarks.md ("On a real GPU"): the share and capture
# tables, this table, each part's time; written to $OUT/gpu-results.md when OUT is set, with
# each part's log beside it ($OUT/logs/) and nvidia-smi's NVML calls ($OUT/nvidia-smi-calls.txt);
# rewritten after each part, so a run cut short keeps what it did. GSLICE_COMMIT names the
# commit where the tree has no .git.
# Exit status: 0 only when every check ran and passed; 1 when one failed (or nothing could be
# built); 77 when none failed but some did not run (no gsliced built, no PyTorch): a partial run
# is not a pass.
# Where the sim and the GPU disagree, docs/sim.md says which behaviour the sim models.
# Dry run on the sim (the script's own logic, no GPU; the torch-graph and nvidia-smi rows with
# the stand-ins of tests/gpu/dryrun for PyTorch and nvidia-smi):
#   GSLICE_GPU_LIBDIR=build/sim LD_LIBRARY_PATH=build/sim GSLICE_BUILD=build \
#   GSLICE_GPU_DRYRUN_TORCH=1 PATH=$PWD/tests/gpu/dryrun:$PATH bash tests/gpu/run.sh
# (the stand-in nvidia-smi needs build/tests/nvml_smi: cmake --build build --target nvml_smi)
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
BUILD=${GSLICE_BUILD:-$SRC/build}
export DUR=${DUR:-10} # the share cases' window (s)
LIBDIR=${GSLICE_GPU_LIBDIR:+-L$GSLICE_GPU_LIBDIR}
W=$(mktemp -d "${TMPDIR:-/tmp}/gslice-gpu.XXXXXX")
trap 'jobs -p | xargs -r kill -9 2>/dev/null; rm -rf "$W"' EXIT
RES=${OUT:+$OUT}
RES=${RES:-$W}
mkdir -p "$RES/logs"
export GSLICE_GPU_RESULTS="$RES/shares.md" GSLICE_GPU_CHECKS="$RES/checks.md"
: >"$GSLICE_GPU_RESULTS"
: >"$GSLICE_GPU_CHECKS"
T_START=$SECONDS
PTX="$SRC/tests/gpu/spin.ptx"
CC=${CC:-cc}
CFLAGS="-O2 -Wall -pthread -I$CUDA_HOME/include -I$SRC/src/common"

build() {
  $CC $CFLAGS -o "$W/client_linked" "$SRC/tests/progs/sim_client.c" $LIBDIR -l:libcuda.so.1 &&
    $CC $CFLAGS -DSIM_CLIENT_DLOPEN -o "$W/client_dlopen" "$SRC/tests/progs/sim_client.c" -ldl &&
    $CC $CFLAGS -o "$W/nvml" "$SRC/tests/progs/sim_nvml.c" $LIBDIR -l:libnvidia-ml.so.1
}
if ! build 2>"$W/build.log"; then
  cat "$W/build.log" >&2
  echo "gpu tests: cannot build against the real driver (is one installed?)" >&2
  exit 1
fi

declare -a NAMES RESULTS NOTES PARTS TOOK # RESULTS: PASS, FAIL or SKIP
record() { NAMES+=("$1"); RESULTS+=("$2"); NOTES+=("$3"); }
check() { # NAME CMD...
  local name=$1 out
  shift
  if out=$(timeout 120 "$@" 2>&1); then
    record "$name" PASS "$(tail -1 <<<"$out")"
  else
    record "$name" FAIL "$(grep -m1 FAIL <<<"$out" || tail -1 <<<"$out")"
  fi
  printf '%s\n' "$out" >"$W/$name.log"
}

check basic-linked "$W/client_linked" basic "$PTX"
check basic-getproc-12000 "$W/client_dlopen" basic "$PTX"
check basic-getproc-13000 env SIM_CLIENT_CUDA_VERSION=13000 "$W/client_dlopen" basic "$PTX"
check basic-getproc-ptds env SIM_CLIENT_PER_THREAD=1 "$W/client_dlopen" basic "$PTX"
check pool "$W/client_linked" pool
check vmm "$W/client_linked" vmm
check misc "$W/client_linked" misc "$PTX"
check nvml "$W/nvml"

# IPC: another process maps the same bytes and adds no device memory.
"$W/client_linked" ipc-export $((64 << 20)) "$W/handle" >"$W/exp" 2>&1 &
exp=$!
for _ in $(seq 300); do [ -e "$W/handle" ] && break; sleep 0.1; done
check ipc "$W/client_linked" ipc-import "$W/handle"
kill -9 $exp 2>/dev/null
wait $exp 2>/dev/null

# Two processes contending: report whether their spin kernels overlapped. A GPU
# time-slices contexts, so globaltimer spins may overlap there; the sim runs each
# kernel to completion (docs/sim.md).
"$W/client_linked" spin "$PTX" 20000 10 >"$W/a" 2>&1 &
a=$!
"$W/client_linked" spin "$PTX" 20000 10 >"$W/b" 2>&1 &
b=$!
if wait $a && wait $b; then
  ov=$(awk '/^interval/ { n++; s[n]=$2; e[n]=$3; f[n]=FILENAME }
    END { o=0; for (i=1;i<=n;i++) for (j=i+1;j<=n;j++)
      if (f[i]!=f[j] && s[i]<e[j]-0.5 && s[j]<e[i]-0.5) o++; print o }' "$W/a" "$W/b")
  record contend PASS "$ov overlapping kernel pairs of 100"
else
  record contend FAIL "$(cat "$W/a" "$W/b" | grep -m1 FAIL)"
fi

# A SIGKILLed process's memory comes back (NVML view).
"$W/client_linked" hold $((1 << 30)) >"$W/hold" 2>&1 &
h=$!
for _ in $(seq 300); do grep -q holding "$W/hold" && break; sleep 0.1; done
before=$("$W/nvml" | grep -o 'dev=0 .*' | grep -o ' used=[0-9]*' | cut -d= -f2)
listed=$("$W/nvml" | grep -c " $h:")
kill -9 $h
wait $h 2>/dev/null
sleep 1
after=$("$W/nvml" | grep -o 'dev=0 .*' | grep -o ' used=[0-9]*' | cut -d= -f2)
if [ "$listed" = 1 ] && [ -n "$before" ] && [ -n "$after" ] && [ "$after" -lt "$before" ]; then
  record kill-reclaim PASS "used ${before} -> ${after} bytes"
else
  record kill-reclaim FAIL "listed=$listed used ${before:-?} -> ${after:-?}"
fi

# part NAME: whether to run it (GSLICE_GPU_SKIP leaves it out, as a SKIP row); starts its clock.
part() {
  P0=$SECONDS
  case " ${GSLICE_GPU_SKIP:-} " in
  *" $1 "*) record "$1" SKIP "left out by GSLICE_GPU_SKIP"; return 1 ;;
  esac
}
# took NAME: the part's time; the results block so far written out (a run cut short keeps it).
took() {
  PARTS+=("$1")
  TOOK+=($((SECONDS - P0)))
  summary="(partial: up to $1)" results_block >"$RES/gpu-results.md"
}
# script_row NAME SCRIPT PASS-NOTE SKIP-NOTE: runs tests/gpu/SCRIPT BUILD (its output shown and
# kept), one row from its exit status (0 PASS, 77 SKIP, else FAIL with its first FAIL line).
script_row() {
  local name=$1 script=$2 rc=0
  echo
  echo "== $name (tests/gpu/$script)"
  GSLICE_BUILD=$BUILD bash "$SRC/tests/gpu/$script" "$BUILD" 2>&1 | tee "$RES/logs/$name.log"
  rc=${PIPESTATUS[0]}
  case $rc in
  0) record "$name" PASS "$3" ;;
  77) record "$name" SKIP "$4" ;;
  *)
    note=$(grep -m1 FAIL "$RES/logs/$name.log" | cut -c1-100)
    record "$name" FAIL "${note:-exit $rc}"
    ;;
  esac
  took "$name"
}

PARTS=(client-checks)
TOOK=($((SECONDS - T_START)))

# Compute isolation (issues 4 and 20) with the real spin kernel, through gsliced.
if [ ! -x "$BUILD/bin/gsliced" ]; then
  record compute-isolation SKIP "no $BUILD/bin/gsliced: build gslice first (make) or set GSLICE_BUILD"
elif part compute-isolation; then
  script_row compute-isolation compute_shares.sh \
    "70/30, hard 30, 50/30/20, 40/40/10/10, graph replays: within bounds" "did not run"
fi
# CUDA graphs (issue 20): the capture pattern in every mode, then torch.cuda.graph. A checkout
# always has these scripts; integration.hook_gpu_status runs this one in a tree of stubs without.
for g in graph-capture:graph_capture.sh torch-graph:torch_graph.sh; do
  [ -f "$SRC/tests/gpu/${g#*:}" ] || continue
  if [ ! -x "$BUILD/bin/gsliced" ]; then
    record "${g%%:*}" SKIP "no $BUILD/bin/gsliced: build gslice first (make) or set GSLICE_BUILD"
  elif part "${g%%:*}"; then
    script_row "${g%%:*}" "${g#*:}" "every mode, with and without a slice: no error" \
      "no python with PyTorch and CUDA here"
  fi
done

# nvidia-smi inside a slice (docs/nvml.md): the cap as memory.total, the slice's processes and
# share only (tests/gpu/nvidia_smi.sh; 77 without nvidia-smi or a gslice build). A checkout
# always has it; integration.hook_gpu_status runs this script in a tree of stubs without it.
# With OUT set it also records the NVML calls nvidia-smi binds ($OUT/nvidia-smi-calls.txt).
if [ -f "$SRC/tests/gpu/nvidia_smi.sh" ] && part nvidia-smi; then
  GSLICE_GPU_OUT=${OUT:-${GSLICE_GPU_OUT:-}} script_row nvidia-smi nvidia_smi.sh \
    "memory total = cap, the slice's processes and share only" \
    "no nvidia-smi, GPU or gslice build (see above)"
fi

# Memory isolation (issue 3): every allocation path x lookup style, the CUDA runtime, NVML and
# PyTorch under libgslice.so with a 1 GiB cap (tests/gpu/hook_gpu.sh prints its own table, and
# exits 77 when some of it could not run, or all of it: no nvcc). Last: a GPU run passed it
# before; a run cut short by its time loses this part first.
if part memory-isolation; then
  script_row memory-isolation hook_gpu.sh "every row of its table passed" \
    "some of its rows did not run (see its table)"
fi

# The results block, markdown for docs/benchmarks.md: the machine, the command, the share and
# capture tables the parts wrote, this table and each part's time.
results_block() {
  local gpu commit i
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0 2>/dev/null | head -1)
  commit=${GSLICE_COMMIT:-$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null)}
  echo "## On a real GPU (${gpu:-no nvidia-smi: a dry run?}), $(date -u +%Y-%m-%d)"
  echo
  echo "    DUR=$DUR bash tests/gpu/run.sh      # at ${commit:-?}, $((SECONDS - T_START)) s in all"
  echo
  if [ -s "$GSLICE_GPU_RESULTS" ]; then
    echo "Shares: device time (spin kernels busy-wait on the GPU's global timer; torch.cuda.graph"
    echo "replays x one replay's time alone) over a ${DUR} s window, of the wall clock and of the"
    echo "device time the case's slices got:"
    echo
    echo "| case | slice: request/limit, workload → share | device busy | judged on | result | took |"
    echo "|---|---|---:|---|---|---:|"
    cat "$GSLICE_GPU_RESULTS"
    echo
  fi
  if [ -s "$GSLICE_GPU_CHECKS" ]; then
    echo "| check | slice | note | result |"
    echo "|---|---|---|---|"
    cat "$GSLICE_GPU_CHECKS"
    echo
  fi
  echo "| row | result | note |"
  echo "|---|---|---|"
  for i in "${!NAMES[@]}"; do
    printf '| %s | %s | %s |\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${NOTES[$i]//|/\\|}"
  done
  echo
  printf '%s' "Time per part:"
  for i in "${!PARTS[@]}"; do printf ' %s %s s;' "${PARTS[$i]}" "${TOOK[$i]}"; done
  echo " $summary."
}

printf '\n%-22s %-5s %s\n' TEST RESULT NOTE
fails=0 skips=0
for i in "${!NAMES[@]}"; do
  printf '%-22s %-5s %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${NOTES[$i]}"
  case ${RESULTS[$i]} in
  PASS) ;;
  SKIP) skips=$((skips + 1)) ;;
  *) fails=$((fails + 1)) ;;
  esac
done
for i in "${!NAMES[@]}"; do
  if [ "${RESULTS[$i]}" = FAIL ] && [ -f "$W/${NAMES[$i]}.log" ]; then
    echo "--- ${NAMES[$i]}"
    cat "$W/${NAMES[$i]}.log"
  fi
done
summary="gpu tests: $((${#NAMES[@]} - fails - skips)) passed, $fails failed, $skips skipped"
echo "$summary"
results_block >"$RES/gpu-results.md"
echo
echo "== results for docs/benchmarks.md (\"On a real GPU\")${OUT:+, also in $OUT/gpu-results.md}"
cat "$RES/gpu-results.md"
[ $fails = 0 ] || exit 1
[ $skips = 0 ] || exit 77
exit 0
