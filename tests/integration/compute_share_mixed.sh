#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# 50/30/20 with kernels of 0.2, 2 and 20 ms: shares follow requests whatever the kernel length.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
S=$(at 1.5)
daemon_wait_over "$(at 2.5)" 8
gsrun --compute 50 -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 8 --kernel-us 200 --label a >"$T/a" &
A=$!
gsrun --compute 30 -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 8 --kernel-us 2000 --label b >"$T/b" &
B=$!
gsrun --compute 20 -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 8 --kernel-us 20000 --label c >"$T/c" &
C=$!
wait $A && wait $B && wait $C || fail "a slice failed"
cat "$T/a" "$T/b" "$T/c"
# Requests add up to 100%: each is owed its request of the device time there is (switching on a
# loaded machine leaves the device idle, and that is shared by all alike).
all="$T/a $T/b $T/c"
device_share "50% slice (0.2 ms kernels)" "$T/a" "$all" 43 57
device_share "30% slice (2 ms kernels)" "$T/b" "$all" 23 37
device_share "20% slice (20 ms kernels)" "$T/c" "$all" 13 27
pass "mixed kernel lengths keep their shares"
