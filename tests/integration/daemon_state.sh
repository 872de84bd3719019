#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The state file: a corrupt one is refused with a clear message and left as it was; one lock per
# state dir; a second daemon on the same socket is refused.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
mkdir -p "$DSTATE"
printf 'gslice-state 1\nnext_id 4\nslice 2 uid=0 what\n' > "$DSTATE/slices.state"
cp "$DSTATE/slices.state" "$T/orig"
set +e
"$BIN/gsliced" --state-dir "$DSTATE" --foreground 2>"$T/err"; rc=$?
set -e
[ "$rc" -ne 0 ] || fail "started over a corrupt state file"
grep -q "slices.state:3: not a valid slice line" "$T/err" || fail "message: $(cat "$T/err")"
grep -q "move it away" "$T/err" || fail "message does not say what to do: $(cat "$T/err")"
cmp -s "$DSTATE/slices.state" "$T/orig" || fail "the corrupt file was changed"
rm "$DSTATE/slices.state"
start_daemon
set +e
"$BIN/gsliced" --state-dir "$DSTATE" --foreground 2>"$T/err2"; rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "another gsliced (pid $DAEMON_PID)" "$T/err2" || fail "second daemon: $(cat "$T/err2")"
set +e
"$BIN/gsliced" --state-dir "$T/other" --foreground 2>"$T/err3"; rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "another daemon answers" "$T/err3" || fail "same socket: $(cat "$T/err3")"
stop_daemon
pass "corrupt state refused and kept, one daemon per state dir and socket"
