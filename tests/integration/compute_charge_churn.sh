#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The charge check against processes gone by the time it looks (the fifth attack run, G1;
# docs/compute.md, "The charge check"): a slice whose holder keeps its token idle while its real
# work runs unhooked in processes of 50 ms each, each gone before most checks, is charged that
# work all the same: NVML keeps a dead process's samples (the sim as a GPU does, docs/sim.md), and
# gsliced remembers each GPU process's slice by pid and start time while it lives (NVML's
# running-process list read every 20 ms, the hook connections). Before: the 50% victim got 4.8-5.1%
# of the wall clock and nobody was warned; now 50-55%. Beside a chain of 50 ms zero-charge
# forgers (each its own hook connection) the victim got 32-43%, now 61-95%.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
# victim_floor NAME FILE LO: the victim's share of the wall clock at least LO percent, unless the
# host kept it or the daemon from a CPU (then reported, not checked).
victim_floor() {
  local got
  got=$(pct "$2")
  if [ "$got" -ge "$3" ]; then
    echo "ok: $1 = $got% of the wall clock (want >= $3)"
  elif starved "$2" 2>"$T/starved"; then
    skip_part "$1: $got%, want >= $3%: $(cat "$T/starved")"
  else
    fail "$1: got $got% of the wall clock, want >= $3%"
  fi
}

# A zero-charge holder and its slice's work in unhooked processes of 50 ms, back to back.
start_daemon
S=$(at 1.5)
daemon_wait_over "$(awk -v s="$S" 'BEGIN { printf "%.3f", s + 1 }')" 5
gsrun --compute 50 --name victim -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 \
  --label v >"$T/v" &
V=$!
gsrun --compute 10 --compute-limit 10 --name churn -- sh -c "
  env -u LD_PRELOAD '$TBIN/compute_forge' hold --start $S --warmup 1 --duration 5 >/dev/null &
  end=\$(awk -v s=$S 'BEGIN { printf \"%d\", s + 6 }')
  while [ \$(date +%s) -lt \$end ]; do
    env -u LD_PRELOAD '$TBIN/compute_spin' --warmup 0 --duration 0.05 --label w
  done; wait" >"$T/w" &
A=$!
wait $V || fail "victim failed"
wait $A || fail "the churning workers failed"
cat "$T/v"
echo "workers: $(grep -c 'label=w' "$T/w")"
grep "charged to it" "$T/gsliced.log" | head -1 || true
victim_floor "victim beside a holder and 50 ms workers" "$T/v" 25
qgrep "slice [0-9]* 'churn': NVML saw its processes" "$T/gsliced.log" ||
  fail "the short-lived workers' device time was charged to no slice (no warning)"
stop_daemon

# A chain of zero-charge forgers of 50 ms each, hooked (their own connections to the daemon).
n0=$(wc -l <"$T/gsliced.log")
start_daemon
S=$(at 1.5)
daemon_wait_over "$(awk -v s="$S" 'BEGIN { printf "%.3f", s + 1 }')" 5
gsrun --compute 50 --name victim -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 \
  --label v >"$T/v2" &
V=$!
gsrun --compute 10 --compute-limit 10 --name forgers -- sh -c "
  end=\$(awk -v s=$S 'BEGIN { printf \"%d\", s + 6 }')
  while [ \$(date +%s) -lt \$end ]; do
    env -u LD_PRELOAD '$TBIN/compute_forge' zero --warmup 0 --duration 0.05 --label f
  done" >"$T/f" &
A=$!
wait $V || fail "victim failed"
wait $A || fail "the forgers failed"
cat "$T/v2"
tail -n +"$((n0 + 1))" "$T/gsliced.log" >"$T/log2"
victim_floor "victim beside 50 ms zero-charge forgers" "$T/v2" 52
qgrep "slice [0-9]* 'forgers': NVML saw its processes" "$T/log2" ||
  fail "the short-lived forgers' device time was charged to no slice (no warning)"
stop_daemon
pass "processes gone by the check charged to their slice: victims $(pct "$T/v")% and $(pct "$T/v2")%"
