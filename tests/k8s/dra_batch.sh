#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra prepares the claims of one NodePrepareResources at the same time
# (DRA_PREPARE_PARALLEL threads, dra_prepare_batch) without losing what one claim after the other
# guaranteed: 24 claims of one batch each get their own slice, record and CDI spec (each claim a
# memory of its own, so a record crossed with another's shows); the same batch again answers the
# same and makes nothing; a batch where some claims fail (not allocated, a replaced uid) prepares
# the others; two calls at once are both answered, each claim once; gslice-node dying at the
# first REGISTER of a batch (GSLICE_NODE_TEST_CRASH_AT=registered) leaves, after its restart and
# the kubelet's retry, one slice per claim and none of no claim, and so does gsliced restarting
# in the middle of a batch (its state kept, or lost); Unprepare of the batch leaves no slice, spec
# or record, and so does one cut by a crash right after its first UNREGISTER
# (GSLICE_NODE_TEST_CRASH_AT=unregistered), once gslice-node is back and the kubelet tries again.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_dra.sh"
export GSLICE_SIM_DEVICES=4 GSLICE_SIM_MEMORY=16GiB

dra_up
N=24
MiB=1048576
# claim b<i>: 768Mi + 2Mi * i, compute 2.
for i in $(seq 0 $((N - 1))); do
  dra_claim "b$i" "$((768 + 2 * i))Mi" 2
  dra_alloc "b$i" "p$i" >/dev/null
done
claims_json() { # FIRST LAST: the batch's claims, b<FIRST>..b<LAST>
  local i sep="" out=""
  for i in $(seq "$1" "$2"); do
    out="$out$sep{\"namespace\":\"default\",\"name\":\"b$i\",\"uid\":\"$(claim_uid "b$i")\"}"
    sep=,
  done
  printf '{"driver":"gslice.io","claims":[%s]}' "$out"
}
ALL=$(claims_json 0 $((N - 1)))
# answers ANSWER: "ok" when every claim of ALL has no error and its own CDI device, else why.
answers() { "$PY" - "$1" "$ALL" <<'PYEOF'
import json, sys
ans, batch = json.loads(sys.argv[1]), json.loads(sys.argv[2])
bad = []
for c in batch["claims"]:
    a = ans["claims"].get(c["uid"])
    want = [["gslice.io/claim=claim-" + c["uid"]]]
    if a is None or a["error"] or [d["cdi"] for d in a["devices"]] != want:
        bad.append((c["name"], a))
print("ok" if not bad else "bad: %r" % bad[:3])
PYEOF
}
# each_own: every claim's record and gsliced slice hold its own memory (768 + 2i MiB).
each_own() { "$PY" - "$NSTATE/claims" "$ALL" "$("$BIN/gslice" status --json)" <<'PYEOF'
import json, os, sys
d, batch, st = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
caps = {s["name"]: s["gpus"][0]["memory_cap_bytes"] for s in st["slices"]}
bad = []
for c in batch["claims"]:
    i = int(c["name"][1:])
    want = (768 + 2 * i) * 2**20
    rec = dict(l.split("=", 1) for l in open(os.path.join(d, c["uid"])).read().splitlines() if "=" in l)
    name = rec.get("slice_name", "")
    if rec.get("memory") != "0=%d" % want or caps.get(name) != want or rec.get("pending") != "0":
        bad.append((c["name"], rec.get("memory"), name, caps.get(name)))
print("ok" if not bad and len(caps) == len(batch["claims"]) else "bad: %r (slices %d)" % (bad[:3], len(caps)))
PYEOF
}

out=$(kl POST /prepare "$ALL")
expect_eq "the batch of $N" "$(answers "$out")" ok
echo "the batch of $N: $(jget "$out" "round(d['seconds'] * 1000)") ms"
expect_eq "slices" "$(nslices)" $N
expect_eq "specs" "$(specs)" $N
expect_eq "each claim's record and slice" "$(each_own)" ok
pass "$N claims of one batch prepared at once: each its own slice, record and CDI spec"

out=$(kl POST /prepare "$ALL")
expect_eq "the same batch again" "$(answers "$out")" ok
expect_eq "slices after it" "$(nslices)" $N
expect_eq "each claim's record and slice after it" "$(each_own)" ok
pass "the same batch again: the same answers, nothing made"

# Failures beside successes: an unallocated claim, a uid that is not the claim's.
dra_claim loose 1Gi 2
lu=$(claim_uid loose)
kl POST /unprepare "$ALL" >/dev/null
expect_eq "slices after Unprepare" "$(nslices)" 0
mixed=$("$PY" -c '
import json, sys
b = json.loads(sys.argv[1])
b["claims"][3:3] = [{"namespace": "default", "name": "loose", "uid": sys.argv[2]},
                    {"namespace": "default", "name": "b7", "uid": "00000000-0000-4000-8000-000000000007"}]
print(json.dumps(b))' "$ALL" "$lu")
out=$(kl POST /prepare "$mixed")
expect_eq "the others of the mixed batch" "$(answers "$out")" ok
for u in "$lu" 00000000-0000-4000-8000-000000000007; do
  e=$(jget "$out" "d['claims']['$u']['error']")
  [ -n "$e" ] && [ "$e" != None ] || fail "claim $u was prepared: $out"
  echo "its error: $e"
done
expect_eq "slices after the mixed batch" "$(nslices)" $N
expect_eq "each claim's record and slice after the mixed batch" "$(each_own)" ok
pass "a batch with failing claims: each failure its own error, the $N others prepared"

# Two calls at once, halves of the batch (the kubelet calls per pod, pods start together).
kl POST /unprepare "$ALL" >/dev/null
kl POST /prepare "$(claims_json 0 $((N / 2 - 1)))" >"$T/half1.json" &
h1=$!
kl POST /prepare "$(claims_json $((N / 2)) $((N - 1)))" >"$T/half2.json" &
h2=$!
wait $h1 $h2
both=$("$PY" -c 'import json, sys; a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2])); a["claims"].update(b["claims"]); print(json.dumps(a))' "$T/half1.json" "$T/half2.json")
expect_eq "two calls at once" "$(answers "$both")" ok
expect_eq "slices after them" "$(nslices)" $N
expect_eq "each claim's record and slice after them" "$(each_own)" ok
pass "two calls at once: both answered, each claim prepared once"

# gsliced stopped and started again in the middle of a batch, its state kept, then lost: claims
# cut off fail (the kubelet tries again), those done are kept or made again by the
# reconciliation (which leaves the slices of claims in flight alone); after the retries one
# slice per claim, each its own.
kl POST /unprepare "$ALL" >/dev/null
for lost in 0 1; do
  kl POST /prepare "$ALL" >"$T/cut.json" &
  p=$!
  sleep 0.0$((RANDOM % 9))
  stop_gsliced
  [ $lost = 1 ] && rm -rf "$T/daemon"
  start_gsliced
  wait $p
  for _ in $(seq 60); do
    out=$(kl POST /prepare "$ALL")
    [ "$(answers "$out")" = ok ] && break
    sleep 0.25
  done
  expect_eq "the batch after gsliced's restart (state lost: $lost)" "$(answers "$out")" ok
  # A claim prepared before the loss is answered from its record at once; its slice comes back
  # with the reconciliation of gsliced's return (the main loop's, within its next turns).
  all_back() { [ "$(nslices)" = $N ] && [ "$(each_own)" = ok ]; }
  until_secs 20 all_back
  expect_eq "slices after gsliced's restart (state lost: $lost)" "$(nslices)" $N
  expect_eq "each claim's record and slice after gsliced's restart (state lost: $lost)" "$(each_own)" ok
  echo "gsliced restarted during the batch (state lost: $lost): $(jget "$(cat "$T/cut.json")" "sum(1 for v in d.get('claims', {}).values() if v['error'])") claim(s) of the cut batch failed"
  kl POST /unprepare "$ALL" >/dev/null
done
pass "gsliced restarting during a batch (its state kept, then lost): after the retries one slice per claim"

# A crash at the first REGISTER of a batch: what the other threads had begun is pending or
# nothing; after the restart and the kubelet's retry, one slice per claim, none left over.
kl POST /unprepare "$ALL" >/dev/null
expect_eq "slices before the crash" "$(nslices)" 0
dra_crash registered prepare "$ALL"
echo "at the crash: $(nslices) slice(s) in gsliced, $(ls "$NSTATE/claims" | wc -l) record(s), $(specs) spec(s)"
dra_node_again
reconciled() { grep -q "is of no prepared claim\|gsliced had lost slice" "$T/node.log"; }
until_secs 15 reconciled
out=$(kl POST /prepare "$ALL")
for _ in 1 2 3; do # a claim met in the reconciliation's remake is "tried again"
  [ "$(answers "$out")" = ok ] && break
  sleep 0.5
  out=$(kl POST /prepare "$ALL")
done
expect_eq "the batch after the crash" "$(answers "$out")" ok
expect_eq "slices after the crash" "$(nslices)" $N
expect_eq "each claim's record and slice after the crash" "$(each_own)" ok
dra_slice_names() { "$BIN/gslice" status --json | "$PY" -c 'import json,sys; n = [".".join(s["name"].split(".")[2:]) for s in json.load(sys.stdin)["slices"]]; print(len(n), len(set(n)))'; }
expect_eq "slices per claim" "$(dra_slice_names)" "$N $N"
pass "a crash at the first REGISTER of a batch: after the restart, one slice per claim, nothing leaked"

out=$(kl POST /unprepare "$ALL")
expect_eq "Unprepare errors" "$(jget "$out" "[v['error'] for v in d['claims'].values() if v['error']]")" "[]"
expect_eq "slices after Unprepare" "$(nslices)" 0
expect_eq "specs after Unprepare" "$(specs)" 0
[ -z "$(ls -A "$NSTATE/claims")" ] || fail "claim records are left: $(ls "$NSTATE/claims")"
pass "Unprepare of the batch: no slice, spec or record left"

# A crash in the middle of an Unprepare batch (its claims unprepared DRA_PREPARE_PARALLEL at a
# time), right after the first slice's UNREGISTER, before its record goes: what the other
# threads had begun is done or left whole; after the restart (the reconciliation makes the
# slices of the records left again) and the kubelet's retry, no slice, spec or record is left.
out=$(kl POST /prepare "$ALL")
expect_eq "the batch before the Unprepare crash" "$(answers "$out")" ok
dra_crash unregistered unprepare "$ALL"
echo "at the Unprepare crash: $(nslices) slice(s) in gsliced, $(ls "$NSTATE/claims" | wc -l) record(s), $(specs) spec(s)"
dra_node_again
for _ in $(seq 20); do # a claim met in the reconciliation's remake is "tried again"
  out=$(kl POST /unprepare "$ALL")
  [ "$(jget "$out" "[v['error'] for v in d['claims'].values() if v['error']]")" = "[]" ] && break
  sleep 0.5
done
expect_eq "Unprepare errors after the crash" "$(jget "$out" "[v['error'] for v in d['claims'].values() if v['error']]")" "[]"
expect_eq "slices after the Unprepare crash" "$(nslices)" 0
expect_eq "specs after the Unprepare crash" "$(specs)" 0
[ -z "$(ls -A "$NSTATE/claims")" ] || fail "claim records are left after the Unprepare crash: $(ls "$NSTATE/claims")"
pass "a crash in the middle of an Unprepare batch: after the restart and the retry, nothing left"
