#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice run names its slice's GPUs by UUID in CUDA_VISIBLE_DEVICES (docs/cli.md, "gslice run"),
# on two simulated GPUs that CUDA's default order (FASTEST_FIRST) numbers otherwise than NVML:
# GPU 1 has more SMs (GSLICE_SIM_DEVICE_SMS), so CUDA's device 0 is NVML's GPU 1.
#  - The sim's order: FASTEST_FIRST puts GPU 1 first, CUDA_DEVICE_ORDER=PCI_BUS_ID NVML's order;
#    an index in CUDA_VISIBLE_DEVICES is read in that order, a UUID names its GPU in either.
#  - gslice run --gpu 1 puts its process on the daemon's GPU 1 (CUDA's UUID of its device 0 is the
#    daemon's GPU 1's); it was on GPU 0 with CUDA_VISIBLE_DEVICES=1. --gpu 0,1 in index order;
#    no --gpu is GPU 0; a CUDA_VISIBLE_DEVICES of the user's is kept without --gpu, replaced with.
#  - With CUDA unable to start (the sim's process slots taken), NVML through the hook shows such a
#    process its slice's GPU (the UUIDs are matched without CUDA); it showed none with the index.
#  - A daemon without NVML (no UUIDs): the indices, CUDA_DEVICE_ORDER=PCI_BUS_ID, said once.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
C="$TBIN/sim_client_linked"
P="$TBIN/nvml_closed"
[ -x "$C" ] && [ -x "$P" ] || skip "sim_client_linked or nvml_closed not built"
export GSLICE_SIM_DEVICES=2 GSLICE_SIM_DEVICE_SMS=1:144
unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
start_daemon
uuid_of() { "$BIN/gslice" status --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['gpus'][$1]['uuid'])"; }
U0=$(uuid_of 0)
U1=$(uuid_of 1)
[[ "$U0" == GPU-* && "$U1" == GPU-* && "$U0" != "$U1" ]] || fail "the daemon's UUIDs: '$U0' '$U1'"

# CUDA's devices as "UUID UUID..." in its order.
cuda_uuids() { "$C" devices | sed -n 's/^device [0-9]* uuid=\([^ ]*\) .*/\1/p' | paste -sd' '; }
expect_eq "FASTEST_FIRST (the default)" "$(LD_PRELOAD= cuda_uuids)" "$U1 $U0"
expect_eq "CUDA_DEVICE_ORDER=FASTEST_FIRST" "$(CUDA_DEVICE_ORDER=FASTEST_FIRST cuda_uuids)" "$U1 $U0"
expect_eq "CUDA_DEVICE_ORDER=PCI_BUS_ID" "$(CUDA_DEVICE_ORDER=PCI_BUS_ID cuda_uuids)" "$U0 $U1"
expect_eq "CUDA_VISIBLE_DEVICES=1, FASTEST_FIRST" "$(CUDA_VISIBLE_DEVICES=1 cuda_uuids)" "$U0"
expect_eq "CUDA_VISIBLE_DEVICES=1, PCI_BUS_ID" \
  "$(CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1 cuda_uuids)" "$U1"
expect_eq "CUDA_VISIBLE_DEVICES=$U1, FASTEST_FIRST" "$(CUDA_VISIBLE_DEVICES="$U1" cuda_uuids)" "$U1"
expect_eq "CUDA_VISIBLE_DEVICES=$U0, PCI_BUS_ID" \
  "$(CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES="$U0" cuda_uuids)" "$U0"
pass "the sim's CUDA order: FASTEST_FIRST by SMs, PCI_BUS_ID NVML's; indices in that order"

# What a slice's process sees: its environment's two variables, then CUDA's devices.
inside() { # GSRUN-ARGS...
  gsrun "$@" -- bash -c 'echo "cvd=${CUDA_VISIBLE_DEVICES-unset} order=${CUDA_DEVICE_ORDER-unset}"
    "$0" devices | sed -n "s/^device [0-9]* uuid=\([^ ]*\) .*/\1/p" | paste -sd" "' "$C"
}
expect_eq "gslice run --gpu 1" "$(inside --gpu 1)" "cvd=$U1 order=unset
$U1"
expect_eq "gslice run --gpu 0" "$(inside --gpu 0)" "cvd=$U0 order=unset
$U0"
expect_eq "gslice run --gpu 0,1" "$(inside --gpu 0,1)" "cvd=$U0,$U1 order=unset
$U0 $U1"
expect_eq "gslice run --gpu 1,0 (index order)" "$(inside --gpu 1,0)" "cvd=$U0,$U1 order=unset
$U0 $U1"
expect_eq "gslice run (GPU 0)" "$(inside)" "cvd=$U0 order=unset
$U0"
expect_eq "gslice run, the user's CUDA_VISIBLE_DEVICES=1 kept" \
  "$(CUDA_VISIBLE_DEVICES=1 inside)" "cvd=1 order=unset
$U0"
expect_eq "gslice run --gpu 1, the user's CUDA_VISIBLE_DEVICES=0 replaced" \
  "$(CUDA_VISIBLE_DEVICES=0 inside --gpu 1)" "cvd=$U1 order=unset
$U1"
gsrun --gpu 1 -- true 2>"$T/err"
[ ! -s "$T/err" ] || fail "gslice run --gpu 1 said: $(cat "$T/err")"
pass "gslice run --gpu N: the process on the daemon's GPU N, named by UUID"

# NVML through the hook where CUDA cannot start: every process slot of the sim taken.
LD_PRELOAD= "$P" hold 256 >"$T/hold" 2>&1 &
H=$!
for _ in $(seq 200); do
  qgrep '^held' "$T/hold" && break
  sleep 0.05
done
qgrep '^held' "$T/hold" || fail "holders: $(cat "$T/hold")"
expect_eq "cuInit with every slot taken" "$(LD_PRELOAD= "$P" cuinit 2>/dev/null)" "cuinit rc=304"
expect_eq "NVML of gslice run --gpu 1's process, CUDA not starting" \
  "$(gsrun --gpu 1 -- "$P" count "$U1" 2>"$T/err" | sed 's/ stride=.*//')" "count rc=0 n=1
dev i=0 uuid=$U1
handle0 rc=0
byuuid rc=0"
kill "$H"
wait "$H" 2>/dev/null || true
pass "CUDA not starting: NVML shows gslice run --gpu 1's process its slice's GPU"

# A daemon without NVML knows no UUID: the indices, in NVML's (bus) order.
stop_daemon
if LD_LIBRARY_PATH=/nonexistent "$BIN/gsliced" --state-dir "$DSTATE" --foreground \
  --set gpus=2 2>>"$T/gsliced.log" &
then DAEMON_PID=$!; fi
for _ in $(seq 100); do
  [ -S "$GSLICE_SOCKET" ] && "$BIN/gslice" status >/dev/null 2>&1 && break
  sleep 0.05
done
if [ -n "$(uuid_of 1)" ]; then
  skip_part "a daemon without NVML: a libnvidia-ml.so.1 outside the sim answers here"
else
  expect_eq "gslice run --gpu 1, no UUID" "$(inside --gpu 1 2>"$T/err")" "cvd=1 order=PCI_BUS_ID
$U1"
  expect_eq "what gslice run said" "$(cat "$T/err")" "gslice: the daemon knows no UUID of GPU 1 \
(gsliced without NVML?): CUDA_VISIBLE_DEVICES=1 names the slice's GPUs by index, with \
CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA numbers them as NVML does"
  pass "a daemon without UUIDs: the indices with CUDA_DEVICE_ORDER=PCI_BUS_ID, said once"
fi
