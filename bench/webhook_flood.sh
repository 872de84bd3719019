#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-webhook's memory for a hostile AdmissionReview (docs/security.md, finding 1): a 4 MiB
# Pod CREATE whose object holds ~1.4 million empty objects, POSTed to /mutate once and then 4
# at once; the webhook's resident memory (VmRSS) before, its peak (VmHWM) and VmRSS after, and
# the HTTP status. A well-formed review is sent last: it must still be patched (200).
# Knobs: WEBHOOK_BENCH_BIN (default $GSLICE_BUILD/bin/gslice-webhook: another build's, to compare).
set -euo pipefail
: "${GSLICE_BUILD:?set GSLICE_BUILD (make bench does)}"
BIN=${WEBHOOK_BENCH_BIN:-$GSLICE_BUILD/bin/gslice-webhook}
[ -x "$BIN" ] || { echo "SKIP: no $BIN (gslice-webhook needs GnuTLS)"; exit 0; }
command -v openssl >/dev/null && command -v curl >/dev/null ||
  { echo "SKIP: openssl and curl are needed"; exit 0; }
D=$(mktemp -d /tmp/gslice-whbench.XXXXXX)
trap 'kill "${PID:-}" 2>/dev/null; rm -rf "$D"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/tls.key" -out "$D/tls.crt" -days 1 \
  -subj /CN=localhost 2>/dev/null
python3 - "$D" <<'PY'
import json, sys
d = sys.argv[1]
def review(obj):
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u1", "kind": {"group": "", "version": "v1",
                                   "kind": "Pod"}, "operation": "CREATE", "namespace": "t",
                                   "object": obj}}, separators=(",", ":"))
pod = {"spec": {"containers": [{"name": "m", "resources": {"limits": {
    "gslice.io/gpu": "1", "gslice.io/gpu-memory": "1Gi"}}}]}}
open(d + "/good.json", "w").write(review(pod))
flood = review(dict(pod, x="@@"))
flood = flood.replace('"@@"', "[" + ",".join(["{}"] * 1398000) + "]")
open(d + "/flood.json", "w").write(flood)
PY
"$BIN" --listen 127.0.0.1:0 --tls-cert "$D/tls.crt" --tls-key "$D/tls.key" >"$D/log" 2>&1 &
PID=$!
PORT=
for _ in $(seq 100); do
  PORT=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$D/log" | head -1)
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || { echo "gslice-webhook did not start:"; cat "$D/log"; exit 1; }
kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$PID/status"; }
post() {
  curl -sk -o /dev/null -w '%{http_code} ' -H 'Content-Type: application/json' \
    --data-binary "@$D/$1" "https://127.0.0.1:$PORT/mutate"
}
size=$(stat -c %s "$D/flood.json")
printf '%-28s %10s %10s %10s %s\n' "gslice-webhook, $((size / 1024)) KiB body" "RSS before" \
  "peak" "RSS after" "HTTP"
for n in 1 4; do
  before=$(kib VmRSS)
  codes=$(for _ in $(seq $n); do post flood.json & done; wait)
  printf '%-28s %7s MB %7s MB %7s MB %s\n' "$n at once" $((before / 1024)) \
    $(($(kib VmHWM) / 1024)) $(($(kib VmRSS) / 1024)) "$(echo $codes)"
done
printf '%-28s %s\n' "a well-formed review after" "$(post good.json)"
