#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node's quiet heartbeat: the Lease gslice-node-node-a in gslice-system (coordination.k8s.io/v1,
# holderIdentity node-a, leaseDurationSeconds 40, renewTime a MicroTime) is created and renewed
# every 10 s (renewTime advances); the node's gslice.io/gpus annotation is written once and not
# again while the inventory is unchanged (no PATCH of the node over 25 s); a Lease changed by
# another writer (a 409 on the next update) is read again and renewed; --lease-namespace moves
# it; while the Lease is refused the annotation carries the heartbeat every 10 s. Prints the API
# writes per node per hour it measured.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"

LEASE=/apis/coordination.k8s.io/v1/namespaces/gslice-system/leases/gslice-node-node-a
node_up
lease_there() { API_OK_STATUS=404 api GET "$LEASE" | qgrep '"holderIdentity"'; }
until_secs 20 lease_there
l=$(api GET "$LEASE")
expect_eq "the Lease" "$(jget "$l" "(d['apiVersion'], d['kind'], d['spec']['holderIdentity'], d['spec']['leaseDurationSeconds'])")" \
  "('coordination.k8s.io/v1', 'Lease', 'node-a', 40)"
r1=$(jget "$l" "d['spec']['renewTime']")
[[ "$r1" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$ ]] || fail "renewTime $r1 is not a MicroTime"
pass "Lease gslice-node-node-a created: holder node-a, 40 s, renewTime $r1"

# writes N: the count of 2xx writes of kind N ("PATCH node", "PUT lease", "POST lease").
writes() {
  jget "$(curl -s "$API/_test/writes")" "sum(v for k, v in d.items() if k.startswith({'PATCH node': 'PATCH /api/v1/nodes/node-a', 'PUT lease': 'PUT $LEASE', 'POST lease': 'POST /apis/coordination.k8s.io/v1/namespaces/gslice-system/leases'}['$1']))"
}
p0=$(writes "PATCH node")
u0=$(writes "PUT lease")
[ "$p0" -ge 1 ] || fail "the inventory was never written ($p0 PATCHes)"
sleep 25
p1=$(writes "PATCH node")
u1=$(writes "PUT lease")
r2=$(jget "$(api GET "$LEASE")" "d['spec']['renewTime']")
[ "$r2" != "$r1" ] || fail "renewTime stayed $r1 over 25 s"
[ $((u1 - u0)) -ge 2 ] && [ $((u1 - u0)) -le 4 ] || fail "$((u1 - u0)) Lease updates in 25 s, want 2..4 (every 10 s)"
expect_eq "PATCHes of node-a over 25 s with the inventory unchanged" "$((p1 - p0))" 0
per_hour=$(( (p1 - p0 + u1 - u0) * 3600 / 25 ))
pass "over 25 s: $((u1 - u0)) Lease updates, $((p1 - p0)) node PATCHes (renewTime $r1 -> $r2): about $per_hour API writes per node per hour (the annotation every 10 s was 360)"

# Another writer changes the Lease: the next update (with the old resourceVersion) is a 409,
# gslice-node reads it again and renews.
api PATCH "$LEASE" '{"metadata":{"labels":{"touched":"yes"}}}' >/dev/null
conflict() { jget "$(curl -s "$API/_test/requests")" "any(r['method'] == 'PUT' and r['path'] == '$LEASE' and r['status'] == 409 for r in d)" | qgrep True; }
until_secs 15 conflict
u2=$(writes "PUT lease")
renewed_after() { [ "$(writes "PUT lease")" -gt "$u2" ]; }
until_secs 15 renewed_after
expect_eq "the Lease after a conflict" "$(jget "$(api GET "$LEASE")" "(d['spec']['holderIdentity'], d['metadata']['labels'])")" "('node-a', {'touched': 'yes'})"
pass "a 409 on the Lease: read again and renewed"

# The Lease refused (an RBAC without leases): the annotation carries the heartbeat again, every
# 10 s (not at the 2 s of a retry); back to the Lease once it may.
api POST /_test/fault '{"path":"/leases","status":403,"reason":"Forbidden","count":100000}' >/dev/null
p2=$(writes "PATCH node")
patched() { [ "$(writes "PATCH node")" -gt "$p2" ]; }
until_secs 15 patched
p3=$(writes "PATCH node")
sleep 21
p4=$(writes "PATCH node")
[ $((p4 - p3)) -ge 1 ] && [ $((p4 - p3)) -le 3 ] || fail "$((p4 - p3)) node PATCHes in 21 s with the Lease refused, want 1..3 (every 10 s)"
grep -q "cannot renew the node's Lease gslice-node-node-a in namespace gslice-system" "$T/node.log" || fail "no word of the Lease refused"
api POST /_test/clear-faults >/dev/null
u3=$(writes "PUT lease")
renewed_again() { [ "$(writes "PUT lease")" -gt "$u3" ]; }
until_secs 15 renewed_again
p5=$(writes "PATCH node")
sleep 11
expect_eq "PATCHes of node-a once the Lease is renewed again" "$(writes "PATCH node")" "$p5"
pass "the Lease refused: the annotation's heartbeat every 10 s ($((p4 - p3)) in 21 s), then the Lease again"

# --lease-namespace: the Lease goes there.
stop_node
start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a --lease-namespace gslice-other
other_there() { API_OK_STATUS=404 api GET /apis/coordination.k8s.io/v1/namespaces/gslice-other/leases/gslice-node-node-a | qgrep '"holderIdentity": "node-a"'; }
until_secs 20 other_there
pass "--lease-namespace gslice-other: the Lease is there"
