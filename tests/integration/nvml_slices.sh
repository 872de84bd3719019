#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nvidia-smi inside a slice tells the truth about the slice (docs/nvml.md). Two slices on one
# simulated GPU, a hard 30% (1 GiB) and a 70% (2 GiB), each running compute_spin; inside each,
# nvml_smi makes nvidia-smi's NVML calls through the hook:
#  - the process lists (compute v3 and v1, the two-call protocol) hold only the slice's own
#    process, with the memory the slice counts for it, under the pid its namespace sees;
#  - memory total is the cap, used the slice's (v1 and v2);
#  - utilization is the slice's share (about 30 and 70, not the device's 100), also where only
#    the newer per-process call answers (Blackwell), and both per-process calls give the
#    slice's pids only;
#  - with NVML's pids another namespace's (GSLICE_SIM_NVML_PID_OFFSET, as in a container) the
#    list still shows the slice's processes by their own pids, and utilization is still the
#    slice's share: gsliced's measured figure, which it writes into the slice's region each
#    second, never the device's;
#  - with gsliced gone (its last figure older than 3 s) utilization is as without it: the
#    per-process samples where NVML's pids are the slice's, N/A where they are not;
#  - with two GPUs and CUDA_VISIBLE_DEVICES=1, NVML shows the one GPU, numbered 0.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
SMI="$TBIN/nvml_smi"
[ -x "$SMI" ] || skip "nvml_smi not built"
OFFSET=100000
GiB=$((1 << 30))

# inside SLICE [HOLD [GONE]]: compute_spin in the background, nvidia-smi's calls once it is busy
# (plain, with a pid offset), then the device as NVML sees it without the hook; with GONE, the
# same again once gsliced has been gone for longer than its figure stays fresh.
inside() {
  local s=$1 hold=${2:-0} gone=${3:-0} duration=5
  [ "$gone" = 0 ] || duration=9
  cat > "$T/$s.sh" << EOF
"$TBIN/compute_spin" --start $START --warmup 1 --duration $duration --label $s > "$T/$s.spin" &
echo \$! > "$T/$s.pid"
if [ $hold != 0 ]; then
  "$TBIN/sim_client_linked" hold $hold > "$T/$s.hold" 2>&1 &
  echo \$! > "$T/$s.holdpid"
fi
sleep \$(awk -v s=$START -v n=\$(date +%s.%N) 'BEGIN { d = s + 3 - n; print (d > 0 ? d : 0) }')
LD_PRELOAD= "$SMI" > "$T/$s.raw1" 2> "$T/$s.raw.err"
"$SMI" > "$T/$s.smi" 2> "$T/$s.smi.err"
LD_PRELOAD= "$SMI" > "$T/$s.raw" 2> "$T/$s.raw.err"
GSLICE_SIM_NVML_NO_PROCESS_UTILIZATION=1 "$SMI" > "$T/$s.bw" 2> "$T/$s.bw.err"
LD_PRELOAD= "$SMI" > "$T/$s.raw3" 2> "$T/$s.raw.err"
GSLICE_SIM_NVML_PID_OFFSET=$OFFSET "$SMI" > "$T/$s.off" 2> "$T/$s.off.err"
LD_PRELOAD= "$SMI" > "$T/$s.raw4" 2> "$T/$s.raw.err"
touch "$T/$s.done1"
if [ $gone != 0 ]; then
  while [ ! -e "$T/gone" ]; do sleep 0.05; done
  sleep 3.5 # past the freshness (3 s) of the last figure gsliced wrote
  LD_PRELOAD= "$SMI" > "$T/$s.graw1" 2> "$T/$s.raw.err"
  "$SMI" > "$T/$s.gsmi" 2> "$T/$s.gsmi.err"
  LD_PRELOAD= "$SMI" > "$T/$s.graw2" 2> "$T/$s.raw.err"
  GSLICE_SIM_NVML_NO_PROCESS_UTILIZATION=1 "$SMI" > "$T/$s.gbw" 2> "$T/$s.gbw.err"
  LD_PRELOAD= "$SMI" > "$T/$s.graw3" 2> "$T/$s.raw.err"
  GSLICE_SIM_NVML_PID_OFFSET=$OFFSET "$SMI" > "$T/$s.goff" 2> "$T/$s.goff.err"
fi
[ $hold = 0 ] || kill \$(cat "$T/$s.holdpid")
wait
EOF
}

start_daemon
START=$(at 1.5)
daemon_wait_over "$(at 2.5)" 2.5 # the slices' first second busy, ending before gsliced goes
inside a 0 gone
inside b $((512 << 20)) # and a second process, holding 512 MiB beside its context
gsrun --compute 30 --compute-limit 30 --memory 1GiB --name a -- bash "$T/a.sh" &
A=$!
gsrun --compute 70 --memory 2GiB --name b -- bash "$T/b.sh" &
B=$!
# Both slices' reads done (and the daemon's CPU wait measured): gsliced goes (slice a reads
# again once its last figure is stale).
for _ in $(seq 400); do
  [ -e "$T/a.done1" ] && [ -e "$T/b.done1" ] && [ -s "$T/daemon_wait" ] && break
  sleep 0.05
done
stop_daemon
touch "$T/gone"
wait $A || fail "slice a failed: $(cat "$T"/a.*err)"
wait $B || fail "slice b failed: $(cat "$T"/b.*err)"
cat "$T/a.smi" "$T/b.smi"
PA=$(cat "$T/a.pid")
PB=$(cat "$T/b.pid")

# Without the hook NVML shows both processes (the fixture is what the checks assume).
for s in a b; do
  qgrep "^proc gpu=0 pid=$PA " "$T/$s.raw" && qgrep "^proc gpu=0 pid=$PB " "$T/$s.raw" ||
    fail "NVML without the hook does not list both slices' processes: $(cat "$T/$s.raw")"
done
raw_util=$(sed -n 's/^gpu .* util=\([0-9]*\).*/\1/p' "$T/a.raw")
echo "device utilization without the hook: $raw_util%"

# bracket NAME UTIL PID BEFORE AFTER [SLACK]: UTIL within SLACK (4) points of the range PID's
# samples span in the runs without the hook just before and after (sets raw, the later one).
# gsliced's figure (SLACK 10) is the device time charged to the slice over the second before its
# last housekeeping (up to 1 s before the read), charged as each token's kernels end: NVML's
# samples cover the second before the read, and the two differed by up to 8 points either way
# on a loaded 2-core machine. A process kept from a CPU while its slice holds the token leaves
# the device idle, and that time is charged to the slice (docs/compute.md) but is in no sample:
# where the host starved a workload, gsliced's figure is reported against the samples, not
# checked (a sanitizer build's slow hook read 51% for a 70% slice whose process's samples said
# 31%, the device at 52%).
bracket() {
  local a slack=${6:-4}
  a=$(sed -n "s/^putil gpu=0 pid=$3 sm=\([0-9]*\)/\1/p" "$4")
  raw=$(sed -n "s/^putil gpu=0 pid=$3 sm=\([0-9]*\)/\1/p" "$5")
  [ -n "$a" ] && [ -n "$raw" ] || fail "$1: NVML without the hook has no sample of $3"
  local lo=$((a < raw ? a : raw)) hi=$((a > raw ? a : raw))
  [ "$2" -ge $((lo - slack)) ] && [ "$2" -le $((hi + slack)) ] && return 0
  local why="$1: utilization $2%, the device said $a% then $raw% for its process"
  if [ "$slack" -gt 4 ] && starved "$T/a.spin $T/b.spin" 2> "$T/starved"; then
    skip_part "$why: $(cat "$T/starved")"
  else
    fail "$why"
  fi
}

# check SLICE "OWN_PIDS" "OTHER_PIDS" CAP LO HI: OWN_PIDS' first runs the kernels.
check() {
  local s=$1 own=$2 other=$3 cap=$4 lo=$5 hi=$6 f="$T/$1.smi" gpu list used=0 util raw p u n
  gpu=$(grep '^gpu ' "$f")
  list=$(grep '^list ' "$f")
  n=$(echo $own | wc -w)
  expect_eq "$s: compute processes" "$(field <(echo "$list") compute)" "$n"
  expect_eq "$s: v1 compute processes" "$(field <(echo "$list") compute_v1)" "$n"
  expect_eq "$s: graphics processes" "$(field <(echo "$list") graphics)" 0
  expect_eq "$s: a one-short buffer" "$(field <(echo "$list") short)" "7:$n"
  for p in $own; do
    qgrep "^proc gpu=0 pid=$p used=[1-9][0-9]* name=\(compute_spin\|sim_client_linked\)$" "$f" ||
      fail "$s: its process $p is not listed with its memory and name: $(grep '^proc' "$f")"
    u=$(sed -n "s/^proc gpu=0 pid=$p used=\([0-9]*\).*/\1/p" "$f")
    used=$((used + u))
    # NVML's pids shifted, as a container's pid namespace does: the slice's own pids still.
    qgrep "^proc gpu=0 pid=$p used=$u name=" "$T/$s.off" ||
      fail "$s, pid offset: its process $p is not shown by its own pid: $(grep '^proc' "$T/$s.off")"
    ! qgrep "pid=$((p + OFFSET)) " "$T/$s.off" || fail "$s, pid offset: NVML's pid shown"
    # NVML 12.4's list call gives the same, by the same pids.
    for g in "$f" "$T/$s.off"; do
      field "$g" detail | tr ':,' '\n\n' | qgrep -x "$p/$u" ||
        fail "$s: $p/$u not in the detail list of $g: $(field "$g" detail)"
    done
  done
  expect_eq "$s: detail list count" "$(field "$f" detail | cut -d: -f1)" "$n"
  for p in $other; do
    ! qgrep "pid=$p \|pid=$((p + OFFSET)) " "$f" "$T/$s.off" ||
      fail "$s: the other slice's process $p is shown: $(cat "$f" "$T/$s.off")"
  done
  expect_eq "$s: memory total (the cap)" "$(field <(echo "$gpu") total)" "$cap"
  expect_eq "$s: memory used (its processes')" "$(field <(echo "$gpu") used)" "$used"
  expect_eq "$s: v2 total" "$(field <(echo "$gpu") total2)" "$cap"
  expect_eq "$s: v2 used" "$(field <(echo "$gpu") used2)" "$used"
  expect_eq "$s: v2 reserved" "$(field <(echo "$gpu") reserved2)" 0
  expect_eq "$s: v2 used + free = total" \
    $(($(field <(echo "$gpu") used2) + $(field <(echo "$gpu") free2))) "$cap"
  util=$(field <(echo "$gpu") util)
  # What the device said of the slice's kernels just before and after (NVML without the hook:
  # its process's sample): the slice's figure is that, whatever the host let the workloads run.
  set -- $own
  bracket "$s" "$util" "$1" "$T/$s.raw1" "$T/$s.raw" 10
  echo "ok: $s: utilization $util% (its process: $raw%, the device: $raw_util%)"
  share "$s" "$util" "$lo" "$hi"
  qgrep "^putil gpu=0 pid=$1 sm=" "$f" || fail "$s: no utilization sample of its process"
  qgrep "^putil2 gpu=0 pid=$1 sm=" "$f" || fail "$s: no sample of its process (newer call)"
  for p in $other; do
    ! qgrep "^putil2\? gpu=0 pid=$p " "$f" || fail "$s: the other slice's sample is shown"
  done
  # Where only the newer per-process call answers (Blackwell): the same share (gsliced's here;
  # from that call's samples once gsliced is gone, below).
  qgrep "^putil gpu=0 none rc=3" "$T/$s.bw" || fail "$s: the old call answered: $(cat "$T/$s.bw")"
  qgrep "^putil2 gpu=0 pid=$1 sm=" "$T/$s.bw" || fail "$s: no newer sample: $(cat "$T/$s.bw")"
  bracket "$s, newer call only" "$(field <(grep '^gpu ' "$T/$s.bw") util)" "$1" "$T/$s.raw" \
    "$T/$s.raw3" 10
  # Another namespace's pids: NVML's samples cannot be told apart (none shown), but the share
  # gsliced measured for the slice is still its own: about 30 and 70, not N/A nor the device's.
  qgrep "^putil gpu=0 none rc=6" "$T/$s.off" || fail "$s, pid offset: samples shown"
  util=$(field <(grep '^gpu ' "$T/$s.off") util)
  [ "$util" != na ] || fail "$s, pid offset: utilization N/A with gsliced measuring the slice"
  bracket "$s, pid offset" "$util" "$1" "$T/$s.raw3" "$T/$s.raw4" 10
  share "$s, pid offset" "$util" "$lo" "$hi"
  echo "ok: $s, pid offset: utilization $util% (its process: $raw%)"
  expect_eq "$s, pid offset: memory utilization (not measured)" \
    "$(field <(grep '^gpu ' "$T/$s.off") memutil)" 0
}
# share NAME UTIL LO HI: UTIL is the slice's share, unless the host kept the workloads from a CPU
# (then the device idled).
share() {
  if [ "$2" -lt "$3" ] || [ "$2" -gt "$4" ]; then
    if [ "$2" -le "$4" ] && starved "$T/a.spin $T/b.spin" 2> "$T/starved"; then
      skip_part "$1: utilization $2%, want $3..$4%: $(cat "$T/starved")"
    else
      fail "$1: utilization $2%, want $3..$4% (its share)"
    fi
  fi
}
HB=$(cat "$T/b.holdpid")
qgrep "^proc gpu=0 pid=$HB " "$T/b.raw" || fail "NVML without the hook does not list the holder"
check a "$PA" "$PB $HB" "$GiB" 20 40
check b "$PB $HB" "$PA" $((2 * GiB)) 58 82

# gsliced gone, its last figure stale: as without it, the samples of the slice's process where
# NVML's pids are the slice's, N/A where they are another namespace's.
cat "$T/a.gsmi" "$T/a.goff"
util=$(field <(grep '^gpu ' "$T/a.gsmi") util)
bracket "a, gsliced gone" "$util" "$PA" "$T/a.graw1" "$T/a.graw2"
echo "ok: a, gsliced gone: utilization $util% (its process: $raw%)"
util=$(field <(grep '^gpu ' "$T/a.gbw") util)
bracket "a, gsliced gone, newer call only" "$util" "$PA" "$T/a.graw2" "$T/a.graw3"
echo "ok: a, gsliced gone, newer call only: utilization $util% (its process: $raw%)"
expect_eq "a, gsliced gone, pid offset: utilization" "$(field <(grep '^gpu ' "$T/a.goff") util)" na

# Two GPUs, the slice given the second: NVML shows it alone, as CUDA does, numbered 0.
export GSLICE_SIM_STATE="$T/sim2" GSLICE_SIM_DEVICES=2
"$SMI" > "$T/two.raw" 2>&1 || fail "nvml_smi on two GPUs: $(cat "$T/two.raw")"
uuid1=$(grep '^gpu ' "$T/two.raw" | sed -n 2p | sed 's/.* uuid=\([^ ]*\).*/\1/')
CUDA_VISIBLE_DEVICES=1 LD_PRELOAD="$HOOK" GSLICE_STATE_DIR="$T/slice2" "$SMI" > "$T/two" 2>&1 ||
  fail "nvml_smi with CUDA_VISIBLE_DEVICES=1: $(cat "$T/two")"
expect_eq "CUDA_VISIBLE_DEVICES=1: devices" "$(sed -n 's/^devices=//p' "$T/two")" 1
expect_eq "CUDA_VISIBLE_DEVICES=1: the GPU shown" \
  "$(grep '^gpu ' "$T/two" | sed 's/.* uuid=\([^ ]*\).*/\1/')" "$uuid1"
expect_eq "CUDA_VISIBLE_DEVICES=1: its index" "$(field <(grep '^gpu ' "$T/two") index)" 0
uuid0=$(grep '^gpu ' "$T/two.raw" | head -1 | sed 's/.* uuid=\([^ ]*\).*/\1/')
for q in "bus 00000000:01:00.0 6" "bus 0000:02:00.0 0" "uuid $uuid0 6" "uuid $uuid1 0"; do
  set -- $q
  expect_eq "CUDA_VISIBLE_DEVICES=1: by $1 $2 (NVML_ERROR_NOT_FOUND is 6)" \
    "$(CUDA_VISIBLE_DEVICES=1 LD_PRELOAD="$HOOK" GSLICE_STATE_DIR="$T/slice2" "$SMI" "$1" "$2")" \
    "$1 rc=$3"
done
LD_PRELOAD="$HOOK" GSLICE_STATE_DIR="$T/slice2" "$SMI" > "$T/two.all" 2>&1
expect_eq "no CUDA_VISIBLE_DEVICES: devices" "$(sed -n 's/^devices=//p' "$T/two.all")" 2
# No cap: NVML keeps the device's total, and used is the slice's (none here), not a stranger's
# 768 MiB (a process without the hook, on GPU 0).
"$TBIN/sim_client_linked" hold $((512 << 20)) > "$T/stranger" 2>&1 &
for _ in $(seq 300); do grep -q holding "$T/stranger" && break; sleep 0.05; done
LD_PRELOAD="$HOOK" GSLICE_STATE_DIR="$T/slice3" "$SMI" > "$T/nocap" 2>&1 ||
  fail "nvml_smi without a cap: $(cat "$T/nocap")"
gpu0=$(grep '^gpu ' "$T/nocap" | head -1)
expect_eq "no cap: used (the slice's)" "$(field <(echo "$gpu0") used)" 0
expect_eq "no cap: total (the device's)" "$(field <(echo "$gpu0") total)" $((16 * GiB))
expect_eq "no cap: processes" "$(field <(grep '^list gpu=0' "$T/nocap") compute)" 0
pass "each slice sees its own process, memory and share; container pids; its GPUs only"
