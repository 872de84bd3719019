#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Two simulated GPUs, one scheduler each: requests are admitted per GPU, and a slice's token on
# one GPU does not hold back the other (--gpu sets CUDA_VISIBLE_DEVICES; ordinal 0 inside the
# slice is its first GPU).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
export GSLICE_SIM_DEVICES=2
start_daemon
S=$(at 1.5)
daemon_wait_over "$(at 2.5)" 5
gsrun --gpu 0 --compute 70 -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 --label a >"$T/a" &
A=$!
gsrun --gpu 1 --compute 70 -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 --label b >"$T/b" &
B=$!
gsrun --gpu 1 --compute 30 -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 --label c >"$T/c" &
C=$!
# The three slices registered (gslice run admits each before its workload starts): then GPU 1's
# 100% is committed. A fixed wait raced three runners starting on a loaded host.
for _ in $(seq 200); do [ "$(nslices)" -ge 3 ] && break; sleep 0.05; done
[ "$(nslices)" -eq 3 ] || fail "three slices did not register within 10 s: $(nslices)"
set +e
gsrun --gpu 0,1 --compute 10 -- true 2>"$T/refused"; rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "GPU 1 has 100% of compute committed already" "$T/refused" ||
  fail "over-commit on GPU 1: rc=$rc $(cat "$T/refused")"
wait $A && wait $B && wait $C || fail "a slice failed"
cat "$T/a" "$T/b" "$T/c"
# GPU 1: 70 + 30 = 100%, shares of the device time its slices got (see compute_share_mixed.sh).
device_share "70% slice on GPU 1" "$T/b" "$T/b $T/c" 63 77
device_share "30% slice on GPU 1" "$T/c" "$T/b $T/c" 23 37
# GPU 0: alone, a soft slice takes the wall clock, unless the host starved it or the daemon.
share_ceiling_floor "70% slice alone on GPU 0 (work-conserving)" "$(pct "$T/a")" 85 100 "$T/a $T/b $T/c"
pass "one scheduler per GPU, admission per GPU"
