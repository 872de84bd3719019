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
expect_eq "device memory after the rules" \
  "$("$BIN/gslice-sim" info --json | jq '.devices[0].memory_used')" 0
pass "sim capture rules"
