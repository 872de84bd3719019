#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gslice status` against a stopped (SIGSTOP) daemon: a short wait and a message that says what
# is wrong (issue 8: it waited 10 s and asked whether it was "the same gslice version").
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"

start_daemon
kill -STOP "$DAEMON_PID"
t0=$(date +%s%N)
rc=0
"$BIN/gslice" status >"$T/out" 2>&1 || rc=$?
t1=$(date +%s%N)
kill -CONT "$DAEMON_PID"
ms=$(((t1 - t0) / 1000000))
echo "gslice status took $ms ms, rc $rc: $(cat "$T/out")"
[ "$rc" != 0 ] || fail "status succeeded against a stopped daemon"
grep -q "gsliced at $GSLICE_SOCKET did not answer within 3 s; is it stopped" "$T/out" ||
  fail "the message does not say the daemon did not answer: $(cat "$T/out")"
! grep -q "version" "$T/out" || fail "the message blames the version: $(cat "$T/out")"
[ "$ms" -lt 6000 ] || fail "status waited $ms ms"
pass "status against a stopped daemon: ${ms} ms, says so"
# And once it runs again, status works.
"$BIN/gslice" status >/dev/null || fail "status after SIGCONT"
