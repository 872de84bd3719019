#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The API client (src/k8s/common/kube.c) keeps its connection between requests (HTTP/1.1
# keep-alive): twenty requests one after the other take one connection; a server that closes a
# kept connection without answering gets a GET again, once, on a fresh connection (answered),
# never a POST (an error, the server saw it once); a connection the server closed while idle is
# not used again (the next request, a POST too, goes on a fresh one without an error); a server
# that sends a second, unsolicited answer after one (at once or 100 ms later) does not have it
# read as the next request's: that connection is closed and counted, and the client keeps no
# connection from then on, so the next requests are answered on fresh ones and taken once. Against a small HTTP/1.1 server of its own
# that counts connections and requests.
source "$GSLICE_SRC/tests/k8s/lib.sh"
C="$TBIN/k8s_kube_client"
[ -x "$C" ] || { echo "SKIP: no $C"; exit 77; }

cat >"$T/server.py" <<'PYEOF'
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATS = {"connections": 0, "requests": {}}
DROPPED = set()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 3  # a connection idle 3 s is closed (as servers and balancers do, sooner)

    def setup(self):
        super().setup()
        self.served = 0

    def log_message(self, *a):
        pass

    def answer(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def any(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if self.path == "/_stats":
            with LOCK:
                return self.answer(200, STATS)
        if self.path == "/_reset":
            with LOCK:
                STATS.update(connections=0, requests={})
                DROPPED.clear()
            self.close_connection = True
            return self.answer(200, {})
        key = "%s %s" % (self.command, self.path)
        with LOCK:
            if self.served == 0:
                STATS["connections"] += 1
            STATS["requests"][key] = STATS["requests"].get(key, 0) + 1
            drop = self.path.startswith("/drop") and self.served > 0 and key not in DROPPED
            if drop:
                DROPPED.add(key)
        self.served += 1
        if drop:  # taken, then the connection closed without an answer
            self.close_connection = True
            return
        self.answer(200, {"kind": "Status", "status": "Success"})
        if self.path.startswith("/extra"):  # then an answer nobody asked for, on the same connection
            b = b'{"kind":"Status","status":"Failure","code":418}'
            extra = b"HTTP/1.1 418 I'm a teapot\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(b) + b
            if self.path.startswith("/extra-late"):
                self.wfile.flush()
                time.sleep(0.1)
            self.wfile.write(extra)
            self.wfile.flush()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = any


ThreadingHTTPServer.daemon_threads = True
srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(srv.server_address[1]))
srv.serve_forever()
PYEOF
"$PY" "$T/server.py" "$T/port.tmp" &
SRV=$!
trap 'kill $SRV 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$T/port.tmp" ] && break; sleep 0.05; done
mv "$T/port.tmp" "$T/port"
S="http://127.0.0.1:$(cat "$T/port")"
cat >"$T/kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: t
clusters:
- {name: s, cluster: {server: "$S"}}
contexts:
- {name: t, context: {cluster: s, user: u}}
users:
- {name: u, user: {token: x}}
KC
stats() { curl -fsS "$S/_stats"; }
reset() { curl -fsS "$S/_reset" >/dev/null; }
seq_() { "$C" "$T/kubeconfig" seq "$@"; }

steps=()
for _ in $(seq 20); do steps+=(GET:/ok); done
out=$(seq_ "${steps[@]}")
expect_eq "answers" "$(grep -c '^GET /ok 200$' <<<"$out")" 20
expect_eq "connections for 20 requests" "$(jget "$(stats)" "d['connections']")" 1
pass "20 requests one after the other: one connection"

reset
out=$(seq_ GET:/ok GET:/drop-get)
expect_eq "a GET the server dropped" "$out" "GET /ok 200
GET /drop-get 200"
expect_eq "the dropped GET as the server saw it" "$(jget "$(stats)" "(d['requests']['GET /drop-get'], d['connections'])")" "(2, 2)"
pass "a kept connection closed without an answer: the GET sent again once, on a fresh connection"

reset
out=$(seq_ GET:/ok POST:/drop-post GET:/ok)
[[ "$(sed -n 2p <<<"$out")" == "POST /drop-post error 5: "*"without answering (not sent again"* ]] ||
  fail "a POST the server dropped: $out"
expect_eq "the request after it" "$(sed -n 3p <<<"$out")" "GET /ok 200"
expect_eq "the dropped POST as the server saw it" "$(jget "$(stats)" "d['requests']['POST /drop-post']")" 1
pass "a kept connection closed without an answer: the POST not sent again ($(sed -n 2p <<<"$out" | cut -d: -f2-))"

reset
out=$(seq_ GET:/ok sleep:4000 POST:/ok PATCH:/ok)
expect_eq "after the server closed the idle connection" "$out" "GET /ok 200
POST /ok 200
PATCH /ok 200"
expect_eq "connections" "$(jget "$(stats)" "(d['connections'], d['requests']['POST /ok'])")" "(2, 1)"
pass "a connection the server closed while idle: the next requests on a fresh one, without an error"

# An answer nobody asked for, 100 ms after the one asked for (the client idle meanwhile): the
# next request, a GET or a POST, is not answered by it (the old client read the 418 as theirs).
reset
# Found once, the client keeps no connection past its answer: a request right after one whose
# stray answer is still to come (the POST and PATCH after /extra-late-b) is not answered by it.
out=$(seq_ GET:/extra-late-a sleep:1000 GET:/ok POST:/extra-late-b POST:/ok PATCH:/ok count:out-of-step 2>"$T/late.err")
expect_eq "after an answer nobody asked for" "$out" "GET /extra-late-a 200
GET /ok 200
POST /extra-late-b 200
POST /ok 200
PATCH /ok 200
out-of-step 1"
expect_eq "as the server saw it" "$(jget "$(stats)" "(d['requests']['POST /ok'], d['requests']['GET /ok'], d['connections'])")" "(1, 1, 5)"
expect_eq "warnings (said once)" "$(grep -c 'sent bytes on a kept connection before any request' "$T/late.err")" 1
# In the same write as the answer asked for: libcurl sees the excess and closes the connection.
reset
out=$(seq_ GET:/extra-same sleep:1000 GET:/ok POST:/ok)
expect_eq "after an answer nobody asked for, in the same write" "$out" "GET /extra-same 200
GET /ok 200
POST /ok 200"
pass "a second, unsolicited answer is never read as the next request's: that connection is closed (counted)"
