# SPDX-License-Identifier: Apache-2.0
# gslice-node's tests (sourced after tests/k8s/lib.sh): a private simulated machine and gsliced,
# the kubelet stand-in, gslice-node, and helpers to drive them. Sockets live in the test's own
# temp dir, so tests of several worktrees run side by side.
PB="$GSLICE_BUILD/tests/k8s-pb"
[ -f "$PB/deviceplugin_pb2.py" ] || { echo "SKIP: no $PB (protoc missing at build time)"; exit 77; }
"$PY" -c 'import grpc, google.protobuf' 2>/dev/null || { echo "SKIP: $PY lacks python3-grpcio/python3-protobuf"; exit 77; }
export GSLICE_SIM_STATE="$T/sim-state"
export GSLICE_SOCKET="$T/run/gsliced.sock"
export LD_LIBRARY_PATH="$GSLICE_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GSLICE_SIM_DEVICES="${GSLICE_SIM_DEVICES:-2}"
HOOK="$GSLICE_BUILD/lib/libgslice.so"
DP="$T/device-plugins"
PODRES="$T/pod-resources.sock"
NSTATE="$T/node"
mkdir -p "$T/run" "$DP" "$T"

start_gsliced() {
  "$BIN/gsliced" --state-dir "$T/daemon" --foreground "$@" 2>>"$T/gsliced.log" &
  GSLICED_PID=$!
  for _ in $(seq 200); do
    "$BIN/gslice" status >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  fail "gsliced did not come up"
}
stop_gsliced() { kill "$GSLICED_PID" 2>/dev/null || true; wait "$GSLICED_PID" 2>/dev/null || true; }

start_kubelet() {
  rm -f "$T/kubelet.port"
  "$PY" "$K8S/kubelet.py" --dir "$DP" --pod-resources "$PODRES" --pb-dir "$PB" \
    --log-dir "$T" --port-file "$T/kubelet.port" ${API:+--api "$API"} 2>>"$T/kubelet.log" &
  KUBELET_PID=$!
  wait_file "$T/kubelet.port"
  KUBELET="http://127.0.0.1:$(cat "$T/kubelet.port")"
}

# start_node [ARGS...]: gslice-node on this test's kubelet dir and gsliced.
start_node() {
  "$BIN/gslice-node" --kubelet-dir "$DP" --pod-resources-socket "$PODRES" --state-dir "$NSTATE" \
    --socket "$GSLICE_SOCKET" --daemon-state-dir "$T/daemon" --hook "$HOOK" \
    --nvidia-visible-devices "" --signing-key "$SIGNING_KEY" "$@" 2>>"$T/node.log" &
  NODE_PID=$!
}
stop_node() { kill "$NODE_PID" 2>/dev/null || true; wait "$NODE_PID" 2>/dev/null || true; }

# kl METHOD PATH [JSON]: the kubelet stand-in's control interface; prints the body.
kl() {
  "$PY" - "$KUBELET" "$@" <<'PYEOF'
import sys, urllib.request, urllib.error
base, method, path = sys.argv[1:4]
body = sys.argv[4].encode() if len(sys.argv) > 4 else None
req = urllib.request.Request(base + path, data=body, method=method,
                             headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.read().decode())
PYEOF
}

# until_true SECONDS CMD...: polls CMD every 50 ms; fails the test after SECONDS.
until_true() {
  local secs=$1 i
  shift
  for ((i = 0; i < secs * 20; i++)); do "$@" && return 0; sleep 0.05; done
  fail "timed out after ${secs}s waiting for: $*"
}
# until_secs SECONDS CMD...: the same by the clock, for a CMD that takes its own while (an API
# query through Python): it fails after SECONDS of wall time, however slow each try.
until_secs() {
  local secs=$1 end=$((SECONDS + $1))
  shift
  while ((SECONDS < end)); do "$@" && return 0; sleep 0.2; done
  fail "timed out after ${secs}s waiting for: $*"
}
# kstate EXPR: a Python expression over the kubelet's /state `d`.
kstate() { jget "$(kl GET /state)" "$1"; }
healthy() { [ "$(kstate "sum(v == 'Healthy' for v in d['devices'].values())")" = "$1" ]; }
registrations_over() { [ "$(kstate "d['registrations']")" -gt "$1" ]; }
now_ms() { date +%s%3N; }
# recovered_ms FROM_REGEX: from the kubelet's log, ms from the last line matching FROM_REGEX to
# the first ListAndWatch after it with every device Healthy (the kubelet's own clock: exact,
# unlike polling from here).
recovered_ms() {
  "$PY" - "$T/kubelet.log" "$1" <<'PYEOF'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
start = None
for i, l in enumerate(lines):
    if re.search(sys.argv[2], l):
        start = i
if start is None:
    print("? (no line matched %r)" % sys.argv[2])
    sys.exit(0)
t0 = float(lines[start].split()[0])
for l in lines[start + 1:]:
    m = re.search(r"ListAndWatch: (\d+) devices, (\d+) healthy", l)
    if m and m.group(1) == m.group(2) and int(m.group(1)) > 0:
        print(int((float(l.split()[0]) - t0) * 1000))
        break
else:
    print("?")
PYEOF
}
# npod ARGS...: a pod in the API server as gslice-extender would have bound it (node_pod.py:
# declared resources, spec.nodeName, gslice.io/assigned signed for its UID); prints the UID.
npod() { "$PY" "$K8S/node_pod.py" --api "$API" --key "$SIGNING_KEY" "$@"; }
# slice_names: gsliced's slices as "<namespace>.<pod>.<container>" (gslice-node names them
# k8s.<seq>.<namespace>.<pod>.<container>), sorted.
slice_names() { "$BIN/gslice" status --json | "$PY" -c '
import json, sys
print(sorted(s["name"].split(".", 2)[2] if s["name"].startswith("k8s.") else s["name"] for s in json.load(sys.stdin)["slices"]))'; }
# in_ns: whether the kubelet stand-in starts containers in their own namespaces with real
# mounts (else tests of what a container can reach skip).
in_ns() { [ "$(kstate "d['namespaces']")" = True ]; }

# node_up [NODE_JSON [ARGS...]]: the API server with node-a (NODE_JSON, default a bare node-a),
# gsliced, the kubelet and gslice-node (given ARGS too); back once the kubelet shows 32 healthy
# slots and the inventory (gslice.io/gpus) is on the node: its text in $inv, the two GPUs' uuids
# in $U0 and $U1.
node_up() {
  local node=${1:-'{"metadata":{"name":"node-a"}}'}
  start_apiserver
  api POST /api/v1/nodes "$node" >/dev/null
  start_gsliced
  start_kubelet
  start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a "${@:2}"
  until_true 20 healthy 32
  until_true 20 node_has_gpus
  inv=$(jget "$(api GET /api/v1/nodes/node-a)" "d['metadata']['annotations']['gslice.io/gpus']")
  U0=$(jget "$inv" "d['gpus'][0]['uuid']")
  U1=$(jget "$inv" "d['gpus'][1]['uuid']")
}
node_has_gpus() { [ -n "$(jget "$(api GET /api/v1/nodes/node-a)" "d['metadata'].get('annotations',{}).get('gslice.io/gpus','')")" ]; }

# extender_up: gslice-extender on this test's API server and signing key, plain HTTP on
# loopback; back once /healthz says it has synced: the verbs at $EXT, /metrics at $MET.
extender_up() {
  "$BIN/gslice-extender" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --kubeconfig "$KUBECONFIG_FILE" \
    --signing-key "$SIGNING_KEY" "$@" 2>"$T/extender.log" &
  until_true 10 extender_port
  EXT="http://127.0.0.1:$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$T/extender.log" | head -1)"
  MET="http://127.0.0.1:$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$T/extender.log" | head -1)"
  until_true 20 extender_ready
}
extender_port() { grep -q "listening on port [0-9]" "$T/extender.log"; }
extender_ready() { "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" "$MET/healthz" 2>/dev/null; }
