#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra serves the kubelet's calls on a pool of workers (--dra-workers): one
# NodePrepareResources held up (its claim's read answered 6 s late by the API server) delays
# neither another claim's Prepare nor another's Unprepare past 3 s; two calls preparing the same
# claim at once answer the same (one slice); a Prepare and an Unprepare of one claim at once
# leave it whole or gone, never half; --dra-workers out of range is refused.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_dra.sh"
source "$GSLICE_SRC/tests/k8s/lib_slowapi.sh" # fault
export GSLICE_SIM_DEVICES=2 GSLICE_SIM_MEMORY=16GiB

for bad in 0 17 x; do
  rc=0
  "$BIN/gslice-node" --mode dra --dra-workers "$bad" >"$T/usage.out" 2>&1 || rc=$?
  expect_eq "--dra-workers $bad" "$rc" 2
  grep -q -- "--dra-workers wants 1..16" "$T/usage.out" || fail "--dra-workers $bad: $(cat "$T/usage.out")"
done
pass "--dra-workers out of 1..16 is refused with what it takes"

dra_up
for c in slow fast held twin both; do
  dra_claim "$c" 1Gi 10
  dra_alloc "$c" "p-$c" >/dev/null
done
one() { printf '{"driver":"gslice.io","claims":[{"namespace":"default","name":"%s","uid":"%s"}]}' "$1" "$(claim_uid "$1")"; }
# ok ANSWER CLAIM: the claim answered without an error, with its CDI device.
ok() { jget "$1" "not d['claims']['$(claim_uid "$2")']['error'] and d['claims']['$(claim_uid "$2")']['devices'][0]['cdi'] == ['gslice.io/claim=claim-$(claim_uid "$2")']"; }
ms() { echo $(($(date +%s%N) / 1000000)); }

out=$(kl POST /prepare "$(one held)")
expect_eq "claim held prepared" "$(ok "$out" held)" True
before=$(nslices)

# The slow one first: its claim's read waits 6 s at the API server (the calls' JSON made before:
# the test's own reads of the claims must not meet the fault).
slow_json=$(one slow) fast_json=$(one fast) held_json=$(one held) held_uid=$(claim_uid held)
fault '{"method":"GET","path":"resourceclaims/slow$","status":0,"delay_s":6,"count":1}'
t0=$(ms)
kl POST /prepare "$slow_json" >"$T/slow.json" &
slow=$!
sleep 1
t1=$(ms)
out=$(kl POST /prepare "$fast_json")
t2=$(ms)
fast_out=$out
out=$(kl POST /unprepare "$held_json")
t3=$(ms)
expect_eq "claim held unprepared beside the slow call" "$(jget "$out" "d['claims']['$held_uid']['error']")" None
echo "beside a call held 6 s: Prepare $((t2 - t1)) ms, Unprepare $((t3 - t2)) ms"
[ $((t2 - t1)) -lt 3000 ] || fail "another claim's Prepare waited $((t2 - t1)) ms behind the slow call"
[ $((t3 - t2)) -lt 3000 ] || fail "another claim's Unprepare waited $((t3 - t2)) ms behind the slow call"
kill -0 "$slow" 2>/dev/null || fail "the slow call was answered before the others: nothing was measured"
expect_eq "claim fast prepared beside the slow call" "$(ok "$fast_out" fast)" True
wait "$slow"
expect_eq "the slow claim prepared in the end" "$(ok "$(cat "$T/slow.json")" slow)" True
echo "the slow call: $(($(ms) - t0)) ms"
expect_eq "slices" "$(nslices)" $((before + 1))
pass "a call held up by a slow API server delays neither another claim's Prepare nor Unprepare"

# The same claim in two calls at once (two pods of one claim starting together): the first's
# read slow; the second waits for that read (the claim is in flight from it), then answers the
# slice the first made (the second fault is left for a second read, were one made: cleared).
twin_json=$(one twin)
fault '{"method":"GET","path":"resourceclaims/twin$","status":0,"delay_s":1,"count":2}'
kl POST /prepare "$twin_json" >"$T/twin1.json" &
a=$!
kl POST /prepare "$twin_json" >"$T/twin2.json" &
b=$!
wait $a $b
clear_faults
expect_eq "first call of twin" "$(ok "$(cat "$T/twin1.json")" twin)" True
expect_eq "second call of twin" "$(ok "$(cat "$T/twin2.json")" twin)" True
expect_eq "slices after twin" "$(nslices)" $((before + 2))
expect_eq "twin's records" "$(ls "$NSTATE/claims" | grep -c "^$(claim_uid twin)\$")" 1
pass "two calls preparing one claim at once: the same answer, one slice"

# Prepare and Unprepare of one claim at once: whole (record, slice, spec) or gone (none).
before=$(nslices) both_json=$(one both)
for round in 1 2 3; do
  fault '{"method":"GET","path":"resourceclaims/both$","status":0,"delay_s":0.3,"count":1}'
  kl POST /prepare "$both_json" >/dev/null &
  a=$!
  sleep 0.$((RANDOM % 5))
  kl POST /unprepare "$both_json" >/dev/null &
  b=$!
  wait $a $b
  u=$(claim_uid both)
  rec=$([ -f "$NSTATE/claims/$u" ] && echo 1 || echo 0)
  spec=$(ls "$CDI" | grep -c "^gslice.io-claim_$u" || true)
  sl=$(($(nslices) - before))
  echo "round $round: record $rec, spec $spec, slices of it $sl"
  [ "$rec$spec$sl" = 111 ] || [ "$rec$spec$sl" = 000 ] ||
    fail "claim both is half there after a Prepare and an Unprepare at once: record $rec, spec $spec, slice $sl"
  kl POST /unprepare "$both_json" >/dev/null
  expect_eq "slices after its Unprepare" "$(nslices)" "$before"
done
pass "a Prepare and an Unprepare of one claim at once: whole or gone, never half"
