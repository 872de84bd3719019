#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node as a device plugin alone (no API server): registration, ListAndWatch of S slots per
# GPU with health from gsliced, Allocate's environment and mounts, a container with no
# assignment refused at its first CUDA call, re-registration after a kubelet restart and after
# a gsliced restart, and clear errors for a bad command line.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"

# Bad command lines say what is wrong.
out=$("$BIN/gslice-node" --slots-per-gpu 0 2>&1) && fail "--slots-per-gpu 0 accepted"
grep -q "slots-per-gpu wants 1..256" <<<"$out" || fail "no reason for --slots-per-gpu 0: $out"
out=$("$BIN/gslice-node" --bogus 2>&1) && fail "--bogus accepted"
grep -q "usage: gslice-node" <<<"$out" || fail "no usage for --bogus: $out"
out=$(NODE_NAME= "$BIN/gslice-node" --kubelet-dir "$DP" --hook "$HOOK" 2>&1) && fail "no node name accepted"
grep -q "no node name" <<<"$out" || fail "no reason without a node name: $out"
out=$("$BIN/gslice-node" --no-api-server --kubelet-dir "$T/nope" --hook "$HOOK" 2>&1) && fail "missing kubelet dir accepted"
grep -q "is not a directory" <<<"$out" || fail "no reason for a missing kubelet dir: $out"
"$BIN/gslice-node" --help | qgrep -- "--slots-per-gpu" || fail "--help"
# A state dir that is not there yet, given relative: made (mkdir -p, 0700) where gslice-node
# started, and used by its absolute path (before: "cannot make .../records: No such file").
mkdir -p "$T/cwd"
(cd "$T/cwd" && exec "$BIN/gslice-node" --no-api-server --kubelet-dir "$DP" --hook "$HOOK" \
  --socket "$T/none.sock" --state-dir rel/state 2>"$T/rel.log") &
REL=$!
made() { [ -d "$T/cwd/rel/state/starts" ]; }
until_true 10 made
kill "$REL"; wait "$REL" 2>/dev/null || true
expect_eq "state dir mode" "$(stat -c %a "$T/cwd/rel/state")" 700
expect_eq "its subdirs" "$(cd "$T/cwd/rel/state" && stat -c '%n %a' records alloc starts | tr '\n' ' ')" "records 700 alloc 700 starts 700 "
grep -q "starting" "$T/rel.log" || fail "with a relative state dir: $(cat "$T/rel.log")"
rm -f "$DP/gslice.sock"

# An old-style container directory (before start directories: the container could write it),
# with what a container's root may have left there: moved aside, nothing in it followed.
mkdir -p "$NSTATE/alloc/gpu0-0/sub"
ln -s "$T/host-file" "$NSTATE/alloc/gpu0-0/slice.env"
ln -s "$T/host-file" "$NSTATE/alloc/gpu0-0/slice.env.tmp"
echo keep >"$T/host-file"
start_gsliced
start_kubelet
start_node --no-api-server --slots-per-gpu 4
until_true 10 healthy 8
expect_eq "options" "$(kstate "d['options']['pre_start_required'] and d['options']['get_preferred_allocation_available']")" True
expect_eq "resource" "$(kstate "d['resource']")" "gslice.io/gpu"
pass "registered: 2 GPUs x 4 slots, all Healthy"

# Allocate: the hook, ld.so.preload, gsliced's socket dir, the container's own dir, the slots.
resp=$(kl POST /pods '{"namespace":"default","name":"p1","containers":[{"name":"main","devices":1,
  "command":["'"$TBIN"'/compute_spin","--duration","1"]}]}')
expect_eq "slots in env" "$(jget "$resp" "d['containers'][0]['env']['GSLICE_K8S_SLOTS'] == d['containers'][0]['devices'][0]")" True
expect_eq "socket in env" "$(jget "$resp" "d['containers'][0]['env']['GSLICE_SOCKET']")" /run/gslice/daemon/gsliced.sock
# Read-only all but the region (a file mount over the placeholder in the read-only slice dir);
# the daemon's is the hook socket's directory, never gsliced's own (where REGISTER is served).
expect_eq "mounts" "$(jget "$resp" "sorted((m['container_path'], m['read_only']) for m in d['containers'][0]['mounts'])")" \
  "[('/etc/ld.so.preload', True), ('/run/gslice/daemon', True), ('/run/gslice/slice', True), ('/run/gslice/slice/memory.region', False), ('/usr/local/lib/gslice/libgslice.so', True)]"
expect_eq "daemon mount" "$(jget "$resp" "[m['host_path'] for m in d['containers'][0]['mounts'] if m['container_path'] == '/run/gslice/daemon'][0]")" "$T/run/hook"
key=$(jget "$resp" "d['containers'][0]['devices'][0]")
expect_eq "slice and region mounts" "$(jget "$resp" "sorted(m['host_path'] for m in d['containers'][0]['mounts'] if m['container_path'].startswith('/run/gslice/slice'))")" \
  "['$NSTATE/alloc/$key', '$NSTATE/alloc/$key.region']"
expect_eq "hook mount" "$(jget "$resp" "[m['host_path'] for m in d['containers'][0]['mounts'] if m['container_path'].endswith('libgslice.so')][0]")" "$(realpath "$HOOK")"
# No API server: the container starts, its first CUDA call fails with one clear line.
until_true 10 grep -q "compute_spin:" "$T/default_p1_main.log"
grep -q "this container has no GPU slice: gslice-node runs without an API server" "$T/default_p1_main.log" ||
  fail "no clear error in the container: $(cat "$T/default_p1_main.log")"
grep -q "compute_spin: cuInit: CUDA_ERROR_NO_DEVICE" "$T/default_p1_main.log" ||
  fail "cuInit was not CUDA_ERROR_NO_DEVICE: $(cat "$T/default_p1_main.log")"
expect_eq "lines from the hook" "$(grep -c "gslice\[" "$T/default_p1_main.log")" 1
expect_eq "p1's slots" "$(jget "$resp" "d['containers'][0]['devices']")" "['gpu0-0']"
[ -L "$NSTATE/alloc/gpu0-0" ] || fail "the old-style directory is still there"
expect_eq "the host file behind its links" "$(cat "$T/host-file")" keep
grep -q "gets no GPU: gslice-node runs without an API server" "$T/node.log" || fail "not in gslice-node's log"
pass "a container without assignment: CUDA_ERROR_NO_DEVICE and one line, in gslice-node's log too"

# A kubelet restart: sockets deleted, kubelet.sock anew: gslice-node registers again.
n=$(kstate "d['registrations']")
t0=$(now_ms)
kl POST /restart '{"down_s":0.3}' >/dev/null
until_true 10 registrations_over "$n"
until_true 10 healthy 8
echo "kubelet restart: registered again and all slots Healthy $(recovered_ms "back up") ms after the kubelet was back (300 ms down)"
pass "kubelet restart"

# gsliced goes: slots Unhealthy; back: Healthy, registered again.
n=$(kstate "d['registrations']")
stop_gsliced
until_true 10 healthy 0
t0=$(now_ms)
start_gsliced
until_true 10 healthy 8
until_true 10 registrations_over "$n"
echo "gsliced restart: slots Unhealthy for $(recovered_ms "devices, 0 healthy") ms (its stop and start included)"
pass "gsliced restart"

# Garbage on the plugin's socket: an error for that call, the plugin serves on.
raw() {
  "$PY" - "$DP/gslice.sock" "$1" <<'PYEOF'
import grpc, sys
ch = grpc.insecure_channel("unix:" + sys.argv[1])
call = ch.unary_unary("/v1beta1.DevicePlugin/" + sys.argv[2])
try:
    call(b"\x0a\x50\x0a\x01", timeout=5)
    print("OK")
except grpc.RpcError as e:
    print(e.code().name, e.details())
PYEOF
}
out=$(raw Allocate)
grep -q "INVALID_ARGUMENT Allocate: malformed request" <<<"$out" || fail "garbage Allocate: $out"
out=$(raw PreStartContainer)
grep -q "INVALID_ARGUMENT" <<<"$out" || fail "garbage PreStartContainer: $out"
out=$(raw Nope)
grep -q "UNIMPLEMENTED" <<<"$out" || fail "unknown method: $out"
healthy 8 || fail "the plugin stopped serving after garbage"
pass "malformed requests get INVALID_ARGUMENT, unknown methods UNIMPLEMENTED, the plugin serves on"

# A corrupt record (disk trouble, a hand edit) is said and skipped at start; nothing else lost.
printf 'slots=gpu1-3\nthis is not a record\n' >"$NSTATE/records/gpu1-3"
n=$(kstate "d['registrations']")
stop_node
start_node --no-api-server --slots-per-gpu 4
until_true 10 registrations_over "$n"
grep -q "record $NSTATE/records/gpu1-3 is unreadable or corrupt: ignored" "$T/node.log" ||
  fail "no word of the corrupt record: $(tail -5 "$T/node.log")"
grep -q "1 record(s)" "$T/node.log" || fail "the good record was not kept: $(grep record "$T/node.log")"
rm -f "$NSTATE/records/gpu1-3"
pass "a corrupt record is said and skipped"

# Deleting the pod frees its slot and gslice-node forgets the container.
kl DELETE /pods/default/p1 >/dev/null
until_true 10 grep -q "removed: the kubelet no longer lists its container" "$T/node.log"
[ -z "$(ls "$NSTATE/records")" ] || fail "records left: $(ls "$NSTATE/records")"
pass "device plugin"
