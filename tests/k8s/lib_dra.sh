# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra's end-to-end tests (sourced after tests/k8s/lib.sh): the simulated
# machine and gsliced (lib_node.sh), the API server stand-in with resource.k8s.io/v1 and
# deploy's DeviceClasses, the DRA kubelet stand-in (dra_kubelet.py), gslice-node in DRA mode, the
# allocator stand-in as kube-scheduler (dra_alloc.py), and helpers to drive them. Every socket,
# spec and record lives in the test's own temp dir.
source "$GSLICE_SRC/tests/k8s/lib_node.sh"
[ -f "$PB/dra_pb2.py" ] && [ -f "$PB/pluginregistration_pb2.py" ] ||
  { echo "SKIP: no $PB/dra_pb2.py (protoc missing at build time)"; exit 77; }
"$PY" -c 'import yaml' 2>/dev/null || { echo "SKIP: $PY lacks python3-yaml (deploy's manifests)"; exit 77; }
REG="$T/plugins_registry"
PLUGIN_DIR="$T/plugins/gslice.io"
CDI="$T/cdi"
mkdir -p "$REG" "$T/plugins" "$CDI"
RES=/apis/resource.k8s.io/v1
GiB=1073741824

start_dra_kubelet() {
  rm -f "$T/dra_kubelet.port"
  "$PY" "$K8S/dra_kubelet.py" --plugins-registry "$REG" --cdi-dir "$CDI" --api "$API" \
    --node-name node-a --pb-dir "$PB" --log-dir "$T" --port-file "$T/dra_kubelet.port" \
    2>>"$T/dra_kubelet.log" &
  KUBELET_PID=$!
  wait_file "$T/dra_kubelet.port"
  KUBELET="http://127.0.0.1:$(cat "$T/dra_kubelet.port")" # kl and kstate (lib_node.sh) use it
}

# start_dra_node [ARGS...]: gslice-node --mode dra on this test's registry, gsliced and API server.
start_dra_node() {
  "$BIN/gslice-node" --mode dra --plugins-registry "$REG" --plugin-dir "$PLUGIN_DIR" \
    --cdi-dir "$CDI" --state-dir "$NSTATE" --socket "$GSLICE_SOCKET" \
    --daemon-state-dir "$T/daemon" --hook "$HOOK" --nvidia-visible-devices "" \
    --kubeconfig "$KUBECONFIG_FILE" --node-name node-a "$@" 2>>"$T/node.log" &
  NODE_PID=$!
}

dra_registered() { [ "$(kstate "'gslice.io' in d['plugins']")" = True ]; }
registrations() { kstate "d['registrations']"; }
# dra_node_again [ARGS...]: gslice-node (stopped, or gone) started again; back once the kubelet
# stand-in registered it anew.
dra_node_again() {
  DRA_REGS=$(registrations)
  start_dra_node "$@"
  until_secs 15 dra_registered_anew
}
dra_registered_anew() { [ "$(registrations)" -gt "$DRA_REGS" ]; }
# dra_crash AT KIND BATCH: gslice-node stopped and started again to die at its crash point AT
# (GSLICE_NODE_TEST_CRASH_AT, tests only: exit 99), sent BATCH as one KIND call (prepare or
# unprepare) once registered; back once it died there.
dra_crash() {
  local rc=0
  stop_node
  export GSLICE_NODE_TEST_CRASH_AT=$1
  dra_node_again
  unset GSLICE_NODE_TEST_CRASH_AT
  kl POST "/$2" "$3" >/dev/null || true
  wait "$NODE_PID" || rc=$?
  expect_eq "gslice-node's exit at the crash point $1" "$rc" 99
}
prepares() { kstate "d['prepares']"; }
node_slices() { jget "$(api GET "$RES/resourceslices?fieldSelector=spec.nodeName=node-a,spec.driver=gslice.io")" "len(d['items'])"; }
published() { [ "$(node_slices)" -ge 1 ]; }

# dra_up: everything up, back once the kubelet stand-in registered gslice.io and the node's
# ResourceSlice is published. A gslice-node that exits or never registers fails the test
# (its DRA mode is there: a skip would hide a real failure on a loaded host); the wait is 40 s.
dra_up() {
  start_apiserver
  api POST /api/v1/nodes '{"metadata":{"name":"node-a"}}' >/dev/null
  "$PY" - "$GSLICE_SRC/deploy/overlays/dra/deviceclass.yaml" >"$T/classes.json" <<'PYEOF'
import json, sys, yaml
print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "DeviceClass"]))
PYEOF
  for i in $(seq 0 $(($(jget "$(cat "$T/classes.json")" "len(d)") - 1))); do
    api POST "$RES/deviceclasses" "$(jget "$(cat "$T/classes.json")" "__import__('json').dumps(d[$i])")" >/dev/null
  done
  start_gsliced
  start_dra_kubelet
  start_dra_node
  local i
  for ((i = 0; i < 800; i++)); do
    dra_registered && break
    kill -0 "$NODE_PID" 2>/dev/null ||
      fail "gslice-node --mode dra exited before registering: $(tail -n 3 "$T/node.log" | tr '\n' ' ')"
    sleep 0.05
  done
  if ! dra_registered; then
    [ -n "$(ls -A "$REG")" ] ||
      fail "gslice-node --mode dra made no registration socket in 40 s: $(tail -n 3 "$T/node.log" | tr '\n' ' ')"
    fail "gslice-node's registration socket is there but the kubelet did not register it: $(kstate "d['refusals']")"
  fi
  until_secs 20 published
}

# dra_claim NAME MEMORY COMPUTE [LIMIT]: a ResourceClaim in default of one request "gpu" of class
# gslice.io asking capacity memory and compute, with its own SliceConfig computeLimit LIMIT.
dra_claim() {
  local cfg=""
  [ -n "${4:-}" ] && cfg=',"config":[{"requests":["gpu"],"opaque":{"driver":"gslice.io","parameters":{"apiVersion":"gslice.io/v1","kind":"SliceConfig","computeLimit":'"$4"'}}}]'
  api POST "$RES/namespaces/default/resourceclaims" '{"metadata":{"name":"'"$1"'"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gslice.io","capacity":{"requests":{"memory":"'"$2"'","compute":"'"$3"'"}}}}]'"$cfg"'}}}' >/dev/null
}
# dra_alloc CLAIM POD...: allocated and reserved for the pods (uid POD-uid), as kube-scheduler
# does before it binds them; prints the claim written.
dra_alloc() {
  local c=$1 args=()
  shift
  for p in "$@"; do args+=(--pod "$p:$p-uid"); done
  "$PY" "$K8S/dra_alloc.py" --api "$API" allocate --claim "$c" --node node-a "${args[@]}"
}
dra_release() { "$PY" "$K8S/dra_alloc.py" --api "$API" release --claim "$1" --pod-uid "$2-uid" >/dev/null; }
claim_uid() { jget "$(api GET "$RES/namespaces/default/resourceclaims/$1")" "d['metadata']['uid']"; }
# dra_pod NAME CLAIM COMMAND_JSON: the pod (uid NAME-uid) with one container "main" using CLAIM.
dra_pod() {
  local out
  out=$(kl POST /pods '{"namespace":"default","name":"'"$1"'","uid":"'"$1"'-uid","claims":[{"name":"c","resourceClaimName":"'"$2"'"}],"containers":[{"name":"main","claims":[{"name":"c"}],"command":'"$3"'}]}')
  [ "$(jget "$out" "'error' in d")" = False ] || fail "pod $1 not started: $out"
  printf '%s\n' "$out"
}
nslices() { "$BIN/gslice" status --json | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["slices"]))'; }
# gs_slices: gsliced's slices as sorted (request %, limit %, [GPU indexes], [memory caps]).
gs_slices() { "$BIN/gslice" status --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(sorted((s["compute_request_percent"], s["compute_limit_percent"], [g["index"] for g in s["gpus"]], [g["memory_cap_bytes"] for g in s["gpus"]]) for s in d["slices"]))'; }
specs() { ls "$CDI" | grep -c '^gslice.io-claim_' || true; }
# share LOG LABEL: compute_spin's share (percent) of the window labelled LABEL.
share() { awk -v l="$2" '/share=/ { for (i = 1; i <= NF; i++) if ($i == "label=" l) ok = 1; if (!ok) next; for (i = 1; i <= NF; i++) if ($i ~ /^share=/) { split($i, a, "="); printf "%d", a[2] * 100 + 0.5 }; ok = 0 }' "$T/$1.log"; }
filled() { sed -n 's/^fill n=\([0-9]*\).*/\1/p' "$T/$1.log"; }
