#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-extender's command line: --help, and every bad flag or setting refused with what was
# wrong (exit 2 for usage, 1 for a setting that cannot work) before anything starts.
source "$GSLICE_SRC/tests/k8s/lib.sh"
X="$BIN/gslice-extender"
out=$("$X" --help)
echo "$out" | qgrep "^usage: gslice-extender \[--listen \[HOST:\]PORT\] \[--kubeconfig FILE\]" ||
  fail "--help: $out"
# refused ARGS... EXIT WORDS: runs it, checks the status and that stderr says WORDS.
refused() {
  local want=${*: -2:1} words=${*: -1} rc
  set +e
  "$X" "${@:1:$#-2}" >"$T/out" 2>"$T/err"
  rc=$?
  set -e
  expect_eq "gslice-extender ${*:1:$#-2}: exit status" "$rc" "$want"
  grep -qF -- "$words" "$T/err" || fail "gslice-extender ${*:1:$#-2}: stderr lacks '$words': $(cat "$T/err")"
}
refused --bogus 2 'unknown option "--bogus"'
refused --policy pack 2 '--policy "pack": use binpack or spread'
refused --listen 2 '--listen needs a value'
refused --listen 70000 2 '--listen "70000" is not [HOST:]PORT'
refused --listen a:b:c 2 'is not [HOST:]PORT'
refused --node-timeout 0 2 '--node-timeout "0" must be whole seconds'
refused --node-timeout 5s 2 'must be whole seconds'
refused stray 2 'unexpected argument "stray"'
# The verbs answer only kube-scheduler: off loopback, TLS with client certificates or an
# explicit --insecure-listen.
refused --listen 0.0.0.0:8765 2 'refusing to serve the verbs off loopback'
refused --listen 8765 2 'refusing to serve the verbs off loopback'
refused --tls-cert "$T/c.pem" --tls-key "$T/k.pem" --listen 8765 2 'refusing to serve the verbs off loopback'
refused --tls-cert "$T/c.pem" 2 '--tls-cert and --tls-key go together'
refused --client-ca "$T/ca.pem" 2 '--client-ca needs --tls-cert and --tls-key'
refused --metrics-listen a:b:c 2 '--metrics-listen "a:b:c" is not [HOST:]PORT or off'
refused --request-timeout 0 2 '--request-timeout "0" must be whole seconds, 1..300'
refused --max-connections-per-ip 0 2 '--max-connections-per-ip "0" must be 1..256'
refused --scheduler-name , 2 '--scheduler-name'
refused --kubeconfig "$T/none.yaml" 1 "kubeconfig $T/none.yaml: No such file or directory"
echo "clusters: [" >"$T/bad.yaml"
refused --kubeconfig "$T/bad.yaml" 1 "not YAML"
env -u KUBERNETES_SERVICE_HOST "$X" >/dev/null 2>"$T/err" && fail "started with no API server"
grep -q "give --kubeconfig FILE" "$T/err" || fail "in-cluster refusal: $(cat "$T/err")"
# A port in use: the real reason, not a generic failure.
start_apiserver
"$PY" -c 'import socket,time,sys; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); open(sys.argv[1],"w").write(str(s.getsockname()[1])); time.sleep(30)' "$T/busy" &
wait_file "$T/busy"
refused --listen "127.0.0.1:$(cat "$T/busy")" --kubeconfig "$KUBECONFIG_FILE" --signing-key "$SIGNING_KEY" 1 "Address already in use"
K=(--kubeconfig "$KUBECONFIG_FILE" --signing-key "$SIGNING_KEY" --metrics-listen 127.0.0.1:0)
refused --listen 127.0.0.1:0 --tls-cert "$T/none.crt" --tls-key "$T/none.key" "${K[@]}" 1 "--tls-cert $T/none.crt: No such file or directory"
echo junk >"$T/junk.pem"
refused --listen 127.0.0.1:0 --tls-cert "$T/junk.pem" --tls-key "$T/junk.pem" "${K[@]}" 1 "cannot serve TLS on 127.0.0.1:0"
# Said in so many words, plain HTTP on every address is taken (and logged as http).
"$X" --listen 0.0.0.0:0 --insecure-listen "${K[@]}" 2>"$T/insecure.log" &
pid=$!
for _ in $(seq 100); do grep -q "listening on port" "$T/insecure.log" && break; sleep 0.1; done
kill "$pid"
wait "$pid" || true
grep -q "listening on port [0-9]* (http), metrics on port" "$T/insecure.log" ||
  fail "--insecure-listen: $(cat "$T/insecure.log")"
pass "gslice-extender's command line: --help, bad flags and settings refused with reasons"
