#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A slice's process works on its slice's GPUs only, and the gate sees the copies it runs there:
#  - gslice run --gpu 1 whose command points CUDA_VISIBLE_DEVICES at GPU 0 (by UUID or index,
#    or unsets it) ran on GPU 0 under GPU 1's cap and token (fifth attack run of 2026-12-02, G7):
#    the hook now checks each CUDA device's UUID against the slice's (GSLICE_GPUS): a device that
#    is not the slice's k-th is left out of cuDeviceGetCount, refused by cuDeviceGet and by
#    context creation (CUDA_ERROR_INVALID_DEVICE), said once with what to do.
#  - A 2D copy's descriptor that another thread changes while the call waits in the gate: the
#    driver gets the copy the gate looked at (a device-to-device copy that turned device-to-host
#    in between went to the host before, ungated had it been the other way round).
#  - Managed memory whose memory type reads HOST (the sim answers so for CU_MEM_ATTACH_HOST, as
#    the driver may) is device work: its copies are gated and counted.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
P="$TBIN/hook_gpus"
[ -x "$P" ] || skip "hook_gpus not built (no simulated driver)"
export GSLICE_SIM_DEVICES=2
unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER GSLICE_GPUS
start_daemon
uuid_of() { "$BIN/gslice" status --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['gpus'][$1]['uuid'])"; }
U0=$(uuid_of 0)
U1=$(uuid_of 1)
[[ "$U0" == GPU-* && "$U1" == GPU-* && "$U0" != "$U1" ]] || fail "the daemon's UUIDs: '$U0' '$U1'"

# inside GSRUN-ARGS -- CMD: CMD (a shell line; $P is the program) inside gslice run, its stdout and
# stderr together.
inside() {
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  gsrun "${args[@]}" -- bash -c "$1" "$P" 2>&1
}
devices() { grep -v '^gslice\['; }
said() { # WHAT OUT TEXT: OUT holds TEXT
  [[ "$2" == *"$3"* ]] || fail "$1: the hook did not say '$3': $2"
}

expect_eq "gslice run --gpu 1" "$(inside --gpu 1 -- '"$0" devices' | devices)" "count rc=0 n=1
device 0 uuid=$U1"
expect_eq "gslice run --gpu 1, a context on device 0" "$(inside --gpu 1 -- '"$0" raw 0')" "get rc=0
retain rc=0
create rc=0
alloc rc=0
memset rc=0"
out=$(inside --gpu 1 -- "CUDA_VISIBLE_DEVICES=$U0 \"\$0\" devices")
expect_eq "gslice run --gpu 1, the command's CUDA_VISIBLE_DEVICES=GPU 0's UUID" \
  "$(devices <<<"$out")" "count rc=0 n=0"
said "CUDA_VISIBLE_DEVICES=GPU 0's UUID" "$out" "CUDA device 0 is $U0, not the slice's GPU 0 ($U1)"
said "CUDA_VISIBLE_DEVICES=GPU 0's UUID" "$out" "Leave CUDA_VISIBLE_DEVICES as gslice run set it"
out=$(inside --gpu 1 -- "CUDA_VISIBLE_DEVICES=$U0 \"\$0\" raw 0")
expect_eq "gslice run --gpu 1, CUDA_VISIBLE_DEVICES=GPU 0's UUID, a context on device 0" \
  "$(devices <<<"$out")" "get rc=101
retain rc=101
create rc=101"
[ "$(grep -c '^gslice\[' <<<"$out")" = 1 ] || fail "the refusal said more than once: $out"
expect_eq "gslice run --gpu 1, CUDA_VISIBLE_DEVICES=0" \
  "$(inside --gpu 1 -- 'CUDA_VISIBLE_DEVICES=0 "$0" devices' | devices)" "count rc=0 n=0"
expect_eq "gslice run --gpu 1, CUDA_VISIBLE_DEVICES unset" \
  "$(inside --gpu 1 -- 'unset CUDA_VISIBLE_DEVICES; "$0" devices' | devices)" "count rc=0 n=0"
out=$(inside --gpu 1 -- "CUDA_VISIBLE_DEVICES=$U1,$U0 \"\$0\" devices")
expect_eq "gslice run --gpu 1, CUDA_VISIBLE_DEVICES=GPU 1's,GPU 0's" "$(devices <<<"$out")" \
  "count rc=0 n=1
device 0 uuid=$U1"
said "CUDA_VISIBLE_DEVICES=GPU 1's,GPU 0's" "$out" "CUDA device 1 is $U0, beyond the slice's 1 GPU"
expect_eq "gslice run --gpu 1, CUDA_VISIBLE_DEVICES=GPU 1's,GPU 0's, a context on device 1" \
  "$(inside --gpu 1 -- "CUDA_VISIBLE_DEVICES=$U1,$U0 \"\$0\" raw 1" | devices)" "get rc=101
retain rc=101
create rc=101"
expect_eq "gslice run --gpu 0,1, the two swapped" \
  "$(inside --gpu 0,1 -- "CUDA_VISIBLE_DEVICES=$U1,$U0 \"\$0\" devices" | devices)" "count rc=0 n=0"
expect_eq "gslice run --gpu 0,1, the first only" \
  "$(inside --gpu 0,1 -- "CUDA_VISIBLE_DEVICES=$U0 \"\$0\" devices" | devices)" "count rc=0 n=1
device 0 uuid=$U0"
# NVML shows what CUDA shows (nvidia-smi in the slice): no GPU past the first that is not the
# slice's. Before, the hook's NVML list followed CUDA's real devices: GPU 0 under --gpu 1.
nvml_gpus() { grep -o '^gpu index=[0-9]* uuid=[^ ]*' | sed 's/^gpu //'; }
S="$TBIN/nvml_smi"
expect_eq "gslice run --gpu 1, NVML" "$(inside --gpu 1 -- "'$S'" | nvml_gpus)" "index=0 uuid=$U1"
expect_eq "gslice run --gpu 1, CUDA_VISIBLE_DEVICES=GPU 0's UUID, NVML" \
  "$(inside --gpu 1 -- "CUDA_VISIBLE_DEVICES=$U0 '$S'" | nvml_gpus)" ""
expect_eq "gslice run --gpu 1, CUDA_VISIBLE_DEVICES=GPU 1's,GPU 0's, NVML" \
  "$(inside --gpu 1 -- "CUDA_VISIBLE_DEVICES=$U1,$U0 '$S'" | nvml_gpus)" "index=0 uuid=$U1"
pass "gslice run --gpu 1: a CUDA_VISIBLE_DEVICES changed to another GPU shows and reaches none of it"

# What stays as it was: a user's own CUDA_VISIBLE_DEVICES without --gpu is kept, unchecked
# (docs/cli.md); an outer GSLICE_GPUS is not inherited; a malformed one stops the program.
expect_eq "gslice run, the user's CUDA_VISIBLE_DEVICES=1 kept" \
  "$(CUDA_VISIBLE_DEVICES=1 inside -- '"$0" devices' | devices)" "count rc=0 n=1
device 0 uuid=$U1"
expect_eq "gslice run --gpu 1 under an outer GSLICE_GPUS" \
  "$(GSLICE_GPUS=$U0 inside --gpu 1 -- 'echo "$GSLICE_GPUS"; "$0" devices' | devices)" "$U1
count rc=0 n=1
device 0 uuid=$U1"
out=$(inside --gpu 1 -- 'GSLICE_GPUS=1 "$0" devices; echo "rc=$?"')
said "GSLICE_GPUS=1" "$out" 'GSLICE_GPUS="1" is not the list of GPU UUIDs'
said "GSLICE_GPUS=1" "$out" "rc=1"
pass "without --gpu the user's CUDA_VISIBLE_DEVICES is kept; GSLICE_GPUS is gslice run's"

# A 2D copy that waits in the gate (the daemon stopped: no grant comes) while another thread makes
# its descriptor a device-to-host one, 300 ms into the call: the bytes land where the descriptor
# the gate looked at said.
race() {
  mkfifo "$T/race.in"
  gsrun --gpu 0 --name race --compute 30 -- "$P" race 300 <"$T/race.in" >"$T/race" 2>&1 &
  local R=$!
  exec 7>"$T/race.in"
  for _ in $(seq 200); do
    qgrep ready "$T/race" && break
    sleep 0.05
  done
  qgrep ready "$T/race" || fail "the race program: $(cat "$T/race")"
  sleep 1 # its set-up's burst closed
  kill -STOP "$DAEMON_PID"
  echo go >&7
  sleep 1
  kill -CONT "$DAEMON_PID"
  exec 7>&-
  wait "$R" || fail "the race program failed: $(cat "$T/race")"
  rm -f "$T/race.in"
}
race
line=$(grep '^race' "$T/race") || fail "the race program said: $(cat "$T/race")"
echo "$line"
if [ "$(field "$T/race" waited_ms)" -lt 500 ]; then
  skip_part "the 2D copy did not wait in the gate ($line): the flip fell after the call"
else
  expect_eq "a 2D copy's descriptor flipped during its wait in the gate" \
    "$(field "$T/race" landed)" device
  pass "a 2D copy's descriptor changed while the call waits: the driver copies what the gate saw"
fi

# Managed memory attached to the host: cuMemcpy and a unified 2D copy, 10 of each, all counted.
mkfifo "$T/m.in"
gsrun --gpu 0 --name managed --compute 30 -- "$P" managed 10 <"$T/m.in" >"$T/m" 2>&1 &
M=$!
exec 8>"$T/m.in"
for _ in $(seq 200); do
  qgrep '^copied' "$T/m" && break
  sleep 0.05
done
qgrep '^copied 20' "$T/m" || fail "the managed copies: $(cat "$T/m")"
expect_eq "managed memory attached to the host" "$(head -1 "$T/m")" "type=host managed=1"
counted=0
for _ in $(seq 60); do
  counted=$("$BIN/gslice" status --json | /usr/bin/python3 -c '
import json, sys
for s in json.load(sys.stdin)["slices"]:
    if s["name"] == "managed":
        print(sum(g["launches_total"] for g in s["gpus"]))')
  [ "${counted:-0}" -ge 20 ] && break
  sleep 0.1
done
exec 8>&-
wait "$M" || fail "the managed copies failed: $(cat "$T/m")"
expect_eq "the daemon's count of the managed copies" "${counted:-none}" 20
pass "copies of managed memory that reads as host memory go through the gate"
