# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# What the share scripts of tests/gpu (compute_shares.sh, graph_capture.sh, torch_graph.sh) have
# in common; sourced, with SRC and BUILD set:
#   shares_setup NAME: a work dir ($W), the spin workloads built against the machine's
#     libcuda.so.1 ($W/compute_spin, $W/compute_graph; GSLICE_GPU_LIBDIR picks another, e.g. the
#     sim's for a dry run) and a private gsliced on its own socket. 1 when one cannot be had.
#   run_case NAME LO HI "RUN ARGS[|WORKLOAD ARGS]" [LO HI "..."]...: the slices side by side over
#     one window (DUR s after a 1 s warm-up; they start LEAD s from now), each judged LO..HI.
#     WORKLOAD is spin (default: compute_spin, single launches), graph (compute_graph share: a
#     graph's replays) or torch (torch_graph.py share under $TORCH_PY), then its own arguments.
#     Each prints label= ... share=: its device time (kernels x their length: spin kernels
#     busy-wait on the GPU's global timer) over the window. With SPLIT=1 a slice is judged on its
#     part of the device time all the case's slices got (what requests adding up to 100% are
#     owed: the idle time of token switches comes off each alike), else on the wall clock.
#     One line a slice to stdout, one markdown row a case to $GSLICE_GPU_RESULTS when set;
#     `fails` counts the slices out of bounds. A workload is killed LEAD + DUR + 60 s on.
#   check_row CHECK SLICE NOTE RESULT: one row of the checks table ($GSLICE_GPU_CHECKS when set),
#     counted in `fails` unless RESULT is PASS.
#   gsrun ARGS...: gslice run; in a sanitizer build (GSLICE_SANITIZE in its CMakeCache) with the
#     ASan runtime ahead of the hook, as an uninstrumented workload needs it (a dry run's check).
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
DUR=${DUR:-10}
ASAN_RT=""
if grep -q '^GSLICE_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  ASAN_RT=$(${CC:-cc} -print-file-name=libasan.so)
  export ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:abort_on_error=0
fi
gsrun() {
  if [ -n "$ASAN_RT" ]; then LD_PRELOAD="$ASAN_RT" "$BUILD/bin/gslice" run "$@"; else "$BUILD/bin/gslice" run "$@"; fi
}
LEAD=${LEAD:-1}
fails=${fails:-0}

shares_setup() {
  local libdir=${GSLICE_GPU_LIBDIR:+-L$GSLICE_GPU_LIBDIR} p
  W=$(mktemp -d "${TMPDIR:-/tmp}/gslice-gpu-$1.XXXXXX")
  trap 'jobs -p | xargs -r kill 2>/dev/null; sleep 0.2; rm -rf "$W"' EXIT
  export GSLICE_SRC="$SRC" GSLICE_SOCKET="$W/gsliced.sock" GSLICE_DAEMON_STATE_DIR="$W/daemon"
  for p in compute_spin compute_graph; do
    # shellcheck disable=SC2086
    if ! ${CC:-cc} -O2 -pthread -I"$CUDA_HOME/include" -o "$W/$p" "$SRC/tests/progs/$p.c" \
      $libdir -l:libcuda.so.1 2>>"$W/build.log"; then
      cat "$W/build.log" >&2
      echo "cannot build $p against libcuda.so.1 (is a driver installed?)" >&2
      return 1
    fi
  done
  "$BUILD/bin/gsliced" --state-dir "$W/daemon" --foreground 2>"$W/gsliced.log" &
  for _ in $(seq 100); do [ -S "$GSLICE_SOCKET" ] && break; sleep 0.05; done
  [ -S "$GSLICE_SOCKET" ] || { cat "$W/gsliced.log" >&2; echo "gsliced did not start" >&2; return 1; }
}

# The command line of a workload: WORKLOAD [ARGS...] -> its argv (printed one word a line).
workload_cmd() {
  local what=${1:-spin}
  [ $# -gt 0 ] && shift
  case $what in
  spin) printf '%s\n' "$W/compute_spin" "$@" ;;
  graph) printf '%s\n' "$W/compute_graph" share "$@" ;;
  torch) printf '%s\n' "${TORCH_PY:?no python with torch}" "$SRC/tests/gpu/torch_graph.py" share "$@" ;;
  *) echo "run_case: unknown workload $what" >&2; return 1 ;;
  esac
}

# What a slice is, for the tables: REQ/LIMIT[ PRIORITY] and its workload in a few words.
slice_desc() { # RUN_ARGS WORKLOAD_ARGS
  local req lim pr k n
  req=$(sed -n 's/.*--compute \([0-9]*\).*/\1/p' <<<"$1")
  lim=$(sed -n 's/.*--compute-limit \([0-9]*\).*/\1/p' <<<"$1")
  pr=$(sed -n 's/.*--priority \([a-z]*\).*/\1/p' <<<"$1")
  k=$(sed -n 's/.*--kernel-us \([0-9]*\).*/\1/p' <<<"$2")
  n=$(sed -n 's/.*--nodes \([0-9]*\).*/\1/p' <<<"$2")
  printf '%s/%s%s ' "${req:-0}" "${lim:-100}" "${pr:+ $pr}"
  case ${2%% *} in
  graph) awk -v n="${n:-10}" -v k="${k:-200}" 'BEGIN { printf "graph %dx%gms", n, k / 1000 }' ;;
  torch) printf 'torch.cuda.graph' ;;
  *) awk -v k="${k:-2000}" 'BEGIN { printf "spin %gms", k / 1000 }' ;;
  esac
}

run_case() { # NAME LO HI "RUN ARGS[|WORKLOAD ARGS]" ...
  local name=$1 t0=$SECONDS
  shift
  local start i=0 specs=("$@") pids=() argv
  start=$(date +%s.%N | awk -v l="$LEAD" '{ printf "%.3f", $1 + l }')
  while [ $i -lt ${#specs[@]} ]; do
    local spec=${specs[$((i + 2))]} ra wa
    ra=${spec%%|*}
    wa=spin
    [[ $spec == *"|"* ]] && wa=${spec#*|}
    # shellcheck disable=SC2086
    mapfile -t argv < <(workload_cmd $wa)
    # shellcheck disable=SC2086
    gsrun $ra -- timeout -k 5 $((${LEAD%.*} + DUR + 60)) "${argv[@]}" \
      --start "$start" --warmup 1 --duration "$DUR" --label s$((i / 3)) >"$W/out.$i" 2>>"$W/err" &
    pids+=($!)
    i=$((i + 3))
  done
  wait "${pids[@]}"
  case_verdict "$name" $((SECONDS - t0)) "${specs[@]}"
}

# Judges and prints the case run_case ran (its outputs in $W/out.N).
case_verdict() { # NAME SECONDS SPECS...
  local name=$1 took=$2 i=0 total=0 cells="" verdict=PASS
  shift 2
  local specs=("$@")
  for ((i = 0; i < ${#specs[@]}; i += 3)); do
    total=$(awk -v t="$total" -v s="$(share_of "$W/out.$i")" 'BEGIN { print t + s }')
  done
  for ((i = 0; i < ${#specs[@]}; i += 3)); do
    local lo=${specs[$i]} hi=${specs[$((i + 1))]} spec=${specs[$((i + 2))]} got split judged res desc
    got=$(share_of "$W/out.$i" | awk '{ printf "%.1f", $1 * 100 }')
    split=$(awk -v s="$(share_of "$W/out.$i")" -v t="$total" 'BEGIN { printf "%.1f", (t > 0 ? 100 * s / t : 0) }')
    judged=$got
    [ "${SPLIT:-0}" = 1 ] && judged=$split
    if [ -s "$W/out.$i" ] && grep -q 'share=' "$W/out.$i" &&
      awk -v g="$judged" -v l="$lo" -v h="$hi" 'BEGIN { exit !(g >= l && g <= h) }'; then
      res=PASS
    else
      res="FAIL (want $lo..$hi$([ "${SPLIT:-0}" = 1 ] && echo ' of the device time')$(starved "${specs[@]}"))"
      fails=$((fails + 1))
      verdict=FAIL
    fi
    desc=$(slice_desc "${spec%%|*}" "$([[ $spec == *"|"* ]] && echo "${spec#*|}")")
    printf '%-30s %-4s %-30s %-9s %-9s %s\n' "$name" "s$((i / 3))" "$desc" "$got%" "$split%" "$res"
    cells+="s$((i / 3)) ${desc} → ${got}% (${split}% of the device time; want $lo..$hi)<br>"
  done
  [ -z "${GSLICE_GPU_RESULTS:-}" ] ||
    printf '| %s | %s | %s%% | %s | %s | %s s |\n' "$name" "${cells%<br>}" \
      "$(awk -v t="$total" 'BEGIN { printf "%.1f", 100 * t }')" \
      "$([ "${SPLIT:-0}" = 1 ] && echo "part of the device time" || echo "wall clock")" \
      "$verdict" "$took" >>"$GSLICE_GPU_RESULTS"
}

check_row() {
  [ -z "${GSLICE_GPU_CHECKS:-}" ] ||
    printf '| %s | %s | %s | %s |\n' "$1" "$2" "${3//|/\\|}" "$4" >>"$GSLICE_GPU_CHECKS"
  [ "$4" = PASS ] || fails=$((fails + 1))
}

# "; ..." when a slice of the case waited for a CPU over 5% of the window (cpu_wait_s=, summed
# over its threads): a loaded host (a dry run beside other work), not the GPU, moved the shares.
starved() {
  local i w
  for ((i = 0; i < $#; i += 3)); do
    w=$(sed -n 's/.*cpu_wait_s=\([0-9.]*\).*/\1/p' "$W/out.$i" 2>/dev/null | head -1)
    if [ -n "$w" ] && awk -v w="$w" -v d="$DUR" 'BEGIN { exit !(w > 0.05 * d) }'; then
      echo "; s$((i / 3)) waited ${w} s for a CPU"
      return
    fi
  done
}

share_of() { sed -n 's/.*share=\([0-9.]*\).*/\1/p' "$1" | head -1 | grep . || echo 0; }

shares_header() {
  printf '%-30s %-4s %-30s %-9s %-9s %s\n' CASE "" "SLICE: REQ/LIMIT, WORKLOAD" WALL DEVICE RESULT
}
