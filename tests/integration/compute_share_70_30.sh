#!/bin/bash
# Two slices asking 70% and 30% of one simulated GPU, both always busy: each gets its request.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
S=$(at 1.5)
gsrun --compute 70 --name a -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 6 --label a >"$T/a" &
A=$!
gsrun --compute 30 --name b -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 6 --label b >"$T/b" &
B=$!
wait $A || fail "slice a failed"
wait $B || fail "slice b failed"
cat "$T/a" "$T/b"
within "70% slice" "$(pct "$T/a")" 63 77
within "30% slice" "$(pct "$T/b")" 23 37
busy=$(( $(pct "$T/a") + $(pct "$T/b") ))
[ "$busy" -ge 85 ] || fail "device busy only $busy%"
pass "70/30 shares held, device $busy% busy"
