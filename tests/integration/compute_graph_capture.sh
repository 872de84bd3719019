#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# CUDA graph capture under the compute gate, in the pattern PyTorch and vLLM use (warm-up, a
# capture on a side stream while another thread launches and synchronizes, instantiate, 1000
# replays): in every capture mode, with a token and under a hard limit, the capture ends with its
# graph and no call of the hook (any of its threads) invalidates it. Then every capture rule of
# the sim (sim_capture) holds with the hook in between, as it does without it.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
export GSLICE_SIM_TRACE=1 # names the call and thread that invalidated a capture
start_daemon
failed=""
# expect_clean WHAT CMD...: CMD succeeds and (unless RULES, whose tests invalidate captures on
# purpose) the sim saw no capture invalidated.
expect_clean() {
  local what=$1
  shift
  if "$@" >"$T/out" 2>&1 && { [ -n "${RULES:-}" ] || ! grep -q 'invalidated' "$T/out"; }; then
    echo "ok: $what${PRINT_OUT:+: $(grep '^mode=' "$T/out")}"
  else
    echo "FAIL: $what"; sed 's/^/  /' "$T/out"
    failed="$failed; $what"
  fi
}
PRINT_OUT=1
for slice in "--compute 30" "--compute 30 --compute-limit 30"; do
  read -r -a opts <<<"$slice"
  for mode in global thread-local relaxed; do
    expect_clean "$mode capture, gslice run $slice" gsrun "${opts[@]}" -- "$TBIN/compute_graph" capture "$mode"
  done
  # The other thread on its per-thread default stream: a burst the gate cannot time with events,
  # which it otherwise ends with a context synchronize (prohibited while a capture goes on).
  expect_clean "global capture beside a per-thread stream, gslice run $slice" \
    gsrun "${opts[@]}" -- "$TBIN/compute_graph" capture global --per-thread
done
PRINT_OUT='' RULES=1
for rule in $("$TBIN/sim_capture" list); do
  expect_clean "sim_capture $rule under a hard limit" \
    gsrun --compute 30 --compute-limit 30 -- "$TBIN/sim_capture" "$rule"
done
[ -z "$failed" ] || fail "under the hook:${failed#;}"
pass "graph capture under the gate: every mode, token and hard limit; every capture rule"
