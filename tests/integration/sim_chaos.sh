#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Processes killed at any instant (mid-allocation, mid-launch, holding the machine's
# lock): the machine stays usable, no lock is left held, and every byte comes back.
source "$GSLICE_SRC/tests/integration/lib.sh"
PTX="$GSLICE_SRC/tests/gpu/spin.ptx"
export GSLICE_SIM_MEMORY=4GiB GSLICE_SIM_CONTEXT_MEMORY=128MiB

start() { "$TBIN/sim_client_linked" churn "$PTX" >/dev/null 2>"$T/churn.$1.err" & pids[$1]=$!; }
pids=()
for i in 0 1 2 3; do start $i; done
for round in $(seq 40); do
  sleep 0.0$((RANDOM % 9 + 1))
  i=$((RANDOM % 4))
  kill -9 "${pids[$i]}" 2>/dev/null || true
  wait "${pids[$i]}" 2>/dev/null || true
  start $i
done
sleep 0.2
for i in 0 1 2 3; do
  # A survivor must still be churning, not stuck on a lock or failed.
  kill -0 "${pids[$i]}" || fail "churner $i died: $(cat "$T/churn.$i.err")"
  kill -9 "${pids[$i]}"
  wait "${pids[$i]}" 2>/dev/null || true
done
json=$(timeout 10 "$BIN/gslice-sim" info --json) || fail "gslice-sim info hangs (lock left held?)"
expect_eq "memory after every process died" "$(jq '.devices[0].memory_used' <<<"$json")" 0
expect_eq "processes after every process died" "$(jq '.devices[0].processes | length' <<<"$json")" 0
out=$(timeout 20 "$TBIN/sim_client_linked" fill $((64 << 20))) || fail "fill after chaos: $out"
expect_eq "whole device usable" "$(grep -o 'allocated=[0-9]*' <<<"$out")" \
  "allocated=$(((4 << 30) - (128 << 20)))"
pass "sim chaos"
