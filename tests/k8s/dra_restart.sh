#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-node --mode dra through restarts (issue 19, deliverable 4): a prepared claim keeps
# working while gslice-node, gsliced and the kubelet restart in the middle of its container's
# measuring window (held to its hard share throughout); gslice-node registers again and finds its
# prepared claim; gsliced's slice comes back; the kubelet's startup wipe of the node's
# ResourceSlices is followed by gslice-node publishing it again; nothing is prepared twice; a
# container started after them all still resolves the claim's CDI spec and joins its budget;
# unprepare after the restarts removes the slice and the spec; with gsliced gone its GPUs are
# reported unhealthy (DRAResourceHealth) and not offered, until it is back. Each recovery time
# is printed.
source "$GSLICE_SRC/tests/k8s/lib.sh"
source "$GSLICE_SRC/tests/k8s/lib_dra.sh"
source "$GSLICE_SRC/tests/integration/lib_starve.sh"
export TBIN
export GSLICE_SIM_MEMORY=8GiB

dra_up
dra_claim hard50 1Gi 50 50
dra_alloc hard50 r r2 >/dev/null
S=$(date +%s.%N | awk '{ printf "%.3f", $1 + 4 }')
D=10
S2=$(awk -v s="$S" -v d="$D" 'BEGIN { printf "%.3f", s + 1 + d + 0.5 }')
D2=6
spin() { echo "[\"$TBIN/compute_spin\",\"--start\",\"$1\",\"--warmup\",\"1\",\"--duration\",\"$2\",\"--label\",\"$3\"]"; }
dra_pod r hard50 "[\"bash\",\"-c\",\"\$0 --start $S --warmup 1 --duration $D --label during && \$0 --start $S2 --warmup 1 --duration $D2 --label after\",\"$TBIN/compute_spin\"]" >/dev/null
expect_eq "prepared" "$(prepares)" 1
want=$(gs_slices)
expect_eq "the claim's slice" "$want" "[(50, 50, [0], [$GiB])]"
u=$(claim_uid hard50)
spec="$CDI/gslice.io-claim_$u.json"
[ -e "$spec" ] || fail "no CDI spec $spec: $(ls "$CDI")"

ms_since() { echo $(($(date +%s%3N) - $1)); }
while [ "$(date +%s%N)" -lt "$(awk -v s="$S" 'BEGIN { printf "%d", (s + 2) * 1e9 }')" ]; do sleep 0.1; done
# gslice-node: stopped and started again; it registers again and keeps its prepared claim.
n=$(registrations)
t0=$(date +%s%3N)
stop_node
start_dra_node
over() { [ "$(registrations)" -gt "$n" ]; }
until_secs 15 over
echo "gslice-node restart: registered again $(ms_since "$t0") ms after it was stopped"
expect_eq "slices after gslice-node's restart" "$(gs_slices)" "$want"
[ -e "$spec" ] || fail "the CDI spec went with gslice-node's restart"

sleep 1
# gsliced: its slices are in memory only; gslice-node registers the prepared claim's again.
t0=$(date +%s%3N)
stop_gsliced
start_gsliced
back() { [ "$(gs_slices)" = "$want" ]; }
until_secs 15 back
echo "gsliced restart: the claim's slice back $(ms_since "$t0") ms after gsliced was stopped"

sleep 1
# The kubelet: its restart wipes the node's ResourceSlices; gslice-node publishes it again.
t0=$(date +%s%3N)
kl POST /restart '{"down_s":0.3}' >/dev/null
until_secs 15 dra_registered
until_secs 30 published
echo "kubelet restart: the wiped ResourceSlice published again $(ms_since "$t0") ms after the restart began (300 ms down)"
expect_eq "slices deleted by the two wipes (start, restart)" "$(kstate "d['wiped']")" "[0, 1]"
expect_eq "Prepare calls after the restarts" "$(prepares)" 1
pass "gslice-node, gsliced and kubelet restarts: registered, slice and ResourceSlice back, nothing prepared twice"

# A container started now (the kubelet starts it from the claim it prepared before): r2 joins r.
dra_pod r2 hard50 "$(spin "$S2" "$D2" after)" >/dev/null
expect_eq "Prepare calls with r2" "$(prepares)" 1
finished() { grep -q "label=after " "$T/default_r_main.log" && grep -q "label=after " "$T/default_r2_main.log"; }
until_secs 60 finished
grep -q "label=during " "$T/default_r_main.log" || fail "r's window: $(cat "$T/default_r_main.log")"
d=$(share default_r_main during)
[ "$d" -le 55 ] || fail "r during the restarts: $d%, above its hard 50%"
echo "ok: r during the restarts = $d% (hard 50%, at most 55)"
grep -h "label=after " "$T/default_r_main.log" "$T/default_r2_main.log" >"$T/after.line"
STARVE_NO_DAEMON=1 share_ceiling_floor "r + r2 after the restarts (one claim, hard 50%)" \
  "$(($(share default_r_main after) + $(share default_r2_main after)))" 43 55 "$T/after.line"
pass "held to its share through the restarts; a container started after them joins the claim's budget"

# Health (issue 19, deliverable 5): with gsliced gone, the DRAResourceHealth stream says its GPUs
# are unhealthy and the ResourceSlice offers them no more (gone or tainted); both come back.
health_is() { [ "$(kstate "sorted(v['health'] for v in d['health'].get('gslice.io', {}).values())")" = "$1" ]; }
offered() { jget "$(api GET "$RES/resourceslices?fieldSelector=spec.nodeName=node-a")" "sum(1 for s in d['items'] for x in s['spec'].get('devices') or [] if not x.get('taints'))"; }
offered_is() { [ "$(offered)" = "$1" ]; }
until_secs 10 health_is "['HEALTHY', 'HEALTHY']"
echo "health stream: $(kstate "d['plugins']['gslice.io']['health_version']").DRAResourceHealth"
t0=$(date +%s%3N)
stop_gsliced
until_secs 30 health_is "['UNHEALTHY', 'UNHEALTHY']"
echo "gsliced gone: both GPUs UNHEALTHY in the health stream $(ms_since "$t0") ms after it was stopped"
until_secs 30 offered_is 0
echo "gsliced gone: no device offered in the ResourceSlice $(ms_since "$t0") ms after it was stopped"
t0=$(date +%s%3N)
start_gsliced
until_secs 30 health_is "['HEALTHY', 'HEALTHY']"
until_secs 30 offered_is 2
echo "gsliced back: HEALTHY and both devices offered again $(ms_since "$t0") ms after it was started"
pass "health: a GPU whose gsliced is gone is reported unhealthy and not offered, and comes back"

kl DELETE /pods/default/r >/dev/null
kl DELETE /pods/default/r2 >/dev/null
gone() { [ "$(nslices)" = 0 ] && [ ! -e "$spec" ]; }
until_secs 10 gone
pass "unprepare after the restarts: slice and spec removed"
