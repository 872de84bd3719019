#!/bin/bash
# Hostile clients (garbage, wrong versions, lies about lengths, out-of-protocol messages) lose
# their own connection and nothing else: a slice keeps running and status still answers.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
daemon_wait_over "$(at 0)" 3
gsrun --compute 40 --name steady -- "$TBIN/compute_spin" --warmup 0 --duration 3 --label s >"$T/s" &
S=$!
"$TBIN/daemon_badclient" "$GSLICE_SOCKET" || fail "bad clients were not handled"
"$BIN/gslice" status >/dev/null || fail "status does not answer after the bad clients"
wait $S || fail "the slice failed"
cat "$T/s"
# The slice's share of the time it had work at the device or at its gate, not of wall time: the
# sanitizer suite beside daemon_attack took the wall-clock share to 42% one run in three, the
# daemon held up by the client below that writes STATUS and never reads (each ASan snapshot
# handled before the slice's requests; fixed: a bounded turn per connection, no request taken
# while a reply waits), and a loaded CPU lowers the wall-clock share for no fault of the daemon.
got=$(pct_asked "$T/s")
echo "the slice ran $got% of the time it asked (wall clock: $(pct "$T/s")%)"
# A holder kept from a CPU cannot release in time and is revoked (86% of the window off a CPU
# beside a soak's build: 69%): below the floor is then the host's doing, reported not checked.
if [ "$got" -lt 70 ]; then
  if starved "$T/s" 2>"$T/starved"; then
    skip_part "the slice's floor of 70% (got $got%): $(cat "$T/starved")"
  else
    fail "the slice got only $got%"
  fi
fi
kill -0 "$DAEMON_PID" || fail "the daemon died"
pass "malformed clients closed, daemon and slices unharmed"
