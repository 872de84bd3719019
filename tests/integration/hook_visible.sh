#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# CUDA_VISIBLE_DEVICES renumbers devices per process; the slice's budget follows the physical
# device (the region keys devices by UUID). On a 2-GPU machine, process A sees only physical
# device 1 (as its device 0, capped by GSLICE_MEMORY_LIMIT=0=1GiB); process B sees both and
# allocates on its device 1 (capped by 1=1GiB): they share one 1 GiB budget, physical device 0
# stays untouched.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_SIM_DEVICES=2
unset CUDA_VISIBLE_DEVICES GSLICE_MEMORY_LIMIT

# sim_used_on N: bytes in use on physical device N, by every process (the device's own count).
sim_used_on() { "$BIN/gslice-sim" info --json | jq ".devices[$1].memory_used"; }
# Physical device 1's UUID, from a process that sees every device.
"$TBIN/sim_client_linked" devices > "$T/devices"
U1=$(sed -n 's/^device 1 uuid=\([^ ]*\).*/\1/p' "$T/devices")
[ -n "$U1" ] || fail "no device 1: $(cat "$T/devices")"

# A: its context (256 MiB) and one 256 MiB chunk, on physical device 1.
CUDA_VISIBLE_DEVICES=1 GSLICE_MEMORY_LIMIT=0=1GiB \
  start a --lookup dlsym --path alloc --device 0 --chunk 256MiB --script "alloc 1;info;wait"
await a '^waiting' > /dev/null
expect_eq "A's chunk" "$(field "$(await a '^alloc')" n)" 1
expect_eq "A's view" "$(field "$(await a '^info')" total)" "$GiB"
expect_eq "physical device 1 with A" "$(sim_used_on 1)" $((512 * MiB))

# B: sees A's usage in its view of its device 1, and fills only what A left of the budget.
out=$(CUDA_VISIBLE_DEVICES=0,1 GSLICE_MEMORY_LIMIT=1=1GiB \
  client --lookup procaddr --path alloc --device 1 --chunk 256MiB --script "info;fill;info" 2> "$T/b.err")
first=$(echo "$out" | grep '^info' | head -1)
expect_eq "B's view: total" "$(field "$first" total)" "$GiB"
expect_eq "B's view: free next to A and B's context" "$(field "$first" free)" $((256 * MiB))
expect_eq "B's chunks" "$(field "$(echo "$out" | grep '^fill')" n)" 1
expect_eq "B's refusal" "$(field "$(echo "$out" | grep '^fill')" err)" 2
grep -q "out of memory on device 1 ($U1)" "$T/b.err" || fail "B's log line: $(cat "$T/b.err")"
# B has exited (its memory went with it); A still holds its 512 MiB.
expect_eq "physical device 1 after B" "$(sim_used_on 1)" $((512 * MiB))
expect_eq "physical device 0 never touched" "$(sim_used_on 0)" 0

# The region has one device, physical device 1's UUID, with A's usage.
"$TBIN/hook_region" "$GSLICE_STATE_DIR" reclaim > /dev/null
devs=$("$TBIN/hook_region" "$GSLICE_STATE_DIR" show | grep '^device ')
expect_eq "one device in the region" "$(echo "$devs" | wc -l)" 1
expect_eq "keyed by physical device 1's UUID" "$(field "$devs" uuid)" "$U1"
expect_eq "region usage" "$(field "$devs" used)" $((512 * MiB))

finish a

# The other way round: B holds on its device 1, A (a fresh process) fills on its device 0,
# and its context alone takes what is left.
CUDA_VISIBLE_DEVICES=0,1 GSLICE_MEMORY_LIMIT=1=1GiB \
  start b --lookup procaddr --path managed --device 1 --chunk 256MiB --script "alloc 2;wait"
await b '^waiting' > /dev/null
out=$(CUDA_VISIBLE_DEVICES="${U1:0:12}" GSLICE_MEMORY_LIMIT=0=1GiB \
  client --lookup dlsym --path alloc --device 0 --chunk 256MiB --script "info;fill" 2> /dev/null)
expect_eq "A's view next to B" "$(field "$(echo "$out" | grep '^info')" free)" 0
expect_eq "A's chunks next to B" "$(field "$(echo "$out" | grep '^fill')" n)" 0
expect_eq "physical device 1 with B" "$(sim_used_on 1)" $((768 * MiB))
expect_eq "physical device 0 still untouched" "$(sim_used_on 0)" 0
finish b
pass "processes that number the GPUs differently share the physical device's budget"
