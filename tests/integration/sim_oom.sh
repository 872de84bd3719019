#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Memory runs out at the configured size, the context's own memory included.
source "$GSLICE_SRC/tests/integration/lib.sh"
export GSLICE_SIM_MEMORY=1GiB GSLICE_SIM_CONTEXT_MEMORY=256MiB

out=$("$TBIN/sim_client_linked" fill $((64 << 20))) || fail "fill: $out"
echo "$out"
expect_eq "bytes allocated before OOM" "$(grep -o 'allocated=[0-9]*' <<<"$out")" \
  "allocated=$((768 << 20))"
expect_eq "free at OOM" "$(grep -o 'free=[0-9]*' <<<"$out")" "free=0"
expect_eq "total" "$(grep -o 'total=[0-9]*' <<<"$out")" "total=$((1 << 30))"

# A context costs memory too: with 1 GiB and 256 MiB contexts, four processes holding
# only their contexts fill the device and a fifth cannot even create its context.
for i in 1 2 3 4; do
  "$TBIN/sim_client_linked" hold 0 >"$T/hold.$i" 2>&1 &
done
for i in 1 2 3 4; do
  for _ in $(seq 200); do grep -q holding "$T/hold.$i" && break; sleep 0.05; done
  grep -q holding "$T/hold.$i" || fail "holder $i: $(cat "$T/hold.$i")"
done
if "$TBIN/sim_client_linked" hold 0 >"$T/hold.5" 2>&1; then fail "fifth context fit"; fi
grep -q "cuDevicePrimaryCtxRetain.*CUDA_ERROR_OUT_OF_MEMORY" "$T/hold.5" \
  || fail "fifth context: $(cat "$T/hold.5")"
pass "sim oom"
