#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The API client's cost per request (src/k8s/common/kube.c): N GETs of one node, one after the
# other on one client (k8s_kube_client seq), against the API server stand-in over plain HTTP and
# over TLS with a client certificate (as gslice-node and gslice-extender reach a kube-apiserver).
# Prints ms per request for each. Knobs: KUBE_BENCH_N (200), KUBE_CLIENT (another build's
# k8s_kube_client, to compare: it must know seq).
: "${GSLICE_BUILD:?set GSLICE_BUILD}"
export GSLICE_SRC=${GSLICE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
(
  source "$GSLICE_SRC/tests/k8s/lib.sh"
  command -v openssl >/dev/null || { echo "SKIP: openssl is needed for the TLS part"; exit 77; }
  C=${KUBE_CLIENT:-$TBIN/k8s_kube_client}
  N=${KUBE_BENCH_N:-200}
  steps=()
  for _ in $(seq "$N"); do steps+=(GET:/api/v1/nodes/node-a); done
  # per_request KUBECONFIG LABEL: the N GETs' wall time, in ms per request.
  per_request() {
    local t0 t1
    t0=$(date +%s%N)
    "$C" "$1" seq "${steps[@]}" | grep -c ' 200$' | grep -qx "$N" || fail "$2: not every GET answered 200"
    t1=$(date +%s%N)
    awk -v l="$2" -v ns=$((t1 - t0)) -v n="$N" 'BEGIN { printf "%s: %.3f ms per request (%d)\n", l, ns / n / 1e6, n }'
  }
  start_apiserver
  api POST /api/v1/nodes '{"metadata":{"name":"node-a"}}' >/dev/null
  per_request "$KUBECONFIG_FILE" "plain HTTP"

  cd "$T" || exit 1
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -subj "/CN=bench-ca" -days 2 -out ca.crt 2>/dev/null
  for n in server client; do
    openssl req -new -newkey rsa:2048 -nodes -keyout $n.key -subj "/CN=$n" -out $n.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >$n.ext
    openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile $n.ext -out $n.crt 2>/dev/null
  done
  "$PY" "$K8S/apiserver.py" --port 0 --port-file tls.port --tls-cert server.crt --tls-key server.key \
    --client-ca ca.crt >tls.log 2>&1 &
  wait_file tls.port
  curl -fsS --cacert ca.crt --cert client.crt --key client.key -X POST -H 'Content-Type: application/json' \
    -d '{"metadata":{"name":"node-a"}}' "https://127.0.0.1:$(cat tls.port)/api/v1/nodes" >/dev/null
  cat >tls.yaml <<KC
current-context: t
clusters:
- {name: c, cluster: {server: "https://127.0.0.1:$(cat tls.port)", certificate-authority: ca.crt}}
contexts:
- {name: t, context: {cluster: c, user: u}}
users:
- {name: u, user: {client-certificate: client.crt, client-key: client.key}}
KC
  per_request "$T/tls.yaml" "TLS, client certificate"
)
rc=$?
[ $rc = 77 ] && exit 0 # skipped, and said why
exit $rc
