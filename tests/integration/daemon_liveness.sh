#!/bin/bash
# One client never stalls the others (tests/progs/daemon_attack.c): a client writing STATUS
# without pause gets a bounded share of each loop turn; another slice's tokens keep coming.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
A="$TBIN/daemon_attack"
S="$GSLICE_SOCKET"
start_daemon --set max_slices_per_user=256

# Two connections writing STATUS without pause, next to a slice that asks for a token, takes
# it and gives it back, over and over: the longest wait between two of its grants says how long
# the loop was kept from it (4.2 s before each connection got a bounded turn).
gsrun --name asker -- "$A" "$S" grants 4 > "$T/grants" &
G=$!
sleep 0.5
"$A" "$S" statusflood 2 3 10 > "$T/flood" || fail "the STATUS flood failed"
wait $G || fail "grants run failed"
cat "$T/flood" "$T/grants"
gap=$(sed -n 's/.*longest gap \([0-9]*\) ms/\1/p' "$T/grants")
[ -n "$gap" ] && [ "$gap" -lt 500 ] || fail "a STATUS flood kept a slice from its token for $gap ms"
n=$(awk '{ s += $5 } END { print s + 0 }' "$T/flood")
[ "$n" -gt 100 ] || fail "the flood was not served at all ($n STATUS): it was meant to be, slowly"
pass "a STATUS flood (2 connections, $n requests) kept a slice from its token at most $gap ms"
