#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --health-listen flooded by pods while the kubelet probes it (our attack run's
# finding 3): the kubelet (127.0.0.1) keeps getting its answers.
# 1. From one address (127.0.0.2), 16 connections dripping a header byte every 0.5 s, each
#    reopened when cut: every probe answers (at most 4 per address).
# 2. One such connection is cut about 2 s after it connected, however it drips (the deadline
#    counts the whole request; an idle timeout, which each byte resets, never cut it).
# 3. From 32 addresses at once (127.0.0.10..41, pods of one node), 4 connections each: every
#    probe answers (128 slots taken of many more; 64 in all filled before).
# Skipped (77) where 127.0.0.2 cannot be a source address.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"

"$PY" -c 'import socket; socket.create_server(("127.0.0.2", 0)).close()' 2>/dev/null ||
  { echo "SKIP: 127.0.0.2 cannot be a source address here"; exit 77; }
HPORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

start_apiserver
api POST /api/v1/nodes '{"metadata":{"name":"node-a"}}' >/dev/null
start_gsliced
start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a --health-listen "$HPORT"

# flood MODE: runs MODE against the health listener, prints what it measured, fails if short.
flood() {
  "$PY" - "$HPORT" "$1" <<'PYEOF'
import socket, sys, threading, time
port, mode = int(sys.argv[1]), sys.argv[2]
HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096


def dial(src, timeout=2.0):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(src, 0))


def probe():
    """A kubelet httpGet probe: 200 within 2 s."""
    try:
        s = dial("127.0.0.1")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        ok = s.recv(64).startswith(b"HTTP/1.1 200")
        s.close()
        return ok
    except OSError:
        return False


stop = threading.Event()


def dripper(src):
    """One connection dripping a byte every 0.5 s, reopened when cut."""
    while not stop.is_set():
        try:
            s = dial(src)
            for i in range(len(HEAD)):
                if stop.is_set():
                    break
                s.sendall(HEAD[i:i + 1])
                time.sleep(0.5)
        except OSError:
            pass
        time.sleep(0.05)


def probes_during(sources, n=20):
    ts = [threading.Thread(target=dripper, args=(src,), daemon=True) for src in sources]
    for t in ts:
        t.start()
    time.sleep(3.0)  # the flood in place, and cut and reopened once
    ok = 0
    for _ in range(n):
        ok += probe()
        time.sleep(0.25)
    stop.set()
    return ok


if mode == "one":
    ok = probes_during(["127.0.0.2"] * 16)
    print("16 dripping connections from 127.0.0.2: %d of 20 probes answered" % ok)
    sys.exit(0 if ok == 20 else 1)
if mode == "many":
    ok = probes_during(["127.0.0.%d" % (10 + i // 4) for i in range(128)])
    print("32 addresses x 4 dripping connections: %d of 20 probes answered" % ok)
    sys.exit(0 if ok == 20 else 1)
s = dial("127.0.0.2", timeout=10)
t0 = time.monotonic()
cut = None
for i in range(40):
    try:
        s.sendall(HEAD[i:i + 1])
        s.settimeout(0.5)
        if s.recv(64) == b"":
            cut = time.monotonic() - t0
            break
    except socket.timeout:
        continue
    except OSError:
        cut = time.monotonic() - t0
        break
print("a connection dripping a byte every 0.5 s: %s" %
      ("cut after %.1f s" % cut if cut else "not cut in 20 s"))
sys.exit(0 if cut is not None and 1.5 <= cut <= 5.0 else 1)
PYEOF
}

up() { "$PY" -c 'import sys, urllib.request; urllib.request.urlopen("http://127.0.0.1:%s/healthz" % sys.argv[1], timeout=2)' "$HPORT" 2>/dev/null; }
until_true 20 up
out=$(flood one) || fail "$out"
pass "$out"
out=$(flood cut) || fail "$out"
pass "$out"
out=$(flood many) || fail "$out"
pass "$out"
kill -0 "$NODE_PID" || fail "gslice-node exited"
