#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# One container must not take gsliced's hook socket from the others. Its limits were counted per
# uid, which a container chooses (and uid 0 is every root container's), and a connection that had
# said a valid HELLO of its own slice never timed out: 4 uids x 256 connections of one container
# filled all of max_hook_clients and another container's hook was refused (it then paced itself
# at its own limit: the node's guaranteed shares were gone). Now the hook socket counts no uid:
# after HELLO a slice holds at most max_hook_clients_per_slice connections, before it a pid
# namespace (a container) at most max_hook_pending_per_pidns, each at most a quarter of
# max_hook_clients. Here one container (its own pid namespace, several uids) opens hooks'
# connections and silent ones until refused; another container's hook is still accepted and
# takes tokens; a silent connection is closed after hook_hello_timeout_ms.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a container's root, several uids)"
unshare --pid --fork --mount-proc true 2>/dev/null || skip "cannot make a pid namespace here (unshare --pid)"
K="$TBIN/daemon_k8s"
H="$T/hook/gsliced.sock"
chmod 0755 "$T" # the container's other uids reach the hook socket (its dir 0755, it 0666)
ulimit -n 4096 2>/dev/null || true
# The defaults (max_hook_clients 1024, 64 a slice, 32 pending a container), but silent
# connections kept long enough to count them.
start_daemon --set hook_hello_timeout_ms=30000
"$K" register "$GSLICE_SOCKET" atk 0x1 30 30 1073741824 3 >"$T/a" || fail "register: $(cat "$T/a")"
"$K" register "$GSLICE_SOCKET" victim 0x1 30 30 1073741824 3 >"$T/v" || fail "register: $(cat "$T/v")"
aid=$(sed -n 's/^id=\([0-9]*\) .*/\1/p' "$T/a")
an=$(sed -n 's/.* nonce=\([0-9a-f]*\) .*/\1/p' "$T/a")
vid=$(sed -n 's/^id=\([0-9]*\) .*/\1/p' "$T/v")
vn=$(sed -n 's/.* nonce=\([0-9a-f]*\) .*/\1/p' "$T/v")

# The attacking container: 5 uids, root first, 300 hooks' connections each (HELLO as its own
# slice), then 40 silent ones each; all held 40 s.
cat >"$T/attack.sh" <<'SH'
K=$1 H=$2 id=$3 nonce=$4 T=$5
echo "pidns $(readlink /proc/self/ns/pid)"
"$K" fill "$H" "$id" "$nonce" 0,1001,1002,1003,1004 300 40 >"$T/fill1" &
for _ in $(seq 600); do grep -q '^filled' "$T/fill1" && break; sleep 0.05; done
"$K" fill "$H" 0 0 0,1001,1002,1003,1004 40 40 >"$T/fill2" &
wait
SH
unshare --pid --fork --kill-child --mount-proc bash "$T/attack.sh" "$K" "$H" "$aid" "$an" "$T" >"$T/attack" 2>&1 &
AP=$!
for _ in $(seq 900); do grep -q '^filled' "$T/fill2" 2>/dev/null && break; sleep 0.05; done
cat "$T/attack" "$T/fill1" "$T/fill2"
grep -q '^filled' "$T/fill2" 2>/dev/null || fail "the attack did not settle"
! grep -q "pidns $(readlink /proc/self/ns/pid)" "$T/attack" || fail "the attacker is not in a pid namespace of its own"
hellos=$(awk '/^uid .*: held/ { s += $4 } END { print s }' "$T/fill1")
pending=$(awk '/^uid .*: held/ { s += $4 } END { print s }' "$T/fill2")
echo "the container holds $hellos hooks' connections and $pending silent ones"
expect_eq "hooks' connections of one slice, all uids together" "$hellos" 64
expect_eq "silent connections of one pid namespace, all uids together" "$pending" 32
grep -q "refused -87 slice $aid has 64 connections on gsliced's hook socket.*max_hook_clients_per_slice = 64" "$T/fill1" ||
  fail "the slice's 65th hook was not refused with the bound"
grep -q "HELLO as slice $aid on the hook socket refused" "$T/gsliced.log" || fail "the refusal is not in the log"
grep -q "refusing a connection: pid namespace [0-9]* has 32 connections on gsliced's hook socket that have not said HELLO.*max_hook_pending_per_pidns = 32" \
  "$T/gsliced.log" || fail "the pending refusal is not in the log"

# Another container, root too, meanwhile: its hook's HELLO is accepted and its workload takes
# tokens over the hook socket; its silent connections have their own bound.
cat >"$T/victim.sh" <<'SH'
K=$1 H=$2 id=$3 nonce=$4 HOOK=$5 TBIN=$6 T=$7
echo "hello: $("$K" hello "$H" hook "$id" "$nonce")"
"$K" fill "$H" 0 0 0 4 0 | head -1
GSLICE_SOCKET="$H" GSLICE_SLICE="$id" GSLICE_SLICE_NONCE="$nonce" GSLICE_STATE_DIR="$T/vslice" \
  GSLICE_COMPUTE_LIMIT=30 LD_PRELOAD="$HOOK" "$TBIN/compute_spin" --warmup 0.5 --duration 2 \
  --label victim >"$T/vspin" 2>"$T/vspin.err" || echo "spin failed: $(cat "$T/vspin.err")"
SH
mkdir -p "$T/vslice"
timeout 60 unshare --pid --fork --mount-proc bash "$T/victim.sh" "$K" "$H" "$vid" "$vn" "$HOOK" "$TBIN" "$T" >"$T/victim" 2>&1 ||
  fail "the victim container failed: $(cat "$T/victim")"
cat "$T/victim"
grep -q "^hello: ok$" "$T/victim" || fail "another container's hook was refused: $(cat "$T/victim")"
grep -q "^uid 0: held 4$" "$T/victim" || fail "another container's silent connections were refused"
! grep -q "spin failed" "$T/victim" || fail "the victim's workload failed"
tokens=$("$BIN/gslice" status --json | python3 -c "import json,sys; d=json.load(sys.stdin); print([s['gpus'][0]['tokens_total'] for s in d['slices'] if s['id']==$vid][0])")
[ "$tokens" -gt 0 ] || fail "the victim's hook got no token over the hook socket"
echo "the victim's tokens: $tokens"
"$BIN/gslice" status >/dev/null 2>"$T/err" || fail "the host's CLI was refused: $(cat "$T/err")"
pass "one container holds its slice's 64 and its namespace's 32; another container's hook is served"
kill -9 "$AP" 2>/dev/null || true # unshare --fork ignores SIGTERM; --kill-child ends the rest
wait "$AP" 2>/dev/null || true

# A silent connection on the hook socket is closed after hook_hello_timeout_ms (a hook says HELLO
# as it connects), not after the main socket's hello_timeout_ms.
stop_daemon
start_daemon --set hook_hello_timeout_ms=300 --set hello_timeout_ms=60000
python3 - "$H" >"$T/silent" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(20)
t = time.time()
try:
    got = s.recv(1)
except OSError:
    got = b""
print("closed" if got == b"" else "data", "after %.1f s" % (time.time() - t))
PY
cat "$T/silent"
grep -q "^closed after [0-2]\.[0-9] s" "$T/silent" || fail "a silent hook-socket connection was not closed after hook_hello_timeout_ms: $(cat "$T/silent")"
pass "a silent connection on the hook socket is closed after hook_hello_timeout_ms"

# The bounds must leave the hook socket to more than one container: each at most a quarter.
rc=0
"$BIN/gsliced" --state-dir "$T/d3" --set max_hook_clients=100 --set max_hook_clients_per_slice=30 \
  --print-config >"$T/bad" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "must each be at most a quarter of max_hook_clients" "$T/bad" ||
  fail "a per-slice bound over a quarter of max_hook_clients was taken: $(cat "$T/bad")"
pass "a per-container bound over a quarter of max_hook_clients is refused"
