#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Kernels longer than the quantum are charged what they ran, and the slice after them is not
# charged their tail. A slice of 20 ms kernels, one per batch (a 10 ms quantum: one kernel per
# token, as for one of 51 slices at the defaults), beside a slice of 1 ms kernels: the daemon's
# charge per launch is ~20 ms and ~1 ms. Before, the hook's helper could mark the end of a burst
# before its one kernel reached the driver: about one burst in four of the long slice was
# charged ~50 us, and the short slice, whose kernels queued behind the rest, ~1.2 ms per 1 ms
# kernel (so the long one got twice its fair share among 51 slices).
# Charged time per launch, from the daemon's own counters, does not move with the machine's load.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon --set quantum_max_us=10000 --set quantum_init_us=10000
gsrun --name long -- "$TBIN/compute_spin" --warmup 0 --duration 6 --kernel-us 20000 --batch 1 \
  --label long >"$T/long" &
A=$!
gsrun --name short -- "$TBIN/compute_spin" --warmup 0 --duration 6 --kernel-us 1000 --batch 2 \
  --label short >"$T/short" &
B=$!
# busy_seconds_total and launches_total of each slice on GPU 0: "name busy launches" lines
counters() {
  "$BIN/gslice" status --json | /usr/bin/python3 -c '
import json, sys
for s in json.load(sys.stdin)["slices"]:
    for g in s["gpus"]:
        if g["index"] == 0:
            print(s["name"], g["busy_seconds_total"], g["launches_total"])'
}
sleep 1.5
counters >"$T/c0"
sleep 4
counters >"$T/c1"
wait $A || fail "slice long failed"
wait $B || fail "slice short failed"
cat "$T/long" "$T/short" "$T/c0" "$T/c1"
per_launch() {
  awk -v n="$1" 'FNR == 1 { f++ } $1 == n { b[f] = $2; l[f] = $3 }
    END { if (l[2] <= l[1]) { print -1; exit } printf "%d", (b[2] - b[1]) / (l[2] - l[1]) * 1e6 + 0.5 }' \
    "$T/c0" "$T/c1"
}
long=$(per_launch long) short=$(per_launch short)
echo "charged per launch: long $long us (kernel 20000), short $short us (kernel 1000)"
[ "$long" -ge 18500 ] && [ "$long" -le 21500 ] || fail "long: charged $long us per 20 ms kernel, want 18500..21500"
[ "$short" -ge 900 ] && [ "$short" -le 1100 ] || fail "short: charged $short us per 1 ms kernel, want 900..1100"
pass "kernels longer than the quantum are charged what they ran, and the next slice not their tail"
