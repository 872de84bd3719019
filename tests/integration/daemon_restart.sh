#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The daemon killed and restarted under load: slices are recovered from the state dir, their
# processes keep running (at no more than their limits meanwhile), reconnect, and finish.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
gsrun --compute 20 --compute-limit 20 --name capped -- "$TBIN/compute_spin" --warmup 0 --duration 5 --label c >"$T/c" &
C=$!
gsrun --compute 50 --name busy -- "$TBIN/compute_spin" --warmup 0 --duration 5 --label b >"$T/b" &
B=$!
sleep 1.5
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
sleep 1
start_daemon
grep -q "2 slice(s) recovered" "$T/gsliced.log" || fail "the restarted daemon did not recover both slices"
"$BIN/gslice" status --json > "$T/status.json"
grep -q '"capped"' "$T/status.json" && grep -q '"busy"' "$T/status.json" || fail "status lacks the slices"
wait $C || fail "capped slice failed"
wait $B || fail "busy slice failed"
cat "$T/c" "$T/b"
# The capped slice never ran above its limit, daemon or not.
# The daemon restarts inside the window: only the workload's own CPU wait is measured.
STARVE_NO_DAEMON=1 share_ceiling_floor "capped slice across the restart" "$(pct "$T/c")" 10 27 "$T/c"
sleep 1.5
n=$(nslices)
[ "$n" -eq 0 ] || fail "slices left after their runs ended: $n"
pass "daemon restart under load: slices recovered, limits held, runs finished"
