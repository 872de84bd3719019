#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Two slices asking 70% and 30% of one simulated GPU, both always busy: each gets its request.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
S=$(at 1.5)
daemon_wait_over "$(at 2.5)" 6
gsrun --compute 70 --name a -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 6 --label a >"$T/a" &
A=$!
gsrun --compute 30 --name b -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 6 --label b >"$T/b" &
B=$!
wait $A || fail "slice a failed"
wait $B || fail "slice b failed"
cat "$T/a" "$T/b"
# 70 + 30 = 100%: shares of the device time the slices got (see compute_share_mixed.sh); on the
# wall clock a loaded host took the 70% slice to 53-57% with the split of device time 68/32.
all="$T/a $T/b"
device_share "70% slice" "$T/a" "$all" 63 77
device_share "30% slice" "$T/b" "$all" 23 37
# Work conservation: the device busy nearly all the wall clock, unless the host kept the
# workloads or the daemon from a CPU (then the idle time is the host's, not a scheduler's).
busy=$(( $(pct "$T/a") + $(pct "$T/b") ))
share_ceiling_floor "device busy" "$busy" 85 100 "$all"
pass "70/30 shares held, device $busy% busy"
