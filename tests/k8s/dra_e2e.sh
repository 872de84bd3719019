#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra end to end on the simulated GPU (issue 19): the kubelet stand-in
# registers it through the plugins directory; the node's ResourceSlice as ../shared/K8S.md fixes
# it; claims allocated by the KEP-5075 allocator stand-in as kube-scheduler would (first fit:
# hard 60 and hard 30 share gpu-0, a claim of 40 goes to gpu-1) and prepared by the kubelet
# stand-in; each claim one gsliced slice with its consumed capacity and computeLimit; hard 60
# and hard 30 held to their shares; a 1 GiB claim held to 1 GiB (its allocations past it fail);
# two pods of one claim prepared once and held to one budget of compute and memory; a claim
# asking less memory than one CUDA context (512Mi) allocated the context floor (768Mi) and its
# container making its context and filling it; unprepare after the last pod removes the slice and
# the CDI spec; a claim whose status gives less than the floor (written by hand) refused at
# Prepare, saying so, the other claim of its batch prepared.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_dra.sh"
source "$GSLICE_SRC/tests/integration/lib_starve.sh"
export TBIN T
export GSLICE_SIM_MEMORY=8GiB

dra_up
sl=$(api GET "$RES/resourceslices?fieldSelector=spec.nodeName=node-a")
# ../shared/K8S.md's names: uuid, index (and productName where the GPU has one: the simulated GPU
# has none), capacities memory (bytes) and compute (100), allowMultipleAllocations.
expect_eq "the node's ResourceSlice" "$(jget "$sl" "[(s['spec']['driver'], s['spec']['pool']['name'], [(x['name'], x['attributes']['index']['int'], x['attributes']['uuid']['string'].startswith('GPU-'), isinstance(x['attributes'].get('productName', {'string': ''})['string'], str), x['capacity']['memory']['value'] in ('8Gi', '8589934592'), x['capacity']['compute']['value'], x.get('allowMultipleAllocations')) for x in s['spec']['devices']]) for s in d['items']]")" \
  "[('gslice.io', 'node-a', [('gpu-0', 0, True, True, True, '100', True), ('gpu-1', 1, True, True, True, '100', True)])]"
echo "the ResourceSlice's devices: $(jget "$sl" "__import__('json').dumps(d['items'][0]['spec']['devices'][0])")"
pass "registered (v1.DRAPlugin: $(kstate "d['plugins']['gslice.io']['version']")); one ResourceSlice, gpu-0 and gpu-1"

dra_claim hard60 1Gi 60 60
dra_claim hard30 512Mi 30 30
dra_claim shared 1Gi 40 40
where() { jget "$1" "[(r['device'], r['consumedCapacity']['compute']) for r in d['status']['allocation']['devices']['results']]"; }
expect_eq "hard60's allocation" "$(where "$(dra_alloc hard60 a)")" "[('gpu-0', '60')]"
expect_eq "hard30's allocation" "$(where "$(dra_alloc hard30 b)")" "[('gpu-0', '30')]"
expect_eq "shared's allocation" "$(where "$(dra_alloc shared s1 s2)")" "[('gpu-1', '40')]"
pass "allocated first fit by capacity: 60 + 30 on gpu-0, 40 on gpu-1"

cat >"$T/work.sh" <<'W'
#!/bin/bash
# A container's workload: kernels in the common window, then memory ($4: fill; hold: 6 chunks of
# 64 MiB, kept; after FILE: fill once FILE says its holder holds them).
"$TBIN/compute_spin" --start "$1" --warmup 1 --duration "$2" --label "$3" || exit 1
case $4 in
fill) exec "$TBIN/hook_client_linked" --lookup link --path alloc --chunk 64MiB --script "fill;info" ;;
hold) sleep 60 | exec "$TBIN/hook_client_linked" --lookup link --path alloc --chunk 64MiB --script "alloc 6;info;wait" ;;
after) for _ in $(seq 600); do grep -q "^alloc n=6 " "$5" && break; sleep 0.05; done
  exec "$TBIN/hook_client_linked" --lookup link --path alloc --chunk 64MiB --script "fill;info" ;;
esac
W
S=$(date +%s.%N | awk '{ printf "%.3f", $1 + 5 }')
D=8
run() { echo "[\"bash\",\"$T/work.sh\",\"$S\",\"$D\",\"$1\",\"$2\"${3:+,\"$3\"}]"; }
n0=$(prepares)
dra_pod a hard60 "$(run a fill)" >/dev/null
dra_pod b hard30 "$(run b fill)" >/dev/null
dra_pod s1 shared "$(run s1 hold)" >/dev/null
dra_pod s2 shared "$(run s2 after "$T/default_s1_main.log")" >/dev/null
expect_eq "Prepare calls for 4 pods of 3 claims" "$(($(prepares) - n0))" 3
expect_eq "specs in the CDI dir" "$(specs)" 3
# hard30 asked 512Mi, less than one CUDA context: the ResourceSlice's validRange min rounded it
# up to 768Mi.
expect_eq "gsliced's slices" "$(gs_slices)" "[(30, 30, [0], [$((GiB * 3 / 4))]), (40, 40, [1], [$GiB]), (60, 60, [0], [$GiB])]"
pass "3 claims prepared once each (the second pod of 'shared' joined it), one slice each"

done_all() {
  for f in a b s2; do grep -q "^fill" "$T/default_${f}_main.log" || return 1; done
  grep -q "^alloc" "$T/default_s1_main.log"
}
until_secs 60 done_all
for c in "a 60" "b 30"; do
  set -- $c
  grep "label=$1 " "$T/default_$1_main.log" >"$T/$1.line" || true
  STARVE_NO_DAEMON=1 share_ceiling_floor "$1 (hard $2%)" "$(share default_$1_main "$1")" \
    $(($2 - 7)) $(($2 + 5)) "$T/$1.line"
done
grep -h "label=s[12] " "$T/default_s1_main.log" "$T/default_s2_main.log" >"$T/s.line" || true
s12=$(($(share default_s1_main s1) + $(share default_s2_main s2)))
STARVE_NO_DAEMON=1 share_ceiling_floor "s1 + s2 (one claim, hard 40%)" "$s12" 33 45 "$T/s.line"
pass "hard 60 and hard 30 held to their shares; two pods of one claim to one share"

for f in "a 16" "b 12"; do
  set -- $f
  n=$(filled "default_$1_main")
  [ -n "$n" ] && [ "$n" -le "$2" ] && [ "$n" -ge $(($2 - 6)) ] || fail "$1 filled $n x 64 MiB, its claim is $2 x 64 MiB"
  echo "ok: $1 filled $n x 64 MiB, then an allocation failed (its claim: $2 x 64 MiB)"
done
# s2 gets what a lone pod of a 1 GiB claim gets (a's figure) less what s1 holds (and its
# context); with a budget of its own it would get a's figure.
grep -q "^alloc n=6 " "$T/default_s1_main.log" || fail "s1 could not take 6 x 64 MiB: $(cat "$T/default_s1_main.log")"
na=$(filled default_a_main) n2=$(filled default_s2_main)
[ -n "$n2" ] && [ "$n2" -le $((na - 6)) ] || fail "s2 filled $n2 x 64 MiB while s1 held 6 of one 1 GiB claim (alone: $na)"
echo "ok: s1 holds 6 x 64 MiB, s2 then got $n2 (a lone pod: $na): one 1 GiB budget"
pass "a 1 GiB claim held to 1 GiB, a 512Mi one to the 768Mi floor; two pods of one claim share its memory"

# Unprepare: only after the last pod of a claim; its slice and its spec go.
for p in a b; do kl DELETE /pods/default/$p >/dev/null; done
one() { [ "$(nslices)" = 1 ]; }
until_secs 10 one
expect_eq "specs after a and b" "$(specs)" 1
kl DELETE /pods/default/s1 >/dev/null
expect_eq "slices while s2 still holds 'shared'" "$(nslices)" 1
u=$(claim_uid shared)
[ -e "$CDI/gslice.io-claim_$u.json" ] || fail "the spec of 'shared' is gone while s2 holds it: $(ls "$CDI")"
kl DELETE /pods/default/s2 >/dev/null
zero() { [ "$(nslices)" = 0 ]; }
until_secs 10 zero
expect_eq "specs after the last pod" "$(specs)" 0
for c in "hard60 a" "hard30 b" "shared s1" "shared s2"; do dra_release $c; done
pass "unprepare after each claim's last pod: its slice and its CDI spec removed"

# One batch, each claim its own answer: a claim asked by a UID that is not its own (a claim
# deleted and made again under its name) fails alone; the other is prepared.
dra_claim good 256Mi 10
dra_alloc good x >/dev/null
good=$(claim_uid good)
ans=$(kl POST /prepare '{"driver":"gslice.io","claims":[{"namespace":"default","name":"good","uid":"'"$good"'"},{"namespace":"default","name":"hard60","uid":"00000000-0000-4000-8000-000000000000"}]}')
expect_eq "the batch's answers" "$(jget "$ans" "(sorted(d['claims']), d['claims']['$good']['error'], len(d['claims']['$good']['devices']), bool(d['claims']['00000000-0000-4000-8000-000000000000']['error']))")" \
  "([$(jget '["00000000-0000-4000-8000-000000000000", "'"$good"'"]' "', '.join(repr(x) for x in sorted(d))")], None, 1, True)"
echo "the replaced claim's error: $(jget "$ans" "d['claims']['00000000-0000-4000-8000-000000000000']['error']")"
expect_eq "slices after the mixed batch" "$(nslices)" 1
kl POST /unprepare '{"driver":"gslice.io","claims":[{"namespace":"default","name":"good","uid":"'"$good"'"}]}' >/dev/null
until_secs 10 zero
pass "a batch answers each claim: a replaced claim's error, the other prepared"

# The second line: an allocation of less memory than one CUDA context (its status written by
# hand, as a slice published without the floor would have it allocated) is refused at Prepare,
# naming what it was given, the floor and what to do; the other claim of its batch is prepared.
dra_claim byhand 2Mi 10
"$PY" - "$API" "$K8S" <<'PYEOF'
import sys, uuid
sys.path.insert(0, sys.argv[2])
import dra_alloc as A
api = A.Api(sys.argv[1])
p = A.claim_path("default", "byhand")
c = api.get(p)
c["status"] = {"allocation": {"devices": {"results": [{
    "request": "gpu", "driver": "gslice.io", "pool": "node-a", "device": "gpu-1",
    "shareID": str(uuid.uuid4()),
    "consumedCapacity": {"memory": "2Mi", "compute": "10", "shares": "1"}}]},
    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}}
code, out = api.call("PUT", p + "/status", c)
assert code == 200, out
PYEOF
bh=$(claim_uid byhand)
ans=$(kl POST /prepare '{"driver":"gslice.io","claims":[{"namespace":"default","name":"good","uid":"'"$good"'"},{"namespace":"default","name":"byhand","uid":"'"$bh"'"}]}')
expect_eq "good's answer beside byhand" "$(jget "$ans" "(d['claims']['$good']['error'], len(d['claims']['$good']['devices']))")" "(None, 1)"
err=$(jget "$ans" "d['claims']['$bh']['error']")
echo "byhand's error: $err"
for w in 'default/byhand' 'request "gpu"' '2097152 bytes' 'gpu-1' '768 MiB one CUDA context' 'at least 768Mi'; do
  case $err in *"$w"*) ;; *) fail "byhand's error does not say '$w': $err" ;; esac
done
expect_eq "slices after byhand's batch" "$(nslices)" 1
expect_eq "specs after byhand's batch" "$(specs)" 1
kl POST /unprepare '{"driver":"gslice.io","claims":[{"namespace":"default","name":"good","uid":"'"$good"'"},{"namespace":"default","name":"byhand","uid":"'"$bh"'"}]}' >/dev/null
until_secs 10 zero
pass "an allocation under one CUDA context refused at Prepare, saying why; the other claim prepared"
