#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Per-thread default stream: a program built with --default-stream per-thread launches with
# cuLaunchKernel_ptsz on stream 0 from several threads. Under a hard 30 slice it gets 30%, and
# the gate times its bursts on the per-thread stream, never on the legacy one (a legacy event
# would wait for every blocking stream of the context on a real GPU, and time the wrong queue).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
# compute_ptsz's window starts 1 s (its warmup) after its setup.
daemon_wait_over "$(at 1.2)" 4
GSLICE_LOG_LEVEL=debug GSLICE_LOG_FILE="$T/hook.log" \
  gsrun --compute 30 --compute-limit 30 -- "$TBIN/compute_ptsz" --threads 2 --warmup 1 \
  --duration 4 > "$T/out" || fail "ptsz run failed: $(cat "$T/out"; tail -5 "$T/hook.log")"
cat "$T/out"
share_ceiling_floor "hard 30, two threads on cuLaunchKernel_ptsz(stream 0)" "$(pct "$T/out")" 23 37 "$T/out"
n=$(grep -c "opened on the per-thread stream" "$T/hook.log" || true)
[ "$n" -gt 10 ] || fail "bursts not opened on the per-thread stream ($n): $(grep 'opened on' "$T/hook.log" | sort | uniq -c | head)"
if grep -q "opened on the legacy stream" "$T/hook.log"; then
  fail "a _ptsz burst was timed on the legacy stream: $(grep -c 'opened on the legacy' "$T/hook.log") times"
fi
echo "ok: $n bursts, all on the per-thread stream"
pass "per-thread default stream: timed on its own stream, held to its slice"
