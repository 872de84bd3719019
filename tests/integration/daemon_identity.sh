#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A slice's identity survives a daemon that lost its state (issue 8): a daemon restarted over
# another, empty state dir gives id 1 out again; the running slice's hook used to reconnect as
# "slice 1" and join a stranger's slice (a hard 20% ran at 25%, the other's 50% got 20-26%).
# Each slice carries a random nonce (GSLICE_SLICE_NONCE); a HELLO with another one is refused,
# the process paces itself at its own limit, and its runner does not remove the stranger's slice.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"

start_daemon
gsrun --compute 20 --compute-limit 20 --name old -- "$TBIN/compute_spin" --warmup 0 \
  --duration 5 --label old$$ >"$T/old" 2>"$T/old.err" &
OLD=$!
for _ in $(seq 100); do
  "$BIN/gslice" status --json | qgrep '"name":"old","[^]]*"pids":\[[0-9]' && break
  sleep 0.05
done
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true

# Another, empty state dir: ids start at 1 again.
DSTATE="$T/daemon2"
start_daemon
"$BIN/gslice" run --compute 50 --name stranger -- sleep 15 >/dev/null 2>&1 &
for _ in $(seq 100); do
  "$BIN/gslice" status --json | qgrep '"id":1,"name":"stranger"' && break
  sleep 0.05
done
"$BIN/gslice" status --json | qgrep '"id":1,"name":"stranger"' || fail "the stranger's slice is not slice 1"

# The old slice's hook tries to reconnect every 200 ms: give it time, then look.
old_pid=$(pgrep -f "^$TBIN/compute_spin --warmup 0 --duration 5 --label old$$\$" || true)
[ -n "$old_pid" ] || fail "the old slice's workload is gone already"
for _ in $(seq 40); do
  st=$("$BIN/gslice" status --json)
  pids=$(sed -n 's/.*"id":1,"name":"stranger",[^]]*"pids":\[\([0-9,]*\)\].*/\1/p' <<<"$st")
  [[ ",$pids," != *",$old_pid,"* ]] ||
    fail "the old slice's process $old_pid joined the stranger's slice 1 (pids $pids)"
  grep -q "not the slice's: refused" "$T/gsliced.log" && break
  sleep 0.1
done
grep -q "not the slice's: refused" "$T/gsliced.log" || { cat $T/gsliced.log $T/old.err; fail "no refused HELLO in the daemon's log (old pid $old_pid, slice 1 pids $pids)"; }
wait "$OLD" || fail "the old slice's workload failed: $(cat "$T/old.err")"
grep -q "is not this process's slice" "$T/old.err" || fail "the old slice's process did not say why: $(cat "$T/old.err")"
cat "$T/old"
# Paced at its own 20% limit, not scheduled as the stranger's 50%.
STARVE_NO_DAEMON=1 share_ceiling_floor "old slice, paced by itself" "$(pct "$T/old")" 10 27 "$T/old"
# Its runner's exit did not remove the stranger's slice of the same id.
sleep 0.5
"$BIN/gslice" status --json | qgrep '"id":1,"name":"stranger"' || fail "the old runner removed the stranger's slice"
pass "a slice's process never joins another slice that got its id"
