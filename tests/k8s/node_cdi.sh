#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --allocate-cdi (no API server): Allocate answers one CDI device per container
# (gslice.io/slot=<first slot>) instead of envs and mounts, its spec in --cdi-dir read by the
# CDI library's rules (tests/k8s/cdi_read.py) holds the same mounts and environment as the plain
# Allocate gives, the container started through it (the kubelet stand-in applies CDI as
# containerd does) reaches its slice directory; a new Allocate of the same slots replaces the
# spec; a --cdi-dir that is a link is refused with a clear error; without the flag nothing is
# written there. And the reader itself is strict: what the library refuses, it refuses.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"

CDI="$T/cdi"
READ="$K8S/cdi_read.py"
# The kubelet stand-in with CDI on (the runtime reads $CDI), as lib_node's start_kubelet.
start_kubelet_cdi() {
  rm -f "$T/kubelet.port"
  "$PY" "$K8S/kubelet.py" --dir "$DP" --pod-resources "$PODRES" --pb-dir "$PB" \
    --log-dir "$T" --port-file "$T/kubelet.port" --cdi-dir "$CDI" 2>>"$T/kubelet.log" &
  KUBELET_PID=$!
  wait_file "$T/kubelet.port"
  KUBELET="http://127.0.0.1:$(cat "$T/kubelet.port")"
}
pod() {
  kl POST /pods '{"namespace":"default","name":"'"$1"'","containers":[{"name":"main","devices":1,
    "command":["'"$TBIN"'/compute_spin","--duration","1"]}]}'
}
# view: the container's (container_path, host_path, read_only) mounts and env, sorted.
mounts_of() { jget "$1" "sorted((m['container_path'], m['host_path'], m['read_only']) for m in d['mounts'])"; }
env_of() { jget "$1" "sorted(d['env'].items())"; }

start_gsliced
start_kubelet_cdi

# Without --allocate-cdi: Allocate is what it was (envs and mounts), no CDI device, nothing in
# the CDI dir.
start_node --no-api-server --slots-per-gpu 4 --cdi-dir "$CDI"
until_true 10 healthy 8
resp=$(pod plain)
plain=$(jget "$resp" "json.dumps(d['containers'][0])")
expect_eq "plain: CDI devices" "$(jget "$plain" "d['cdi_devices']")" "[]"
expect_eq "plain: mounts" "$(jget "$plain" "len(d['mounts'])")" 5
[ ! -e "$CDI" ] || fail "without --allocate-cdi something was written in $CDI: $(ls -la "$CDI")"
key=$(jget "$plain" "d['devices'][0]")
kl DELETE /pods/default/plain >/dev/null
until_true 10 grep -q "removed: the kubelet no longer lists its container" "$T/node.log"
pass "without --allocate-cdi: mounts and envs, no CDI device, nothing in --cdi-dir"

# With it: one CDI device, no envs or mounts in the answer; the spec is there, valid.
stop_node
n=$(kstate "d['registrations']")
start_node --no-api-server --slots-per-gpu 4 --cdi-dir "$CDI" --allocate-cdi
until_true 10 registrations_over "$n"
until_true 10 healthy 8
resp=$(pod c1)
c1=$(jget "$resp" "json.dumps(d['containers'][0])")
expect_eq "the same slots again" "$(jget "$c1" "d['devices'][0]")" "$key"
expect_eq "CDI devices" "$(jget "$c1" "d['cdi_devices']")" "['gslice.io/slot=$key']"
expect_eq "no envs or mounts in the answer" "$(jget "$c1" "(d['env'], d['mounts'])")" "({}, [])"
spec="$CDI/gslice.io-slot_$key.json"
[ -f "$spec" ] || fail "no spec $spec: $(ls -la "$CDI" 2>&1)"
expect_eq "spec mode" "$(stat -c %a "$spec")" 644
expect_eq "cdi dir mode" "$(stat -c %a "$CDI")" 755
out=$("$PY" "$READ" --check "$spec") || fail "the spec is refused: $out"
expect_eq "checked" "$out" "$spec: ok gslice.io/slot cdiVersion 0.3.0 1 device(s)"
expect_eq "files in the CDI dir" "$(ls -A "$CDI")" "gslice.io-slot_$key.json"
grep -q "Allocate: slots $key (directory .*), CDI device gslice.io/slot=$key" "$T/node.log" ||
  fail "no word of the CDI device in the log: $(grep Allocate "$T/node.log" | tail -2)"
pass "--allocate-cdi: Allocate answers gslice.io/slot=$key, its spec valid at cdiVersion 0.3.0"

# What the spec gives is what the plain answer gave: the same mounts (host, container,
# read-only) and the same environment.
cdi=$("$PY" "$READ" --dir "$CDI" --kubelet "gslice.io/slot=$key") || fail "does not resolve: $cdi"
expect_eq "mounts as the plain Allocate's" "$(mounts_of "$cdi")" "$(mounts_of "$plain")"
expect_eq "env as the plain Allocate's" "$(env_of "$cdi")" "$(env_of "$plain")"
# The simulated GPUs have no /dev/nvidia* and no /proc/driver/nvidia: no device node to give.
if [ -e /dev/nvidiactl ]; then
  jget "$cdi" "d['device_nodes']" | qgrep /dev/nvidiactl || fail "no /dev/nvidiactl: $cdi"
else
  expect_eq "device nodes (none on this host)" "$(jget "$cdi" "d['device_nodes']")" "[]"
fi
# The container was started through the spec: the hook read its slice directory there.
until_true 10 grep -q "compute_spin:" "$T/default_c1_main.log"
grep -q "this container has no GPU slice: gslice-node runs without an API server" \
  "$T/default_c1_main.log" || fail "the container did not reach its slice: $(cat "$T/default_c1_main.log")"
pass "the spec holds the plain Allocate's mounts and environment; the container started through it"

# A new Allocate of the same slots (the pod gone, another one): the spec is replaced, not added.
kl DELETE /pods/default/c1 >/dev/null
resp=$(pod c2)
expect_eq "c2's slots" "$(jget "$resp" "d['containers'][0]['devices'][0]")" "$key"
expect_eq "files after a second Allocate" "$(ls -A "$CDI")" "gslice.io-slot_$key.json"
"$PY" "$READ" --check "$spec" >/dev/null || fail "the replaced spec is refused"
# Two containers at once: a spec each.
resp=$(kl POST /pods '{"namespace":"default","name":"two","containers":[
  {"name":"a","devices":1,"command":["sleep","30"]},{"name":"b","devices":2,"command":["sleep","30"]}]}')
k2=$(jget "$resp" "d['containers'][1]['cdi_devices'][0]")
expect_eq "b's device" "$k2" "gslice.io/slot=$(jget "$resp" "sorted(d['containers'][1]['devices'])[0]")"
"$PY" "$READ" --dir "$CDI" "$k2" >/dev/null || fail "b's device does not resolve"
expect_eq "b's slots in its spec" "$("$PY" "$READ" --dir "$CDI" --kubelet "$k2" | jget "$(cat)" "d['env']['GSLICE_K8S_SLOTS']")" \
  "$(jget "$resp" "','.join(sorted(d['containers'][1]['devices']))")"
expect_eq "specs for 3 containers" "$(ls "$CDI" | wc -l)" 3
pass "a spec per container, replaced when its slots are given out again"

# The slots free again (the pod gone, its record removed): its spec goes too.
kl DELETE /pods/default/two >/dev/null
until_true 10 grep -q "slots $(jget "$resp" "','.join(sorted(d['containers'][1]['devices']))")) removed" "$T/node.log"
if grep -q cdi_slot_spec_drop "$GSLICE_SRC/src/k8s/node/slices.c"; then
  until_true 10 test ! -e "$CDI/gslice.io-slot_${k2#gslice.io/slot=}.json"
  [ ! -e "$CDI/gslice.io-slot_${k2#gslice.io/slot=}.json" ] || fail "the spec of a freed container stays: $(ls "$CDI")"
  # c1's record (superseded by c2's Allocate of the same slots) went too, but not c2's spec.
  until_true 10 test "$(grep -c "(slots $key) removed" "$T/node.log")" -ge 2
  [ -e "$spec" ] || fail "c2's spec went with c1's superseded record"
  pass "a freed container's spec is removed; a superseded record's removal leaves the new one's"
else
  skip_part "a freed container's spec removed with its record (slices.c's node_reconcile does not call cdi_slot_spec_drop yet)"
fi

# A --cdi-dir that is a link: Allocate fails and says why; nothing is written where it points.
stop_node
mkdir -p "$T/elsewhere"
ln -s "$T/elsewhere" "$T/cdi-link"
n=$(kstate "d['registrations']")
start_node --no-api-server --slots-per-gpu 4 --cdi-dir "$T/cdi-link" --allocate-cdi
until_true 10 registrations_over "$n"
until_true 10 healthy 8
resp=$(pod linked)
grep -q "Allocate failed: .*CDI: cannot open $T/cdi-link: a symbolic link" <<<"$resp" ||
  fail "a linked --cdi-dir: $resp"
[ -z "$(ls -A "$T/elsewhere")" ] || fail "written through the link: $(ls "$T/elsewhere")"
pass "a --cdi-dir that is a link: Allocate refused, with the reason"

# The reader refuses what the CDI library refuses (so that its "ok" above means something).
bad() {
  "$PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(s, open(sys.argv[3], "w"))' \
    "$spec" "$1" "$T/bad.json"
  out=$("$PY" "$READ" --check "$T/bad.json") && fail "taken: $1"
  grep -q "$2" <<<"$out" || fail "$1: not the reason '$2': $out"
}
bad 's["extra"] = 1' "unknown field 'extra'"
bad 's["devices"][0]["containerEdits"]["mounts"][0]["readOnly"] = True' "unknown field 'readOnly'"
bad 's["cdiVersion"] = "0.2.0"' "must be at least v0.3.0"
bad 's["cdiVersion"] = "0.9.0"' "invalid version"
bad 's["devices"][0]["name"] = "0" + s["devices"][0]["name"]' "must be at least v0.5.0"
bad 's["devices"][0]["containerEdits"]["deviceNodes"] = [{"path": "/dev/x", "hostPath": "/dev/y"}]' "must be at least v0.5.0"
bad 's["devices"][0]["containerEdits"]["mounts"][0]["type"] = "bind"' "must be at least v0.4.0"
bad 's["kind"] = "gslice.io/slot.v2"' "must be at least v0.6.0"
bad 's["kind"] = "gslice.io"' "not vendor/class"
bad 's["devices"][0]["name"] = "a/b"' "invalid device name"
bad 's["devices"].append(s["devices"][0])' "multiple device"
bad 's["devices"] = []' "no devices"
bad 's["devices"][0]["containerEdits"] = {}' "empty container edits"
bad 's["devices"][0]["containerEdits"]["env"] = ["=x"]' "invalid environment variable"
bad 's["cdiVersion"] = 3' "wrong type"
printf '{"cdiVersion":"0.3.0","cdiVersion":"0.3.0","kind":"a.b/cd","devices":[{"name":"x","containerEdits":{"env":["A=1"]}}]}' >"$T/dup.json"
out=$("$PY" "$READ" --check "$T/dup.json") && fail "a key given twice taken"
grep -q "given twice" <<<"$out" || fail "a key given twice: $out"
# Two specs naming one device in one dir: a conflict, neither resolves.
mkdir -p "$T/conflict"
cp "$spec" "$T/conflict/a.json"
cp "$spec" "$T/conflict/b.json"
out=$("$PY" "$READ" --dir "$T/conflict" "gslice.io/slot=$key" 2>&1) && fail "a conflict resolved"
grep -q "conflicting device" <<<"$out" || fail "no word of the conflict: $out"
pass "the reader refuses unknown fields, versions too low or unknown, bad names, duplicates, conflicts"
