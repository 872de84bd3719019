# SPDX-License-Identifier: Apache-2.0
# Shared by the tests in tests/k8s/: temp dir, the API server stand-in on a free port,
# a kubeconfig pointing at it, and helpers. Usage: source "$GSLICE_SRC/tests/k8s/lib.sh"
set -euo pipefail
# qgrep ARGS...: grep -q that reads its input to the end. Under pipefail, `cmd | grep -q` fails
# when grep exits at its first match and cmd, still writing, dies of SIGPIPE (status 141): a
# passing check then fails now and then (k8s.ext_cli, one soak run in 8 beside a build).
qgrep() { grep "$@" >/dev/null; }
: "${GSLICE_BUILD:?run through ctest (make test), which sets GSLICE_BUILD}"
: "${GSLICE_SRC:?run through ctest (make test), which sets GSLICE_SRC}"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY (Debian's python3) is needed by the stand-ins"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/gslice-k8s.XXXXXX")
BIN="$GSLICE_BUILD/bin"
TBIN="$GSLICE_BUILD/tests"
K8S="$GSLICE_SRC/tests/k8s"
# skip_part WHY: a part of the test that cannot run or say anything here; the rest runs, and a
# run that otherwise passed ends as skipped (77), naming what was not checked.
_k8s_skipped_parts=""
skip_part() { echo "SKIP (part): $*"; _k8s_skipped_parts="${_k8s_skipped_parts:+$_k8s_skipped_parts; }$*"; }
_k8s_cleanup() {
  local rc=$?
  if [ "$rc" = 0 ] && [ -n "$_k8s_skipped_parts" ]; then
    echo "SKIP: what ran passed; not checked here: $_k8s_skipped_parts"
    rc=77
  fi
  jobs -p | xargs -r kill 2>/dev/null || true
  sleep 0.1
  jobs -p | xargs -r kill -9 2>/dev/null || true
  wait 2>/dev/null || true
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    for f in "$T"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }; done
  fi
  rm -rf "$T"
  exit $rc
}
trap _k8s_cleanup EXIT
# SIGNING_KEY: this test's signing key (64 hex digits, mode 0600), what gslice-extender and
# gslice-node are started with (--signing-key; start_node passes it). A test that hand-writes
# gslice.io/assigned signs it with sign_assigned.
SIGNING_KEY="$T/signing.key"
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$SIGNING_KEY")
export SIGNING_KEY
# sign_assigned KEY_FILE UID NODE TEXT: prints the gslice.io/assigned-signature gslice-extender
# would write for assignment TEXT (the annotation's exact bytes) of the pod with UID on NODE:
# v1:<first 16 hex of SHA-256(key)>:<hex HMAC-SHA256 of "gslice.io/assigned/v1\n" UID "\n"
# NODE "\n" TEXT> (src/k8s/common/sign.h).
sign_assigned() {
  "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import signing; print(signing.sign_assigned(*sys.argv[2:6]))' "$K8S" "$@"
}
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
expect_eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }

# wait_file FILE [SECONDS]: until FILE exists.
wait_file() {
  local i
  for ((i = 0; i < ${2:-10} * 20; i++)); do [ -s "$1" ] && return 0; sleep 0.05; done
  fail "timed out waiting for $1"
}

# start_apiserver [ARGS...]: the stand-in on a port the kernel picks (port 0), so tests of
# several worktrees never collide; sets API (http://127.0.0.1:PORT) and KUBECONFIG_FILE.
start_apiserver() {
  rm -f "$T/api.port"
  "$PY" "$K8S/apiserver.py" --port 0 --port-file "$T/api.port" "$@" >"$T/apiserver.log" 2>&1 &
  APISERVER_PID=$!
  wait_file "$T/api.port"
  API="http://127.0.0.1:$(cat "$T/api.port")"
  KUBECONFIG_FILE="$T/kubeconfig"
  cat >"$KUBECONFIG_FILE" <<KC
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: stand-in
  cluster:
    server: $API
contexts:
- name: test
  context: {cluster: stand-in, user: tester}
users:
- name: tester
  user:
    token: ${APISERVER_TOKEN:-none}
KC
}

# api METHOD PATH [JSON]: one request to the stand-in; prints the body, fails on >= 400
# unless API_OK_STATUS lists the status.
api() {
  "$PY" - "$API" "$@" <<'PYEOF'
import json, sys, urllib.request, urllib.error, os
base, method, path = sys.argv[1:4]
body = sys.argv[4].encode() if len(sys.argv) > 4 else None
ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
req = urllib.request.Request(base + path, data=body, method=method,
                             headers={"Content-Type": ctype,
                                      "Authorization": "Bearer " + os.environ.get("APISERVER_TOKEN", "none")})
ok = os.environ.get("API_OK_STATUS", "").split()
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.read().decode())
    if str(e.code) not in ok:
        sys.exit("HTTP %d on %s %s" % (e.code, method, path))
PYEOF
}

# jget JSON EXPR: a Python expression over the parsed JSON `d`, printed.
jget() {
  printf '%s' "$1" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$2"
}
