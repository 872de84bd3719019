#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node never keeps the kubelet waiting on the API server (issue 16, finding 7): with every
# API request taking 9 s, GetDevicePluginOptions, GetPreferredAllocation and Allocate answer in
# under 2 s, a container whose pod gslice-node already knows gets its slice at once, and a
# gslice-node started meanwhile answers the kubelet at once too; with the API server hanging,
# a container starting then is told UNAVAILABLE (the kubelet retries) and gets its slice once the
# server is back — never refused for good. The kubelet calls are timed by node_call.py, a client
# of the plugin's socket beside the kubelet stand-in.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"
source "$GSLICE_SRC/tests/k8s/lib_slowapi.sh"

node_up
npod --name p1 "main=$U0:268435456:10" >/dev/null
sleep 1 # the watch brings it

# ---- every request to the API server takes 9 s ----
if part slow; then
fault '{"status":0,"delay_s":9,"count":1000000}'
calls --duration 11 --slots gpu1-15 >"$T/calls1.json" &
CALLS=$!
sleep 0.5
t0=$(now_ms)
start_pod p1 >/dev/null
alloc_ms=$(($(now_ms) - t0))
until_true 25 has_slice default.p1.main
slice_ms=$(($(now_ms) - t0))
wait "$CALLS"
c1=$(cat "$T/calls1.json")
echo "API server 9 s a request: kubelet calls $c1; pod p1 admitted (Allocate) in $alloc_ms ms, its slice made $slice_ms ms after"
[ "$(jget "$c1" "d['errors']")" = 0 ] || fail "kubelet calls failed: $c1"
[ "$(jget "$c1" "d['max_ms']")" -lt 2000 ] || fail "a kubelet call waited $(jget "$c1" "d['max_ms']") ms (the API server's 9 s?)"
[ "$alloc_ms" -lt 2000 ] || fail "admitting p1 (GetPreferredAllocation + Allocate) took $alloc_ms ms"
[ "$slice_ms" -lt 4000 ] || fail "p1's slice took $slice_ms ms: PreStartContainer waited on the API server"
clear_faults
pass "every API request 9 s: calls answered in $(jget "$c1" "d['max_ms']") ms at most, p1's slice in $slice_ms ms"
fi

# A gslice-node started while the API server is this slow answers the kubelet at once.
listed=$(lines "listed this node's pods" "$T/node.log")
if part restart; then
fault '{"status":0,"delay_s":9,"count":1000000}'
n=$(kstate "d['registrations']")
stop_node
start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a
t0=$(now_ms)
until_true 10 registrations_over "$n"
reg_ms=$(($(now_ms) - t0))
c2=$(calls --duration 3 --slots gpu1-15)
echo "gslice-node restarted under the slow API server: registered in $reg_ms ms; calls $c2"
[ "$(jget "$c2" "d['errors']")" = 0 ] || fail "kubelet calls failed: $c2"
[ "$(jget "$c2" "d['max_ms']")" -lt 2000 ] || fail "a kubelet call to the new gslice-node waited $(jget "$c2" "d['max_ms']") ms"
[ "$reg_ms" -lt 3000 ] || fail "registration took $reg_ms ms"
clear_faults
pass "a gslice-node started under the slow API server registered in $reg_ms ms, calls answered in $(jget "$c2" "d['max_ms']") ms"
fi

# ---- the API server hangs: requests are held, then dropped unanswered ----
cache_synced() { [ "$(lines "listed this node's pods" "$T/node.log")" -gt "$listed" ]; }
if part outage; then
# (a gslice-node that says nothing of it, an older one, is measured all the same)
! qgrep "listed this node's pods" "$T/node.log" || until_true 20 cache_synced
# The new gslice-node's cache is listed; now its watch is cut and every new read of pods hangs.
fault '{"method":"GET","path":"^/api/v1/(pods\\?|namespaces/default/pods/p2)","status":"hang","delay_s":3,"count":1000000}'
api POST /_test/close-watches '{}' >/dev/null
sleep 0.5
npod --name p2 "main=$U0:268435456:10" >/dev/null
t0=$(now_ms)
start_pod p2 >/dev/null
sleep 4
has_slice default.p2.main && fail "p2 got a slice while the API server hung (from what?)"
# (the stand-in logs the gRPC error over several lines)
grep -A3 "PreStartContainer main failed" "$T/kubelet.log" | qgrep "UNAVAILABLE" ||
  fail "PreStartContainer during the outage did not answer UNAVAILABLE (was the container refused for good?)"
! qgrep "default/p2/main.*gets no GPU" "$T/node.log" || fail "p2's container was refused for good during the outage"
clear_faults
t1=$(now_ms)
until_true 20 has_slice default.p2.main
back_ms=$(($(now_ms) - t1))
fails=$(grep -c "PreStartContainer main failed" "$T/kubelet.log" || true)
echo "API server hung: PreStartContainer answered UNAVAILABLE $fails time(s), the kubelet retried; p2's slice $back_ms ms after the API server was back"
pass "outage: UNAVAILABLE, then the slice once the API server was back ($back_ms ms)"
fi

# The kubelet's calls are not held while the API server hangs either.
if part hang; then
fault '{"status":"hang","delay_s":3,"count":1000000}'
api POST /_test/close-watches '{}' >/dev/null
c3=$(calls --duration 11 --slots gpu1-15) # the heartbeat falls due in there (every 10 s)
echo "API server hanging: calls $c3"
[ "$(jget "$c3" "d['max_ms']")" -lt 2000 ] || fail "a kubelet call waited $(jget "$c3" "d['max_ms']") ms while the API server hung"
clear_faults
pass "API server hanging: calls answered in $(jget "$c3" "d['max_ms']") ms at most"
fi

# ---- a watch too old to resume (410 Gone): the cache lists again and goes on ----
if part relist; then
listed=$(lines "listed this node's pods" "$T/node.log")
fault '{"path":"watch=","status":"watch410http","count":1}'
api POST /_test/close-watches '{}' >/dev/null
# Listed twice: after the cut stream, then after the 410 on the watch that followed it.
relisted_twice() { [ "$(lines "listed this node's pods" "$T/node.log")" -gt "$((listed + 1))" ]; }
until_true 20 relisted_twice
npod --name p4 "main=$U0:268435456:10" >/dev/null
start_pod p4 >/dev/null
until_true 10 has_slice default.p4.main
pass "a 410 on the watch: listed again, a new pod's container got its slice"
fi
