#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The simulated GPU time-slices contexts as a GPU without MPS does: two processes without
# gslice, one queueing 20 ms kernels and one 0.2 ms kernels, share the device equally while
# both have work (in device time, by events), a 20 ms kernel next to another process's work
# takes longer than 20 ms by its events (it was preempted), a context alone runs its kernels
# back to back, exactly as long as they are, and a bad GSLICE_SIM_TIMESLICE is refused.
source "$GSLICE_SRC/tests/integration/lib.sh"
PTX="$GSLICE_SRC/tests/gpu/spin.ptx"
# 1. Shares. Two processes queue deep work at once, no gslice: one 60 x 20 ms, the other
# 2000 x 0.2 ms once the first has queued. Without slicing the short kernels waited behind
# all 1.2 s of long ones. With it, while both have work the device alternates timeslices: the
# short-kernel process gets half the device. Measured in device time by its own events (the
# end of each kernel) over its middle 1000 kernels, once every launch is queued, so a busy
# host cannot shift it.
queued() { "$BIN/gslice-sim" info --json | grep -o '"queued_ns":[0-9]*' | cut -d: -f2; }
"$TBIN/sim_client_linked" spin "$PTX" 20000 60 >"$T/long" 2>&1 &
long=$!
for _ in $(seq 500); do [ "$(queued 2>/dev/null || echo 0)" -gt 0 ] && break; sleep 0.01; done
[ "$(queued)" -gt 0 ] || fail "the long process queued nothing: $(cat "$T/long")"
"$TBIN/sim_client_linked" spin "$PTX" 200 2000 >"$T/short" 2>&1 || fail "short: $(cat "$T/short")"
wait $long || fail "long: $(cat "$T/long")"
awk '/^interval/ { n++; end[n] = $3 }
     END { if (n != 2000) { print "FAIL: " n " intervals"; exit 1 }
           share = 1000 * 0.2 / (end[1500] - end[500])
           printf "short kernels next to long ones: %.1f%% of the device\n", share * 100
           if (share < 0.45 || share > 0.55) { print "FAIL: want 45..55%"; exit 1 } }' \
  "$T/short" || fail "shares"

# 2. Preemption shows in event timings: the long process's 20 ms kernels that ran beside the
# short ones took about 40 ms each between their events; the device ran exactly the 1.6 s
# both queued, nothing lost or counted twice by preempting.
awk '/^interval/ && $5 >= 30 && $5 <= 50 { n++ }
     END { if (n < 15) { print "FAIL: only " n " of 60 kernels took 30..50 ms"; exit 1 }
           print n " of 60 long kernels took 30..50 ms by events: preempted" }' "$T/long" \
  || fail "preemption"
busy=$("$BIN/gslice-sim" info --json | grep -o '"busy_ns":[0-9]*' | head -1 | cut -d: -f2)
expect_eq "device busy ns" "$busy" 1600000000

# 3. A context alone: its kernels back to back, each exactly its time by events. Only a kernel
# whose "before" event completed at the previous kernel's end (queued behind it) says so: when
# the stream was idle (the first kernel; any after a host stall of 20 ms between launches) that
# event completed at its record, and the host's gap to the launch is in the interval too (a
# loaded CI host made the first one 20.115 ms).
"$TBIN/sim_client_linked" spin "$PTX" 20000 8 >"$T/alone" 2>&1 || fail "spin: $(cat "$T/alone")"
q=$(awk '/^interval/ { n++; a = $3 - $5
       if (n > 1 && a <= prev + 0.01) { q++; if ($5 < 19.99 || $5 > 20.01) bad = bad " " $5 }
       prev = $3 }
     END { if (n != 8 || bad != "") { print "FAIL: alone:" bad " (" n " kernels)"; exit 1 }
           print q + 0 }' "$T/alone") || fail "alone: $q"
if [ "$q" -ge 3 ]; then
  echo "ok: alone, $q of 8 kernels queued behind another took exactly 20 ms"
else
  skip_part "alone: only $q of 8 kernels were queued behind another (the host stalled the launches)"
fi

# 4. A bad value is refused, naming the variable and the unit.
out=$(GSLICE_SIM_TIMESLICE=2ms "$TBIN/sim_client_linked" spin "$PTX" 1 1 2>&1) && fail "2ms accepted"
grep -q "GSLICE_SIM_TIMESLICE='2ms' is invalid: want a whole number of microseconds" <<<"$out" \
  || fail "message: $out"
pass "sim timeslice"
