#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Cleanup of many containers holds up neither the kubelet's calls nor registration (issue 16,
# finding 7): 100 containers with slices, every read of the API server taking 0.1 s, and
# gslice-node's periodic look at every container's pod (deleted? replaced? finished?) reads the
# pod cache, not the API server: kubelet calls meanwhile answer in under 1 s, and a kubelet
# restart is followed by registration in under 3 s. Then a pod is deleted in the API server and
# its slice goes.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"
source "$GSLICE_SRC/tests/k8s/lib_slowapi.sh"
N=${N:-100}

start_apiserver
api POST /api/v1/nodes '{"metadata":{"name":"node-a"}}' >/dev/null
start_gsliced
start_kubelet
start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a --slots-per-gpu 64
until_true 20 healthy 128
U0=$(gpu_uuid 0)
U1=$(gpu_uuid 1)

# N pods of one container each, half on either GPU, 64 MiB and 1% each; the kubelet starts them.
for ((i = 0; i < N; i++)); do
  u=$U0
  ((i % 2)) && u=$U1
  npod --name "m$i" "main=$u:67108864:1" >/dev/null
done
# One after the other, each started before the next is admitted: the stand-in holds its lock
# through Allocate, and the PreStartContainer before it asks PodResources, which takes that lock
# (the kubelet itself calls plugins outside its lock).
"$PY" - "$KUBELET" "$N" <<'PYEOF'
import json, sys, time, urllib.request
base, n = sys.argv[1], int(sys.argv[2])
def call(method, path, body=None):
    r = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else None,
                               method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=60) as resp:
        return json.loads(resp.read() or b"{}")
for i in range(n):
    call("POST", "/pods", {"namespace": "default", "name": "m%d" % i, "containers": [
        {"name": "main", "devices": 1, "command": ["sleep", "600"]}]})
    end = time.monotonic() + 30
    while not call("GET", "/pods/default/m%d" % i)["containers"][0].get("pid"):
        if time.monotonic() > end:
            sys.exit("m%d did not start" % i)
        time.sleep(0.02)
PYEOF
all_there() { [ "$(nslices)" -ge "$N" ]; }
until_true 90 all_there
pass "$N containers, $N slices"

# Every read of the API server now takes 0.1 s: a look at each container's pod through it would
# hold gslice-node for N x 0.1 s at a time.
fault '{"method":"GET","status":0,"delay_s":0.1,"count":1000000}'
if part calls; then
c=$(calls --duration 14 --slots gpu1-63)
echo "$N containers, API reads 0.1 s each: kubelet calls $c"
[ "$(jget "$c" "d['errors']")" = 0 ] || fail "kubelet calls failed: $c"
[ "$(jget "$c" "d['max_ms']")" -lt 1000 ] || fail "a kubelet call waited $(jget "$c" "d['max_ms']") ms while gslice-node looked at $N pods"
pass "$N containers under a slow API server: calls answered in $(jget "$c" "d['max_ms']") ms at most"
fi

if part restart; then
sleep 11 # every record's pod is due for a look (each every 10 s)
n=$(kstate "d['registrations']")
kl POST /restart '{"down_s":0.3}' >/dev/null
t0=$(now_ms)
until_true 10 registrations_over "$n"
reg_ms=$(($(now_ms) - t0))
echo "kubelet restart with $N containers and a slow API server: registered again $reg_ms ms after it was back"
[ "$reg_ms" -lt 3000 ] || fail "registration took $reg_ms ms after the kubelet's restart"
pass "registration after a kubelet restart: $reg_ms ms"
fi

# The cache is not only fast: a pod deleted in the API server (still listed by the kubelet)
# loses its slice at the next look, and the others keep theirs.
clear_faults
api DELETE /api/v1/namespaces/default/pods/m0 >/dev/null
gone() { ! has_slice default.m0.main; }
until_true 30 gone
expect_eq "slices left" "$(nslices)" "$((N - 1))"
pass "a deleted pod's slice removed, the other $((N - 1)) kept"
