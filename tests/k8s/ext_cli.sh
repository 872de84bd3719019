#!/bin/bash
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
refused --kubeconfig "$T/none.yaml" 1 "kubeconfig $T/none.yaml: No such file or directory"
echo "clusters: [" >"$T/bad.yaml"
refused --kubeconfig "$T/bad.yaml" 1 "not YAML"
env -u KUBERNETES_SERVICE_HOST "$X" >/dev/null 2>"$T/err" && fail "started with no API server"
grep -q "give --kubeconfig FILE" "$T/err" || fail "in-cluster refusal: $(cat "$T/err")"
# A port in use: the real reason, not a generic failure.
start_apiserver
"$PY" -c 'import socket,time,sys; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); open(sys.argv[1],"w").write(str(s.getsockname()[1])); time.sleep(30)' "$T/busy" &
wait_file "$T/busy"
refused --listen "127.0.0.1:$(cat "$T/busy")" --kubeconfig "$KUBECONFIG_FILE" 1 "Address already in use"
pass "gslice-extender's command line: --help, bad flags and settings refused with reasons"
