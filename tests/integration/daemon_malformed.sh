#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
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
# The slice's share of the wall clock, alone on the device: the bad clients must not hold the
# daemon up (the sanitizer suite beside daemon_attack once took it to 42% one run in three: each
# ASan snapshot for the client below that writes STATUS and never reads was handled before the
# slice's requests; fixed: a bounded turn per connection, no request taken while a reply
# waits). Not of the time it spent in launch calls: since the handoff (issue 12, item 1) a
# launch waits for its own slice's next token while that slice's tail still runs, so launch
# time overlaps device time (68-73% of "device + launch time" with the device 99% busy).
got=$(pct "$T/s")
echo "the slice ran $got% of the wall clock"
# A host that kept the slice or the daemon from a CPU (a holder off its CPU cannot release in
# time and is revoked) lowers it for no fault of the daemon: reported, not checked.
if [ "$got" -lt 70 ]; then
  if starved "$T/s" 2>"$T/starved"; then
    skip_part "the slice's floor of 70% (got $got%): $(cat "$T/starved")"
  else
    fail "the slice got only $got%"
  fi
fi
kill -0 "$DAEMON_PID" || fail "the daemon died"
pass "malformed clients closed, daemon and slices unharmed"
