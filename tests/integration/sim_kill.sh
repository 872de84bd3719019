#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A SIGKILLed process's memory returns to the pool, as NVML, gslice-sim info and
# cuMemGetInfo in other processes all see.
source "$GSLICE_SRC/tests/integration/lib.sh"
export GSLICE_SIM_MEMORY=2GiB GSLICE_SIM_CONTEXT_MEMORY=256MiB

"$TBIN/sim_client_linked" hold $((1 << 30)) >"$T/hold.out" 2>&1 &
victim=$!
for _ in $(seq 200); do grep -q holding "$T/hold.out" && break; sleep 0.05; done
grep -q holding "$T/hold.out" || fail "holder did not start: $(cat "$T/hold.out")"

json=$("$BIN/gslice-sim" info --json)
expect_eq "used while held" "$(grep -o '"memory_used":[0-9]*' <<<"$json" | cut -d: -f2)" \
  $(((1 << 30) + (256 << 20)))
grep -q "\"pid\":$victim," <<<"$json" || fail "victim not listed: $json"
nv=$("$TBIN/sim_nvml")
echo "$nv"
grep -q "procs=1 $victim:$(((1 << 30) + (256 << 20)))" <<<"$nv" || fail "NVML process list: $nv"
"$BIN/gslice-sim" info

kill -9 "$victim"
wait "$victim" 2>/dev/null || true

nv=$("$TBIN/sim_nvml")
echo "$nv"
grep -q " used=0 " <<<"$nv" || fail "NVML still counts the dead: $nv"
grep -q "procs=0" <<<"$nv" || fail "NVML still lists the dead: $nv"
json=$("$BIN/gslice-sim" info --json)
expect_eq "used after kill" "$(grep -o '"memory_used":[0-9]*' <<<"$json" | cut -d: -f2)" 0
# The whole device is usable again (2 GiB less one context).
out=$("$TBIN/sim_client_linked" fill $((256 << 20)))
expect_eq "refill" "$(grep -o 'allocated=[0-9]*' <<<"$out")" "allocated=$((1792 << 20))"

# A killed holder that was never waited for (a zombie) is dead too.
"$TBIN/sim_client_linked" hold $((1 << 30)) >"$T/hold2.out" 2>&1 &
z=$!
for _ in $(seq 200); do grep -q holding "$T/hold2.out" && break; sleep 0.05; done
kill -9 "$z"
for _ in $(seq 100); do [ "$(awk '{print $3}' /proc/$z/stat 2>/dev/null)" = Z ] && break; sleep 0.02; done
json=$("$BIN/gslice-sim" info --json)
expect_eq "used after zombie" "$(grep -o '"memory_used":[0-9]*' <<<"$json" | cut -d: -f2)" 0
# A process whose main thread exited (its leader shows as a zombie) while another
# thread lives keeps its memory; killed, it gives it back.
"$TBIN/sim_client_linked" hold-thread $((1 << 30)) >"$T/ht.out" 2>&1 &
ht=$!
for _ in $(seq 200); do grep -q holding "$T/ht.out" && break; sleep 0.05; done
for _ in $(seq 100); do [ "$(awk '{print $3}' /proc/$ht/stat 2>/dev/null)" = Z ] && break; sleep 0.02; done
json=$("$BIN/gslice-sim" info --json)
expect_eq "used by a live process with a zombie leader" \
  "$(jq '.devices[0].memory_used' <<<"$json")" $(((1 << 30) + (256 << 20)))
kill -9 $ht
wait $ht 2>/dev/null || true
expect_eq "used after killing it" "$("$BIN/gslice-sim" info --json | jq '.devices[0].memory_used')" 0
pass "sim kill"
