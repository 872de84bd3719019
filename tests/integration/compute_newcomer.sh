#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A newcomer with a request does not stop a slice already running (issue 12, item 6): a
# best-effort slice runs alone; a --compute 60 slice starts. Over the newcomer's first 1.2 s the
# best-effort slice keeps more than a third of its fair part (fair: half of the 40% left, 20%;
# switching on a loaded machine comes out of that part). Shares of the device time the two got,
# so a machine too loaded to keep the device busy moves neither. Before: the best-effort slice got
# nothing for 1.3 s (its second alone counted against it, the newcomer owed its request for a
# window it had not been there for).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
S=$(at 1.5)
N=$(awk -v s="$S" 'BEGIN { printf "%.3f", s + 2 }')
daemon_wait_over "$N" 1.2
gsrun --name be -- "$TBIN/compute_spin" --start "$S" --warmup 2 --duration 1.2 \
  --kernel-us 1000 --batch 2 --label be >"$T/be" &
A=$!
gsrun --compute 60 --name new -- "$TBIN/compute_spin" --start "$N" --warmup 0 --duration 1.2 \
  --kernel-us 2000 --batch 2 --label new >"$T/new" &
B=$!
wait $A || fail "slice be failed"
wait $B || fail "slice new failed"
cat "$T/be" "$T/new"
be=$(field "$T/be" device_s) new=$(field "$T/new" device_s)
pm=$(awk -v a="$be" -v b="$new" 'BEGIN { printf "%d", (a + b > 0 ? 1000 * a / (a + b) : 0) }')
# A holder kept from a CPU is revoked with the device idle and its turn lost: its share of the
# device time drops by the host's doing (40‰ with the two processes off a CPU 22% and 53% of the
# window, beside a soak's build), and the floor is then reported not checked.
if [ "$pm" -lt 70 ]; then
  if starved "$T/be $T/new" 2>"$T/starved"; then
    skip_part "the best-effort slice's floor of 70‰ (got $pm‰): $(cat "$T/starved")"
  else
    fail "the best-effort slice got $pm‰ of the device in the newcomer's first 1.2 s (fair: 200‰)"
  fi
fi
# Two slices took turns: the daemon measured time lost to switching, and says so.
lost=$("$BIN/gslice" status --json | grep -o '"switch_lost_seconds_total":[0-9.e+-]*' | head -1 | cut -d: -f2)
awk -v l="${lost:-0}" 'BEGIN { exit !(l > 0 && l < 1.2) }' || fail "switch_lost_seconds_total: '$lost'"
echo "ok: $lost s lost to switching"
pass "the best-effort slice got $pm‰ of the device beside a 60% newcomer (fair: 200‰)"
