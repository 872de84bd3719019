#!/bin/bash
# Hostile clients (garbage, wrong versions, lies about lengths, out-of-protocol messages) lose
# their own connection and nothing else: a slice keeps running and status still answers.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
gsrun --compute 40 --name steady -- "$TBIN/compute_spin" --warmup 0 --duration 3 --label s >"$T/s" &
S=$!
"$TBIN/daemon_badclient" "$GSLICE_SOCKET" || fail "bad clients were not handled"
"$BIN/gslice" status >/dev/null || fail "status does not answer after the bad clients"
wait $S || fail "the slice failed"
cat "$T/s"
got=$(pct "$T/s")
[ "$got" -ge 70 ] || fail "the slice got only $got%"
kill -0 "$DAEMON_PID" || fail "the daemon died"
pass "malformed clients closed, daemon and slices unharmed"
