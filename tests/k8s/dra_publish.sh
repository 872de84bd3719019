#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The node's ResourceSlice (dra_publish, src/k8s/node/dra_api.c, driven by k8s_dra_publish as
# gslice-node's DRA loop calls it, every 200 ms here) against the API server stand-in with
# resource.k8s.io/v1 (which validates it as the API reference says): created with one device
# per GPU and the request policies; no write while nothing changes; made again by the next
# publish after the kubelet's wipe (deletecollection by spec.nodeName), at a higher pool
# generation; updated when a GPU goes, emptied while gsliced does not answer, put back when
# someone else changes it; a stray gslice.io slice of this node deleted at the start, another
# driver's left alone; all of ours deleted by dra_unpublish.
source "$GSLICE_SRC/tests/k8s/lib.sh"
C="$TBIN/k8s_dra_publish"
[ -x "$C" ] || { echo "SKIP: $C is not built (it needs jansson and libcurl, as gslice-node)"; exit 77; }
start_apiserver
R=/apis/resource.k8s.io/v1/resourceslices
S=$R/node-a-gslice.io

# Before it starts: a stray slice of ours on this node (an older gslice-node's name) and
# another driver's.
api POST $R '{"metadata":{"name":"old-node-a"},"spec":{"driver":"gslice.io","nodeName":"node-a","pool":{"name":"old","generation":1,"resourceSliceCount":1},"devices":[{"name":"gpu-0"}]}}' >/dev/null
api POST $R '{"metadata":{"name":"other-node-a"},"spec":{"driver":"gpu.example.com","nodeName":"node-a","pool":{"name":"node-a","generation":1,"resourceSliceCount":1},"devices":[{"name":"gpu-0"}]}}' >/dev/null

printf '0 GPU-aaaa-0000 17179869184\n1 GPU-bbbb-1111 85900394496\n' >"$T/gpus"
"$C" "$KUBECONFIG_FILE" node-a "$T/gpus" 200 120 >"$T/publish.log" 2>&1 &
PUB=$!

publishes() { grep -c '^publish' "$T/publish.log" || true; }
# until_slice EXPR [TRIES]: until the slice exists and EXPR (Python over it, `d`) holds.
until_slice() {
  local i out
  for ((i = 0; i < ${2:-100}; i++)); do
    out=$(API_OK_STATUS=404 api GET $S)
    if [ "$(jget "$out" "d.get('kind') == 'ResourceSlice' and bool($1)")" = True ]; then
      SLICE=$out
      return 0
    fi
    sleep 0.05
  done
  fail "the slice never came to: $1 (last: $out; log: $(tail -3 "$T/publish.log"))"
}
devs() { jget "$SLICE" "[x['name'] for x in d['spec'].get('devices') or []]"; }
gen() { jget "$SLICE" "d['spec']['pool']['generation']"; }

until_slice True
grep -q '^publish 0 ' "$T/publish.log" || fail "publish failed: $(head -3 "$T/publish.log")"
expect_eq "devices" "$(devs)" "['gpu-0', 'gpu-1']"
expect_eq "driver, node, pool" "$(jget "$SLICE" "(d['spec']['driver'], d['spec']['nodeName'], d['spec']['pool']['name'], d['spec']['pool']['resourceSliceCount'])")" "('gslice.io', 'node-a', 'node-a', 1)"
expect_eq "generation" "$(gen)" 1
D='d["spec"]["devices"][1]'
expect_eq "attributes" "$(jget "$SLICE" "sorted($D['attributes'].items())")" "[('index', {'int': 1}), ('uuid', {'string': 'GPU-bbbb-1111'})]"
expect_eq "multi" "$(jget "$SLICE" "$D['allowMultipleAllocations']")" True
expect_eq "memory" "$(jget "$SLICE" "$D['capacity']['memory']")" "{'value': '81921Mi', 'requestPolicy': {'default': '80Gi', 'validRange': {'min': '768Mi', 'max': '80Gi', 'step': '2Mi'}}}"
expect_eq "compute" "$(jget "$SLICE" "$D['capacity']['compute']")" "{'value': '100', 'requestPolicy': {'default': '100', 'validRange': {'min': '1', 'max': '100', 'step': '1'}}}"
expect_eq "shares" "$(jget "$SLICE" "$D['capacity']['shares']")" "{'value': '16', 'requestPolicy': {'default': '1', 'validValues': ['1']}}"
expect_eq "this node's slices" "$(jget "$(api GET "$R?fieldSelector=spec.nodeName%3Dnode-a")" "sorted(x['metadata']['name'] for x in d['items'])")" "['node-a-gslice.io', 'other-node-a']"
pass "created (stand-in's validation passed), the stray gslice.io slice gone, another driver's kept"

# Nothing changes: no write (the resourceVersion stays over 5 periods).
rv=$(jget "$SLICE" "d['metadata']['resourceVersion']")
n0=$(publishes)
while [ "$(publishes)" -lt $((n0 + 5)) ]; do sleep 0.05; done
expect_eq "resourceVersion after 5 quiet publishes" "$(jget "$(api GET $S)" "d['metadata']['resourceVersion']")" "$rv"
pass "no write while nothing changes"

# The kubelet's wipe at its start: made again by the next publish, at a higher generation.
api DELETE "$R?fieldSelector=spec.nodeName%3Dnode-a" >/dev/null
n0=$(publishes)
until_slice True
expect_eq "generation after the wipe" "$(gen)" 2
# The publish that made it again (the first holding generation 2) is the one in flight when the
# wipe returned or the next.
n1=$(grep '^publish' "$T/publish.log" | awk '$3 == 2 { print NR; exit }')
[ "$n1" -le $((n0 + 2)) ] || fail "made again only by the $((n1 - n0))th publish after the wipe"
expect_eq "devices after the wipe" "$(devs)" "['gpu-0', 'gpu-1']"
pass "made again within one period of the wipe, at a higher generation"

# A GPU goes: updated, generation bumped; the update's first PUT meets a conflict (409, as when
# another write came between the read and the update) and is read and sent again in the same
# publish.
api POST /_test/fault '{"method":"PUT","path":"resourceslices/node-a-gslice.io$","status":409,"count":1,"message":"the object has been modified"}' >/dev/null
printf '0 GPU-aaaa-0000 17179869184\n' >"$T/gpus"
until_slice "len(d['spec'].get('devices') or []) == 1"
expect_eq "devices without GPU 1" "$(devs)" "['gpu-0']"
expect_eq "generation" "$(gen)" 3
expect_eq "PUTs of the slice answered 409" "$(jget "$(api GET /_test/requests)" "sum(1 for r in d if r['method'] == 'PUT' and r['path'].endswith('/node-a-gslice.io') and r['status'] == 409)")" 1
pass "updated when a GPU goes (through a conflict, in one publish)"

# gsliced does not answer: nothing on offer; back: both again.
rm "$T/gpus"
until_slice "not d['spec'].get('devices')"
expect_eq "generation" "$(gen)" 4
printf '0 GPU-aaaa-0000 17179869184\n1 GPU-bbbb-1111 85900394496\n' >"$T/gpus"
until_slice "len(d['spec'].get('devices') or []) == 2"
expect_eq "generation" "$(gen)" 5
pass "no devices while gsliced is gone, back after"

# Someone else's change (a capacity raised) is put back.
rv=$(jget "$SLICE" "d['metadata']['resourceVersion']")
body=$(jget "$SLICE" "__import__('json').dumps(dict(d, spec=dict(d['spec'], devices=[dict(x, capacity=dict(x['capacity'], compute={'value': '400'})) for x in d['spec']['devices']])))")
api PUT $S "$body" >/dev/null
until_slice "d['spec']['devices'][0]['capacity']['compute']['value'] == '100'"
expect_eq "generation" "$(gen)" 6
pass "a change by another writer put back"

# What kube-scheduler's allocator (the KEP-5075 stand-in, dra_alloc.py) makes of these request
# policies, and what dra_claim_read makes of its claims.
api POST /apis/resource.k8s.io/v1/deviceclasses '{"metadata":{"name":"gslice.io"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '"'gslice.io'"'"}}],"config":[{"opaque":{"driver":"gslice.io","parameters":{"apiVersion":"gslice.io/v1","kind":"SliceConfig","computeLimit":80,"priority":"high","weight":4}}}]}}' >/dev/null
mkclaim() { # NAME CAPACITY-REQUESTS-JSON CLAIM-CONFIG-JSON
  api POST /apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims "{\"metadata\":{\"name\":\"$1\",\"namespace\":\"team-a\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"gslice.io\",\"capacity\":{\"requests\":$2}}}],\"config\":$3}}}" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["uid"])'
}
allocate() { "$PY" "$K8S/dra_alloc.py" --api "$API" allocate --namespace team-a --claim "$1" --node node-a --pod "p-$1:$(cat /proc/sys/kernel/random/uuid)"; }
SC='{"opaque":{"driver":"gslice.io","parameters":{"apiVersion":"gslice.io/v1","kind":"SliceConfig"'
u1=$(mkclaim c1 '{"memory":"1001Mi","compute":"30"}' "[$SC,\"computeLimit\":60}}}]")
allocate c1 >/dev/null
out=$("$C" claim "$KUBECONFIG_FILE" node-a team-a c1 "$u1")
expect_eq "claim c1" "$(echo "$out" | head -1)" "claim 0 "
# 1001Mi rounded up to the 2 MiB step; the class's limit lowered by the claim, its priority and
# weight kept.
expect_eq "c1's share" "$(echo "$out" | sed -n 2p | cut -d' ' -f1-9)" "share gpu gpu-0 0 1050673152 30 60 high 4"
echo "$out" | sed -n 2p | qgrep -E ' [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' || fail "no shareID: $out"
# Nothing asked: the whole GPU (memory and compute defaults); gpu-0 is taken in part, so gpu-1.
u2=$(mkclaim c2 '{}' '[]')
allocate c2 >/dev/null
expect_eq "c2's allocation" "$(jget "$(api GET /apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/c2)" "[(r['device'], r['consumedCapacity']) for r in d['status']['allocation']['devices']['results']]")" "[('gpu-1', {'compute': '100', 'memory': '80Gi', 'shares': '1'})]"
# ... which its class's computeLimit 80 cannot hold: a limit below the request is refused.
out=$("$C" claim "$KUBECONFIG_FILE" node-a team-a c2 "$u2")
echo "$out" | qgrep '^claim -22 computeLimit 80 is below the compute 100' || fail "c2: $out"
# 80% more does not fit anywhere now: gpu-0 has 70 left, gpu-1 none.
u3=$(mkclaim c3 '{"compute":"80"}' '[]')
if allocate c3 >"$T/c3.log" 2>&1; then fail "c3 was allocated: $(cat "$T/c3.log")"; fi
qgrep "request gpu: 0 of 1 devices of class gslice.io fit on node node-a" "$T/c3.log" ||
  fail "c3 refused for another reason: $(cat "$T/c3.log")"
# A claim raising its class's limit is refused at prepare; a replaced claim (another uid) too.
u4=$(mkclaim c4 '{"memory":"1Gi","compute":"10"}' "[$SC,\"computeLimit\":90}}}]")
allocate c4 >/dev/null
out=$("$C" claim "$KUBECONFIG_FILE" node-a team-a c4 "$u4")
echo "$out" | qgrep "^claim -1 .*raises computeLimit to 90 above 80" || fail "c4: $out"
out=$("$C" claim "$KUBECONFIG_FILE" node-a team-a c1 "$u4")
echo "$out" | qgrep "^claim -116 .*has uid $u1, not $u4" || fail "c1 with c4's uid: $out"
out=$("$C" claim "$KUBECONFIG_FILE" node-a team-a nope "$u4")
echo "$out" | qgrep "^claim -2 " || fail "a missing claim: $out"
# Less memory than one CUDA context (the request policy's min, 768Mi): rounded up to it.
u5=$(mkclaim c5 '{"memory":"2Mi","compute":"5"}' '[]')
allocate c5 >/dev/null
out=$("$C" claim "$KUBECONFIG_FILE" node-a team-a c5 "$u5")
expect_eq "c5's share (asked 2Mi)" "$(echo "$out" | sed -n 2p | cut -d' ' -f1-6)" "share gpu gpu-0 0 805306368 5"
pass "claims allocated on the published slice read back: rounding (a request under one CUDA context to it), defaults, a full GPU not given twice; a limit below the request, a raise and a replaced uid refused"

# A clean stop: every gslice.io slice of this node deleted, the other driver's kept (made
# again: the wipe above took it too, as the kubelet's takes every driver's).
api POST $R '{"metadata":{"name":"other-node-a"},"spec":{"driver":"gpu.example.com","nodeName":"node-a","pool":{"name":"node-a","generation":1,"resourceSliceCount":1},"devices":[{"name":"gpu-0"}]}}' >/dev/null
touch "$T/gpus.stop"
wait $PUB || fail "k8s_dra_publish exited $?: $(tail -3 "$T/publish.log")"
grep -q '^unpublish 0 ' "$T/publish.log" || fail "unpublish: $(tail -1 "$T/publish.log")"
expect_eq "this node's slices after unpublish" "$(jget "$(api GET "$R?fieldSelector=spec.nodeName%3Dnode-a")" "sorted(x['metadata']['name'] for x in d['items'])")" "['other-node-a']"
if grep -q '^publish -' "$T/publish.log"; then
  fail "a publish failed: $(grep '^publish -' "$T/publish.log" | head -3)"
fi
pass "unpublished"
