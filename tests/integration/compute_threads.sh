#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Launching threads that come and go, 300 at once (more than the gate's 256 slots: the rest
# share one), three waves, under a hard 50: every launch goes through, no close waits forever for
# a launch it thinks in flight, and the daemon counts exactly the launches the program made (each
# one passed the gate once and was reported with its burst).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
timeout 60 "$BIN/gslice" run --name churn --compute 50 --compute-limit 50 -- \
  "$TBIN/compute_threads" --waves 3 --threads 300 --launches 64 --hold 30 >"$T/out" 2>&1 &
P=$!
for _ in $(seq 600); do
  grep -q "^launched" "$T/out" && break
  kill -0 $P 2>/dev/null || break
  sleep 0.1
done
made=$(sed -n 's/^launched \([0-9]*\)$/\1/p' "$T/out")
[ -n "$made" ] || fail "the run failed or hung: $(tail -5 "$T/out")"
[ "${made:-0}" -eq $((3 * 300 * 64)) ] || fail "launched ${made:-?}, want $((3 * 300 * 64))"
counted=$("$BIN/gslice" status --json | /usr/bin/python3 -c '
import json, sys
for s in json.load(sys.stdin)["slices"]:
    if s["name"] == "churn":
        print(sum(g["launches_total"] for g in s["gpus"]))')
echo "launched $made, the daemon counted ${counted:-none}"
kill $P 2>/dev/null
wait $P 2>/dev/null || true
[ "${counted:-0}" -eq "$made" ] || fail "the daemon counted ${counted:-no} launches of $made"
pass "300 launching threads at once, three waves: every launch through and counted once"
