#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# NVML through the hook where it answered for the whole node or another tenant (the fourth attack
# run of 2026-12-02; docs/nvml.md). Two simulated GPUs; tests/progs/nvml_closed makes the calls.
#  - The v1 NVLink far end (nvmlDeviceGetNvLinkRemotePciInfo) as _v2: with
#    CUDA_VISIBLE_DEVICES=1 the links to GPU 0 NVML_ERROR_NO_PERMISSION (4), the NVSwitch's
#    NVML's; clock event reasons without GpuIdle (an idle slice learnt whether others ran); CC
#    protected memory NVML's answer (3: CC off); event sets: the slice's GPU registered, a
#    handle of the other GPU (forged from the handles' stride) refused (2) by these calls.
#  - Every wrapped call with NULL outputs answers NVML_ERROR_INVALID_ARGUMENT (2) as NVML does,
#    never a store through NULL (nvmlDeviceGetIndex(d, NULL) was SUCCESS with the filter off).
#  - The per-process samples' size calls of a slice with no process on the device say the same
#    whether another tenant ran there or not (NVML_ERROR_NOT_FOUND, 6): the newer call's said 1
#    while the other ran (7:1), 0 after.
#  - With CUDA unable to start (the sim's 256 process slots taken), a slice's process
#    (GSLICE_MEMORY_LIMIT or GSLICE_SLICE set) sees no GPU, says why, and finds none by UUID;
#    with CUDA_VISIBLE_DEVICES as a UUID it sees that GPU; a process with no slice sees NVML's
#    list as before. It saw both GPUs before.
source "$GSLICE_SRC/tests/integration/lib.sh"
P="$TBIN/nvml_closed"
[ -x "$P" ] || skip "nvml_closed not built"
export GSLICE_SIM_DEVICES=2
raw() { LD_PRELOAD= "$P" "$@"; }
hooked() { LD_PRELOAD="$HOOK" "$P" "$@"; }

c=$(raw count)
stride=$(sed -n 's/^count rc=0 n=2 stride=\(-\?[0-9]*\)$/\1/p' <<< "$c")
[ -n "$stride" ] && [ "$stride" != 0 ] || fail "two GPUs without the hook: $c"
U1=$(sed -n 's/^dev i=1 uuid=//p' <<< "$c")

# The v1 NVLink far end, clock event reasons, CC memory, event sets.
links() { # BUS0..3 RC0..3
  local l
  for l in 0 1 2 3; do echo "link1 l=$l rc=$2 bus=$1"; done
  for l in 4 5; do echo "link1 l=$l rc=0 bus=0000:C0:00.0"; done
}
expect_eq "without the hook: v1 far ends, reasons, CC, events, GPU 0 by its handle" \
  "$(raw f9 "$stride")" "$(links 0000:02:00.0 0)
clocks reasons=0:1 throttle=0:1
cc rc=3
events create=0 reg=0 wait=10
forged link1=0 clocks=0 throttle=0 cc=3 reg=0"
expect_eq "CUDA_VISIBLE_DEVICES=1: v1 far ends, reasons, CC, events, GPU 0 forged" \
  "$(CUDA_VISIBLE_DEVICES=1 hooked f9 "$stride")" "$(links "" 4)
clocks reasons=0:0 throttle=0:0
cc rc=3
events create=0 reg=0 wait=10
forged link1=2 clocks=2 throttle=2 cc=2 reg=2"
pass "v1 NVLink far end, clock event reasons, CC memory and event sets kept to the slice"

# NULL outputs.
want=$(raw null) || fail "NULL outputs without the hook: $want"
[ "$(grep -c '^null ' <<< "$want")" -ge 50 ] || fail "NULL outputs without the hook: $want"
qgrep -v '=2$' <<< "$want" && fail "NVML answered a NULL output with other than 2: $want"
expect_eq "NULL outputs through the hook" "$(hooked null)" "$want"
expect_eq "NULL outputs through the hook, CUDA_VISIBLE_DEVICES=1" \
  "$(CUDA_VISIBLE_DEVICES=1 hooked null)" "$want"
pass "$(grep -c '^null ' <<< "$want") wrapped calls with NULL outputs: INVALID_ARGUMENT as NVML"

# The per-process samples' size calls of a slice idle on GPU 0, before and while another runs.
attacker() { CUDA_VISIBLE_DEVICES=0 GSLICE_MEMORY_LIMIT=1GiB hooked samples; }
none="samples gpu=0 old=6:0 new=6:0 oldfill=6:0 newfill=6:0"
expect_eq "an idle slice's samples, GPU 0 idle" "$(attacker)" "$none"
LD_PRELOAD= CUDA_VISIBLE_DEVICES=0 "$TBIN/compute_spin" --duration 6 --warmup 0 --label v \
  > "$T/v" 2>&1 &
V=$!
for _ in $(seq 100); do
  raw samples | qgrep '^samples gpu=0 old=7:72 new=7:1 ' && break
  sleep 0.05
done
raw samples | qgrep '^samples gpu=0 old=7:72 new=7:1 oldfill=0:1 newfill=0:1' ||
  fail "no sample of the other tenant's process: $(raw samples)"
expect_eq "an idle slice's samples, another tenant busy on GPU 0" "$(attacker)" "$none"
kill "$V" 2>/dev/null || true
wait "$V" 2>/dev/null || true
pass "the per-process samples' size calls say nothing of another tenant's process"

# CUDA unable to start: every process slot of the sim taken.
LD_PRELOAD= "$P" hold 256 > "$T/hold" 2>&1 &
H=$!
for _ in $(seq 200); do
  qgrep '^held' "$T/hold" && break
  sleep 0.05
done
qgrep '^held' "$T/hold" || fail "holders: $(cat "$T/hold")"
expect_eq "cuInit with every slot taken" "$(raw cuinit 2>/dev/null)" "cuinit rc=304"
for how in GSLICE_MEMORY_LIMIT=1GiB GSLICE_SLICE=7; do
  got=$(env CUDA_VISIBLE_DEVICES=1 "$how" LD_PRELOAD="$HOOK" "$P" count "$U1" 2> "$T/err")
  expect_eq "a slice ($how), CUDA not starting: devices" "$got" "count rc=0 n=0 stride=0
handle0 rc=2
byuuid rc=6"
  qgrep "NVML shows this process no GPU: its slice's GPUs (CUDA_VISIBLE_DEVICES=1)" "$T/err" ||
    fail "no line saying why: $(cat "$T/err")"
  qgrep "cuInit failed with CUDA error 304" "$T/err" || fail "no CUDA error: $(cat "$T/err")"
done
expect_eq "a slice by UUID, CUDA not starting" \
  "$(CUDA_VISIBLE_DEVICES="$U1" GSLICE_SLICE=7 hooked count "$U1" 2> /dev/null)" \
  "count rc=0 n=1 stride=0
dev i=0 uuid=$U1
handle0 rc=0
byuuid rc=0"
got=$(CUDA_VISIBLE_DEVICES=1 hooked count 2> /dev/null)
[ "$(head -1 <<< "$got")" = "count rc=0 n=2 stride=$stride" ] ||
  fail "no slice, CUDA not starting: NVML's list as before, got $got"
kill "$H"
wait "$H" 2>/dev/null || true
pass "CUDA not starting: a slice sees no GPU (or its UUIDs), a process with no slice NVML's list"
