#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# What a container's root can do with the mounts Allocate gives (issue 16 items 1, 2, 8, 10):
# containers start in their own mount and pid namespaces with real bind mounts of exactly what
# Allocate returned (tests/k8s/kubelet.py). As the container's root: gsliced's socket cannot be
# deleted or replaced (read-only), REGISTER through it is refused; nothing can be planted in the
# slice directory (read-only), and a refused container that tried restarts cleanly with no host
# file changed (a link slice.env.tmp is not followed, a directory slice.env does not fail
# PreStartContainer); the memory region is the one file it may write. A node-local user (nobody) reads no slice.env and no region. An assignment not
# signed for the pod is refused; an uneven split over two GPUs is registered per GPU exactly.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"
export TBIN T BIN

node_up
in_ns || { echo "SKIP: containers cannot get their own namespaces here (root and unshare needed)"; exit 77; }
GiB=1073741824
nsl() { "$BIN/gslice" status --json | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["slices"]))'; }

# A stand-in for a host file a root program must never write (the issue's etc/passwd).
printf 'root:x:0:0::/root:/bin/sh\n' >"$T/host-passwd"
cp "$T/host-passwd" "$T/host-passwd.orig"

# The attacker's container: every step as its root, each result a line in $T/<name>.out.
cat >"$T/attack.sh" <<'A'
#!/bin/bash
out=$1
try() { if bash -c "$1" 2>>"$out.err"; then echo "done: $1" >>"$out"; else echo "refused: $1" >>"$out"; fi; }
echo "uid $(id -u) pidns $(readlink /proc/self/ns/pid)" >>"$out"
try "rm -f /run/gslice/daemon/gsliced.sock"
try "touch /run/gslice/daemon/evil.sock"
try "mv /run/gslice/daemon /run/gslice/daemon.old"
try "ln -s $T/host-passwd /run/gslice/slice/slice.env.tmp"
try "rm -f /run/gslice/slice/slice.env && mkdir /run/gslice/slice/slice.env"
try "echo GSLICE_SLICE=1 >/run/gslice/slice/slice.env"
try "ln -s $T/host-passwd /run/gslice/slice/evil"
try "[ -w /run/gslice/slice/memory.region ] && : >>/run/gslice/slice/memory.region"
# REGISTER through the socket it was given: a slice of its own, 50% and no memory cap.
try "GSLICE_SOCKET=/run/gslice/daemon/gsliced.sock LD_PRELOAD= $BIN/gslice run --compute 50 --name evil -- true"
echo end >>"$out"
A
chmod +x "$T/attack.sh"

# 1. A refused container (its pod has no assignment) tries everything, then restarts.
npod --name refused --no-assign main="$U0:$GiB:10" >/dev/null
kl POST /pods '{"namespace":"default","name":"refused","containers":[{"name":"main","devices":1,"command":["'"$T/attack.sh"'","'"$T/refused.out"'"]}]}' >/dev/null
until_true 20 grep -qs "^end" "$T/refused.out"
cat "$T/refused.out"
for op in "rm -f /run/gslice/daemon/gsliced.sock" "touch /run/gslice/daemon/evil.sock" \
  "mv /run/gslice/daemon" "ln -s $T/host-passwd /run/gslice/slice/slice.env.tmp" \
  "rm -f /run/gslice/slice/slice.env" "echo GSLICE_SLICE=1" "ln -s $T/host-passwd /run/gslice/slice/evil"; do
  grep -qF "refused: $op" "$T/refused.out" || fail "the container's root could: $op"
done
grep -q "Read-only file system" "$T/refused.out.err" || fail "not refused as read-only: $(cat "$T/refused.out.err")"
[ -S "$T/run/gsliced.sock" ] && [ -S "$T/run/hook/gsliced.sock" ] || fail "gsliced's sockets are gone"
expect_eq "slices after REGISTER through the container's socket" "$(nsl)" 0
pass "the container's root: the socket dir and the slice dir are read-only, REGISTER is refused"

# Its restart: a fresh start directory, nothing of the old one followed; no host file written.
f0=$(kstate "d['prestart_failures']")
r=$(kl POST /pods/default/refused/restart '{"container":"main","command":["'"$T/attack.sh"'","'"$T/refused2.out"'"]}')
expect_eq "restart started" "$(jget "$r" "d['started']")" True
expect_eq "PreStartContainer failures at the restart" "$(kstate "d['prestart_failures']")" "$f0"
until_true 20 grep -qs "^end" "$T/refused2.out"
cmp -s "$T/host-passwd" "$T/host-passwd.orig" || fail "a host file was written: $(cat "$T/host-passwd")"
expect_eq "start directories of the slot" "$(ls "$NSTATE/starts" | wc -l)" 1
pass "a refused container's restart: no host file changed, no PreStartContainer failure"

# 2. An assigned container: the same, and its slice works (the region is its one writable file).
npod --name ok main="$U0:$GiB:30/30" >/dev/null
kl POST /pods '{"namespace":"default","name":"ok","containers":[{"name":"main","devices":1,"command":["bash","-c","'"$T/attack.sh"' '"$T/ok.out"' && exec '"$TBIN"'/hook_client_linked --lookup link --path alloc --chunk 64MiB --script \"fill;info\""]}]}' >/dev/null
until_true 20 grep -qs "^fill" "$T/default_ok_main.log"
cat "$T/ok.out"
grep -qF "done: [ -w /run/gslice/slice/memory.region ]" "$T/ok.out" || fail "the region is not writable in the container"
grep -qF "refused: GSLICE_SOCKET=/run/gslice/daemon/gsliced.sock" "$T/ok.out" || fail "REGISTER through the container's socket was not refused"
grep -qF "refused: rm -f /run/gslice/daemon/gsliced.sock" "$T/ok.out" || fail "the socket could be deleted"
n=$(sed -n 's/^fill n=\([0-9]*\).*/\1/p' "$T/default_ok_main.log")
[ -n "$n" ] && [ "$n" -le 16 ] && [ "$n" -ge 10 ] || fail "the slice's cap did not hold: filled $n x 64 MiB of 1 GiB: $(cat "$T/default_ok_main.log")"
expect_eq "slices" "$(slice_names)" "['default.ok.main']"
pass "an assigned container: its slice holds (filled $n x 64 MiB of 1 GiB), nothing else is writable"

# 3. A node-local user reaches no slice.env and no region (the trees above them are 0700).
chmod 0755 "$T"
id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null || { skip_part "no user nobody or setpriv"; nobody=; }
if [ -n "${nobody-x}" ]; then
  # What the kubelet mounts (the host paths Allocate gave), and where those lead.
  files=$("$PY" - "$NSTATE/alloc" <<'PYEOF'
import glob, os, sys
fs = set()
for p in glob.glob(sys.argv[1] + "/*/slice.env") + glob.glob(sys.argv[1] + "/*/memory.region") + \
        glob.glob(sys.argv[1] + "/*.region"):
    fs.add(p)
    fs.add(os.path.realpath(p))
print("\n".join(sorted(fs)))
PYEOF
)
  [ "$(grep -c "slice.env$" <<<"$files")" -ge 2 ] && [ "$(grep -c "region$" <<<"$files")" -ge 2 ] || fail "no slice.env or region found: $files"
  while read -r f; do
    setpriv --reuid nobody --regid nogroup --clear-groups cat "$f" >/dev/null 2>&1 && fail "user nobody read $f"
    setpriv --reuid nobody --regid nogroup --clear-groups sh -c ": >>'$f'" 2>/dev/null && fail "user nobody may write $f"
  done <<<"$files"
  for d in "$NSTATE" "$NSTATE/records" "$NSTATE/alloc" "$NSTATE/starts"; do
    expect_eq "mode of $d" "$(stat -c %a "$d")" 700
  done
  expect_eq "records' mode" "$(stat -c %a "$NSTATE"/records/* | sort -u)" 600
  pass "user nobody reads no slice.env and no region; state dirs 0700, records 0600"
fi
chmod 0700 "$T"

# 4. An assignment not signed for the pod: refused, nothing registered.
npod --name unsigned --no-sign main="$U1:$GiB:10/10" >/dev/null
kl POST /pods '{"namespace":"default","name":"unsigned","containers":[{"name":"main","devices":1,"command":["'"$TBIN"'/compute_spin","--duration","1"]}]}' >/dev/null
until_true 20 grep -qs "compute_spin:" "$T/default_unsigned_main.log"
grep -q "no GPU slice: pod default/unsigned: gslice.io/assigned is not the extender's" "$T/default_unsigned_main.log" ||
  fail "unsigned: $(cat "$T/default_unsigned_main.log")"
expect_eq "slices" "$(slice_names)" "['default.ok.main']"
pass "an unsigned assignment is refused"

# 5. 31% and 3 GiB over two GPUs (16% + 15%, 1.5 GiB each): each GPU gets its own part.
npod --name split main="$U0:$((3 * GiB / 2)):16,$U1:$((3 * GiB / 2)):15/40" >/dev/null
kl POST /pods '{"namespace":"default","name":"split","containers":[{"name":"main","devices":2,"command":["sleep","60"]}]}' >/dev/null
two() { [ "$(nsl)" = 2 ]; }
until_true 20 two
got=$("$BIN/gslice" status --json | "$PY" -c '
import json, sys
for s in json.load(sys.stdin)["slices"]:
    if s["name"].endswith(".split.main"):
        print(sorted((g["index"], g.get("compute_request_percent"), g["memory_cap_bytes"]) for g in s["gpus"]))')
expect_eq "per-GPU parts" "$got" "[(0, 16, $((3 * GiB / 2))), (1, 15, $((3 * GiB / 2)))]"
pass "an uneven split is registered per GPU as assigned: $got"

# 6. gsliced does not answer (stopped): PreStartContainer is UNAVAILABLE and the kubelet tries
#    again; once gsliced is back the container gets its slice (before: refused for good).
f0=$(kstate "d['prestart_failures']")
npod --name late main="$U1:$GiB:10/10" >/dev/null
# The pod is admitted right after gsliced stops, before gslice-node's inventory (every 1 s)
# marks the slots Unhealthy; on a host too busy for that, again.
for try in 1 2 3; do
  kill -STOP "$GSLICED_PID"
  kl POST /pods '{"namespace":"default","name":"late","containers":[{"name":"main","devices":1,"command":["bash","-c","cat /run/gslice/slice/slice.env >'"$T"'/late.env; sleep 60"]}]}' >"$T/late.admit"
  grep -q '"devices"' "$T/late.admit" && break
  kill -CONT "$GSLICED_PID"
  [ "$try" = 3 ] && fail "the pod was never admitted: $(cat "$T/late.admit")"
  until_true 20 healthy 32
done
failed_once() { [ "$(kstate "d['prestart_failures']")" -gt "$f0" ]; }
until_true 30 failed_once
kill -CONT "$GSLICED_PID"
until_true 30 test -s "$T/late.env"
grep -q "^GSLICE_SLICE=" "$T/late.env" || fail "late: $(cat "$T/late.env")"
grep -q "PreStartContainer main failed: .*UNAVAILABLE" "$T/kubelet.log" || fail "not UNAVAILABLE: $(grep PreStart "$T/kubelet.log" | tail -3)"
pass "gsliced not answering: UNAVAILABLE, retried, then the slice ($(( $(kstate "d['prestart_failures']") - f0 )) failed tries)"

# 7. A slice directory gsliced names outside the state root gslice-node was given is not taken.
stop_node
start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a --daemon-state-dir "$T/elsewhere"
mkdir -p "$T/elsewhere"
until_true 20 healthy 32
before=$(nsl)
npod --name outside main="$U1:$GiB:10/10" >/dev/null
kl POST /pods '{"namespace":"default","name":"outside","containers":[{"name":"main","devices":1,"command":["'"$TBIN"'/compute_spin","--duration","1"]}]}' >/dev/null
until_true 20 grep -qs "compute_spin:" "$T/default_outside_main.log"
grep -q "which is not below its state root" "$T/default_outside_main.log" || fail "outside: $(cat "$T/default_outside_main.log")"
expect_eq "slices" "$(nsl)" "$before"
pass "a slice directory outside gsliced's state root is refused, its slice removed"
stop_node
start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a

# 8. Something else listening on gsliced's socket path (another user's program): not believed.
mkdir -p "$T/fake" && chmod 0777 "$T/fake" && chmod 0711 "$T"
if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  setpriv --reuid nobody --regid nogroup --clear-groups "$PY" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
while True:
    c, _ = s.accept(); time.sleep(0.2); c.close()' "$T/fake/gsliced.sock" &
  until_true 10 test -S "$T/fake/gsliced.sock"
  "$BIN/gslice-node" --kubelet-dir "$T/fake" --pod-resources-socket "$PODRES" --state-dir "$T/fake-node" \
    --socket "$T/fake/gsliced.sock" --daemon-state-dir "$T/daemon" --hook "$HOOK" --no-api-server 2>"$T/fake-node.log" &
  FAKE_NODE=$!
  until_true 10 grep -qs "is served by uid $(id -u nobody) (pid [0-9]*), not by root or gslice-node's uid 0: not believed" "$T/fake-node.log"
  kill "$FAKE_NODE"
  pass "a socket served by another user is not believed (SO_PEERCRED)"
else
  skip_part "no user nobody or setpriv: the SO_PEERCRED check"
fi
chmod 0700 "$T"

for p in refused ok unsigned split late outside; do kl DELETE /pods/default/$p >/dev/null; done
zero() { [ "$(nsl)" = 0 ]; }
until_true 20 zero
no_starts() { [ -z "$(ls "$NSTATE/starts")" ] && [ -z "$(ls "$NSTATE/alloc")" ]; }
until_true 10 no_starts
pass "a container's root is kept off the node"
