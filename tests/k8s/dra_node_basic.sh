#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra on its two sockets, driven by a small gRPC client as the kubelet calls
# it (the kubelet stand-in, claims in the API server and pods end to end are dra_kubelet.py's
# and the dra_e2e tests'): the registration socket in --plugins-registry answers GetInfo (type
# DRAPlugin, driver gslice.io, the service socket's path, v1 then v1beta1) and
# NotifyRegistrationStatus (a refusal logged as an error); the service socket answers
# NodePrepareResources and NodeUnprepareResources of v1 and v1beta1 with an answer per claim
# (here every claim fails on its own: no API server to read it from; an unknown claim
# unprepares as success; a claim named by a UID that is not one is refused before anything is
# done), NodeWatchResources of v1, v1beta1 and v1alpha1 (every GPU HEALTHY, UNHEALTHY while
# gsliced is gone, HEALTHY again), an unknown method UNIMPLEMENTED; a removed socket is served
# again; a clean stop removes both sockets; bad flags are refused, naming the flag.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"

REGDIR="$T/plugins_registry"
PLUGDIR="$T/plugins/gslice.io"
mkdir -p "$REGDIR" "$T/plugins" "$T/cdi"
REGSOCK="$REGDIR/gslice.io-reg.sock"

cat >"$T/client.py" <<'PYEOF'
import json
import sys

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
import dra_pb2  # noqa: E402
import pluginregistration_pb2 as reg_pb2  # noqa: E402

REG = sys.argv[2]
STEP = sys.argv[3]
ARGS = sys.argv[4:]
DRA_PKG = {"v1": "k8s.io.kubelet.pkg.apis.dra.v1", "v1beta1": "k8s.io.kubelet.pkg.apis.dra.v1beta1"}


def unary(sock, method, req, resp_cls, timeout=20):
    with grpc.insecure_channel("unix:" + sock) as ch:
        call = ch.unary_unary(method, request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=resp_cls.FromString)
        return call(req, timeout=timeout)


def endpoint():
    return unary(REG, "/pluginregistration.Registration/GetInfo", reg_pb2.InfoRequest(),
                 reg_pb2.PluginInfo).endpoint


def main():
    if STEP == "info":
        info = unary(REG, "/pluginregistration.Registration/GetInfo", reg_pb2.InfoRequest(),
                     reg_pb2.PluginInfo)
        unary(REG, "/pluginregistration.Registration/NotifyRegistrationStatus",
              reg_pb2.RegistrationStatus(plugin_registered=True), reg_pb2.RegistrationStatusResponse)
        print(json.dumps({"type": info.type, "name": info.name, "endpoint": info.endpoint,
                          "versions": list(info.supported_versions)}))
    elif STEP == "refused":
        unary(REG, "/pluginregistration.Registration/NotifyRegistrationStatus",
              reg_pb2.RegistrationStatus(plugin_registered=False, error=ARGS[0]),
              reg_pb2.RegistrationStatusResponse)
        print(json.dumps({"ok": True}))
    elif STEP == "health":
        with grpc.insecure_channel("unix:" + endpoint()) as ch:
            call = ch.unary_stream("/%s.DRAResourceHealth/NodeWatchResources" % ARGS[0],
                                   request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=dra_pb2.NodeWatchResourcesResponse.FromString)
            for m in call(dra_pb2.NodeWatchResourcesRequest(), timeout=20):
                print(json.dumps({d.device.pool_name + "/" + d.device.device_name:
                                  dra_pb2.HealthStatus.Name(d.health) for d in m.devices}))
                break
    elif STEP in ("prepare", "unprepare"):
        claims = [dra_pb2.Claim(namespace=c[0], name=c[1], uid=c[2]) for c in json.loads(ARGS[1])]
        pkg = DRA_PKG[ARGS[0]]
        if STEP == "prepare":
            r = unary(endpoint(), "/%s.DRAPlugin/NodePrepareResources" % pkg,
                      dra_pb2.NodePrepareResourcesRequest(claims=claims),
                      dra_pb2.NodePrepareResourcesResponse, timeout=60)
            print(json.dumps({uid: {"error": a.error,
                                    "devices": [[list(d.request_names), d.pool_name, d.device_name,
                                                 list(d.cdi_device_ids)] for d in a.devices]}
                              for uid, a in r.claims.items()}))
        else:
            r = unary(endpoint(), "/%s.DRAPlugin/NodeUnprepareResources" % pkg,
                      dra_pb2.NodeUnprepareResourcesRequest(claims=claims),
                      dra_pb2.NodeUnprepareResourcesResponse, timeout=60)
            print(json.dumps({uid: a.error for uid, a in r.claims.items()}))
    elif STEP == "call":
        try:
            unary(endpoint(), ARGS[0], dra_pb2.NodeWatchResourcesRequest(),
                  dra_pb2.NodeWatchResourcesResponse)
            print(json.dumps("OK"))
        except grpc.RpcError as e:
            print(json.dumps(e.code().name))
    else:
        sys.exit("unknown step " + STEP)


if __name__ == "__main__":
    main()
PYEOF
c() { "$PY" "$T/client.py" "$PB" "$REGSOCK" "$@"; }

# Bad flags: said, exit 2, before anything is served.
bad() {
  local rc=0 out
  out=$("$BIN/gslice-node" --mode dra --no-api-server --node-name node-a --hook "$HOOK" "$@" 2>&1) || rc=$?
  expect_eq "gslice-node --mode dra $*: exit" "$rc" 2
  printf '%s' "$out" | qgrep -- "$1" || fail "the refusal of $* does not name $1: $out"
}
bad --plugins-registry "$T/none" --plugin-dir "$PLUGDIR"
bad --plugin-dir "$T/none/gslice.io" --plugins-registry "$REGDIR"
bad --plugin-dir relative/gslice.io --plugins-registry "$REGDIR"
bad --allocate-cdi --plugins-registry "$REGDIR" --plugin-dir "$PLUGDIR"
[ -z "$(ls -A "$REGDIR")" ] || fail "a refused start left $(ls "$REGDIR")"
pass "bad DRA flags refused, saying which"

start_gsliced
"$BIN/gslice-node" --mode dra --no-api-server --node-name node-a --plugins-registry "$REGDIR" \
  --plugin-dir "$PLUGDIR" --cdi-dir "$T/cdi" --state-dir "$NSTATE" --socket "$GSLICE_SOCKET" \
  --daemon-state-dir "$T/daemon" --hook "$HOOK" --nvidia-visible-devices "" 2>>"$T/node.log" &
NODE_PID=$!
until_true 10 test -S "$REGSOCK"

info=$(c info)
expect_eq "GetInfo" "$info" "{\"type\": \"DRAPlugin\", \"name\": \"gslice.io\", \"endpoint\": \"$PLUGDIR/dra.sock\", \"versions\": [\"v1.DRAPlugin\", \"v1beta1.DRAPlugin\"]}"
until_true 10 grep -q "the kubelet registered DRA driver gslice.io" "$T/node.log"
c refused "plugin name gslice.io already registered" >/dev/null
until_true 10 grep -q "refused to register DRA driver gslice.io: plugin name gslice.io already registered" "$T/node.log"
pass "registration: GetInfo, NotifyRegistrationStatus (registered, and a refusal logged)"

all_healthy='{"node-a/gpu-0": "HEALTHY", "node-a/gpu-1": "HEALTHY"}'
for v in v1 v1beta1 v1alpha1; do
  expect_eq "NodeWatchResources $v" "$(c health $v)" "$all_healthy"
done
pass "health: NodeWatchResources of v1, v1beta1 and v1alpha1"

claims='[["default", "c1", "0b6c7d2e-1f3a-4c5b-9d8e-7f6a5b4c3d2e"], ["team-a", "c2", "u-2"], ["default", "c3", "../../etc"]]'
for v in v1 v1beta1; do
  out=$(c prepare $v "$claims")
  expect_eq "$v Prepare: every claim answered" "$(jget "$out" "sorted(d)")" "['../../etc', '0b6c7d2e-1f3a-4c5b-9d8e-7f6a5b4c3d2e', 'u-2']"
  expect_eq "$v Prepare: c1 fails on its own" "$(jget "$out" "'--no-api-server' in d['0b6c7d2e-1f3a-4c5b-9d8e-7f6a5b4c3d2e']['error'] and d['0b6c7d2e-1f3a-4c5b-9d8e-7f6a5b4c3d2e']['devices'] == []")" True
  expect_eq "$v Prepare: c2 too" "$(jget "$out" "'team-a/c2' in d['u-2']['error']")" True
  expect_eq "$v Prepare: not a UID" "$(jget "$out" "'not a UID' in d['../../etc']['error']")" True
  out=$(c unprepare $v "$claims")
  expect_eq "$v Unprepare: unknown claims are unprepared" "$(jget "$out" "[d['0b6c7d2e-1f3a-4c5b-9d8e-7f6a5b4c3d2e'], d['u-2']]")" "['', '']"
  expect_eq "$v Unprepare: not a UID" "$(jget "$out" "'not a UID' in d['../../etc']")" True
done
[ -z "$(ls -A "$T/cdi")" ] || fail "a CDI spec was written for a claim that was never prepared: $(ls "$T/cdi")"
expect_eq "an unknown method" "$(c call /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeFrobnicate)" '"UNIMPLEMENTED"'
pass "Prepare and Unprepare of v1 and v1beta1: an answer per claim, each its own error"

stop_gsliced
unhealthy() { [ "$(c health v1)" = '{"node-a/gpu-0": "UNHEALTHY", "node-a/gpu-1": "UNHEALTHY"}' ]; }
until_true 20 unhealthy
start_gsliced
healthy_again() { [ "$(c health v1)" = "$all_healthy" ]; }
until_true 20 healthy_again
pass "health: UNHEALTHY while gsliced is gone, HEALTHY when it is back"

rm -f "$REGSOCK" "$PLUGDIR/dra.sock"
until_true 10 test -S "$REGSOCK"
until_true 10 test -S "$PLUGDIR/dra.sock"
expect_eq "GetInfo after the sockets were removed" "$(c info)" "$info"
pass "removed sockets are served again"

kill -TERM "$NODE_PID"
wait "$NODE_PID" || fail "gslice-node --mode dra did not stop cleanly"
[ ! -e "$REGSOCK" ] && [ ! -e "$PLUGDIR/dra.sock" ] || fail "a socket is left after a clean stop"
pass "a clean stop removes both sockets"
