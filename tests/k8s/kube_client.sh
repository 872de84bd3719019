#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The API client (src/k8s/common/kube.c) against the API server stand-in: list pages and
# resourceVersion, watch from a version, 410 after compaction (as an ERROR event and as
# HTTP 410), merge patch, binding with annotations in the same write and 409 when bound,
# bearer token refused, a token file read at each request, injected 500, a hung server timing
# out.
source "$GSLICE_SRC/tests/k8s/lib.sh"
C="$TBIN/k8s_kube_client"
APISERVER_TOKEN=sekrit
export APISERVER_TOKEN
start_apiserver --token sekrit --bookmark-s 0.3

for i in $(seq 1 1203); do
  printf '{"metadata":{"name":"p%04d","namespace":"ns%d"},"spec":{"containers":[{"name":"c"}]}}\n' "$i" $((i % 2))
done >"$T/pods.jsonl"
"$PY" - "$API" "$T/pods.jsonl" <<'PYEOF'
import sys, urllib.request
base, f = sys.argv[1:3]
for line in open(f):
    ns = "ns0" if '"ns0"' in line else "ns1"
    urllib.request.urlopen(urllib.request.Request(base + "/api/v1/namespaces/%s/pods" % ns,
        data=line.encode(), method="POST", headers={"Authorization": "Bearer sekrit",
        "Content-Type": "application/json"})).read()
PYEOF
api POST /api/v1/nodes '{"metadata":{"name":"node-a"}}' >/dev/null

# A list over three pages (limit 500) comes back whole, with the version to watch from.
out=$("$C" "$KUBECONFIG_FILE" list /api/v1/pods)
expect_eq "list of 1203 pods" "${out% rv *}" "items 1203"
rv=${out#* rv }
out=$("$C" "$KUBECONFIG_FILE" list "/api/v1/namespaces/ns0/pods")
expect_eq "namespaced list" "${out% rv *}" "items 601"
pass "list: paged, resourceVersion $rv"

# Merge patch of an annotation; null removes it.
"$C" "$KUBECONFIG_FILE" patch /api/v1/nodes/node-a '{"metadata":{"annotations":{"gslice.io/gpus":"x","k":"v"}}}' >/dev/null
"$C" "$KUBECONFIG_FILE" patch /api/v1/nodes/node-a '{"metadata":{"annotations":{"k":null}}}' >"$T/node.json"
expect_eq "patched annotations" "$(jget "$(cat "$T/node.json")" 'd["metadata"]["annotations"]')" "{'gslice.io/gpus': 'x'}"
pass "merge patch"

# Watch from the list's version sees exactly the two changes since, in order.
out=$("$C" "$KUBECONFIG_FILE" watch /api/v1/nodes "$rv" 5 2 || true)
expect_eq "watch events" "$(echo "$out" | awk '{print $1, $2}' | head -2 | tr '\n' ' ')" "MODIFIED node-a MODIFIED node-a "
echo "$out" | qgrep "^end 1 rv " || fail "watch did not stop at the callback: $out"
# A watch with nothing to say ends at timeoutSeconds with bookmarks only, rc 0.
now=$(jget "$(api GET /_test/state)" 'd["resourceVersion"]')
out=$("$C" "$KUBECONFIG_FILE" watch /api/v1/nodes "$now" 1 100)
echo "$out" | qgrep "^BOOKMARK" || fail "no bookmark in an idle watch: $out"
echo "$out" | qgrep "^end 0 rv $now\$" || fail "idle watch did not end cleanly at timeout: $out"
pass "watch from a resourceVersion, bookmarks, timeout"

# Binding: annotations land with spec.nodeName in one write; a second binding is 409.
prv=$(jget "$(api GET /_test/state)" 'int(d["resourceVersion"])')
"$C" "$KUBECONFIG_FILE" post /api/v1/namespaces/ns1/pods/p0001/binding \
  '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p0001","annotations":{"gslice.io/assigned":"A"}},"target":{"apiVersion":"v1","kind":"Node","name":"node-a"}}' >/dev/null
pod=$(api GET /api/v1/namespaces/ns1/pods/p0001)
expect_eq "bound node" "$(jget "$pod" 'd["spec"]["nodeName"]')" node-a
expect_eq "annotation with the binding" "$(jget "$pod" 'd["metadata"]["annotations"]["gslice.io/assigned"]')" A
expect_eq "one write" "$(jget "$pod" 'd["metadata"]["resourceVersion"]'),$(jget "$(api GET /_test/state)" 'd["resourceVersion"]')" "$((prv + 1)),$((prv + 1))"
set +e
"$C" "$KUBECONFIG_FILE" post /api/v1/namespaces/ns1/pods/p0001/binding \
  '{"metadata":{"name":"p0001"},"target":{"kind":"Node","name":"node-b"}}' 2>"$T/err"
rc=$?
set -e
expect_eq "second binding" "$rc" 17 # EEXIST
grep -q 'already assigned to node "node-a"' "$T/err" || fail "409 without the server's message: $(cat "$T/err")"
pass "binding: one write, 409 when bound"

# Compaction: resuming from an old version is 410 (ERROR event), -ESTALE.
api POST /_test/compact '{}' >/dev/null
set +e
"$C" "$KUBECONFIG_FILE" watch /api/v1/nodes "$rv" 5 10 >"$T/out" 2>"$T/err"
rc=$?
set -e
expect_eq "watch from a compacted version" "$rc" 116 # ESTALE
grep -q "too old resource version" "$T/err" || fail "410 without its message: $(cat "$T/err")"
api POST /_test/fault '{"path":"watch=1","status":"watch410http"}' >/dev/null
set +e
"$C" "$KUBECONFIG_FILE" watch /api/v1/nodes "$now" 5 10 >"$T/out" 2>"$T/err"
rc=$?
set -e
expect_eq "watch answered HTTP 410" "$rc" 116
pass "410 Gone both ways"

# Faults: 500 is EIO with the message; a hung server times out; a bad token is EACCES.
api POST /_test/fault '{"method":"GET","path":"/nodes/node-a","status":500,"message":"etcd is sad"}' >/dev/null
set +e
"$C" "$KUBECONFIG_FILE" get /api/v1/nodes/node-a >/dev/null 2>"$T/err"
rc=$?
set -e
expect_eq "injected 500" "$rc" 5
grep -q "etcd is sad" "$T/err" || fail "500 without the message: $(cat "$T/err")"
api POST /_test/fault '{"method":"GET","path":"/nodes/node-a","status":"hang","delay_s":6}' >/dev/null
set +e
start=$(date +%s%N)
"$C" "$KUBECONFIG_FILE" get /api/v1/nodes/node-a >/dev/null 2>"$T/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
set -e
expect_eq "hung server" "$rc" 110 # ETIMEDOUT
[ "$ms" -lt 5500 ] || fail "the 3 s request timeout took ${ms} ms"
# A token file is read at each request (with its newline dropped); a missing one is named.
sed 's/token: sekrit/tokenFile: token.txt/' "$KUBECONFIG_FILE" >"$T/tf.yaml"
printf 'sekrit\n' >"$T/token.txt"
"$C" "$T/tf.yaml" get /api/v1/nodes/node-a >/dev/null || fail "a token file's token was refused"
rm "$T/token.txt"
set +e
"$C" "$T/tf.yaml" get /api/v1/nodes/node-a >/dev/null 2>"$T/err"
rc=$?
set -e
expect_eq "missing token file" "$rc" 2 # ENOENT
grep -q "token file $T/token.txt: No such file" "$T/err" || fail "missing token file not named: $(cat "$T/err")"
sed -i 's/token: sekrit/token: wrong/' "$KUBECONFIG_FILE"
set +e
"$C" "$KUBECONFIG_FILE" get /api/v1/nodes/node-a >/dev/null 2>"$T/err"
rc=$?
set -e
expect_eq "wrong token" "$rc" 13 # EACCES
pass "faults: 500, hang, 401, token files"
