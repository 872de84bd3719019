#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra: an Unprepare wins over a Prepare call of the same claims that came
# before it, claims still waiting their turn in that call's batch included. A NodePrepareResources
# of 9 claims takes 8 at a time (DRA_PREPARE_PARALLEL): the reads of the first 8 are held 9 s at
# the API server stand-in, so the ninth waits in the batch. An Unprepare of the first (being read)
# and of the ninth (not begun) answers at once; the batch then answers both "unprepared" and
# makes nothing of them (no record, CDI spec or slice), the 7 others prepared. Before, the ninth
# was prepared after the Unprepare had answered, its slice left until the claim was gone (the
# kubelet's retry of a batch that timed out, then the pod's deletion: the fifth attack run's D1
# for a batch). A Prepare sent after the Unprepare prepares both; the batch's Unprepare leaves
# nothing.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_dra.sh"
source "$GSLICE_SRC/tests/k8s/lib_slowapi.sh" # fault, nslices
export GSLICE_SIM_DEVICES=2 GSLICE_SIM_MEMORY=16GiB

dra_up
N=9
for i in $(seq 0 $((N - 1))); do
  dra_claim "q$i" 1Gi 10
  dra_alloc "q$i" "p-q$i" >/dev/null
done
# batch I...: the call of claims q<I>... (JSON made before the faults: the test's own reads of the
# claims must not meet them).
batch() {
  local i sep="" out=""
  for i in "$@"; do
    out="$out$sep{\"namespace\":\"default\",\"name\":\"q$i\",\"uid\":\"$(claim_uid "q$i")\"}"
    sep=,
  done
  printf '{"driver":"gslice.io","claims":[%s]}' "$out"
}
ALL=$(batch $(seq 0 $((N - 1))))
RACED=$(batch 0 8)
declare -A U
for i in $(seq 0 $((N - 1))); do U[$i]=$(claim_uid "q$i"); done
faults_left() { jget "$(api GET /_test/faults)" "len(d)"; }
held() { [ "$(faults_left)" = 0 ]; }
# err FILE I: claim q<I>'s error in a Prepare's answer (None: prepared).
err() { jget "$(cat "$1")" "d['claims']['${U[$2]}'].get('error')"; }
# left I: what of claim q<I> is there, "record spec".
left() {
  local rec spec
  rec=$([ -f "$NSTATE/claims/${U[$1]}" ] && echo 1 || echo 0)
  spec=$(ls "$CDI" | grep -c "^gslice.io-claim_${U[$1]}" || true)
  echo "$rec $spec"
}
base=$(nslices)

fault '{"method":"GET","path":"resourceclaims/q[0-7]$","status":0,"delay_s":9,"count":8}'
kl POST /prepare "$ALL" >"$T/p.json" &
a=$!
until_secs 10 held # the first 8 reads held: q8 waits its turn in the batch
un=$(kl POST /unprepare "$RACED")
kill -0 "$a" 2>/dev/null || fail "the batch was answered before the Unprepare (9 s): nothing was raced"
expect_eq "the Unprepare of q0 (being read) and q8 (waiting in the batch)" \
  "$(jget "$un" "[d['claims'][u]['error'] for u in ('${U[0]}', '${U[8]}')]")" "[None, None]"
pass "an Unprepare of claims of a Prepare batch in flight answers at once"
wait "$a"
for i in 0 8; do
  e=$(err "$T/p.json" "$i")
  [[ "$e" == *"was unprepared while this call"* ]] ||
    fail "claim q$i of the batch, unprepared meanwhile, answered '$e' (record, spec: $(left "$i"))"
  expect_eq "claim q$i: record and spec after the batch" "$(left "$i")" "0 0"
done
for i in $(seq 1 7); do expect_eq "claim q$i of the batch" "$(err "$T/p.json" "$i")" None; done
expect_eq "slices after the batch" "$(nslices)" $((base + 7))
pass "the batch made nothing of the claims unprepared meanwhile (q0 being read, q8 not begun) and prepared the 7 others"

out=$(kl POST /prepare "$RACED")
echo "$out" >"$T/p2.json"
for i in 0 8; do
  expect_eq "claim q$i prepared after the Unprepare" "$(err "$T/p2.json" "$i")" None
  expect_eq "claim q$i: record and spec" "$(left "$i")" "1 1"
done
expect_eq "slices" "$(nslices)" $((base + 9))
un=$(kl POST /unprepare "$ALL")
expect_eq "the batch's Unprepare" "$(jget "$un" "sorted(set(str(v['error']) for v in d['claims'].values()))")" "['None']"
for i in $(seq 0 $((N - 1))); do expect_eq "claim q$i after the Unprepare" "$(left "$i")" "0 0"; done
expect_eq "slices after the Unprepare" "$(nslices)" "$base"
pass "a Prepare after the Unprepare prepares the claims anew; the batch's Unprepare leaves nothing"
