#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A slice is charged its kernels whatever it synchronizes on. After a launch-bound loop the gate
# takes a synchronize of the burst for one that finds all its work done, without asking the
# driver, and the burst idle from its return; a synchronize that does not wait for all of the
# burst's work (another stream's, an event's) must not be taken so, or the kernel still running
# behind it comes off the slice's charge. Each mode: 20 rounds of a 20 ms kernel behind a
# launch-bound loop, charged (gslice status --json's busy_seconds_total) 0.9..1.5 x 0.4 s.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon

busy() {
  "$BIN/gslice" status --json | /usr/bin/python3 -c '
import json, sys
for s in json.load(sys.stdin)["slices"]:
    if s["name"] == sys.argv[1]:
        for g in s["gpus"]:
            if g["index"] == 0:
                print(g["busy_seconds_total"])' "$1"
}

for mode in other event stream ctx; do
  gsrun --name "sync-$mode" --compute 50 -- "$TBIN/compute_sync_kinds" "$mode" 20 20000 4 \
    >"$T/$mode" &
  P=$!
  for _ in $(seq 300); do
    qgrep '^done' "$T/$mode" && break
    kill -0 $P 2>/dev/null || break
    sleep 0.1
  done
  qgrep '^done' "$T/$mode" || { wait $P; fail "$mode: the program did not finish its rounds"; }
  # The token's last burst closes at its expiry (a lone slice's: quantum_max) and is charged.
  sleep 1.5
  charged=$(busy "sync-$mode")
  wait $P || fail "$mode: the program failed"
  launched=$(field "$T/$mode" launched_s)
  echo "$mode: charged ${charged:-none} s for $launched s of kernels"
  [ -n "$charged" ] || fail "$mode: no busy_seconds_total for the slice"
  awk -v c="$charged" -v l="$launched" 'BEGIN { exit !(c >= 0.9 * l && c <= 1.5 * l) }' ||
    fail "$mode: charged $charged s for $launched s of kernels, want 0.9..1.5 x"
done
pass "a slice is charged its kernels through every kind of synchronize after a launch-bound loop"
