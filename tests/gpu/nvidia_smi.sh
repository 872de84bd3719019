#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The real nvidia-smi inside a slice (docs/nvml.md), on a real GPU, in one command:
#   bash tests/gpu/nvidia_smi.sh [BUILD_DIR]      (default: build; run `make` first)
# Two slices on GPU 0 through a private gsliced: "a" hard 30% with a 2 GiB cap, "b" 70% with
# 4 GiB, each running the spin workload. Inside "a" it runs `nvidia-smi`,
# `nvidia-smi --query-gpu=...` and `nvidia-smi --query-compute-apps=pid,used_memory` and checks:
# memory.total = the cap, memory.used = what its processes use, the process list holds a's
# process and not b's, utilization.gpu is a's share (20..40), not the device's (~100).
# It also records which NVML entry points nvidia-smi binds (LD_DEBUG=bindings, without the
# hook) into $GSLICE_GPU_OUT/nvidia-smi-calls.txt when GSLICE_GPU_OUT is set: the traced list
# docs/nvml.md asks for.
# Exit: 0 all passed, 1 a check failed, 77 skipped (no nvidia-smi, no GPU, no gslice build).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-${GSLICE_BUILD:-$SRC/build}}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
DUR=${DUR:-8}
skip() { echo "SKIP: $*"; exit 77; }
command -v nvidia-smi > /dev/null || skip "no nvidia-smi on PATH"
nvidia-smi -L > /dev/null 2>&1 || skip "nvidia-smi finds no GPU"
[ -x "$BUILD/bin/gsliced" ] && [ -x "$BUILD/bin/gslice" ] && [ -f "$BUILD/lib/libgslice.so" ] ||
  skip "no gslice build in $BUILD (make, or set GSLICE_BUILD)"
# shellcheck source=tests/gpu/lib_shares.sh
source "$SRC/tests/gpu/lib_shares.sh"
shares_setup smi || { echo "FAIL: no workload built or no gsliced (above)"; exit 1; }
fails=0
ok() { echo "PASS: $*"; }
bad() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

if [ -n "${GSLICE_GPU_OUT:-}" ]; then
  mkdir -p "$GSLICE_GPU_OUT"
  for args in "" "--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu --format=csv" \
    "--query-compute-apps=pid,process_name,used_memory --format=csv"; do
    # shellcheck disable=SC2086
    LD_DEBUG=bindings timeout -k 2 30 nvidia-smi $args 2>&1 > /dev/null |
      grep -o "normal symbol \`nvml[A-Za-z0-9_]*'" | sed "s/normal symbol \`//; s/'$//" |
      sort -u | sed "s|^|${args:-default}: |"
  done > "$GSLICE_GPU_OUT/nvidia-smi-calls.txt"
  echo "nvidia-smi's NVML calls: $(wc -l < "$GSLICE_GPU_OUT/nvidia-smi-calls.txt") lines in" \
    "$GSLICE_GPU_OUT/nvidia-smi-calls.txt"
fi

start=$(date +%s.%N | awk '{ printf "%.3f", $1 + 1 }')
cat > "$W/a.sh" << EOF
"$W/compute_spin" --start $start --warmup 1 --duration $DUR --label a > "$W/a.spin" &
echo \$! > "$W/a.pid"
sleep 4
timeout -k 2 30 nvidia-smi > "$W/a.default" 2>&1
timeout -k 2 30 nvidia-smi --query-gpu=index,uuid,memory.total,memory.used,utilization.gpu \
  --format=csv,noheader,nounits > "$W/a.gpu" 2>&1
timeout -k 2 30 nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$W/a.apps" 2>&1
wait
EOF
gsrun --gpu 0 --compute 30 --compute-limit 30 --memory 2GiB --name a -- \
  bash "$W/a.sh" 2>> "$W/err" &
A=$!
gsrun --gpu 0 --compute 70 --memory 4GiB --name b -- bash -c \
  "echo \$\$ > '$W/b.pid'; exec '$W/compute_spin' --start $start --warmup 1 --duration $DUR --label b" \
  > "$W/b.spin" 2>> "$W/err" &
B=$!
sleep 4.5
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$W/host.apps" 2>&1
nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -i 0 > "$W/host.util" 2>&1
wait $A $B
echo "--- nvidia-smi inside slice a"
cat "$W/a.default" "$W/a.gpu" "$W/a.apps"
echo "--- outside: $(tr '\n' ' ' < "$W/host.apps"); utilization $(cat "$W/host.util")%"
pa=$(cat "$W/a.pid" 2> /dev/null)
pb=$(cat "$W/b.pid" 2> /dev/null)
IFS=', ' read -r _ _ total used util < <(head -1 "$W/a.gpu")
[ "${total:-}" = 2048 ] && ok "memory.total is the cap: 2048 MiB" ||
  bad "memory.total ${total:-?} MiB, want the 2048 MiB cap"
apps_used=$(awk -F', *' '{ s += $2 } END { print s + 0 }' "$W/a.apps")
[ "${used:-x}" = "$apps_used" ] && ok "memory.used ($used MiB) is what the slice's processes use" ||
  bad "memory.used ${used:-?} MiB, its processes use $apps_used MiB"
grep -q "^$pa," "$W/a.apps" && ok "a's process $pa is listed" || bad "a's process $pa not listed"
grep -q "^$pb," "$W/a.apps" && bad "b's process $pb is listed inside a" || ok "b's process not listed"
[ "$(wc -l < "$W/a.apps")" = 1 ] && ok "one process listed" || bad "$(wc -l < "$W/a.apps") listed"
grep -q "^$pb," "$W/host.apps" || bad "outside the slice nvidia-smi does not list b's $pb (fixture)"
if [ -n "${util:-}" ] && [ "$util" -ge 20 ] 2> /dev/null && [ "$util" -le 40 ]; then
  ok "utilization.gpu $util% is a's share (device: $(cat "$W/host.util")%)"
else
  bad "utilization.gpu ${util:-?}, want 20..40 (a's share; the device: $(cat "$W/host.util")%)"
fi
grep -q "compute_spin" "$W/a.default" && ok "the default view lists a's process by name" ||
  bad "the default view lists no compute_spin"
[ $fails = 0 ] || {
  tail -n 20 "$W/gsliced.log" "$W/err"
  exit 1
}
exit 0
