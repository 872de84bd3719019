#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --health-listen: /healthz is 200 while it serves; /readyz is 503 (saying what is
# missing) until it registered with the kubelet and its pod cache synced, then 200; another
# path is 404, another method 405. The listener is on loopback when no host is given.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"

# probe PATH [METHOD]: "STATUS BODY" of one request to the health listener.
probe() {
  "$PY" - "http://127.0.0.1:$HPORT$1" "${2:-GET}" <<'PYEOF'
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1], method=sys.argv[2])
try:
    with urllib.request.urlopen(req, timeout=5) as r:
        print(r.status, r.read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
except OSError as e:
    print("down", e)
PYEOF
}
HPORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

start_apiserver
api POST /api/v1/nodes '{"metadata":{"name":"node-a"}}' >/dev/null
start_gsliced
# No kubelet yet: gslice-node serves, but is not registered.
start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a --health-listen "$HPORT"
up() { [ "$(probe /healthz | cut -d' ' -f1)" = 200 ]; }
until_true 20 up
expect_eq "/healthz" "$(probe /healthz)" "200 ok"
synced() { probe /readyz | qgrep -v "pod cache"; }
until_true 20 synced
expect_eq "/readyz before registration" "$(probe /readyz)" "503 not ready: not registered with the kubelet"
expect_eq "an unknown path" "$(probe /nowhere | cut -d' ' -f1)" 404
expect_eq "POST /readyz" "$(probe /readyz POST | cut -d' ' -f1)" 405
pass "before registration: /healthz 200, /readyz 503 naming the registration, 404, 405"

start_kubelet
ready() { [ "$(probe /readyz)" = "200 ok" ]; }
until_true 20 ready
until_true 20 healthy 32
pass "after registration: /readyz 200"

# The kubelet goes: registration is lost, /readyz says so; back when it returns.
kill "$KUBELET_PID"; wait "$KUBELET_PID" 2>/dev/null || true
rm -f "$DP/kubelet.sock"
unready() { probe /readyz | qgrep "^503 not ready: not registered"; }
until_true 20 unready
pass "the kubelet gone: /readyz 503"

# Only loopback when no host is given.
ip=$(hostname -I 2>/dev/null | awk '{print $1}')
if [ -n "$ip" ] && [ "${ip#127.}" = "$ip" ]; then
  off=$("$PY" -c "import socket,sys; s=socket.socket(); s.settimeout(2); print(s.connect_ex((sys.argv[1], int(sys.argv[2]))))" "$ip" "$HPORT")
  [ "$off" != 0 ] || fail "the health listener answers on $ip:$HPORT without a host given"
  pass "not on $ip without a host"
else
  skip_part "no address other than loopback"
fi
