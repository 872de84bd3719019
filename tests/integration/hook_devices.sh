#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Two GPUs: each has its own cap (GSLICE_MEMORY_LIMIT per device index), the slice's budget is
# per device (by UUID), and NVML shows each device's cap.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_SIM_DEVICES=2
export GSLICE_MEMORY_LIMIT=0=512MiB,1=1GiB

out=$(client --lookup dlsym --path alloc --device 0 --chunk 256MiB --script "info;fill" 2>/dev/null)
expect_eq "device 0 total" "$(field "$(echo "$out" | grep '^info')" total)" $((512 * MiB))
expect_eq "device 0 chunks" "$(field "$(echo "$out" | grep '^fill')" n)" 1
# Device 1 while a process holds some of it: the two share device 1's budget only.
start holder --lookup procaddr --path vmm --device 1 --chunk 256MiB --script "alloc 1;wait"
await holder '^waiting' > /dev/null
out=$(client --lookup dlsym --path alloc --device 1 --chunk 256MiB --script "info;fill" 2>/dev/null)
expect_eq "device 1 total" "$(field "$(echo "$out" | grep '^info')" total)" "$GiB"
expect_eq "device 1 chunks next to the holder" "$(field "$(echo "$out" | grep '^fill')" n)" 1
# Device 0 is not touched by what device 1 holds.
out=$(client --lookup dlsym --path alloc --device 0 --chunk 256MiB --script "fill" 2>/dev/null)
expect_eq "device 0 chunks while device 1 is held" "$(field "$out" n)" 1
# NVML (no CUDA context in that process) shows both caps by UUID.
nv=$(LD_PRELOAD="$HOOK_PRELOAD" "$TBIN/hook_nvml")
expect_eq "NVML device 0 total" "$(field "$(echo "$nv" | grep '^nvml ')" total)" $((512 * MiB))
finish holder
pass "per-device caps, per-device budgets, NVML by UUID"
