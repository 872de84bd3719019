#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libgslice.so on a real GPU, every path of docs/memory.md: builds the hook (build-gpu/, or
# $GSLICE_BUILD), builds the driver-API client with nvcc (linked, dlsym, cuGetProcAddress) and a
# CUDA-runtime program, runs them under the hook with a 1 GiB cap, runs PyTorch under it, and
# prints a PASS/FAIL table. One command, by hand, where a GPU exists (never in CI):
#     bash tests/gpu/hook_gpu.sh          # HOOK_GPU_CAP=2GiB to change the cap
# Exit status: 0 when every row passed, 1 when one failed, 77 when none failed but one could not
# run here (no PyTorch with CUDA), or nothing could (no nvcc): not a pass.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
BUILD=${GSLICE_BUILD:-$SRC/build-gpu}
W=$(mktemp -d "${TMPDIR:-/tmp}/gslice-hook-gpu.XXXXXX")
trap 'jobs -p | xargs -r kill -9 2>/dev/null; rm -rf "$W"' EXIT
CAP=${HOOK_GPU_CAP:-1GiB}
MiB=$((1 << 20))

if [ ! -f "$BUILD/lib/libgslice.so" ]; then
  make -C "$SRC" BUILD="$BUILD" > "$W/make.log" 2>&1 || {
    tail -20 "$W/make.log" >&2
    echo "hook gpu tests: the build failed" >&2
    exit 1
  }
fi
HOOK="$BUILD/lib/libgslice.so"
to_bytes() {
  local v=${1%%[A-Za-z]*} s
  case ${1#"$v"} in
  "" | B) s=0 ;; K | KiB) s=10 ;; M | MiB) s=20 ;; G | GiB) s=30 ;; T | TiB) s=40 ;;
  *) echo "hook gpu tests: HOOK_GPU_CAP=$1 is not a size" >&2; exit 2 ;;
  esac
  echo $((v << s))
}
CAPB=$(to_bytes "$CAP")

command -v "$NVCC" > /dev/null || {
  echo "SKIP: no nvcc ($NVCC; set NVCC or CUDA_HOME): the memory checks' programs need a CUDA toolkit"
  exit 77
}
build() {
  local inc="-I$CUDA_HOME/include -I$SRC/src/common"
  "$NVCC" -O2 $inc -DHOOK_CLIENT_LINKED -o "$W/client_linked" "$SRC/tests/progs/hook_client.c" \
    "$SRC/src/common/size.c" -L"$CUDA_HOME/lib64/stubs" -lcuda -ldl -lpthread &&
    "$NVCC" -O2 $inc -o "$W/client" "$SRC/tests/progs/hook_client.c" "$SRC/src/common/size.c" \
      -ldl -lpthread &&
    "$NVCC" -O2 -o "$W/cudart" "$SRC/tests/gpu/hook_cudart.cu" &&
    ${CC:-cc} -O2 $inc -o "$W/nvml" "$SRC/tests/progs/hook_nvml.c" -ldl
}
if ! build > "$W/build.log" 2>&1; then
  cat "$W/build.log" >&2
  echo "hook gpu tests: cannot build with nvcc against the real driver (is one installed?)" >&2
  exit 1
fi

declare -a NAMES RESULTS NOTES
record() { NAMES+=("$1"); RESULTS+=("$2"); NOTES+=("$3"); }
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# What the device holds for pid (bytes), from nvidia-smi without the hook; empty if unlisted.
device_used_by() {
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -F', *' -v p="$1" '$1 == p { print $2 * 1048576 }'
}
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1; }

# hold NAME CMD...: runs CMD under the hook with stdin from a fifo, waits for "waiting", then
# reports. Sets OUT (its stdout) and USED (device bytes for it, or "?").
hold() {
  local name=$1 i pid fd
  shift
  mkfifo "$W/$name.in"
  GSLICE_MEMORY_LIMIT=$CAP LD_PRELOAD="$HOOK" "$@" < "$W/$name.in" > "$W/$name.out" 2> "$W/$name.err" &
  pid=$!
  exec {fd}> "$W/$name.in"
  for i in $(seq 600); do grep -q '^waiting' "$W/$name.out" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1; done
  USED=$(device_used_by $pid)
  [ -n "$USED" ] || USED="?"
  eval "exec $fd>&-"
  wait $pid 2>/dev/null
  OUT=$(cat "$W/$name.out")
}

# The issue's done-when: allocate 256 MiB chunks until failure; OOM, the slice (context
# included) never over the cap on the device, cuMemGetInfo total = cap.
judge() { # NAME
  local name=$1 first fill note
  first=$(grep '^info' <<<"$OUT" | head -1)
  fill=$(grep '^fill' <<<"$OUT")
  note="chunks=$(field "$fill" n) total=$(field "$first" total) device_used=$USED"
  if [ "$(field "$fill" err)" = 2 ] && [ "$(field "$first" total)" = "$CAPB" ] &&
     { [ "$USED" = "?" ] || [ "$USED" -le "$CAPB" ]; } &&
     grep -q "out of memory on device" "$W/$name.err"; then
    record "$name" PASS "$note"
  else
    record "$name" FAIL "$note err=$(field "$fill" err) $(head -c 200 "$W/$name.err")"
  fi
}

export GSLICE_STATE_DIR="$W/slice"
for path in alloc pitch managed async pool vmm array array3d mipmap; do
  hold "link-$path" "$W/client_linked" --lookup link --path "$path" --script "info;fill;info;wait"
  judge "link-$path"
  hold "dlsym-$path" "$W/client" --lookup dlsym --path "$path" --script "info;fill;info;wait"
  judge "dlsym-$path"
  hold "procaddr-$path" "$W/client" --lookup procaddr --path "$path" --script "info;fill;info;wait"
  judge "procaddr-$path"
done
for path in async pool; do
  hold "procaddr-ptsz-$path" "$W/client" --lookup procaddr --ptsz --path "$path" \
    --script "info;fill;info;wait"
  judge "procaddr-ptsz-$path"
done
hold "ctx-create" "$W/client" --lookup dlsym --ctx create --path alloc --script "info;fill;info;wait"
judge ctx-create

# The CUDA runtime (cuGetProcAddress for everything): cudaErrorMemoryAllocation at the cap.
for path in malloc managed async pitch array array3d mipmap; do
  hold "cudart-$path" "$W/cudart" "$path"
  fill=$(grep '^fill' <<<"$OUT")
  if [ "$(field "$fill" oom)" = 1 ] && [ "$(field "$(grep '^info' <<<"$OUT" | head -1)" total)" = "$CAPB" ] &&
     { [ "$USED" = "?" ] || [ "$USED" -le "$CAPB" ]; }; then
    record "cudart-$path" PASS "chunks=$(field "$fill" n) device_used=$USED"
  else
    record "cudart-$path" FAIL "$fill device_used=$USED $(head -c 200 "$W/cudart-$path.err")"
  fi
done

# NVML (nvidia-smi's way in) shows the slice.
out=$(GSLICE_MEMORY_LIMIT=$CAP LD_PRELOAD="$HOOK" "$W/nvml" 2>&1)
if [ "$(field "$(grep '^nvml ' <<<"$out")" total)" = "$CAPB" ] &&
   [ "$(field "$(grep '^nvml2 ' <<<"$out")" total)" = "$CAPB" ]; then
  record nvml PASS "$(grep '^nvml ' <<<"$out")"
else
  record nvml FAIL "$out"
fi

# Two processes of one slice: together under the cap; the killed one's memory is reused.
# Each process's context counts against the cap (about 0.5 GiB on an H200), so this check
# uses a cap that holds two contexts and some chunks: HOOK_GPU_TWO_CAP (default 2GiB).
TWO_CAP=${HOOK_GPU_TWO_CAP:-2GiB}
mkfifo "$W/a.in"
GSLICE_MEMORY_LIMIT=$TWO_CAP LD_PRELOAD="$HOOK" "$W/client" --lookup dlsym --path alloc --chunk 128MiB \
  --script "alloc 1;wait" < "$W/a.in" > "$W/a.out" 2>&1 &
a=$!
exec {afd}> "$W/a.in"
for i in $(seq 300); do grep -q '^waiting' "$W/a.out" && break; sleep 0.1; done
b1=$(GSLICE_MEMORY_LIMIT=$TWO_CAP LD_PRELOAD="$HOOK" "$W/client" --lookup dlsym --path alloc --chunk 64MiB \
  --script fill 2>/dev/null)
kill -9 $a
wait $a 2>/dev/null
b2=$(GSLICE_MEMORY_LIMIT=$TWO_CAP LD_PRELOAD="$HOOK" "$W/client" --lookup dlsym --path alloc --chunk 64MiB \
  --script fill 2>/dev/null)
n1=$(field "$b1" n)
n2=$(field "$b2" n)
if [ -n "$n1" ] && [ -n "$n2" ] && [ "$n2" -ge $((n1 + 2)) ]; then
  record two-processes PASS "next to a holder: $n1 x 64MiB; after it was killed: $n2 (cap $TWO_CAP)"
else
  record two-processes FAIL "next to a holder: '$b1'; after it was killed: '$b2'"
fi

# PyTorch.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  if out=$(HOOK_CAP_BYTES=$CAPB GSLICE_MEMORY_LIMIT=$CAP LD_PRELOAD="$HOOK" \
      python3 "$SRC/tests/gpu/hook_torch.py" 2>"$W/torch.err"); then
    record pytorch PASS "$(grep -m1 OutOfMemory <<<"$out" | cut -c1-100)"
  else
    record pytorch FAIL "$(grep -m1 FAIL <<<"$out" || tail -2 "$W/torch.err")"
  fi
else
  record pytorch SKIP "no PyTorch with CUDA here (pip install torch)"
fi

# The allocation benchmark against the real driver (numbers for docs/benchmarks.md).
if [ -x "$BUILD/bench/hook_bench" ]; then
  GSLICE_BUILD="$BUILD" HOOK_BENCH_REAL_DRIVER=1 HOOK_BENCH_PAIRS=${HOOK_BENCH_PAIRS:-5000} \
    bash "$SRC/bench/hook_alloc.sh" > "$W/bench" 2>&1 &&
    record bench PASS "see below" || record bench FAIL "$(tail -1 "$W/bench")"
fi

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
[ -f "$W/bench" ] && { echo; cat "$W/bench"; }
echo
echo "$((${#NAMES[@]} - fails - skips))/${#NAMES[@]} passed, $skips skipped (cap $CAP)"
[ $fails = 0 ] || exit 1
[ $skips = 0 ] || exit 77
exit 0
