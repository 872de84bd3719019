#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra recovers what a crash or a lost gsliced leaves (dra.c's records and
# reconciliation): gslice-node dying between REGISTER and its record (GSLICE_NODE_TEST_CRASH_AT=
# registered) leaves a slice no claim knows: the next gslice-node removes it and makes the
# claim's one slice, and Prepare answers as for any prepared claim, nothing leaked; gsliced
# losing its state (its state dir gone) loses a prepared claim's slice: gslice-node makes it
# again (new id), moves the claim's start directory to it and keeps its CDI spec; Unprepare after
# both leaves no slice, spec or record. A prepared claim deleted from the API server (or made
# again under its name) with no Unprepare from the kubelet is unprepared by gslice-node itself
# at its next start (and every minute).
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_dra.sh"

dra_up
dra_claim c1 1Gi 30 30
dra_alloc c1 p1 >/dev/null
u=$(claim_uid c1)
batch='{"driver":"gslice.io","claims":[{"namespace":"default","name":"c1","uid":"'"$u"'"}]}'
want="[(30, 30, [0], [$GiB])]"
dra_slice_names() { "$BIN/gslice" status --json | "$PY" -c 'import json,sys; print(sorted(s["name"].split(".")[0] + ":" + ".".join(s["name"].split(".")[2:]) for s in json.load(sys.stdin)["slices"]))'; }

# The crash: REGISTER done, gslice-node gone before its record says so.
dra_crash registered prepare "$batch"
expect_eq "the slice REGISTER made" "$(gs_slices)" "$want"
[ "$(specs)" = 0 ] || fail "a CDI spec was written before the crash point"
dra_node_again
# The orphan goes and the claim's slice is made (once).
one() { [ "$(dra_slice_names)" = "['dra:default.c1']" ] && [ "$(gs_slices)" = "$want" ] && grep -q "is of no prepared claim" "$T/node.log"; }
until_secs 15 one
out=$(kl POST /prepare "$batch")
expect_eq "Prepare after the crash" "$(jget "$out" "(d['claims']['$u']['error'], [x['cdi'] for x in d['claims']['$u']['devices']])")" "(None, [['gslice.io/claim=claim-$u']])"
expect_eq "slices after Prepare" "$(gs_slices)" "$want"
[ "$(specs)" = 1 ] || fail "no CDI spec after Prepare: $(ls "$CDI")"
pass "a crash between REGISTER and the record: the orphan removed, one slice made, Prepare answers"

# gsliced loses its state: the claim's slice is made again and its start directory follows.
id_of() { "$BIN/gslice" status --json | "$PY" -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin)["slices"] if s["name"].startswith("dra.")])'; }
env_id() { sed -n 's/^GSLICE_SLICE=//p' "$NSTATE/alloc/claim-$u/slice.env"; }
old=$(id_of)
expect_eq "slice.env names gsliced's slice" "[$(env_id)]" "$old"
spec_before=$(cat "$CDI/gslice.io-claim_$u.json")
stop_gsliced
rm -rf "$T/daemon"
start_gsliced
remade() { [ "$(gs_slices)" = "$want" ] && [ "[$(env_id)]" = "$(id_of)" ] && [ "$(id_of)" != "$old" ]; }
until_secs 20 remade
grep -q "claim default/c1: gsliced had lost slice" "$T/node.log" || fail "the remake is not logged"
expect_eq "the CDI spec through gsliced's loss" "$(cat "$CDI/gslice.io-claim_$u.json")" "$spec_before"
out=$(kl POST /prepare "$batch")
expect_eq "Prepare after gsliced's loss" "$(jget "$out" "d['claims']['$u']['error']")" None
pass "gsliced lost its state: the claim's slice made again ($old -> $(id_of)), its start directory moved, its CDI spec kept"

out=$(kl POST /unprepare "$batch")
expect_eq "Unprepare" "$(jget "$out" "d['claims']['$u']['error']")" None
expect_eq "slices after Unprepare" "$(gs_slices)" "[]"
[ "$(specs)" = 0 ] || fail "a CDI spec is left: $(ls "$CDI")"
[ -z "$(ls -A "$NSTATE/claims")" ] || fail "a claim record is left: $(ls "$NSTATE/claims")"
[ ! -e "$NSTATE/alloc/claim-$u" ] || fail "the claim's directory link is left"
out=$(kl POST /unprepare "$batch")
expect_eq "Unprepare again" "$(jget "$out" "d['claims']['$u']['error']")" None
pass "Unprepare after both: no slice, spec, record or directory left; again is success"

# Claims the kubelet never unprepares: one deleted, one made again under its name (another uid).
dra_claim gone 1Gi 10 10
dra_alloc gone g1 >/dev/null
dra_claim again 1Gi 10 10
dra_alloc again a1 >/dev/null
ug=$(claim_uid gone)
ua=$(claim_uid again)
two='{"driver":"gslice.io","claims":[{"namespace":"default","name":"gone","uid":"'"$ug"'"},{"namespace":"default","name":"again","uid":"'"$ua"'"}]}'
out=$(kl POST /prepare "$two")
expect_eq "Prepare gone and again" "$(jget "$out" "[d['claims'][u]['error'] for u in ('$ug', '$ua')]")" "[None, None]"
expect_eq "their slices" "$(nslices)" 2
stop_node
api DELETE "$RES/namespaces/default/resourceclaims/gone" >/dev/null
api DELETE "$RES/namespaces/default/resourceclaims/again" >/dev/null
dra_claim again 1Gi 10 10
start_dra_node
cleaned() { [ "$(nslices)" = 0 ] && [ "$(specs)" = 0 ] && [ -z "$(ls -A "$NSTATE/claims")" ]; }
until_secs 20 cleaned
grep -q "claim default/gone (uid $ug): slice [0-9]* removed: its ResourceClaim is gone from the API server" "$T/node.log" || fail "the removal of gone is not logged"
grep -q "claim default/again (uid $ua): slice [0-9]* removed: its ResourceClaim was replaced" "$T/node.log" || fail "the removal of again is not logged"
pass "claims deleted or replaced in the API server without an Unprepare: unprepared at gslice-node's start"
