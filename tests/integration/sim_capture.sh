#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The stream capture rules of the CUDA driver on the sim alone, one run per rule
# (tests/progs/sim_capture.c; docs/sim.md, "Stream capture", gives each rule's source).
source "$GSLICE_SRC/tests/integration/lib.sh"
export GSLICE_SIM_MEMORY=4GiB
failed=""
for rule in $("$TBIN/sim_capture" list); do
  if "$TBIN/sim_capture" "$rule" > "$T/$rule.out" 2>&1; then
    echo "ok: $rule"
  else
    echo "FAIL: $rule"; sed 's/^/  /' "$T/$rule.out"
    failed="$failed $rule"
  fi
done
[ -z "$failed" ] || fail "capture rules:$failed"
# GSLICE_SIM_TRACE names the call that broke a capture (what a hook's author needs to know).
GSLICE_SIM_TRACE=1 "$TBIN/sim_capture" exchange > "$T/trace" 2>&1 || fail "exchange with the trace on"
qgrep -E '^gslice-sim: capture [0-9]+ invalidated by cuMemAlloc \(thread [0-9]+\)$' "$T/trace" ||
  fail "no trace line for the invalidating cuMemAlloc: $(grep invalidated "$T/trace")"
expect_eq "device memory after the rules" \
  "$("$BIN/gslice-sim" info --json | jq '.devices[0].memory_used')" 0
pass "sim capture rules"
