#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node end to end on the simulated GPU, with the API server and kubelet stand-ins: the
# node's inventory annotation; two pods of one container and one pod of two, each container
# its own slice held to its memory cap and compute share, with a kubelet restart, a gslice-node
# restart and a gsliced restart in the middle of the measuring window; nothing double-booked,
# nothing lost; containers of an unassigned pod and of another node's are refused; deleting
# the pods removes their slices.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_node.sh"
source "$GSLICE_SRC/tests/integration/lib_starve.sh"
export TBIN
export GSLICE_SIM_MEMORY=8GiB

node_up
# The inventory: gslice.io/gpus on the node, as the contract shapes it.
expect_eq "inventory" "$(jget "$inv" "(d['version'], d['slotsPerGpu'], len(d['gpus']), [g['index'] for g in d['gpus']], [g['memory'] for g in d['gpus']], all(g['healthy'] and g['slots'] == 16 for g in d['gpus']))")" \
  "(1, 16, 2, [0, 1], [8589934592, 8589934592], True)"
pass "inventory: 2 GPUs x 16 slots, $U0 $U1"

GiB=1073741824
cat >"$T/work.sh" <<'W'
#!/bin/bash
# A container's workload: spin kernels in the common window, then fill memory to the cap.
# Two windows: the restarts happen in the first, the second is after them all.
"$TBIN/compute_spin" --start "$1" --warmup 1 --duration "$2" --label "$3-during" || exit 1
"$TBIN/compute_spin" --start "$4" --warmup 1 --duration "$5" --label "$3-after" || exit 1
exec "$TBIN/hook_client_linked" --lookup link --path alloc --chunk 64MiB --script "fill;info"
W
# The pods as gslice-extender binds them: declared resources, assignment signed for their UID.
npod --name a main="$U0:$GiB:60/60" >/dev/null
npod --name b main="$U0:$((GiB / 2)):30/30" >/dev/null
npod --name c x="$U1:$GiB:50/50" y="$U1:$((2 * GiB)):20/20" >/dev/null

S=$(date +%s.%N | awk '{ printf "%.3f", $1 + 5 }')
D=8
S2=$(awk -v s="$S" -v d="$D" 'BEGIN { printf "%.3f", s + 1 + d + 0.5 }')
D2=6
run() { echo "[\"bash\",\"$T/work.sh\",\"$S\",\"$D\",\"$1\",\"$S2\",\"$D2\"]"; }
kl POST /pods '{"namespace":"default","name":"a","containers":[{"name":"main","devices":1,"command":'"$(run a)"'}]}' >/dev/null
kl POST /pods '{"namespace":"default","name":"b","containers":[{"name":"main","devices":1,"command":'"$(run b)"'}]}' >/dev/null
kl POST /pods '{"namespace":"default","name":"c","containers":[{"name":"x","devices":1,"command":'"$(run x)"'},{"name":"y","devices":1,"command":'"$(run y)"'}]}' >/dev/null
nsl() { "$BIN/gslice" status --json | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["slices"]))'; }
four() { [ "$(nsl)" = 4 ]; }
until_true 20 four
slices() { "$BIN/gslice" status --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(sorted((s["name"].split(".", 2)[2], s["compute_request_percent"], s["compute_limit_percent"], [g["index"] for g in s["gpus"]], [g["memory_cap_bytes"] for g in s["gpus"]]) for s in d["slices"]))'; }
want_slices="[('default.a.main', 60, 60, [0], [$GiB]), ('default.b.main', 30, 30, [0], [$((GiB / 2))]), ('default.c.x', 50, 50, [1], [$GiB]), ('default.c.y', 20, 20, [1], [$((2 * GiB))])]"
expect_eq "slices" "$(slices)" "$want_slices"
pass "4 containers, 4 slices with their pods' limits"

# Restarts inside the measuring window [S+1, S+1+D].
while [ "$(date +%s%N)" -lt "$(awk -v s="$S" 'BEGIN { printf "%d", (s + 2) * 1e9 }')" ]; do sleep 0.1; done
RESTARTS=${RESTARTS:-kubelet node gsliced}  # all three in `make test`; fewer to study one
if [[ " $RESTARTS " == *" kubelet "* ]]; then
n=$(kstate "d['registrations']")
t0=$(now_ms)
kl POST /restart '{"down_s":0.3}' >/dev/null
until_true 10 registrations_over "$n"
until_true 10 healthy 32
echo "kubelet restart: registered again and all slots Healthy $(recovered_ms "back up") ms after the kubelet was back (300 ms down)"
fi

sleep 1
if [[ " $RESTARTS " == *" node "* ]]; then
n=$(kstate "d['registrations']")
t0=$(now_ms)
stop_node
start_node --kubeconfig "$KUBECONFIG_FILE" --node-name node-a
until_true 10 registrations_over "$n"
until_true 10 healthy 32
echo "gslice-node restart: registered again and all slots Healthy $(recovered_ms "ListAndWatch ended") ms after the old one's stream ended"
grep -q "4 record(s)" "$T/node.log" || fail "the new gslice-node did not find its 4 records"
fi

sleep 1
if [[ " $RESTARTS " == *" gsliced "* ]]; then
t0=$(now_ms)
stop_gsliced
start_gsliced
# gslice-node sees the restart when its connection breaks (a moment after, maybe after the new
# gsliced is up): the slots go Unhealthy and come back. Waited for in the kubelet's log, which
# keeps the brief Unhealthy a poll of its state could miss.
unhealthy_seen() { grep -q "devices, 0 healthy" "$T/kubelet.log"; }
until_true 10 unhealthy_seen
until_true 10 healthy 32
echo "gsliced restart: slots Unhealthy for $(recovered_ms "devices, 0 healthy") ms (its stop and start included)"
fi
expect_eq "slices after the restarts" "$(slices)" "$want_slices"

# Every workload held through it all: shares in device time over the common window.
done_all() { for f in default_a_main default_b_main default_c_x default_c_y; do grep -q "^fill" "$T/$f.log" || return 1; done; }
until_true 60 done_all
share() { awk -v l="$2" '/share=/ { for (i = 1; i <= NF; i++) if ($i == "label=" l) ok = 1; if (!ok) next; for (i = 1; i <= NF; i++) if ($i ~ /^share=/) { split($i, a, "="); printf "%d", a[2] * 100 + 0.5 }; ok = 0 }' "$T/$1.log"; }
within() { [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] || fail "$1: got $2%, want $3..$4%"; echo "ok: $1 = $2% (want $3..$4)"; }
# During the restarts no slice goes over its limit (while gsliced is away each hook paces itself
# at its limit); after them every slice has its share again.
for c in "default_a_main a 60" "default_b_main b 30" "default_c_x x 50" "default_c_y y 20"; do
  set -- $c
  within "$2 during the restarts (hard $3%)" "$(share "$1" "$2-during")" 0 $(( $3 + 5 ))
  # The floor of a wall-clock share holds unless the host kept the workload from a CPU
  # (lib_starve.sh; only the workload's own wait is measured here).
  grep "label=$2-after " "$T/$1.log" > "$T/$2-after.line" || true
  STARVE_NO_DAEMON=1 share_ceiling_floor "$2 after the restarts (hard $3%)" "$(share "$1" "$2-after")" \
    $(( $3 - 7 )) $(( $3 + 5 )) "$T/$2-after.line"
done
# Memory: each fill stops at its own cap (64 MiB chunks, the context's memory counted too).
filled() { sed -n 's/^fill n=\([0-9]*\).*/\1/p' "$T/$1.log"; }
for f in "default_a_main 16" "default_b_main 8" "default_c_x 16" "default_c_y 32"; do
  set -- $f
  n=$(filled "$1")
  [ -n "$n" ] && [ "$n" -le "$2" ] && [ "$n" -ge $(( $2 - 6 )) ] || fail "$1 filled $n x 64 MiB, cap is $2 x 64 MiB"
  echo "ok: $1 filled $n x 64 MiB under its cap of $2"
done
pass "every container held to its own cap and share through the three restarts"

# Refused: no assignment, and an assignment for another node.
npod --name none --no-assign main="$U0:$GiB:10" >/dev/null
npod --name other --assigned-node node-b main="$U0:$GiB:10/10" >/dev/null
kl POST /pods '{"namespace":"default","name":"none","containers":[{"name":"main","devices":1,"command":["'"$TBIN"'/compute_spin","--duration","1"]}]}' >/dev/null
kl POST /pods '{"namespace":"default","name":"other","containers":[{"name":"main","devices":1,"command":["'"$TBIN"'/compute_spin","--duration","1"]}]}' >/dev/null
until_true 10 grep -q "compute_spin:" "$T/default_none_main.log"
until_true 10 grep -q "compute_spin:" "$T/default_other_main.log"
grep -q "no GPU slice: pod default/none has no gslice.io/assigned annotation" "$T/default_none_main.log" || fail "none: $(cat "$T/default_none_main.log")"
grep -q "no GPU slice: pod default/other is assigned to node node-b, not this node node-a" "$T/default_other_main.log" || fail "other: $(cat "$T/default_other_main.log")"
grep -q "CUDA_ERROR_NO_DEVICE" "$T/default_other_main.log" || fail "other ran on the GPU"
expect_eq "slices with the refused" "$(nsl)" 4
pass "unassigned and other-node containers refused, nothing registered for them"

# A malformed assignment is refused with what is wrong.
api POST /api/v1/namespaces/default/pods '{"metadata":{"name":"bad","namespace":"default","annotations":{"gslice.io/assigned":"{\"version\":1,\"node\":"}},"spec":{"nodeName":"node-a","containers":[{"name":"main"}]}}' >/dev/null
kl POST /pods '{"namespace":"default","name":"bad","containers":[{"name":"main","devices":1,"command":["'"$TBIN"'/compute_spin","--duration","1"]}]}' >/dev/null
until_true 10 grep -q "compute_spin:" "$T/default_bad_main.log"
grep -q "no GPU slice: pod default/bad: gslice.io/assigned is malformed" "$T/default_bad_main.log" || fail "bad: $(cat "$T/default_bad_main.log")"
pass "a malformed assignment is refused, saying so"

# A finished pod (phase Succeeded, still in the kubelet's lists) loses its slice.
npod --name done main="$U1:$GiB:10/10" >/dev/null
kl POST /pods '{"namespace":"default","name":"done","containers":[{"name":"main","devices":1,"command":["true"]}]}' >/dev/null
five() { [ "$(nsl)" = 5 ]; }
until_true 10 five
api PATCH /api/v1/namespaces/default/pods/done '{"status":{"phase":"Succeeded"}}' >/dev/null
until_true 20 four
grep -q "removed: its pod finished" "$T/node.log" || fail "no word of the finished pod"
pass "a finished pod's slice is removed"

# The liveness moves on: the node's Lease is renewed every 10 s (node_lease.sh has the rest).
LEASE=/apis/coordination.k8s.io/v1/namespaces/gslice-system/leases/gslice-node-node-a
renew1=$(jget "$(api GET "$LEASE")" "d['spec']['renewTime']")
renewed() { [ "$(jget "$(api GET "$LEASE")" "d['spec']['renewTime']")" != "$renew1" ]; }
until_true 15 renewed

# Pods deleted: their slices go.
for p in a b c none other bad done; do kl DELETE /pods/default/$p >/dev/null; done
zero() { [ "$(nsl)" = 0 ]; }
until_true 10 zero
no_records() { [ -z "$(ls "$NSTATE/records")" ]; }
until_true 10 no_records
pass "gslice-node end to end"
