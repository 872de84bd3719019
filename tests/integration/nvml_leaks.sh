#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# No NVML call shows a slice another slice's processes, memory or the device's load
# (docs/nvml.md, "Samples, accounting and field values"). Two slices on one simulated GPU (its
# accounting mode on), a hard 30% and a 70%, each running compute_spin; inside each, nvml_leaks
# makes the calls through the hook, and without it to see what the device says:
#  - accounting pids are the slice's own process only; another slice's pid has no stats
#    (NVML_ERROR_NOT_FOUND, 6); with NVML's pids another namespace's, none is listed;
#  - GPU utilization samples are one sample of the slice's own figure, not the device's;
#    encoder samples N/A (3); power samples pass through;
#  - field values: NVLink throughput and the PCIe byte counters (the device's traffic) N/A per
#    field, memory temperature and power pass through; BAR1 passes through;
#  - encoder and NvFBC sessions (the sim gives each process with a context one of each) are the
#    slice's own, their stats from them; none listed with a pid offset; the engines'
#    utilization, the encoder's capacity and PCIe throughput N/A; GPM reported unsupported, its samples and
#    metrics N/A (3), where NVML without the hook gives the device's;
#  - with two GPUs and CUDA_VISIBLE_DEVICES=1, the other GPU is not found by serial or by bus
#    id (v1), as by UUID; the topology lists leave it out, and a handle of it (forged) is
#    NVML_ERROR_INVALID_ARGUMENT (2) in every call the hook wraps (its free memory, for one,
#    would tell the other tenants' use).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
LEAKS="$TBIN/nvml_leaks"
[ -x "$LEAKS" ] || skip "nvml_leaks not built"
OFFSET=100000

inside() {
  local s=$1 o=$2
  cat > "$T/$s.sh" << EOS
"$TBIN/compute_spin" --start $START --warmup 1 --duration 5 --label $s > "$T/$s.spin" &
echo \$! > "$T/$s.pid"
sleep \$(awk -v s=$START -v n=\$(date +%s.%N) 'BEGIN { d = s + 3 - n; print (d > 0 ? d : 0) }')
LD_PRELOAD= "$LEAKS" > "$T/$s.raw" 2> "$T/$s.err"
"$LEAKS" > "$T/$s.out" 2>> "$T/$s.err"
LD_PRELOAD= "$LEAKS" stats \$(cat "$T/$o.pid") > "$T/$s.rawstats" 2>> "$T/$s.err"
"$LEAKS" stats \$(cat "$T/$o.pid") > "$T/$s.otherstats" 2>> "$T/$s.err"
"$LEAKS" stats \$(cat "$T/$s.pid") > "$T/$s.ownstats" 2>> "$T/$s.err"
GSLICE_SIM_NVML_PID_OFFSET=$OFFSET "$LEAKS" > "$T/$s.off" 2>> "$T/$s.err"
wait
EOS
}

start_daemon
START=$(at 1.5)
daemon_wait_over "$(at 2.5)" 5
inside a b
inside b a
gsrun --compute 30 --compute-limit 30 --memory 1GiB --name a -- bash "$T/a.sh" &
A=$!
gsrun --compute 70 --memory 2GiB --name b -- bash "$T/b.sh" &
B=$!
wait $A || fail "slice a failed: $(cat "$T/a.err")"
wait $B || fail "slice b failed: $(cat "$T/b.err")"
cat "$T/a.out" "$T/b.out"
PA=$(cat "$T/a.pid")
PB=$(cat "$T/b.pid")

line() { grep "^$2 gpu=0 ${3:-}" "$1" | head -1; }
# check SLICE OWN OTHER
check() {
  local s=$1 own=$2 other=$3 f="$T/$1.out" raw="$T/$1.raw" l util
  # The fixture: NVML without the hook lists both, and has the other's stats.
  l=$(line "$raw" acct)
  echo "$(field <(echo "$l") pids)" | tr , '\n' | qgrep -x "$other" ||
    fail "$s: NVML without the hook does not list $other in accounting: $l"
  expect_eq "$s: the other's stats without the hook" "$(field "$T/$s.rawstats" rc)" 0
  expect_eq "$s: accounting pids" "$(field <(line "$f" acct) pids)" "$own"
  expect_eq "$s: accounting rc" "$(field <(line "$f" acct) rc)" 0
  expect_eq "$s: the other slice's stats (NOT_FOUND)" "$(field "$T/$s.otherstats" rc)" 6
  expect_eq "$s: its own stats" "$(field "$T/$s.ownstats" rc)" 0
  expect_eq "$s, pid offset: accounting pids listed" "$(field <(line "$T/$s.off" acct) count)" 0
  # Samples: GPU utilization is the slice's figure, one sample; the device's are more.
  util=$(field <(line "$f" util) util)
  l=$(line "$f" samples "type=1 ")
  expect_eq "$s: utilization samples rc" "$(field <(echo "$l") rc)" 0
  expect_eq "$s: utilization samples" "$(field <(echo "$l") n)" 1
  local v=$(field <(echo "$l") max) d=$(field <(line "$raw" samples "type=1 ") max)
  [ "$v" -ge $((util - 5)) ] && [ "$v" -le $((util + 5)) ] ||
    fail "$s: utilization sample $v%, the slice's utilization $util% (the device's: $d%)"
  echo "ok: $s: utilization sample $v% (the slice's $util%, the device's $d%)"
  expect_eq "$s: encoder samples (N/A)" "$(field <(line "$f" samples "type=3 ") rc)" 3
  expect_eq "$s: encoder samples without the hook" "$(field <(line "$raw" samples "type=3 ") rc)" 0
  expect_eq "$s: power samples" "$(line "$f" samples "type=0 ")" \
    "samples gpu=0 type=0 rc=0 n=6 max=350000"
  # Fields: the device's traffic N/A, the board's figures as they are.
  for id in 138 141 197 198; do
    expect_eq "$s: field $id without the hook" "$(field <(line "$raw" field "id=$id ") rc)" 0
    expect_eq "$s: field $id (N/A)" "$(line "$f" field "id=$id ")" \
      "field gpu=0 id=$id rc=3 val=0"
  done
  expect_eq "$s: memory temperature" "$(line "$f" field "id=82 ")" "field gpu=0 id=82 rc=0 val=45"
  expect_eq "$s: power" "$(line "$f" field "id=186 ")" "field gpu=0 id=186 rc=0 val=350000"
  expect_eq "$s: BAR1 total" "$(field <(line "$f" bar1) total)" "$(field <(line "$raw" bar1) total)"
  # Video engines: the slice's sessions only; the device's load N/A.
  local kind fps lat
  for kind in enc fbc; do
    echo "$(field <(line "$raw" $kind) pids)" | tr , '\n' | qgrep -x "$other" ||
      fail "$s: NVML without the hook does not list $other's $kind session: $(line "$raw" $kind)"
    expect_eq "$s: $kind sessions" "$(line "$f" $kind)" "$kind gpu=0 rc=0 count=1 pids=$own"
    expect_eq "$s, pid offset: $kind sessions" "$(field <(line "$T/$s.off" $kind) count)" 0
    [ $kind = enc ] && fps=30 lat=2000 || fps=60 lat=1000
    expect_eq "$s: ${kind}stats" "$(line "$f" ${kind}stats)" \
      "${kind}stats gpu=0 rc=0 n=1 fps=$fps lat=$lat"
    expect_eq "$s: ${kind}stats without the hook" "$(field <(line "$raw" ${kind}stats) n)" 2
  done
  expect_eq "$s: encoder utilization without the hook" "$(line "$raw" engine name=enc)" \
    "engine gpu=0 name=enc rc=0 util=20"
  for kind in enc dec jpg ofa; do
    expect_eq "$s: $kind utilization (N/A)" "$(line "$f" engine name=$kind)" \
      "engine gpu=0 name=$kind rc=3 util=0"
  done
  expect_eq "$s: encoder capacity without the hook" "$(line "$raw" enccap)" "enccap gpu=0 rc=0 cap=80"
  expect_eq "$s: encoder capacity (N/A)" "$(line "$f" enccap)" "enccap gpu=0 rc=3 cap=0"
  # PCIe throughput: the device's traffic, every slice's.
  expect_eq "$s: PCIe throughput without the hook" "$(field <(line "$raw" pcie) rc)" 0
  echo "ok: $s: PCIe TX without the hook $(field <(line "$raw" pcie) tx) KB/s (the device's)"
  expect_eq "$s: PCIe throughput (N/A)" "$(line "$f" pcie)" "pcie gpu=0 rc=3 tx=0"
  # GPM: the device's counters without the hook; none inside the slice.
  l=$(line "$raw" gpm)
  expect_eq "$s: GPM without the hook" "$(echo "$l" | cut -d' ' -f3-7)" \
    "rc=0 supported=1 sample=0 metrics=0 metric_rc=0"
  echo "ok: $s: GPM SM occupancy without the hook $(field <(echo "$l") util)% (the device's)"
  expect_eq "$s: GPM" "$(line "$f" gpm)" \
    "gpm gpu=0 rc=0 supported=0 sample=3 metrics=3 metric_rc=3 util=0"
}
check a "$PA" "$PB"
check b "$PB" "$PA"

# Two GPUs, the slice given the second: the first is not found by serial or bus id (v1).
export GSLICE_SIM_STATE="$T/sim2" GSLICE_SIM_DEVICES=2
"$LEAKS" ids > "$T/ids" 2>&1 || fail "nvml_leaks ids: $(cat "$T/ids")"
s0=$(sed -n 's/^dev index=0 serial=\([^ ]*\).*/\1/p' "$T/ids")
s1=$(sed -n 's/^dev index=1 serial=\([^ ]*\).*/\1/p' "$T/ids")
b0=$(sed -n 's/^dev index=0 .* bus=\([^ ]*\)/\1/p' "$T/ids")
b1=$(sed -n 's/^dev index=1 .* bus=\([^ ]*\)/\1/p' "$T/ids")
[ -n "$s0" ] && [ "$s0" != "$s1" ] && [ -n "$b0" ] || fail "two GPUs: $(cat "$T/ids")"
for q in "serial $s0 6" "serial $s1 0" "bus1 $b0 6" "bus1 $b1 0"; do
  set -- $q
  expect_eq "two GPUs, without the hook: by $1 $2" "$("$LEAKS" "$1" "$2")" "$1 rc=0"
  expect_eq "CUDA_VISIBLE_DEVICES=1: by $1 $2 (NVML_ERROR_NOT_FOUND is 6)" \
    "$(CUDA_VISIBLE_DEVICES=1 LD_PRELOAD="$HOOK" GSLICE_STATE_DIR="$T/slice2" "$LEAKS" "$1" "$2")" \
    "$1 rc=$3"
done
# Topology and MIG, the slice given the second GPU: the lists leave the first out, and a handle
# of it (forged from the handles' stride, as NVML's table is laid out) names no device.
t=$("$LEAKS" topo)
stride=$(echo "$t" | sed -n 's/.*stride=\([-0-9]*\).*/\1/p')
expect_eq "two GPUs, without the hook: topology" "$t" "topo stride=$stride nearest=0:1 gpuset=0:2 self=0:0"
expect_eq "two GPUs, without the hook: the first GPU's handle forged" \
  "$("$LEAKS" topo "$stride" | tail -4)" "forged mig=0 max=0 mighandle=6 gis=3 gi=3
forged mem=0 mem2=0
forged util=0 procs=0 samples=0 acct=0 fields=0 enc=0 pcie=0 gpm=0
forged index=0 ancestor=0 p2p=0 board=0 nearest=0"
t=$(CUDA_VISIBLE_DEVICES=1 LD_PRELOAD="$HOOK" GSLICE_STATE_DIR="$T/slice2" "$LEAKS" topo "$stride")
expect_eq "CUDA_VISIBLE_DEVICES=1: topology" "$t" "topo stride=0 nearest=0:0 gpuset=0:1 self=0:0
forged mig=2 max=2 mighandle=2 gis=2 gi=2
forged mem=2 mem2=2
forged util=2 procs=2 samples=2 acct=2 fields=2 enc=2 pcie=2 gpm=2
forged index=2 ancestor=2 p2p=2 board=2 nearest=2"
pass "no call shows a slice another slice's pids, sessions, stats or traffic, the device's load or counters, or a GPU not its own"
