#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The idle holder (docs/compute.md, "Time held idle"): a slice's process that speaks the hook's
# protocol itself, takes every token it can, keeps each to just before its expiry running nothing
# and releases it charged nothing, is charged the time it held the token past the allowance while
# the other slice waited: its 10% limit paces it by that time, and its 50% neighbour gets the
# device. Before: it held the token 92.6% of the time, the neighbour got 7.2% (the fifth attack
# run, G6), and NVML's samples (the charge check) see nothing, as nothing runs. So is one that
# hands each idle token off and charges 0, or holds each 1.9 ms (the sixth run). An honest pair
# keeps 50/50 and is charged next to nothing for idle holding.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
metrics() {
  /usr/bin/python3 -c 'import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode())' \
    "$(sed -n 's/.*serving \/metrics on port \([0-9]*\).*/\1/p' "$T/gsliced.log" | tail -1)"
}
# idle_s METRICS NAME: the slice's gslice_slice_idle_held_seconds_total (0 when absent).
idle_s() { sed -n "s/^gslice_slice_idle_held_seconds_total{slice=\"$2\",[^}]*} \(.*\)/\1/p" "$1" | awk '{ s += $1 } END { printf "%.3f", s + 0 }'; }

start_daemon --metrics 0
S=$(at 1.5)
daemon_wait_over "$(awk -v s="$S" 'BEGIN { printf "%.3f", s + 1 }')" 5
gsrun --compute 50 --name victim -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 \
  --label v >"$T/v" &
V=$!
# Unhooked (LD_PRELOAD unset): the slice's token is its word alone.
gsrun --compute 10 --compute-limit 10 --name holder -- env -u LD_PRELOAD "$TBIN/compute_forge" \
  hold --start "$S" --warmup 1 --duration 5 --label h >"$T/h" &
H=$!
sleep_until "$S" 5.5
metrics >"$T/m1"
wait $V || fail "victim failed"
wait $H || fail "holder failed"
cat "$T/v" "$T/h"
held=$(idle_s "$T/m1" holder)
echo "holder's gslice_slice_idle_held_seconds_total: $held"
# The victim's share of the wall clock (the holder runs nothing: the device is the victim's when
# the holder has no token). Paced at 10% by the time it holds, the holder keeps the token about
# 10-20% of the time (the allowance is free); before, the victim got 7%.
v=$(pct "$T/v")
if [ "$v" -ge 60 ]; then
  echo "ok: victim beside an idle holder = $v% (want 60..100)"
elif starved "$T/v" 2>"$T/starved"; then
  skip_part "victim beside an idle holder: $v%, want 60..100%: $(cat "$T/starved")"
else
  fail "victim beside an idle holder: got $v%, want 60..100% (the holder kept the token idle)"
fi
awk -v h="$held" 'BEGIN { exit !(h > 0.1) }' || fail "no idle holding on /metrics for the holder ($held s)"
qgrep "slice [0-9]* 'holder' held the token .* idle" "$T/gsliced.log" || fail "no warning of the idle holder"
stop_daemon

# The two ways around it the sixth attack run found: a handoff's PENDING release then a charge of
# 0 (its estimate was refunded and its pacing undone: the holder kept the token 75% of the time,
# the victim 24%), and back-to-back tokens each held 1.9 ms, inside a per-token allowance (48-70%,
# the victim 26-44%). Each is held near its 10% limit now.
for mode in pend0 allow; do
  start_daemon
  S=$(at 1.5)
  daemon_wait_over "$(awk -v s="$S" 'BEGIN { printf "%.3f", s + 1 }')" 4
  gsrun --compute 50 --name victim -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 4 \
    --label v >"$T/v-$mode" &
  V=$!
  gsrun --compute 10 --compute-limit 10 --name holder -- env -u LD_PRELOAD "$TBIN/compute_forge" \
    "$mode" --start "$S" --warmup 1 --duration 4 --label h >"$T/h-$mode" &
  H=$!
  wait $V || fail "victim failed ($mode)"
  wait $H || fail "holder failed ($mode)"
  cat "$T/v-$mode" "$T/h-$mode"
  v=$(pct "$T/v-$mode")
  if [ "$v" -ge 68 ]; then
    echo "ok: victim beside a $mode holder = $v% (want 68..100)"
  elif starved "$T/v-$mode" 2>"$T/starved"; then
    skip_part "victim beside a $mode holder: $v%, want 68..100%: $(cat "$T/starved")"
  else
    fail "victim beside a $mode holder: got $v%, want 68..100%"
  fi
  stop_daemon
done

# An honest pair, each 50%: 50/50 as ever, and next to nothing charged for idle holding.
n0=$(wc -l <"$T/gsliced.log")
start_daemon --metrics 0
S=$(at 1.5)
daemon_wait_over "$(awk -v s="$S" 'BEGIN { printf "%.3f", s + 1 }')" 5
gsrun --compute 50 --name a -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 --label a >"$T/a" &
A=$!
gsrun --compute 50 --name b -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 --label b >"$T/b" &
B=$!
sleep_until "$S" 5.5
metrics >"$T/m2"
wait $A || fail "slice a failed"
wait $B || fail "slice b failed"
cat "$T/a" "$T/b"
device_share "honest a" "$T/a" "$T/a $T/b" 46 54
device_share "honest b" "$T/b" "$T/a $T/b" 46 54
ia=$(idle_s "$T/m2" a) ib=$(idle_s "$T/m2" b)
echo "honest idle holding: a $ia s, b $ib s"
# Of about 5 s each held: an honest holder's release and next grant cost it a fraction of a
# millisecond a token, inside the allowance; beside a build a release the host kept from a CPU may
# cost a few ms (0.15 s in 5 s at load 15), and it is never said as a holder's.
awk -v a="$ia" -v b="$ib" 'BEGIN { exit !(a < 0.5 && b < 0.5) }' ||
  fail "an honest slice was charged for idle holding: a $ia s, b $ib s"
tail -n +"$((n0 + 1))" "$T/gsliced.log" >"$T/log2"
! qgrep "held the token .* idle" "$T/log2" || fail "an honest slice was said to hold tokens idle: $(grep 'idle' "$T/log2")"
pass "idle holder held to its limit by the time it holds (victim $v%, $held s charged), honest pair 50/50 ($ia s, $ib s)"
