#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Per-user bounds: one uid (root too: containers often run as root) cannot take every slice
# (max_slices_per_user) nor every connection (max_clients_per_user) from the others. The
# refusal says the limit and how to raise it; another uid is still served.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
A="$TBIN/daemon_attack"
S="$GSLICE_SOCKET"
OTHER=65534 # nobody
as_other() { setpriv --reuid="$OTHER" --regid="$OTHER" --clear-groups -- "$@"; }
# The other uid reaches the socket through the test's private dir, and what it runs through a
# copy it can reach (lib.sh).
reach_for_others
A="$TBIN/daemon_attack"
start_daemon --set max_slices_per_user=3 --set max_clients_per_user=6

# Slices: a loop stops at 3, with the reason.
"$A" "$S" register 10 1 > "$T/reg" || { cat "$T/reg"; fail "the register loop broke the daemon"; }
cat "$T/reg"
grep -q "at most 3 slices at once, refused with -87" "$T/reg" \
  || fail "registering in a loop is not stopped at max_slices_per_user"
grep -q "max_slices_per_user = 3.*raise max_slices_per_user" "$T/reg" || fail "the refusal does not say the limit"

# gslice run: three live slices of this uid, the fourth refused with the reason; another uid
# still gets one.
pids=()
for i in 1 2 3; do gsrun --name "mine$i" -- sleep 2 & pids+=($!); done
for _ in $(seq 100); do [ "$(nslices)" -ge 3 ] && break; sleep 0.05; done
[ "$(nslices)" -eq 3 ] || fail "three slices did not start"
if gsrun --name mine4 -- true 2> "$T/run4"; then fail "a fourth slice of one uid was accepted"; fi
cat "$T/run4"
grep -q "max_slices_per_user" "$T/run4" || fail "gslice run does not say which limit: $(cat "$T/run4")"
as_other "$BIN/gslice" run --name theirs -- true 2> "$T/other" || { cat "$T/other"; fail "another uid cannot run a slice"; }
wait "${pids[@]}"

# Connections: this uid's idle connections stop at 6 (status of this uid is then refused);
# another uid's status is served meanwhile, and this uid's once they are gone.
"$A" "$S" idle 20 3 > "$T/idle" &
I=$!
for _ in $(seq 100); do [ -s "$T/idle" ] && break; sleep 0.05; done
cat "$T/idle"
grep -q "idle: 6 connections said hello; refused: uid 0 has 6 connections.*max_clients_per_user = 6" "$T/idle" \
  || fail "idle connections are not stopped at max_clients_per_user: $(cat "$T/idle")"
if "$BIN/gslice" status > /dev/null 2> "$T/st7"; then fail "a seventh connection of uid 0 was served"; fi
cat "$T/st7"
grep -q "max_clients_per_user" "$T/st7" || fail "the CLI does not say which limit refused it: $(cat "$T/st7")"
as_other "$BIN/gslice" status > /dev/null || fail "another uid is not served while uid 0 is at its limit"
wait $I
"$BIN/gslice" status > /dev/null || fail "uid 0 is not served once its idle connections are gone"
grep -q "refusing a connection: uid 0 has 6 connections" "$T/gsliced.log" || fail "the daemon did not log the refusal"
kill -0 "$DAEMON_PID" || fail "the daemon died"
pass "one uid cannot take every slice or connection of the node"
