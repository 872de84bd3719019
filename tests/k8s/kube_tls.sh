#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The API client over TLS, as a kubeconfig describes it: the server's CA given as
# certificate-authority-data, a client certificate as a relative file path and its key as
# client-key-data (the API server stand-in requires a certificate signed by its client CA);
# a wrong CA, no client certificate, and insecure-skip-tls-verify.
source "$GSLICE_SRC/tests/k8s/lib.sh"
command -v openssl >/dev/null || { echo "SKIP: openssl is needed to make test certificates"; exit 77; }
C="$TBIN/k8s_kube_client"
cd "$T"
cert() { # NAME CN [SAN]: a key and a certificate signed by ca
  openssl req -new -newkey rsa:2048 -nodes -keyout "$1.key" -subj "/CN=$2" -out "$1.csr" 2>/dev/null
  if [ -n "${3:-}" ]; then echo "subjectAltName=$3" >"$1.ext"; else : >"$1.ext"; fi
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -subj "/CN=test-ca" -days 2 -out ca.crt 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -subj "/CN=other-ca" -days 2 -out other.crt 2>/dev/null
cert server apiserver "IP:127.0.0.1"
cert client "gslice-extender"

"$PY" "$K8S/apiserver.py" --port 0 --port-file api.port --tls-cert server.crt --tls-key server.key \
  --client-ca ca.crt >apiserver.log 2>&1 &
wait_file api.port
PORT=$(cat api.port)
b64() { base64 -w0 <"$1"; }
kubeconfig() { # FILE CLUSTER-EXTRA USER-EXTRA
  cat >"$1" <<KC
current-context: t
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:$PORT
$2
contexts:
- name: t
  context: {cluster: c, user: u}
users:
- name: u
  user:
$3
KC
}
mkdir -p certs && cp client.crt certs/
kubeconfig good.yaml "    certificate-authority-data: $(b64 ca.crt)" \
  "    client-certificate: certs/client.crt
    client-key-data: $(b64 client.key)"
out=$("$C" good.yaml list /api/v1/nodes)
expect_eq "list over TLS with a client certificate" "${out% rv *}" "items 0"
pass "TLS: CA from certificate-authority-data, client certificate from a relative path"

kubeconfig wrongca.yaml "    certificate-authority-data: $(b64 other.crt)" \
  "    client-certificate: certs/client.crt
    client-key-data: $(b64 client.key)"
set +e
"$C" wrongca.yaml list /api/v1/nodes >/dev/null 2>err
rc=$?
set -e
expect_eq "a server not signed by the CA" "$rc" 5 # EIO
grep -qi "certificate" err || fail "no word of the certificate: $(cat err)"
pass "a server the CA did not sign is refused: $(cat err)"

kubeconfig nocert.yaml "    certificate-authority-data: $(b64 ca.crt)" "    token: x"
set +e
"$C" nocert.yaml list /api/v1/nodes >/dev/null 2>err
rc=$?
set -e
[ "$rc" != 0 ] || fail "a client without certificate was let in"
pass "no client certificate: refused by the server (rc $rc)"

kubeconfig insecure.yaml "    insecure-skip-tls-verify: true" \
  "    client-certificate-data: $(b64 client.crt)
    client-key: $T/client.key"
out=$("$C" insecure.yaml list /api/v1/nodes)
expect_eq "insecure-skip-tls-verify" "${out% rv *}" "items 0"
pass "insecure-skip-tls-verify, certificate data and an absolute key path"
