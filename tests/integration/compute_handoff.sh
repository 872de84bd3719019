#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The handoff (docs/compute.md): a burst that has spent its budget gives its token back while its
# last kernels still run, so the next holder's first kernel is queued before the device drains,
# and every stretch of device time is charged once. Two greedy 50% slices of 1 ms kernels; over
# 3 s, from the daemon's counters and the simulated GPU's own busy time:
# - most bursts end in a handoff (the hook's log says so), not in a drained queue;
# - what the daemon charged over the run adds up to the device's busy time: not more (the next
#   holder's events start while the previous tail runs, charged to both the sum would exceed the
#   busy time), and not much less (no device time goes free). The bound is loose (1.5%):
#   charges ran 0.2-0.4% over the busy time before the handoff too (0.3-0.8% in the sanitizer
#   build), and with the next holder queued 0.1 ms before the tail's end the overlap is small
#   (without clip_charge: 0.6% over);
# - the device was busy nearly all the wall clock (no stall), unless the host kept a process
#   from a CPU.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
S=$(at 1)
# Each slice outlives its workload until the test has read the last counters ($T/done; 30 s at
# most: the slice goes when its runner does): its charges are all in by then, and the totals
# compare without the edges of a window (charges arrive after the work they are for; on a
# starved host, tens of ms after).
for l in a b; do
  GSLICE_LOG_LEVEL=debug GSLICE_LOG_FILE="$T/hook.$l" gsrun --compute 50 --name "$l" -- \
    bash -c 'd=$1; shift; "$@" &&
      exec env -u LD_PRELOAD timeout 30 sh -c "until [ -e \"\$0\" ]; do sleep 0.05; done" "$d"' \
    spin "$T/done" "$TBIN/compute_spin" --start "$S" --warmup 1.5 --duration 3 --kernel-us 1000 \
    --label "$l" >"$T/$l" &
  eval "P$l=\$!"
done
# "charged_s device_busy_s time_s read_s": both slices' busy_seconds_total on GPU 0, the sim's
# busy time and clock, and the epoch just after the sim was read
counters() {
  local sim read
  sim=$("$BIN/gslice-sim" info --json)
  read=$(date +%s.%N)
  "$BIN/gslice" status --json | /usr/bin/python3 -c '
import json, sys
st, sim = json.load(sys.stdin), json.loads(sys.argv[1])
c = sum(g["busy_seconds_total"] for s in st["slices"] for g in s["gpus"] if g["index"] == 0)
print(c, sim["devices"][0]["busy_ns"] / 1e9, sim["time_ns"] / 1e9, sys.argv[2])' "$sim" "$read"
}
# The device's busy time over [x, y], both read while the workloads run (S + 1.5 to S + 4.5;
# y at S + 4 leaves the read time on a loaded host). Read after the run ended, by a host that
# kept this script from a CPU, the window would take in the idle device after it.
sleep_until "$S" 1.5
daemon_wait_over "$(at 0)" 3
x=$(counters)
sleep_until "$S" 4
y=$(counters)
y_late=$(awk -v y="$y" -v s="$S" 'BEGIN { split(y, v, " "); print (v[4] > s + 4.5 ? 1 : 0) }')
# Every kernel ran once both workloads have written their lines, and every charge is in once
# two reads 0.5 s apart agree; both slices are still there until $T/done.
for _ in $(seq 300); do
  [ -s "$T/a" ] && [ -s "$T/b" ] && break
  sleep 0.1
done
[ -s "$T/a" ] && [ -s "$T/b" ] || fail "the workloads did not end within 30 s of their run's end"
z=$(counters)
for _ in $(seq 40); do
  sleep 0.5
  z0=$z z=$(counters)
  [ "${z%% *}" = "${z0%% *}" ] && break
done
touch "$T/done"
wait "$Pa" || fail "slice a failed"
wait "$Pb" || fail "slice b failed"
cat "$T/a" "$T/b"
echo "counters (charged, device busy, time, read at): $x -> $y -> $z"
read -r busy wall < <(awk -v x="$x" -v y="$y" 'BEGIN { split(x, a, " "); split(y, b, " ");
  printf "%.4f %.4f\n", b[2] - a[2], b[3] - a[3] }')
read -r charged total < <(awk -v z="$z" 'BEGIN { split(z, c, " "); printf "%.4f %.4f\n", c[1], c[2] }')
echo "over the run: charged ${charged} s, device busy ${total} s; device busy ${busy} s of ${wall} s"

handed=$(cat "$T"/hook.? | grep -c "handed off" || true)
closed=$(cat "$T"/hook.? | grep -c "closed by" || true)
echo "bursts: $closed closed, $handed handed off while their tail ran"
[ "$closed" -gt 20 ] || fail "only $closed bursts closed: the hook's debug log is missing"
if [ $((100 * handed)) -lt $((50 * closed)) ]; then
  starved "$T/a $T/b" 2>"$T/starved" && skip_part "handoffs: $handed of $closed: $(cat "$T/starved")" ||
    fail "only $handed of $closed bursts handed their token off while their tail ran"
fi
# A known weakness, not the host's alone: a hook's device intervals are anchored on its own clock
# reads, and a hook kept from a CPU reads them late, so clip_charge misses part of the overlap
# (8% over, 4.52 s for 4.18 s, with the workloads off a CPU 16-24% of the window beside a soak's
# build; docs/compute.md). Over the bound with that starvation measured: reported, not passed.
if ! awk -v c="$charged" -v b="$total" 'BEGIN { exit !(c <= b * 1.015 + 0.002) }'; then
  if starved "$T/a $T/b" 2>"$T/starved"; then
    skip_part "charges within 1.5% of the busy time (charged ${charged} s for ${total} s): $(cat "$T/starved")"
  else
    fail "charged ${charged} s for ${total} s of device time: overlap charged twice"
  fi
fi
awk -v c="$charged" -v b="$total" 'BEGIN { exit !(c >= b * 0.97) }' ||
  fail "charged ${charged} s for ${total} s of device time: device time went free"
pass_busy=$(awk -v b="$busy" -v w="$wall" 'BEGIN { printf "%d", 100 * b / w }')
# A floor against stalls, not the handoff's measure (the handoffs above are): 97-99% on a quiet
# host, 95-96% in the sanitizer build, 97% before the handoff with two slices.
if [ "$pass_busy" -lt 93 ] && [ "$y_late" = 1 ]; then
  skip_part "device busy's floor of 93% (got ${pass_busy}%): the host kept this script from a" \
    "CPU until the run had ended, and the window read takes in the idle device after it"
else
  share_ceiling_floor "device busy" "$pass_busy" 93 100 "$T/a $T/b"
fi
pass "handoff: next holder queued behind the tail, device time charged once (${charged} s of ${total} s)"
