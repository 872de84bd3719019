#!/bin/bash
# A slice alone on the GPU: hard 30 (limit 30) stays at 30%, soft 30 (limit 100) takes what is free.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
gsrun --compute 30 --compute-limit 30 -- "$TBIN/compute_spin" --warmup 1 --duration 5 --label hard >"$T/hard" || fail "hard run failed"
cat "$T/hard"
within "hard 30 alone" "$(pct "$T/hard")" 25 35
gsrun --compute 30 -- "$TBIN/compute_spin" --warmup 1 --duration 4 --label soft >"$T/soft" || fail "soft run failed"
cat "$T/soft"
within "soft 30 alone" "$(pct "$T/soft")" 85 100
pass "hard limit holds alone, soft request is work-conserving"
