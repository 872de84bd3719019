#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Processes of one slice share its token and its budget: a hard-30 slice of two processes gets
# 30% between them (not 30% each, and not less: their overlapping bursts are charged once),
# and a 40% slice of two processes beside a 60% one keeps its 40.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
S=$(at 1.5)
daemon_wait_over "$(at 2.5)" 5
gsrun --compute 30 --compute-limit 30 -- sh -c "\"$TBIN/compute_spin\" --start $S --warmup 1 --duration 5 --label p1 >\"$T/p1\" &
  \"$TBIN/compute_spin\" --start $S --warmup 1 --duration 5 --label p2 >\"$T/p2\"; wait" || fail "hard slice failed"
cat "$T/p1" "$T/p2"
# A hard limit is a ceiling on the wall clock; its floor only where the host starved no one.
share_ceiling_floor "hard 30 over two processes" $(( $(pct "$T/p1") + $(pct "$T/p2") )) 23 37 "$T/p1 $T/p2"
S=$(at 1.5)
daemon_wait_over "$(at 2.5)" 5
gsrun --compute 40 -- sh -c "\"$TBIN/compute_spin\" --start $S --warmup 1 --duration 5 --label q1 >\"$T/q1\" &
  \"$TBIN/compute_spin\" --start $S --warmup 1 --duration 5 --label q2 >\"$T/q2\"; wait" &
Q=$!
gsrun --compute 60 -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 --label r >"$T/r" || fail "60% slice failed"
wait $Q || fail "40% slice failed"
cat "$T/q1" "$T/q2" "$T/r"
# 40 + 60 = 100%: shares of the device time there is (see compute_share_mixed.sh).
all="$T/q1 $T/q2 $T/r"
device_share "40% slice of two processes" "$T/q1 $T/q2" "$all" 33 47
device_share "60% slice beside it" "$T/r" "$all" 53 67
pass "a slice's processes share its token and its share"
