#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A container restart reuses the slice recorded for it (issue 16 items 3, 9, 11): a running pod
# that edits its own gslice.io/assigned (the namespace edit role may) and restarts its container
# keeps its slice, not what it wrote; the container of a pod deleted and made again under its
# name, restarted, gets no GPU (not the new pod's assignment: the record holds the old uid); a
# gslice-node killed between REGISTER and its record leaves no slice behind once it is back. The crash is made with
# GSLICE_NODE_TEST_CRASH_AT=registered (test only: gslice-node exits right after REGISTERED, the
# pending record written, the final one not).
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"
export TBIN

node_up
GiB=1073741824
# slices: (name, id, request, limit, caps) of every slice, sorted.
slices() { "$BIN/gslice" status --json | "$PY" -c '
import json, sys
print(sorted((s["name"].split(".", 2)[2], s["id"], s["compute_request_percent"], s["compute_limit_percent"], [g["memory_cap_bytes"] for g in s["gpus"]]) for s in json.load(sys.stdin)["slices"]))'; }
nsl() { "$BIN/gslice" status --json | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["slices"]))'; }
running() { [ "$(jget "$(kl GET /pods/default/$1)" "d['containers'][0]['pid'] is not None")" = True ]; }

# 1. The annotation edited on a running pod, then its container restarted: the recorded slice.
npod --name edit main="$U0:$GiB:30/30" >/dev/null
kl POST /pods '{"namespace":"default","name":"edit","containers":[{"name":"main","devices":1,"command":["sleep","600"]}]}' >/dev/null
one() { [ "$(nsl)" = 1 ]; }
until_true 20 one
before=$(slices)
echo "before: $before"
# What the namespace user writes: 16 GiB and 100%, with the signature copied over unchanged.
big=$("$PY" -c 'import json,sys; print(json.dumps({"version":1,"node":"node-a","containers":[{"name":"main","init":False,"gpus":[{"uuid":sys.argv[1],"index":0,"memory":16*2**30,"compute":100}],"computeLimit":100,"priority":"high","weight":1000}]}))' "$U0")
api PATCH /api/v1/namespaces/default/pods/edit "$("$PY" -c 'import json,sys; print(json.dumps({"metadata":{"annotations":{"gslice.io/assigned":sys.argv[1]}}}))' "$big")" >/dev/null
sleep 1 # the pod cache's watch brings the edit
r=$(kl POST /pods/default/edit/restart '{"container":"main"}')
expect_eq "restarted" "$(jget "$r" "d['started']")" True
expect_eq "slices after the edit and the restart" "$(slices)" "$before"
grep -q "restarted, as recorded" "$T/node.log" || fail "no word of the reuse: $(tail -5 "$T/node.log")"
pass "an edited annotation changes nothing at a restart: $(slices)"

# 2. The pod deleted and made again under its name (a new uid, its own signed assignment); the
#    old pod's container, still on the kubelet, restarts: no GPU for it, nothing registered.
#    twin: gslice-node saw the pod gone before it was made again; twin2: made again at once,
#    gslice-node sees it replaced.
cat >"$T/probe.sh" <<'P'
#!/bin/bash
cat /run/gslice/slice/slice.env >"$1"
P
chmod +x "$T/probe.sh"
for p in twin twin2; do
  npod --name $p main="$U1:$GiB:10/10" >/dev/null
  kl POST /pods '{"namespace":"default","name":"'$p'","containers":[{"name":"main","devices":1,"command":["sleep","600"]}]}' >/dev/null
  two() { [ "$(nsl)" = 2 ]; }
  until_true 20 two
  api DELETE /api/v1/namespaces/default/pods/$p >/dev/null
  # gslice-node looks at each pod every 10 s and ends the old slice.
  if [ $p = twin ]; then
    until_true 30 grep -q "default/twin container main (slots .*) removed: its pod was deleted" "$T/node.log"
    npod --name $p main="$U1:$((2 * GiB)):20/20" >/dev/null
  else
    npod --name $p main="$U1:$((2 * GiB)):20/20" >/dev/null
    until_true 30 grep -q "default/twin2 container main (slots .*) removed: its pod was replaced" "$T/node.log"
  fi
  one() { [ "$(nsl)" = 1 ]; }
  until_true 10 one
  sleep 1 # the pod cache's watch brings the new pod
  r=$(kl POST /pods/default/$p/restart '{"container":"main","command":["'"$T/probe.sh"'","'"$T/$p.env"'"]}')
  expect_eq "restarted" "$(jget "$r" "d['started']")" True
  until_true 10 test -s "$T/$p.env"
  grep -q "^GSLICE_K8S_ERROR=.*deleted and made again" "$T/$p.env" || fail "the old pod's container ($p): $(cat "$T/$p.env")"
  expect_eq "slices" "$(nsl)" 1
  kl DELETE /pods/default/$p >/dev/null
done
pass "the old pod's container restarted after its pod was made again: refused, nothing registered"

# 3. gslice-node dies between REGISTER and its record: the slice goes when it is back.
stop_node
GSLICE_NODE_TEST_CRASH_AT=registered start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a
until_true 20 healthy 32
npod --name crash main="$U1:$GiB:40/40" >/dev/null
kl POST /pods '{"namespace":"default","name":"crash","containers":[{"name":"main","devices":1,"command":["sleep","600"]}]}' >/dev/null
dead() { ! kill -0 "$NODE_PID" 2>/dev/null; }
until_true 20 dead
wait "$NODE_PID" 2>/dev/null && rc=0 || rc=$?
expect_eq "gslice-node's exit at the crash point" "$rc" 99
grep -q "exiting after REGISTER (test)" "$T/node.log" || fail "gslice-node did not stop at the crash point"
expect_eq "slices left by the crash" "$(nsl)" 2
start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a
until_true 20 grep -q "has no record (a crash between REGISTER and its record?): removed" "$T/node.log"
# The kubelet tries PreStartContainer again; the container gets one slice, recorded.
until_true 30 running crash
two() { [ "$(nsl)" = 2 ]; }
until_true 20 two
expect_eq "slices after the crash" "$(slices | "$PY" -c 'import sys,ast; print(sorted(s[0] for s in ast.literal_eval(sys.stdin.read())))')" "['default.crash.main', 'default.edit.main']"
kl DELETE /pods/default/crash >/dev/null
kl DELETE /pods/default/edit >/dev/null
zero() { [ "$(nsl)" = 0 ]; }
until_true 20 zero
no_records() { [ -z "$(ls "$NSTATE/records")" ]; }
until_true 10 no_records
pass "no slice outlives its record: a crash after REGISTER leaks nothing"
