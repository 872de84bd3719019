#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A slice is charged the device time of its kernels, not the time it holds its token: a process
# that idles between batches (synchronize, pause, relaunch) is charged ~0.2 ms per 0.2 ms kernel.
# Charged its token's span, it paid for its 0.5 ms pauses after each batch of four: ~0.33 ms per
# kernel, more on a loaded machine, and a hard 30 of it ran 18% of the device.
# Charged time per launch, from the daemon's own counters, does not move with the machine's load.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
gsrun --name idler --compute 30 --compute-limit 30 -- "$TBIN/compute_spin" --warmup 0 --duration 6 \
  --kernel-us 200 --batch 4 --pause-us 500 --label idle >"$T/idle" &
P=$!
# busy_seconds_total and launches_total of the slice on GPU 0, as "busy launches"
counters() {
  "$BIN/gslice" status --json | /usr/bin/python3 -c '
import json, sys
for s in json.load(sys.stdin)["slices"]:
    if s["name"] == "idler":
        for g in s["gpus"]:
            if g["index"] == 0:
                print(g["busy_seconds_total"], g["launches_total"])'
}
sleep 1.5
a=$(counters)
sleep 3
b=$(counters)
wait $P || fail "slice failed"
cat "$T/idle"
[ -n "$a" ] && [ -n "$b" ] || fail "no counters for the slice in gslice status --json"
us=$(awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
  if (y[2] <= x[2]) { print -1; exit } printf "%d", (y[1] - x[1]) / (y[2] - x[2]) * 1e6 + 0.5 }')
echo "charged per launch: $us us (kernel: 200 us; counters $a -> $b)"
[ "$us" -ge 180 ] && [ "$us" -le 240 ] || fail "charged $us us per 200 us kernel, want 180..240"
pass "a slice is charged what its kernels ran, not its idle time between them"
