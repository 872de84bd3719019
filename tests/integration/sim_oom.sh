#!/usr/bin/env bash
# Memory runs out at the configured size, the context's own memory included.
source "$GSLICE_SRC/tests/integration/lib.sh"
export GSLICE_SIM_MEMORY=1GiB GSLICE_SIM_CONTEXT_MEMORY=256MiB

out=$("$TBIN/sim_client_linked" fill $((64 << 20))) || fail "fill: $out"
echo "$out"
expect_eq "bytes allocated before OOM" "$(grep -o 'allocated=[0-9]*' <<<"$out")" \
  "allocated=$((768 << 20))"
expect_eq "free at OOM" "$(grep -o 'free=[0-9]*' <<<"$out")" "free=0"
expect_eq "total" "$(grep -o 'total=[0-9]*' <<<"$out")" "total=$((1 << 30))"

# A context costs memory too: with 1 GiB and 256 MiB contexts, the fifth process
# cannot even start its context.
export GSLICE_SIM_CONTEXT_MEMORY=256MiB
pids=()
for i in 1 2 3 4; do
  coproc_out="$T/hold.$i"
  "$TBIN/sim_client_linked" hold 1 >"$coproc_out" 2>&1 &
  pids+=($!)
done
for i in 1 2 3 4; do
  for _ in $(seq 100); do grep -q holding "$T/hold.$i" 2>/dev/null && break; sleep 0.05; done
done
if "$TBIN/sim_client_linked" hold 1 >"$T/hold.5" 2>&1; then fail "fifth context fit"; fi
grep -q CUDA_ERROR_OUT_OF_MEMORY "$T/hold.5" || { cat "$T"/hold.*; fail "fifth context: no OOM"; }
pass "sim oom"
