#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Launching threads that come and go, 300 at once (more than the gate's 256 slots: the rest
# share one), three waves, under a hard 50: every launch goes through, no close waits forever for
# a launch it thinks in flight, and the daemon counts exactly the launches the program made (each
# one passed the gate once and was reported with its burst). Then three threads of zero-length
# kernels, soft and hard, the same.
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
echo "ok: 300 launching threads at once, three waves: every launch through and counted once"

# A few threads of a launch-bound loop take their launches from the budget an allowance at a
# time (compute.c: allowance_launch): each burst is charged the launches made in it, not the
# allowances taken, and none is lost at a close, soft and hard.
n=0
for how in "--compute 50" "--compute 50 --compute-limit 50"; do
  n=$((n + 1)) name=few$n
  # shellcheck disable=SC2086 # $how is flags
  timeout 60 "$BIN/gslice" run --name "$name" $how -- "$TBIN/compute_threads" --waves 2 \
    --threads 3 --launches 30000 --kernel-us 0 --hold 30 >"$T/$name" 2>&1 &
  P=$!
  for _ in $(seq 600); do
    grep -q "^launched" "$T/$name" && break
    kill -0 $P 2>/dev/null || break
    sleep 0.1
  done
  made=$(sed -n 's/^launched \([0-9]*\)$/\1/p' "$T/$name")
  [ "${made:-0}" -eq $((2 * 3 * 30000)) ] || fail "$how: launched ${made:-?}: $(tail -3 "$T/$name")"
  counted=$("$BIN/gslice" status --json | /usr/bin/python3 -c '
import json, sys
for s in json.load(sys.stdin)["slices"]:
    if s["name"] == sys.argv[1]:
        print(sum(g["launches_total"] for g in s["gpus"]))' "$name")
  kill $P 2>/dev/null
  wait $P 2>/dev/null || true
  echo "$how, 3 threads of zero-length kernels: launched $made, the daemon counted ${counted:-none}"
  [ "${counted:-0}" -eq "$made" ] || fail "$how: the daemon counted ${counted:-no} launches of $made"
done
pass "launching threads, 300 at once and 3 of a launch-bound loop: every launch through and counted once"
