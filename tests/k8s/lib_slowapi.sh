# SPDX-License-Identifier: Apache-2.0
# Helpers of the tests of gslice-node beside a slow or absent API server (node_slowapi*.sh;
# sourced after lib.sh and lib_node.sh).
# Where lib.sh / lib_node.sh lack them (an older checkout, to measure it): a signing key, npod.
if [ -z "${SIGNING_KEY:-}" ]; then
  SIGNING_KEY="$T/signing.key"
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$SIGNING_KEY")
fi
type npod >/dev/null 2>&1 || npod() { "$PY" "$K8S/node_pod.py" --api "$API" --key "$SIGNING_KEY" "$@"; }

# gpu_uuid INDEX: the simulated GPU's uuid, from gsliced.
gpu_uuid() { "$BIN/gslice" status --json | "$PY" -c 'import json, sys; print([g["uuid"] for g in json.load(sys.stdin)["gpus"] if g["index"] == int(sys.argv[1])][0])' "$1"; }
# calls ARGS...: node_call.py on this test's plugin socket; prints its JSON line.
calls() { "$PY" "$K8S/node_call.py" --socket "$DP/gslice.sock" --pb-dir "$PB" "$@"; }
# fault JSON / clear_faults: the API server stand-in's injected faults.
fault() { api POST /_test/fault "$1" >/dev/null; }
clear_faults() { api POST /_test/clear-faults '{}' >/dev/null; }
# has_slice NS.POD.CTR: gsliced holds a slice of that container (named k8s.<seq>.NS.POD.CTR, or
# NS.POD.CTR by older gslice-nodes).
has_slice() {
  "$BIN/gslice" status --json | "$PY" -c '
import json, sys
sys.exit(0 if any(s["name"] == sys.argv[1] or s["name"].endswith("." + sys.argv[1]) for s in json.load(sys.stdin)["slices"]) else 1)' "$1"
}
# nslices: how many slices gsliced holds.
nslices() { "$BIN/gslice" status --json | "$PY" -c 'import json, sys; print(len(json.load(sys.stdin)["slices"]))'; }
# start_pod NAME: the kubelet admits and starts default/NAME, one container "main" of one slot,
# sleeping.
start_pod() {
  kl POST /pods '{"namespace":"default","name":"'"$1"'","containers":[{"name":"main","devices":1,"command":["sleep","600"]}]}'
}
# lines PATTERN FILE: how many lines of FILE match.
lines() { grep -c "$1" "$2" || true; }
# part NAME: whether this part runs (PARTS, default all: to measure one).
part() { [ -z "${PARTS:-}" ] || [[ " $PARTS " == *" $1 "* ]]; }
