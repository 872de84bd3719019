#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A container's root against gsliced, with the mounts a container gets (issue 16 item 1). Every
# gslice container had gsliced's socket dir mounted read-write: its root replaced the socket
# (gslice-node then took a fake daemon's word for a slice dir) and REGISTERed slices of its own.
# Now containers get only the hook socket's dir (<socket dir>/hook, gs_hook_socket_path), read-
# only; a connection there may only HELLO as the hook of a container (any-uid) slice with that
# slice's nonce and then take tokens. From a pid namespace of its own, with that dir bound
# read-only as gslice-node mounts it: the socket cannot be removed or replaced (EROFS);
# REGISTER, SET, UNREGISTER, STATUS (even after the slice's own HELLO: a container reads its
# slice.env), HELLO as CLI or without a slice are refused there (-EPERM);
# HELLO with another nonce is refused; REGISTER over the main socket from that pid namespace is
# refused; a real hook of the container's slice still takes tokens there, held to its limit. The
# hook dir is the daemon's own: a link in its place is replaced, another user's dir refused.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a container's root, its mounts)"
unshare --pid --fork --mount-proc true 2>/dev/null || skip "cannot make a pid namespace here (unshare --pid)"
K="$TBIN/daemon_k8s"
H="$T/hook/gsliced.sock"
# What an old deployment's container root could have left in the socket's dir (mounted read-write
# then): a link where the hook dir goes is replaced by the daemon's own dir, and nothing is made
# through it; a dir of another user there is refused.
mkdir "$T/elsewhere"
ln -s "$T/elsewhere" "$T/hook"
if id nobody >/dev/null 2>&1; then
  mkdir "$T/foreign"
  chown nobody "$T/foreign"
  rc=0
  timeout 10 "$BIN/gsliced" --state-dir "$T/d2" --socket "$T/d2.sock" --foreground \
    --set hook_socket="$T/foreign/h.sock" >"$T/foreign.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "a hook socket dir of another user was taken (rc $rc): $(cat "$T/foreign.out")"
  grep -q "foreign belongs to uid $(id -u nobody), not to gsliced's" "$T/foreign.out" ||
    fail "no clear refusal: $(cat "$T/foreign.out")"
  [ ! -e "$T/foreign/h.sock" ] || fail "a socket was made in another user's dir"
fi
start_daemon
[ -d "$T/hook" ] && [ ! -L "$T/hook" ] || fail "the link in place of the hook dir was not replaced"
[ -z "$(ls -A "$T/elsewhere")" ] || fail "the daemon made something through the link: $(ls -A "$T/elsewhere")"

# The hook socket: its own dir, the daemon's, 0755; the socket 0666.
[ -S "$H" ] || fail "no hook socket at $H"
expect_eq "hook dir mode" "$(stat -c '%a %u' "$T/hook")" "755 0"
expect_eq "hook socket mode" "$(stat -c '%a' "$H")" 666

# gslice-node's slice for a container: held, any uid, hard 30%.
"$K" register "$GSLICE_SOCKET" ctr 0x1 30 30 1073741824 3 >"$T/reg" || fail "register: $(cat "$T/reg")"
id=$(sed -n 's/^id=\([0-9]*\) .*/\1/p' "$T/reg")
nonce=$(sed -n 's/.* nonce=\([0-9a-f]*\) .*/\1/p' "$T/reg")
dir=$(sed -n 's/.* dir=\(.*\)$/\1/p' "$T/reg")
n0=$(nslices)

# The container: a pid and mount namespace of its own, the hook dir bound read-only where the
# container sees it, its slice's dir bound read-write.
mkdir -p "$T/c/hook" "$T/c/slice"
cat >"$T/c/inside.sh" <<'SH'
set -u
T=$1 K=$2 id=$3 nonce=$4 dir=$5 HOOK=$6 TBIN=$7
mount --bind "$T/hook" "$T/c/hook" && mount -o remount,bind,ro "$T/c/hook" || exit 77
mount --bind "$dir" "$T/c/slice" || exit 77
C="$T/c/hook/gsliced.sock"
echo "pidns $(readlink /proc/self/ns/pid)"
rm -f "$C" 2>"$T/c/rm.err" && echo "removed the socket"
grep -q "Read-only file system" "$T/c/rm.err" && echo "rm: EROFS"
ln -s /etc/passwd "$T/c/hook/evil.sock" 2>/dev/null && echo "planted a link"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$T/c/hook/x.sock" 2>/dev/null && echo "bound a socket"
for what in register set unregister status; do echo "hook-socket $what: $("$K" hooked "$C" "$what" "$id" "$nonce")"; done
echo "hook-socket hello cli then register: $("$K" ask "$C" register)"
for what in register status; do echo "hook-socket raw $what: $("$K" raw "$C" "$what")"; done
echo "hook-socket hello cli: $("$K" hello "$C" cli 0 0)"
echo "hook-socket hello hook noslice: $("$K" hello "$C" hook 0 0)"
echo "hook-socket hello hook badnonce: $("$K" hello "$C" hook "$id" 0123456789abcdef)"
echo "main-socket register: $("$K" ask "$T/gsliced.sock" register)"
# The container's real workload: the hook, told its slice by slice.env's values, on the hook
# socket (as gslice-node's Allocate sets GSLICE_SOCKET).
GSLICE_SOCKET="$C" GSLICE_SLICE="$id" GSLICE_SLICE_NONCE="$nonce" GSLICE_STATE_DIR="$T/c/slice" \
  GSLICE_COMPUTE_LIMIT=30 LD_PRELOAD="$HOOK" "$TBIN/compute_spin" --warmup 1 --duration 3 \
  --label ctr >"$T/c/spin" 2>"$T/c/spin.err" || echo "spin failed: $(cat "$T/c/spin.err")"
SH
rc=0
unshare --pid --fork --mount-proc bash "$T/c/inside.sh" "$T" "$K" "$id" "$nonce" "$dir" "$HOOK" "$TBIN" >"$T/c/out" 2>&1 || rc=$?
[ "$rc" = 77 ] && skip "cannot bind-mount here"
cat "$T/c/out"
[ "$rc" = 0 ] || fail "the container's script failed ($rc)"
qgrep "pidns" "$T/c/out" && ! grep -q "pidns $(readlink /proc/self/ns/pid)" "$T/c/out" || fail "not in a pid namespace of its own"
! qgrep "removed the socket" "$T/c/out" || fail "the container removed the hook socket"
qgrep "rm: EROFS" "$T/c/out" || fail "removing the socket did not fail with EROFS"
! qgrep "planted a link\|bound a socket" "$T/c/out" || fail "the container wrote in the hook dir"
[ -S "$H" ] || fail "the hook socket is gone"
for what in register set unregister status; do
  qgrep "^hook-socket $what: refused -1 .*refused on gsliced's hook socket" "$T/c/out" ||
    fail "$what over the hook socket not refused with -EPERM"
done
for what in register status; do
  qgrep "^hook-socket raw $what: refused -1 " "$T/c/out" || fail "$what before HELLO over the hook socket not refused"
done
qgrep "^hook-socket hello cli then register: hello refused -1 " "$T/c/out" || fail "HELLO as CLI before REGISTER on the hook socket not refused"
qgrep "^hook-socket hello cli: refused -1 .*serves only the hooks of a container's slice" "$T/c/out" || fail "HELLO as CLI on the hook socket not refused"
qgrep "^hook-socket hello hook noslice: refused -1 .*named no slice" "$T/c/out" || fail "HELLO without a slice on the hook socket not refused"
qgrep "^hook-socket hello hook badnonce: refused -116 " "$T/c/out" || fail "HELLO with another nonce not refused"
qgrep "^main-socket register: refused -1 no REGISTER from a container" "$T/c/out" || fail "REGISTER over the main socket from a container not refused"
[ "$(nslices)" -eq "$n0" ] || fail "the container added or removed slices: $(nslices), was $n0"
pass "a container's root can neither replace the hook socket nor do more than a hook over it"

# Its hook took tokens from the daemon over the hook socket (a hook without a daemon paces
# itself, so tokens are the proof), and ran held to its hard 30%.
! qgrep "spin failed" "$T/c/out" || fail "the container's workload failed"
cat "$T/c/spin"
tokens=$("$BIN/gslice" status --json | python3 -c "import json,sys; d=json.load(sys.stdin); print([s['gpus'][0]['tokens_total'] for s in d['slices'] if s['id']==$id][0])")
[ "$tokens" -gt 0 ] || fail "the container's hook got no token over the hook socket"
echo "tokens over the hook socket: $tokens"
share_ceiling_floor "a container slice's hook on the hook socket, hard 30%" "$(pct "$T/c/spin")" 20 38 "$T/c/spin"
pass "a container slice's hook is served on the hook socket"

# Containers' connections on the hook socket (uid 0, as often as not) count against no uid: not
# against root's on the main socket (gslice-node's), nor against another root container's hooks
# (daemon_hook_containers.sh: the hook socket's bounds are per slice and per pid namespace).
stop_daemon
start_daemon --set max_clients_per_user=4 --set hook_hello_timeout_ms=20000
python3 - "$H" >"$T/held" <<'PY' &
import socket, sys, time
socks = []
for _ in range(6):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    socks.append(s)
print("held", flush=True)
time.sleep(15)
PY
HP=$!
for _ in $(seq 200); do grep -q held "$T/held" 2>/dev/null && break; sleep 0.05; done
grep -q held "$T/held" || fail "could not hold 6 connections on the hook socket"
"$BIN/gslice" status >/dev/null 2>"$T/err" || fail "6 hook-socket connections of uid 0 shut root out of the main socket: $(cat "$T/err")"
out=$("$K" hello "$H" hook "$id" "$nonce")
[ "$out" = ok ] || fail "a seventh hook-socket connection of uid 0 was refused (max_clients_per_user = 4 is the main socket's): $out"
kill "$HP" 2>/dev/null || true
pass "hook-socket connections count against no uid, apart from the main socket's"
