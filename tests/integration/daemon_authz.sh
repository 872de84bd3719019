#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Who may change a slice (issue 8, docs/security.md): a slice's own processes may lower its
# limits but never raise them, whoever they run as (a workload inside --memory 512MiB
# --compute 10 ran `gslice set $GSLICE_SLICE --memory none --compute 60 --priority high`, and it
# succeeded); an owner who is not an admin may lower, not raise; admin_group's members may raise;
# one non-admin uid's slices request at most max_compute_per_user of a GPU and cap at most
# max_memory_per_user.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
source "$GSLICE_SRC/tests/integration/lib_users.sh"

new_user U
new_user ADM
new_group G
start_daemon --set admin_group="$G"
G_="$BIN/gslice"
# slice_field NAME KEY: a slice's JSON field from status
slice_json() { "$G_" status --json | grep -o "\"name\":\"$1\"[^]]*" ; }

# 1. Root inside its own slice: raising refused, the slice unchanged; lowering is fine.
out=$(gsrun --name in --memory 512MiB --compute 10 -- bash -c \
  '"$0" set "$GSLICE_SLICE" --memory none --compute 60 --priority high 2>&1; echo "rc=$?"; \
   "$0" status --json | grep -o "\"name\":\"in\"[^]]*"' "$G_")
echo "$out"
grep -q "rc=0" <<<"$out" && fail "a slice's own process raised its limits: $out"
grep -q "slice [0-9]*'s own processes may lower its limits, never raise them" <<<"$out" ||
  fail "no clear refusal: $out"
grep -q '"compute_request_percent":10,' <<<"$out" || fail "the request changed: $out"
grep -q '"priority":"normal"' <<<"$out" || fail "the priority changed: $out"
out=$(gsrun --name in2 --memory 512MiB --compute 10 -- bash -c \
  '"$0" set "$GSLICE_SLICE" --compute 5 --memory 256MiB 2>&1; echo "rc=$?"' "$G_")
grep -q "rc=0" <<<"$out" || fail "a slice's own process could not lower its limits: $out"
pass "a slice's own process may lower its limits, never raise them"

# ... nor from a detached, environment-scrubbed grandchild (setsid, double fork, no GSLICE_*):
# gslice run is a subreaper, so the process stays below it.
out=$(gsrun --name in3 --compute 10 -- bash -c \
  'setsid -f env -u GSLICE_SLICE -u GSLICE_SLICE_NONCE -u LD_PRELOAD "$0" set "$1" --compute 60 \
     >"$2" 2>&1; sleep 1; cat "$2"' "$G_" in3 "$T/detached")
echo "$out"
grep -q "own processes may lower its limits, never raise them" <<<"$out" ||
  fail "a detached process of the slice raised it: $out"
pass "a detached process without the slice's environment is still the slice's"

# ... nor from 300 nested processes below it (more than the daemon's walk up its ancestors):
# a chain too long to follow is taken for inside. Each level a bash waiting for the next.
cat >"$T/deep.sh" <<'SH'
if [ "$1" -gt 0 ]; then n=$(($1 - 1)); shift; bash "$0" "$n" "$@"; exit $?; fi
shift
exec "$@"
SH
out=$(gsrun --name in5 --compute 10 -- bash -c   'env -u GSLICE_SLICE -u GSLICE_SLICE_NONCE -u LD_PRELOAD bash "$2" 300 "$0" set "$1"      --compute 60 2>&1; echo "rc=$?"' "$G_" in5 "$T/deep.sh")
echo "$out"
grep -q "rc=0" <<<"$out" && fail "a process 300 levels below the slice's runner raised it: $out"
grep -q "own processes may lower its limits, never raise them" <<<"$out" ||
  fail "no clear refusal 300 levels below the slice's runner: $out"
pass "a process too deep to walk up from is still taken for the slice's"

# ... nor remove it (its processes would run unscheduled): UNREGISTER by hand, as no CLI sends it.
# The protocol version from its one definition (a number here went stale at each bump).
ver=$(sed -n 's/^#define GS_PROTO_VERSION \([0-9]*\)u.*/\1/p' "$GSLICE_SRC/src/common/proto.h")
out=$(gsrun --name in4 --compute 10 -- /usr/bin/python3 - "$GSLICE_SOCKET" "$ver" <<'PY'
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
def call(t, body):
    s.sendall(struct.pack("<IHHII", 0x434c5347, int(sys.argv[2]), t, 16 + len(body), 1) + body)
    h = s.recv(16, socket.MSG_WAITALL); n = struct.unpack("<IHHII", h)[3]
    b = s.recv(n - 16, socket.MSG_WAITALL) if n > 16 else b""
    return struct.unpack("<H", h[6:8])[0], b
call(1, struct.pack("<IIiIQ", 1, 0, os.getpid(), 0, 0))               # HELLO as a CLI
t, b = call(7, struct.pack("<IIQ", int(os.environ["GSLICE_SLICE"]), 0, 0))  # UNREGISTER
print("type=%d code=%d %s" % (t, struct.unpack("<i", b[:4])[0] if t == 3 else 0,
                              b[8:].split(b"\0")[0].decode() if t == 3 else ""))
PY
)
echo "$out"
grep -q "type=3 code=-1 slice [0-9]*'s own processes may not remove it" <<<"$out" ||
  fail "a slice's own process removed it, or no clear refusal: $out"
pass "a slice's own process cannot remove it"

# 2. An owner who is not an admin: lowering yes, raising no.
as_user "$U" "$G_" run --name u1 --compute 20 --memory 1GiB -- sleep 60 >/dev/null 2>&1 &
for _ in $(seq 100); do slice_json u1 >/dev/null && break; sleep 0.05; done
slice_json u1 >/dev/null || fail "U's slice did not come up"
as_user "$U" "$G_" set u1 --compute 10 --memory 512MiB || fail "U could not lower its own slice"
if as_user "$U" "$G_" set u1 --compute 30 2>"$T/err"; then fail "U raised its own slice"; fi
grep -q "needs root, gsliced's user or admin_group ($G)" "$T/err" || fail "no clear refusal: $(cat "$T/err")"
if as_user "$U" "$G_" set u1 --priority high 2>/dev/null; then fail "U raised its priority"; fi
if as_user "$U" "$G_" set u1 --memory none 2>/dev/null; then fail "U removed its memory cap"; fi
pass "an owner may lower, not raise"

# 3. admin_group: a member (as a supplementary group) raises U's slice; a non-member cannot.
if as_user "$ADM" "$G_" set u1 --compute 40 2>/dev/null; then fail "a non-member raised U's slice"; fi
as_user_in "$ADM" "$G_GID" "$G_" set u1 --compute 40 --priority high || fail "admin_group member could not raise"
slice_json u1 | qgrep '"compute_request_percent":40,' || fail "the raise did not apply: $(slice_json u1)"
pass "admin_group members may raise"

# 4. Per-user bounds (max_compute_per_user = 50 by default): U has 40% of GPU 0; 20% more is
# refused with the reason; root (an admin) is not bounded.
if as_user "$U" "$G_" run --name u2 --compute 20 -- true 2>"$T/err"; then fail "U went over 50%"; fi
grep -q "max_compute_per_user = 50" "$T/err" || fail "no clear refusal: $(cat "$T/err")"
as_user "$U" "$G_" run --name u3 --compute 10 -- true || fail "U could not use what is left of its 50%"
gsrun --name r1 --compute 55 -- true || fail "root was held to the per-user bound"
pass "one user's slices request at most max_compute_per_user"

# 5. Root in a container (another pid namespace; containers often run as uid 0 and get the
# socket mounted) is not an admin: it cannot touch the host's slices, and registers none.
if unshare --pid --fork --mount-proc true 2>/dev/null; then
  gsrun --name h1 --compute 10 -- sleep 60 >/dev/null 2>&1 &
  for _ in $(seq 100); do slice_json h1 >/dev/null && break; sleep 0.05; done
  if unshare --pid --fork --mount-proc "$G_" set h1 --compute 40 2>"$T/err"; then
    fail "root in another pid namespace raised a host slice"
  fi
  grep -q "no such slice for this user" "$T/err" || fail "no refusal: $(cat "$T/err")"
  if unshare --pid --fork --mount-proc "$G_" set h1 --compute 5 2>/dev/null; then
    fail "root in another pid namespace changed a host slice"
  fi
  slice_json h1 | qgrep '"compute_request_percent":10,' || fail "h1 changed: $(slice_json h1)"
  # Nor from more ancestors than the daemon walks (the sixth attack run: 300 forks deep in a
  # container lowered h1 to 1%: a chain too deep to walk was taken for inside every slice).
  if unshare --pid --fork --mount-proc "$TBIN/deep_fork" 300 "$G_" set h1 --compute 1 2>/dev/null; then
    fail "root in another pid namespace, 300 forks deep, changed a host slice"
  fi
  slice_json h1 | qgrep '"compute_request_percent":10,' || fail "h1 changed: $(slice_json h1)"
  n0=$(nslices)
  # No REGISTER from a container, whatever its uid (issue 16): before, root in a container
  # registered ordinary slices within max_compute_per_user, beside the ones the cluster placed.
  if unshare --pid --fork --mount-proc "$G_" run --name c1 --compute 5 -- true 2>"$T/err"; then
    fail "root in another pid namespace registered a slice"
  fi
  grep -q "no REGISTER from a container" "$T/err" || fail "no clear refusal: $(cat "$T/err")"
  [ "$(nslices)" -eq "$n0" ] || fail "a slice was left by the refused REGISTER"
  # A slice's own process in a container (below the host's runner): lowering works, raising
  # does not.
  out=$(gsrun --name c2 --compute 10 -- unshare --pid --fork --mount-proc bash -c \
    '"$0" set c2 --compute 5 >/dev/null && echo lowered; "$0" set c2 --compute 20 || echo refused' \
    "$G_" 2>&1)
  grep -q lowered <<<"$out" || fail "a container's slice could not lower itself: $out"
  grep -q "refused by gsliced: slice [0-9]*'s own processes may lower its limits" <<<"$out" ||
    fail "a container's slice raised itself: $out"
  pass "root in another pid namespace is not an admin"
else
  echo "skip: cannot make a pid namespace here (unshare --pid): root-in-a-container not checked"
fi

stop_daemon
start_daemon --set max_memory_per_user=2147483648
if as_user "$U" "$G_" run --name m1 -- true 2>"$T/err"; then fail "U ran without a memory cap"; fi
grep -q "must give its slices a memory cap" "$T/err" || fail "no clear refusal: $(cat "$T/err")"
as_user "$U" "$G_" run --name m2 --memory 1GiB -- true || fail "U could not cap 1GiB beside its 512MiB"
if as_user "$U" "$G_" run --name m3 --memory 2GiB -- true 2>"$T/err"; then fail "U capped 2.5GiB in all"; fi
grep -q "max_memory_per_user = 2GiB" "$T/err" || fail "no clear refusal: $(cat "$T/err")"
pass "one user's slices cap at most max_memory_per_user"
