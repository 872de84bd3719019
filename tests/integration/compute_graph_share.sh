#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Graph replays are held to the slice's share like single launches: a hard 30% slice replaying a
# CUDA graph stays at 30% alone, and next to a 70% slice of single launches the two split the
# device 70/30 (the tolerances of compute_share_alone and compute_share_70_30).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
GRAPH=(--nodes 10 --kernel-us 200 --replays 4)
S=$(at 1.5)
daemon_wait_over "$(at 2.5)" 5
gsrun --compute 30 --compute-limit 30 -- "$TBIN/compute_graph" share "${GRAPH[@]}" --start "$S" \
  --warmup 1 --duration 5 --label alone >"$T/alone" || fail "graph slice alone failed"
cat "$T/alone"
share_ceiling_floor "hard 30 graph slice alone" "$(pct "$T/alone")" 25 35 "$T/alone"
S=$(at 1.5)
daemon_wait_over "$(at 2.5)" 6
gsrun --compute 70 --name a -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 6 --label a >"$T/a" &
A=$!
gsrun --compute 30 --compute-limit 30 --name g -- "$TBIN/compute_graph" share "${GRAPH[@]}" \
  --start "$S" --warmup 1 --duration 6 --label g >"$T/g" &
G=$!
wait $A || fail "slice a (single launches) failed"
wait $G || fail "slice g (graph replays) failed"
cat "$T/a" "$T/g"
all="$T/a $T/g"
device_share "70% slice of single launches" "$T/a" "$all" 63 77
device_share "30% hard slice of graph replays" "$T/g" "$all" 23 37
share_ceiling_floor "30% hard slice of graph replays (wall clock)" "$(pct "$T/g")" 0 35 "$all"
pass "graph replays held to their share: alone $(pct "$T/alone")%, next to 70%: $(pct_of "$T/g" "$all")% of the device"
