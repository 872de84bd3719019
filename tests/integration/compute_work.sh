#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Device work that is not cuLaunchKernel is held to the slice's share: a hard 30% slice doing
# only memsets (cuMemsetD32Async), one doing only synchronous device-to-device copies
# (cuMemcpyDtoD) and one doing only legacy launches (cuLaunchGridAsync), each beside a hard 70%
# slice of kernels, get 30 and 70 of the device time; memsets and copies captured into a graph
# under the gate pass through. Before, the gate never saw them: the memset
# slice ran ungated beside the kernel slice, the device time-sliced between the two contexts, and
# it got about half of the device.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
# 1 GB/s: a 1 MB memset is 1 ms of device time, a 1 MB copy 2 ms (docs/sim.md).
export GSLICE_SIM_MEMORY_BANDWIDTH=1
start_daemon
pair() { # MODE: the MODE slice (30/30) beside a kernel slice (70/70), 6 s
  S=$(at 1.5)
  daemon_wait_over "$(at 2.5)" 6
  gsrun --compute 70 --compute-limit 70 --name "k$1" -- "$TBIN/compute_spin" --start "$S" \
    --warmup 1 --duration 6 --label kernels >"$T/k.$1" &
  local K=$!
  gsrun --compute 30 --compute-limit 30 --name "w$1" -- "$TBIN/compute_work" --mode "$1" \
    --bytes 1000000 --gbps 1 --kernel-us 1000 --start "$S" --warmup 1 --duration 6 \
    --label "$1" >"$T/w.$1" &
  local W=$!
  wait $K || fail "kernel slice beside $1 failed"
  wait $W || fail "$1 slice failed"
  cat "$T/k.$1" "$T/w.$1"
  local all="$T/k.$1 $T/w.$1"
  device_share "hard 30 slice of $1" "$T/w.$1" "$all" 28 32
  device_share "hard 70 slice of kernels beside $1" "$T/k.$1" "$all" 68 72
  share_ceiling_floor "hard 30 slice of $1 (wall clock)" "$(pct "$T/w.$1")" 0 32 "$all"
}
pair memset-async
pair d2d
pair legacy
# Into a capturing stream the gate passes memsets and copies through, as it does kernels: the
# capture holds (an event of the gate's recorded into it would fail it) and its graph replays.
gsrun --compute 30 --compute-limit 30 --name cap -- "$TBIN/compute_work" --mode capture \
  --warmup 0 --duration 1 --label capture >"$T/cap" 2>&1 || fail "captured memsets: $(cat "$T/cap")"
grep -q "label=capture" "$T/cap" || fail "captured memsets: $(cat "$T/cap")"
echo "ok: memsets and copies captured under the gate, replayed: $(cat "$T/cap")"
pass "memsets, device-to-device copies and legacy launches held to their slice's share"
