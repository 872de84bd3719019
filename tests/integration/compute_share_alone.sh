#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A slice alone on the GPU: hard 30 (limit 30) stays at 30%, soft 30 (limit 100) takes what is free.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
# Alone, a slice's share is of the wall clock: the limit is a ceiling that holds however loaded
# the host; the floors only where the host left the workload and the daemon their CPU (starved).
S=$(at 1.5)
daemon_wait_over "$(at 2.5)" 5
gsrun --compute 30 --compute-limit 30 -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 --label hard >"$T/hard" || fail "hard run failed"
cat "$T/hard"
share_ceiling_floor "hard 30 alone" "$(pct "$T/hard")" 25 35 "$T/hard"
S=$(at 1.5)
daemon_wait_over "$(at 2.5)" 4
gsrun --compute 30 -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 4 --label soft >"$T/soft" || fail "soft run failed"
cat "$T/soft"
share_ceiling_floor "soft 30 alone" "$(pct "$T/soft")" 85 100 "$T/soft"
pass "hard limit holds alone, soft request is work-conserving"
