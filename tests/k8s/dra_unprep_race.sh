#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra: an Unprepare of a claim wins over every Prepare of that claim sent
# before it, and a Prepare sent after it prepares the claim as usual. The first Prepare's read of
# the claim is held 9.5 s at the API server stand-in (its client gives up at 10 s) each round:
#   r1  an Unprepare during that read answers at once, and the Prepare then makes nothing (it
#       answers that the claim was unprepared): no record, CDI spec or slice is left, as the
#       kubelet's NodeUnprepareResources promises (before 5bf8522 it answered the Unprepare,
#       then made the slice, which stayed until the claim was gone);
#   r2  a Prepare sent after that Unprepare, while the first still reads, prepares the claim
#       (one slice), and its Unprepare removes it;
#   r3  a second Prepare sent before the Unprepare, waiting its turn behind the first's read (a
#       kubelet retry, a second pod of the claim), makes nothing either (the fifth attack run,
#       D1: 5bf8522 made its slice once the first's read ended, after the Unprepare had
#       answered; 6 of 6 left a record and a slice);
#   r4  both: the waiting Prepare sent before the Unprepare makes nothing, the one sent after it
#       prepares the claim;
#   r5  a second Prepare waiting behind the first's record in flight (below).
# The calls are sent in order on gslice-node's word: it logs each call that waits its turn.
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
# err FILE UID: the claim's error in a Prepare's answer (None: prepared).
err() { jget "$(cat "$1")" "d['claims']['$2'].get('error')"; }
WAITS='waits for another call that has it in flight'
nwaits() { grep -c "$WAITS" "$T/node.log" || true; }
# waits N: gslice-node has said N times that a call waits its turn for a claim. At most 5 s: an
# older gslice-node does not say so, and is raced on time alone.
waits() {
  local i
  for ((i = 0; i < 100; i++)); do
    [ "$(nwaits)" -ge "$1" ] && return 0
    sleep 0.05
  done
}
base=$(nslices)

for c in r1 r2 r3 r4; do
  dra_claim "$c" 4Gi 30
  dra_alloc "$c" "p-$c" >/dev/null
  j=$(one "$c") u=$(claim_uid "$c") werr=
  fault "{\"method\":\"GET\",\"path\":\"resourceclaims/$c\$\",\"status\":0,\"delay_s\":9.5,\"count\":1}"
  kl POST /prepare "$j" >"$T/p-$c" &
  a=$!
  # The Prepare's read is held at the API server (its fault consumed) before the Unprepare goes.
  until_secs 10 held
  if [ "$c" = r3 ] || [ "$c" = r4 ]; then
    # A second Prepare before the Unprepare: it waits its turn behind the first's read.
    w=$(nwaits)
    kl POST /prepare "$j" >"$T/pw-$c" &
    pw=$!
    waits $((w + 1))
  fi
  un=$(kl POST /unprepare "$j")
  kill -0 "$a" 2>/dev/null ||
    fail "claim $c: the Prepare was answered before the Unprepare (9.5 s): nothing was raced"
  expect_eq "claim $c: the Unprepare's answer" "$(jget "$un" "d['claims']['$u']['error']")" None
  pass "claim $c: an Unprepare during the Prepare's read answers at once (the Prepare still reading)"
  if [ "$c" = r2 ] || [ "$c" = r4 ]; then
    # A Prepare after that Unprepare (the kubelet's next pod of the claim) is a new one.
    kl POST /prepare "$j" >"$T/p2-$c" &
    b=$!
  fi
  wait "$a"
  perr=$(err "$T/p-$c" "$u")
  [[ "$perr" == *"was unprepared while this call read it"* ]] ||
    fail "claim $c: the Prepare raced by an Unprepare answered '$perr'"
  if [ "$c" = r3 ] || [ "$c" = r4 ]; then
    wait "$pw"
    werr=$(err "$T/pw-$c" "$u")
    [[ "$werr" == *"was unprepared while this call"* ]] ||
      fail "claim $c: a Prepare sent before the Unprepare, waiting behind the first's read, answered '$werr' (then record, spec, slices: $(left "$u"))"
  fi
  if [ "$c" = r1 ] || [ "$c" = r3 ]; then
    expect_eq "claim $c: record, spec and slices left after the Unprepare" "$(left "$u")" "0 0 0"
    pass "claim $c: the Prepare(s) sent before the Unprepare made nothing and say so ($perr${werr:+; $werr})"
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

# r5: the first Prepare's record in flight (its REGISTER unanswered: gsliced stopped), a second
# Prepare waiting behind it, then the Unprepare, which waits for the first and removes what it
# made; the second answers that the claim was unprepared, and nothing is left. 5bf8522 answered
# the second with the slice the Unprepare then removed, or made one after the Unprepare answered
# (against it, with the waits for log lines it never writes cut to 0.8 s: 4 of 4 rounds that
# raced, 3 of them leaving a record, spec and slice). gsliced answers
# HELLO within 3 s or the first gives up: a round where it did (the host too slow to send both
# calls in time) raced nothing and is run again with another claim, at most 3 times.
rec_there() { [ -f "$NSTATE/claims/$u" ]; }
raced=0
# Allocated before (small: r1-r4 keep their allocations): while gsliced is stopped gslice-node
# offers none of its GPUs.
for try in 1 2 3; do
  dra_claim "r5-$try" 1Gi 10
  dra_alloc "r5-$try" "p-r5-$try" >/dev/null
done
for try in 1 2 3; do
  c=r5-$try
  j=$(one "$c") u=$(claim_uid "$c")
  kill -STOP "$GSLICED_PID"
  kl POST /prepare "$j" >"$T/p-$c" &
  a=$!
  until_secs 10 rec_there # the first's pending record, written just before its REGISTER
  w=$(nwaits)
  kl POST /prepare "$j" >"$T/pw-$c" &
  pw=$!
  waits $((w + 1))
  kl POST /unprepare "$j" >"$T/u-$c" &
  un=$!
  waits $((w + 2)) # the Unprepare waits for the first's record
  kill -CONT "$GSLICED_PID"
  wait "$a" "$pw" "$un"
  if [ "$(err "$T/p-$c" "$u")" != None ]; then
    echo "claim $c: the first Prepare gave up on gsliced ($(err "$T/p-$c" "$u")): nothing raced"
    kl POST /unprepare "$j" >/dev/null
    continue
  fi
  raced=1
  werr=$(err "$T/pw-$c" "$u")
  [[ "$werr" == *"was unprepared while this call"* ]] ||
    fail "claim $c: a Prepare waiting behind one whose REGISTER was in flight, sent before the Unprepare, answered '$werr' (then record, spec, slices: $(left "$u"))"
  expect_eq "claim $c: the Unprepare's answer" "$(jget "$(cat "$T/u-$c")" "d['claims']['$u']['error']")" None
  expect_eq "claim $c: record, spec and slices left after the Unprepare" "$(left "$u")" "0 0 0"
  pass "claim $c: a second Prepare waiting behind a record in flight made nothing and says so ($werr); the Unprepare removed the first's slice"
  break
done
[ "$raced" = 1 ] ||
  skip_part "a Prepare waiting behind a record in flight: in 3 tries the first Prepare gave up on the stopped gsliced (3 s) before both calls came"
