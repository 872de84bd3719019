#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Native sidecars (init containers with restartPolicy: Always, on by default since 1.29) on the
# node: the kubelet (devicemanager Allocate) keeps a sidecar's devices for it (taken out of what
# the containers after it reuse) and lists it in PodResources under its own name; a regular init
# container before it may have started on the same slots. gslice-node gives each container its
# own entry: the sidecar's slots start the regular init containers before it, then the sidecar;
# the app container's slots start the app container, never the sidecar (which never "terminates
# with exit 0"), so a pod gets the slices it declared (and quota counted), no more.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"
[ -x "$BIN/gslice-extender" ] || { echo "SKIP: no gslice-extender in this build"; exit 77; }
export TBIN

node_up '{"metadata":{"name":"node-a"},"status":{"allocatable":{"gslice.io/gpu":"32"},"capacity":{"gslice.io/gpu":"32"}}}'
extender_up
schedule() {
  "$PY" "$K8S/scheduler.py" --api "$API" --extender "$EXT" --once --log "$T/sched.jsonl" >>"$T/scheduler.log" 2>&1 ||
    fail "scheduler: $(cat "$T/scheduler.log")"
}
lim() { echo '{"limits":{"gslice.io/gpu":"1","gslice.io/gpu-memory":"'"$1"'","gslice.io/gpu-compute":"'"$2"'"}}'; }
# slices_of POD: "container:memory_cap_bytes/compute_request_percent" of POD's slices, sorted.
slices_of() { "$BIN/gslice" status --json | "$PY" -c '
import json, sys
out = []
for s in json.load(sys.stdin)["slices"]:
    parts = s["name"].split(".")
    if s["name"].startswith("k8s.") and parts[3] == sys.argv[1]:
        out.append("%s:%s/%s" % (parts[4], sum(g["memory_cap_bytes"] or 0 for g in s["gpus"]), s["compute_request_percent"]))
print(" ".join(sorted(out)))' "$1"; }
GI=1073741824

# 1. The red team's shape: sidecar 8Gi/50% + app 1Gi/1%.
api POST /api/v1/namespaces/default/pods '{"metadata":{"name":"sc"},"spec":{"initContainers":[{"name":"side","restartPolicy":"Always","resources":'"$(lim 8Gi 50)"'}],"containers":[{"name":"app","resources":'"$(lim 1Gi 1)"'}]}}' >/dev/null
schedule
pod=$(api GET /api/v1/namespaces/default/pods/sc)
expect_eq "sc's node" "$(jget "$pod" "d['spec'].get('nodeName')")" node-a
expect_eq "sc's sidecar entry" "$(jget "$pod" "[c.get('sidecar', False) for c in __import__('json').loads(d['metadata']['annotations']['gslice.io/assigned'])['containers'] if c['name'] == 'side'][0]")" True
kl POST /pods '{"namespace":"default","name":"sc","containers":[{"name":"side","init":true,"sidecar":true,"devices":1,"command":["sleep","60"]},{"name":"app","devices":1,"command":["sleep","60"]}]}' >"$T/sc.admit"
devs=$(jget "$(cat "$T/sc.admit")" "' '.join(sorted(d2 for c in d['containers'] for d2 in c['devices']))")
[ "$(echo "$devs" | wc -w)" = 2 ] && [ "$(echo "$devs" | tr ' ' '\n' | sort -u | wc -l)" = 2 ] ||
  fail "the sidecar's slot was reused by the app container: $(cat "$T/sc.admit")"
two_slices() { [ "$(slices_of sc | wc -w)" = 2 ]; }
until_true 20 two_slices
expect_eq "sc's slices" "$(slices_of sc)" "app:$GI/1 side:$((8 * GI))/50"
pass "sidecar 8Gi/50% and app 1Gi/1%: slices side 8 GiB/50% and app 1 GiB/1% (before: app 8 GiB/50%)"

# 2. A regular init container before the sidecar: the sidecar reuses its slot (the kubelet
# lists that slot under the sidecar); setup starts first on it, then the sidecar; the app
# container has its own slot. 2Gi/10% setup, 4Gi/20% side, 1Gi/5% app.
api POST /api/v1/namespaces/default/pods '{"metadata":{"name":"sc2"},"spec":{"initContainers":[{"name":"setup","resources":'"$(lim 2Gi 10)"'},{"name":"side","restartPolicy":"Always","resources":'"$(lim 4Gi 20)"'}],"containers":[{"name":"app","resources":'"$(lim 1Gi 5)"'}]}}' >/dev/null
schedule
expect_eq "sc2's node" "$(jget "$(api GET /api/v1/namespaces/default/pods/sc2)" "d['spec'].get('nodeName')")" node-a
kl POST /pods '{"namespace":"default","name":"sc2","containers":[{"name":"setup","init":true,"devices":1,"command":["sleep","0.5"]},{"name":"side","init":true,"sidecar":true,"devices":1,"command":["sleep","60"]},{"name":"app","devices":1,"command":["sleep","60"]}]}' >"$T/sc2.admit"
setup_dev=$(jget "$(cat "$T/sc2.admit")" "[c['devices'][0] for c in d['containers'] if c['name'] == 'setup'][0]")
side_dev=$(jget "$(cat "$T/sc2.admit")" "[c['devices'][0] for c in d['containers'] if c['name'] == 'side'][0]")
app_dev=$(jget "$(cat "$T/sc2.admit")" "[c['devices'][0] for c in d['containers'] if c['name'] == 'app'][0]")
expect_eq "the sidecar reuses setup's slot" "$side_dev" "$setup_dev"
[ "$app_dev" != "$side_dev" ] || fail "the app container got the sidecar's slot $side_dev"
app_started() { slices_of sc2 | qgrep 'app:'; }
until_true 30 app_started
expect_eq "sc2's slices" "$(slices_of sc2)" "app:$GI/5 side:$((4 * GI))/20"
qgrep "slots $side_dev of default/sc2: listed under container side, started for init container setup" "$T/node.log" ||
  fail "setup did not start on the sidecar's slot as setup: $(grep sc2 "$T/node.log" | tail -5)"
pass "setup then the sidecar on one slot (setup 2 GiB/10%, then side 4 GiB/20%), app 1 GiB/5% on its own"

# 3. A sidecar's restart keeps its own slice (its entry), not another container's.
kl POST /pods/default/sc/restart '{"container":"side"}' >/dev/null
sleep 0.5
expect_eq "sc's slices after the sidecar's restart" "$(slices_of sc)" "app:$GI/1 side:$((8 * GI))/50"
pass "the sidecar's restart: the same slices"
