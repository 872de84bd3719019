#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# One container that makes pid namespaces of its own (unshare --pid inside it, where user
# namespaces are allowed and seccomp does not stop it) still counts as one container on the
# hook socket (the second attack run, issue 16): before, each nested namespace got its own 32
# connections before HELLO (max_hook_pending_per_pidns), 34 of them filled all 1,024 of
# max_hook_clients and another container's hook HELLO failed 39 times of 40. Now a connection
# counts against the outermost pid namespace below gsliced's own (NS_GET_PARENT).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
[ "$(id -u)" = 0 ] || skip "needs root (pid namespaces)"
unshare --pid --fork true 2>/dev/null || skip "cannot make a pid namespace here (unshare --pid)"
PYTHON=$(command -v python3) || skip "no python3"
K="$TBIN/daemon_k8s"
H="$T/hook/gsliced.sock"

cat >"$T/hold.py" <<'PY'
# Holds N connections to the hook socket that never say HELLO, reconnecting as they are closed,
# for SECS seconds.
import select, socket, sys, time
path, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
end, socks = time.time() + secs, []
while time.time() < end:
    while len(socks) < n:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            socks.append(s)
        except OSError:
            s.close()
            break
    r, _, _ = select.select(socks, [], [], 0.02)
    for s in r:
        try:
            d = s.recv(4096)
        except OSError:
            d = b""
        if not d:
            socks.remove(s)
            s.close()
PY

start_daemon --set max_hook_clients=256
"$K" register "$GSLICE_SOCKET" victim 0x1 30 30 1073741824 3 >"$T/v" || fail "register: $(cat "$T/v")"
vid=$(sed -n 's/^id=\([0-9]*\) .*/\1/p' "$T/v")
vn=$(sed -n 's/.* nonce=\([0-9a-f]*\) .*/\1/p' "$T/v")
base=$(ls "/proc/$DAEMON_PID/fd" | wc -l)

# The container: its own pid namespace, and in it 12 more, each holding 32 pending connections.
unshare --pid --fork --mount-proc bash -c "
  for i in \$(seq 12); do unshare --pid --fork '$PYTHON' '$T/hold.py' '$H' 32 8 & done
  wait" &
CPID=$!
sleep 3
most=0
for _ in $(seq 10); do
  n=$(($(ls "/proc/$DAEMON_PID/fd" | wc -l) - base))
  [ "$n" -gt "$most" ] && most=$n
  sleep 0.2
done
ok=0
for _ in $(seq 10); do
  [ "$(timeout 10 "$K" hello "$H" hook "$vid" "$vn" 2>&1)" = ok ] && ok=$((ok + 1))
  sleep 0.05
done
wait "$CPID" 2>/dev/null || true
# 32 held, plus refused ones between their accept and their close: well under the 256 in all that
# the 12 namespaces took before (12 x 32, capped by max_hook_clients).
[ "$most" -le 128 ] || fail "one container with 12 nested pid namespaces held $most connections before HELLO (its bound is 32)"
[ "$ok" = 10 ] || fail "another container's hook HELLO succeeded $ok times of 10 beside it"
pass "12 nested pid namespaces of one container hold at most $most pending connections together; another container's HELLO 10 of 10"
