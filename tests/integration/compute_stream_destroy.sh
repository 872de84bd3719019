#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Streams destroyed while a burst times them: three threads launch into their own streams and
# synchronize while a fourth, round after round, destroys a stream it launched into (its work
# still queued every other round). The gate takes a stream out of the burst before the driver's
# destroy, so it never records an event into, or queries, a destroyed stream: no crash (the sim
# follows no freed stream either: a destroyed stream's query, synchronize, record and wait are
# CUDA_ERROR_INVALID_HANDLE), every burst timed by its events (none charged its wall time after
# a refused record), and the slice's share held under its hard limit.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
# The sim's own checks against a destroy racing every use of the stream in another thread
# (queries, records, synchronizes, waits, launches, async copies and memsets, host functions, graph
# launches and uploads, captures in each mode, cuStreamGetDevice, cuMemAllocAsync/FreeAsync; a
# program that does so has undefined behaviour on a real driver): no crash, each call answered
# SUCCESS, NOT_READY, INVALID_HANDLE or a capture error. One second; the sim before every use
# rechecked the stream under its lock crashed in 9 of 10 runs of 0.3 s.
gsrun --compute 50 --compute-limit 50 -- "$TBIN/compute_stream_destroy" --threads 3 \
  --warmup 0.1 --duration 0.3 --sim-race 1 > "$T/out.race" 2>&1 ||
  fail "the sim race run failed (rc $?): $(cat "$T/out.race")"
qgrep "^sim race: .* no crash" "$T/out.race" || fail "the sim race: $(cat "$T/out.race")"
grep "^sim race" "$T/out.race"
for run in 1 2 3; do
  GSLICE_LOG_LEVEL=debug GSLICE_LOG_FILE="$T/hook.$run.log" \
    gsrun --compute 50 --compute-limit 50 -- "$TBIN/compute_stream_destroy" --threads 3 \
    --warmup 0.3 --duration 1.5 > "$T/out.$run" 2>&1 ||
    fail "run $run failed (rc $?): $(cat "$T/out.$run"; tail -5 "$T/hook.$run.log")"
  cat "$T/out.$run"
  qgrep "query, synchronize, record, wait, destroy: CUDA_ERROR_INVALID_HANDLE" "$T/out.$run" ||
    fail "a destroyed stream's handle checks: $(cat "$T/out.$run")"
  rounds=$(field "$T/out.$run" rounds)
  [ "${rounds:-0}" -ge 20 ] || fail "run $run: only ${rounds:-0} rounds of destroys"
  closes=$(grep -c "burst [0-9]* closed by" "$T/hook.$run.log" || true)
  wall=$(grep -c "closed by .*(wall time)" "$T/hook.$run.log" || true)
  [ "$closes" -gt 5 ] || fail "run $run: $closes bursts closed"
  [ "$wall" -eq 0 ] || fail "run $run: $wall of $closes bursts charged their wall time (an event refused on a destroyed stream?): $(grep '(wall time)' "$T/hook.$run.log" | head -3)"
  echo "ok: run $run, $rounds rounds of destroys, $closes bursts, all timed by their events"
  share_ceiling_floor "hard 50, streams destroyed in bursts (run $run)" "$(pct "$T/out.$run")" 20 58 "$T/out.$run"
done
pass "streams destroyed in a burst: no crash, bursts timed by their events, the share held"
