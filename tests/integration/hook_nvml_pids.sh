#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# NVML that cannot see the slice's processes, as in a container: the hook still measures each
# context (by the drop in the device's free memory) and holds the slice to its cap.
#  hidden:  GSLICE_SIM_NVML_HIDE_PIDS=1, NVML lists no process (what a container's pid namespace
#           often gives): a 1 GiB cap filled with 256 MiB chunks stops after exactly 3, the 256 MiB
#           context counted, the device never over 1 GiB.
#  foreign: GSLICE_SIM_NVML_PID_OFFSET makes NVML list another process (holding 768 MiB, no
#           hook) under the client's own pid, as a pid of another namespace can be: that line
#           is not taken for the client's (no context measured as free, no 768 MiB charged).
#  reserved: the slice's NVML view where the driver reserves memory.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=1GiB

# proc_used PID: what the simulated device holds for PID (its own count, no NVML involved).
proc_used() {
  "$BIN/gslice-sim" info --json | jq "[.devices[0].processes[] | select(.pid == $1) | .memory] | add // 0"
}

check() { # NAME
  local name=$1 fill full pidv="PID_$1" used
  fill=$(await "$name" '^fill')
  full=$(await "$name" '^info' 2)
  await "$name" '^waiting' > /dev/null
  used=$(proc_used "${!pidv}")
  expect_eq "$name fill error" "$(field "$fill" err)" 2
  expect_eq "$name chunks" "$(field "$fill" n)" 3
  expect_eq "$name device holds" "$used" "$GiB"
  expect_eq "$name slice counts" "$(region_used)" "$GiB"
  expect_eq "$name context measured" \
    "$("$TBIN/hook_region" "$GSLICE_STATE_DIR" show | sed -n 's/^device slot=0 .* context=\([0-9]*\).*/\1/p')" \
    $((256 * MiB))
  [ "$(field "$full" free)" -lt $((256 * MiB)) ] || fail "$name: free at the cap: $full"
  finish "$name"
  expect_eq "$name after" "$(region_used)" 0
}

# NVML itself, without the hook: the knobs do what they say.
"$TBIN/sim_client_linked" hold $((512 * MiB)) > "$T/holder.out" 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding "$T/holder.out" && break; sleep 0.05; done
grep -q holding "$T/holder.out" || fail "holder: $(cat "$T/holder.out")"
"$TBIN/sim_nvml" | qgrep "procs=1 $holder:$((768 * MiB))" || fail "NVML does not list the holder"
GSLICE_SIM_NVML_HIDE_PIDS=1 "$TBIN/sim_nvml" | qgrep "procs=0 sm=none" ||
  fail "hidden pids still listed: $(GSLICE_SIM_NVML_HIDE_PIDS=1 "$TBIN/sim_nvml")"
GSLICE_SIM_NVML_PID_OFFSET=-7 "$TBIN/sim_nvml" | qgrep "procs=1 $((holder - 7)):" ||
  fail "offset pids: $(GSLICE_SIM_NVML_PID_OFFSET=-7 "$TBIN/sim_nvml")"
kill -9 $holder
wait $holder 2> /dev/null || true

SCRIPT="info;fill;info;wait;free;info"
GSLICE_SIM_NVML_HIDE_PIDS=1 start hidden --lookup dlsym --path alloc --chunk 256MiB --script "$SCRIPT"
check hidden
GSLICE_SIM_NVML_HIDE_PIDS=1 start hidden_ctx --lookup dlsym --ctx create --path alloc \
  --chunk 256MiB --script "$SCRIPT"
check hidden_ctx

# foreign: the holder again (768 MiB on the device, no hook), then a client that NVML shows it
# as. The client's pid is known only in its subshell ($BASHPID, which execs the client).
"$TBIN/sim_client_linked" hold $((512 * MiB)) > "$T/holder.out" 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding "$T/holder.out" && break; sleep 0.05; done
mkfifo "$T/foreign.in"
(
  for v in ${!FD_@}; do eval "exec ${!v}>&-"; done
  export GSLICE_SIM_NVML_PID_OFFSET=$((BASHPID - holder))
  exec < "$T/foreign.in" > "$T/foreign.out" 2> "$T/foreign.err"
  CLIENT_EXEC=1 client --lookup dlsym --path alloc --chunk 256MiB --script "$SCRIPT"
) &
PID_foreign=$!
exec {FD_foreign}> "$T/foreign.in"
GSLICE_SIM_NVML_PID_OFFSET=$((PID_foreign - holder)) "$TBIN/sim_nvml" |
  grep -q " $PID_foreign:$((768 * MiB))" || fail "the holder is not shown under the client's pid"
check foreign
kill -9 $holder

# The slice's NVML view on a machine whose driver reserves memory (an H200 keeps 615 MiB): v1
# and v2 alike total = cap, used = the slice's, free = the rest, reserved = 0 (the driver's own
# reservation is no slice's), while the real v1 counts the reservation in used.
export GSLICE_SIM_STATE="$T/sim-reserved" GSLICE_STATE_DIR="$T/slice-reserved"
export GSLICE_SIM_RESERVED_MEMORY=512MiB
start reserved --lookup dlsym --path alloc --chunk 256MiB --script "$SCRIPT"
await reserved '^waiting' > /dev/null
expect_eq "reserved: chunks" "$(field "$(await reserved '^fill')" n)" 3
LD_PRELOAD="$HOOK_PRELOAD" "$TBIN/hook_nvml" > "$T/nvml" 2>&1 || fail "hook_nvml: $(cat "$T/nvml")"
expect_eq "view v1" "$(grep '^nvml ' "$T/nvml")" "nvml total=$GiB used=$GiB free=0"
expect_eq "view v2" "$(grep '^nvml2 ' "$T/nvml")" "nvml2 total=$GiB used=$GiB free=0 reserved=0"
real=$("$TBIN/sim_nvml")
expect_eq "real v1 used" "$(field "$real" used)" $((GiB + 512 * MiB))
expect_eq "real v2 used" "$(field "$real" used_v2)" "$GiB"
finish reserved
pass "contexts measured and the cap held without NVML's process list (hidden, foreign pids)"
