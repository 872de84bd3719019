#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A token holder SIGKILLed mid-burst: the daemon sees its connection close and the other slice
# carries on at once (within a quantum), the killed run reports 128+9, its slice goes away.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
# The victim's label is this test's own (v$$): pgrep sees every test's workloads, and under
# ctest -j a concurrent one's (daemon_hook_containers' "--label victim") matched "--label v" too.
gsrun --compute 50 --name victim -- "$TBIN/compute_spin" --warmup 0 --duration 30 --kernel-us 20000 --label "v$$" >/dev/null &
V=$!
daemon_wait_over "$(at 0)" 4
gsrun --compute 50 --name other -- "$TBIN/compute_spin" --warmup 0 --duration 4 --kernel-us 2000 --label o >"$T/o" &
O=$!
sleep 1.5
for _ in $(seq 100); do # the victim's runner has exec'd it by now, unless the host is slow
  vp=$(pgrep -f "^$TBIN/compute_spin .*--label v$$\$" || true)
  [ -n "$vp" ] && break
  sleep 0.1
done
[ -n "$vp" ] || fail "no victim workload process within 10 s"
kill -9 "$vp"
set +e
wait $V
rc=$?
set -e
expect_eq "exit status of the killed run" "$rc" 137
wait $O || fail "the other slice failed"
cat "$T/o"
# It ran 4 s: before the kill it had ~50%, after it ~100%; a stall would show as much less.
got=$(pct "$T/o")
share_ceiling_floor "the other slice, its neighbour killed 1.5 s in" "$got" 60 100 "$T/o"
sleep 0.3
"$BIN/gslice" status --json | qgrep '"victim"' && fail "the killed run's slice is still there"
pass "killed holder: the other slice continued ($got%), slice removed, exit 137"
