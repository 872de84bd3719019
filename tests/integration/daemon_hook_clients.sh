#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The hook socket has its own bound on connections (max_hook_clients), apart from the main
# socket's (max_clients). Both used to share max_clients: containers' processes, of any uid and
# each within max_clients_per_user, filled it through the hook socket and the host's CLI,
# gslice run and gslice-node were refused on the main socket. Here the hook socket is flooded
# from several uids past its bound: it keeps max_hook_clients of them and closes the rest; the
# main socket still serves its max_clients, `gslice status` among them; once the flood is gone
# the hook socket serves again. Each uid of the host's pid namespace keeps at most
# max_hook_pending_per_pidns silent connections there (a container's pid namespace as a whole
# does: daemon_hook_containers.sh), so it takes five uids to reach max_hook_clients.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
H="$T/hook/gsliced.sock"
K="$TBIN/daemon_k8s"
[ "$(id -u)" = 0 ] || skip "needs root (five uids reach the hook socket's bound, each within its own)"
uids="0 4241 4242 4243 4244"
chmod 0755 "$T" # the other uids reach the hook socket (the dir is 0755, the socket 0666)
start_daemon --set max_clients=8 --set max_hook_clients=8 --set max_clients_per_user=64 \
  --set max_hook_clients_per_slice=2 --set max_hook_pending_per_pidns=2 \
  --set hello_timeout_ms=60000 --set hook_hello_timeout_ms=60000

# hold SOCK UIDS N WANT: N connections to SOCK from each uid of UIDS (a child each), held; says
# "open K closed C" once WANT of them stay open and the others were closed or refused (an ERROR
# waiting) by the daemon (or after 30 s, whatever they are then), then "held", and keeps them for
# 60 s.
hold() {
  exec python3 - "$@" <<'PY'
import os, socket, sys, time
path, uids, n, want = sys.argv[1], [int(u) for u in sys.argv[2].split()], int(sys.argv[3]), int(sys.argv[4])
socks = []
children = []  # the other uids' connecting children, each alive until its socketpair closes
for uid in uids:
    if os.getuid() == 0 and uid != 0:
        # A child of that uid connects; the parent takes its descriptors over a unix socketpair.
        a, b = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            a.close()
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(n):
                s = socket.socket(socket.AF_UNIX)
                s.connect(path)
                socket.send_fds(b, [b"x"], [s.fileno()])
                s.close()
            # Alive while the parent holds the connections: the daemon closes a hook-socket
            # connection whose peer is gone by the time it is accepted.
            b.recv(1)
            os._exit(0)
        b.close()
        for _ in range(n):
            _, fds, _, _ = socket.recv_fds(a, 1, 1)
            socks.append(socket.socket(fileno=fds[0]))
        children.append(a)
    else:
        for _ in range(n):
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            socks.append(s)
def count():
    o = 0
    for s in socks:
        s.setblocking(False)
        try:
            s.recv(1, socket.MSG_PEEK)  # an ERROR (refused) or the end: the daemon sends no other
        except BlockingIOError:
            o += 1
        except OSError:
            pass
    return o
end = time.time() + 30
while True:
    o = count()
    if (o == want and time.time() > end - 29) or time.time() > end:
        break
    time.sleep(0.1)
print("open %d closed %d" % (o, len(socks) - o), flush=True)
print("held", flush=True)
time.sleep(60)
PY
}

# The flood: 20 connections of each uid, 2 of each of the first four stay (max_hook_clients = 8).
hold "$H" "$uids" 20 8 >"$T/flood" &
F=$!
for _ in $(seq 700); do grep -q held "$T/flood" 2>/dev/null && break; sleep 0.05; done
grep -q held "$T/flood" || fail "the flood did not settle: $(cat "$T/flood")"
cat "$T/flood"
n=$(($(wc -w <<<"$uids") * 20))
grep -q "^open 8 closed $((n - 8))$" "$T/flood" ||
  fail "the hook socket kept another number than max_hook_clients = 8 of $n: $(head -1 "$T/flood")"
grep -q "refusing a connection on the hook socket: 8 clients there already (max_hook_clients)" \
  "$T/gsliced.log" || fail "the refusal on the hook socket is not in the log"

# The main socket meanwhile: its own 8, of which 7 held idle here and `gslice status` the eighth.
"$BIN/gslice" status >"$T/status" 2>"$T/err" ||
  fail "a full hook socket shut the main socket: gslice status: $(cat "$T/err")"
hold "$GSLICE_SOCKET" "$(id -u)" 7 7 >"$T/main" &
M=$!
for _ in $(seq 700); do grep -q held "$T/main" 2>/dev/null && break; sleep 0.05; done
grep -q "^open 7 closed 0$" "$T/main" || fail "the main socket did not keep 7 connections: $(cat "$T/main")"
"$BIN/gslice" status >"$T/status" 2>"$T/err" ||
  fail "the eighth connection on the main socket was refused: $(cat "$T/err")"
pass "a flood on the hook socket stops at max_hook_clients; the main socket serves its max_clients"

# Both bounds count down as connections go: the hook socket serves a newcomer again.
kill "$F" "$M"
wait "$F" "$M" 2>/dev/null || true
ok=""
for _ in $(seq 100); do
  out=$("$K" hello "$H" hook 0 0)
  grep -q "^refused -1 .*named no slice" <<<"$out" && { ok=1; break; }
  sleep 0.1
done
[ -n "$ok" ] || fail "the hook socket does not answer once the flood is gone: $out"
pass "the hook socket serves again once its connections close"
