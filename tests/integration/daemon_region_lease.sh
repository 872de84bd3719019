#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A container's root against gsliced through a file lease on its own memory region (the second
# attack run, issue 16). A container slice's region is root's and 0666, bind-mounted read-write
# into the container; its root took a write lease on it (fcntl F_SETLEASE) and ignored the
# break: gsliced's next open of the region waited out the kernel's lease-break-time (45 s) on
# every look, and every slice's HELLO, token and `gslice status` waited with it. Now gsliced
# holds each container slice's region open for the slice's life, so the kernel grants no lease
# on it, and opens the region with O_NONBLOCK, so a lease taken while gsliced was down (a
# restart) fails that open at once instead of stalling the loop.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a container's root, its mounts)"
unshare --pid --fork --mount true 2>/dev/null || skip "cannot make mount and pid namespaces here"
PYTHON=$(command -v python3) || skip "no python3"
K="$TBIN/daemon_k8s"
H="$T/hook/gsliced.sock"

cat >"$T/lease.py" <<'PY'
# Takes a write lease on the region as often as the kernel grants one, ignoring the break notice,
# for SECS seconds; prints how many it got.
import fcntl, os, signal, sys, time
F_SETLEASE = 1024
path, secs = sys.argv[1], float(sys.argv[2])
signal.signal(signal.SIGIO, lambda *a: None)
end, taken = time.time() + secs, 0
open(sys.argv[3], "w").close()
while time.time() < end:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.fcntl(fd, F_SETLEASE, fcntl.F_WRLCK)
        taken += 1
        while time.time() < end:
            time.sleep(0.1)
    except OSError:
        time.sleep(0.01)
    os.close(fd)
print(taken, flush=True)
PY

# container LEASE_SECS: the container's root, its region file mounted as gslice-node mounts it.
container() {
  mkdir -p "$T/c/run/gslice/slice"
  : >"$T/c/run/gslice/slice/memory.region"
  rm -f "$T/ready"
  unshare --mount --pid --fork sh -c "mount --bind '$dir/memory.region' '$T/c/run/gslice/slice/memory.region' &&
    exec '$PYTHON' '$T/lease.py' '$T/c/run/gslice/slice/memory.region' $1 '$T/ready'" >"$T/taken" &
  CPID=$!
  for _ in $(seq 200); do [ -e "$T/ready" ] && return 0; sleep 0.05; done
  fail "the container did not start"
}
# answers WHAT: gslice status and a hook's HELLO of the victim slice, each within 2 s.
answers() {
  local t0 t1
  t0=$(date +%s%N)
  timeout 10 "$BIN/gslice" status >/dev/null 2>&1 || fail "$1: gslice status did not answer"
  timeout 10 "$K" hello "$H" hook "$vid" "$vn" >/dev/null 2>&1 || fail "$1: the victim's hook HELLO failed"
  t1=$(date +%s%N)
  [ $(((t1 - t0) / 1000000)) -lt 2000 ] || fail "$1: status and HELLO took $(((t1 - t0) / 1000000)) ms"
}

start_daemon
"$K" register "$GSLICE_SOCKET" atk 0x1 30 30 1073741824 3 >"$T/a" || fail "register: $(cat "$T/a")"
"$K" register "$GSLICE_SOCKET" victim 0x1 30 30 1073741824 3 >"$T/v" || fail "register: $(cat "$T/v")"
dir=$(sed -n 's/.* dir=\(.*\)$/\1/p' "$T/a")
vid=$(sed -n 's/^id=\([0-9]*\) .*/\1/p' "$T/v")
vn=$(sed -n 's/.* nonce=\([0-9a-f]*\) .*/\1/p' "$T/v")
[ -f "$dir/memory.region" ] && [ -n "$vid" ] || fail "no container slice to attack: $(cat "$T/a" "$T/v")"

# While gsliced runs: no lease is granted, and gsliced answers throughout.
container 6
for i in 1 2 3; do
  answers "beside the container's lease attempts ($i)"
  sleep 1.2
done
wait "$CPID"
[ "$(cat "$T/taken")" = 0 ] || fail "the container got $(cat "$T/taken") lease(s) on its region while gsliced ran"
pass "no lease on a container's region while gsliced holds it; status and HELLO answered throughout"

# A lease taken while gsliced was down: the restarted gsliced does not wait on it.
stop_daemon
container 8
sleep 0.5 # the lease is taken while no gsliced holds the file
start_daemon
for i in 1 2 3; do
  answers "after a restart under the container's lease ($i)"
  sleep 1.2
done
kill "$CPID" 2>/dev/null || true
wait "$CPID" 2>/dev/null || true
pass "a restarted gsliced answers at once beside a lease the container took while it was down"
