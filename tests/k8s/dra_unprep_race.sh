#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra: an Unprepare of a claim that comes while a Prepare of it is reading the
# claim from the API server (held there 8 s) answers at once, and the Prepare then makes nothing
# (it answers that the claim was unprepared): no record, CDI spec or slice is left, as the
# kubelet's NodeUnprepareResources promises. A Prepare sent after that Unprepare, while the
# first is still reading, prepares the claim (one slice), and its Unprepare removes it. The old
# gslice-node answered the Unprepare, then made the slice, which stayed until the claim was gone.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_dra.sh"
source "$GSLICE_SRC/tests/k8s/lib_slowapi.sh" # fault
export GSLICE_SIM_DEVICES=2 GSLICE_SIM_MEMORY=16GiB

dra_up
one() { printf '{"driver":"gslice.io","claims":[{"namespace":"default","name":"%s","uid":"%s"}]}' "$1" "$(claim_uid "$1")"; }
faults_left() { jget "$(api GET /_test/faults)" "len(d)"; }
held() { [ "$(faults_left)" = 0 ]; }
# left UID: what of the claim is there, "record spec slices".
left() {
  local rec spec
  rec=$([ -f "$NSTATE/claims/$1" ] && echo 1 || echo 0)
  spec=$(ls "$CDI" | grep -c "^gslice.io-claim_$1" || true)
  echo "$rec $spec $(($(nslices) - base))"
}
base=$(nslices)

for c in r1 r2; do
  dra_claim "$c" 4Gi 30
  dra_alloc "$c" "p-$c" >/dev/null
  j=$(one "$c") u=$(claim_uid "$c")
  fault "{\"method\":\"GET\",\"path\":\"resourceclaims/$c\$\",\"status\":0,\"delay_s\":8,\"count\":1}"
  kl POST /prepare "$j" >"$T/p-$c" &
  a=$!
  # The Prepare's read is held at the API server (its fault consumed) before the Unprepare goes.
  until_secs 10 held
  un=$(kl POST /unprepare "$j")
  kill -0 "$a" 2>/dev/null ||
    fail "claim $c: the Prepare was answered before the Unprepare (8 s): nothing was raced"
  expect_eq "claim $c: the Unprepare's answer" "$(jget "$un" "d['claims']['$u']['error']")" None
  pass "claim $c: an Unprepare during the Prepare's read answers at once (the Prepare still reading)"
  if [ "$c" = r2 ]; then
    # A Prepare after that Unprepare (the kubelet's next pod of the claim) is a new one.
    kl POST /prepare "$j" >"$T/p2-$c" &
    b=$!
  fi
  wait "$a"
  perr=$(jget "$(cat "$T/p-$c")" "d['claims']['$u']['error']")
  [[ "$perr" == *"was unprepared while this call read it"* ]] ||
    fail "claim $c: the Prepare raced by an Unprepare answered '$perr'"
  if [ "$c" = r1 ]; then
    expect_eq "claim $c: record, spec and slices left after the Unprepare" "$(left "$u")" "0 0 0"
    pass "claim $c: the raced Prepare made nothing and says so ($perr)"
    continue
  fi
  wait "$b"
  expect_eq "claim $c: the later Prepare" "$(jget "$(cat "$T/p2-$c")" "d['claims']['$u']['devices'][0]['cdi']")" "['gslice.io/claim=claim-$u']"
  expect_eq "claim $c: record, spec and slices after the later Prepare" "$(left "$u")" "1 1 1"
  un=$(kl POST /unprepare "$j")
  expect_eq "claim $c: its Unprepare" "$(jget "$un" "d['claims']['$u']['error']")" None
  expect_eq "claim $c: record, spec and slices after its Unprepare" "$(left "$u")" "0 0 0"
  pass "claim $c: a Prepare after the raced Unprepare prepares the claim (one slice), its Unprepare removes it"
done
