#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CUDA_VISIBLE_DEVICES, applied by the driver at cuInit (NVML ignores it): indices or UUIDs
# (prefixes that name one device), renumbered from 0 in the list's order; the first invalid
# entry ends the list; empty (or nothing valid) is no device at all.
source "$GSLICE_SRC/tests/integration/lib.sh"
export GSLICE_SIM_DEVICES=3 GSLICE_SIM_MEMORY=4GiB GSLICE_SIM_CONTEXT_MEMORY=256MiB
MiB=$((1 << 20))
devs() { "$TBIN/sim_client_linked" devices; }
seen() { sed -n 's/^device [0-9]* uuid=\([^ ]*\).*/\1/p' | xargs; }
# uuids_of SPEC: the UUIDs the program sees with CUDA_VISIBLE_DEVICES=SPEC, space-separated.
uuids_of() { CUDA_VISIBLE_DEVICES="$1" devs | seen; }

unset CUDA_VISIBLE_DEVICES
out=$(devs)
expect_eq "all devices without the variable" "$(grep '^count' <<<"$out")" "count=3"
info=$("$BIN/gslice-sim" info --json)
U0=$(jq -r '.devices[0].uuid' <<<"$info")
U1=$(jq -r '.devices[1].uuid' <<<"$info")
U2=$(jq -r '.devices[2].uuid' <<<"$info")
expect_eq "physical order without the variable" "$(seen <<<"$out")" "$U0 $U1 $U2"

expect_eq "1" "$(uuids_of 1)" "$U1"
expect_eq "2,0" "$(uuids_of 2,0)" "$U2 $U0"
expect_eq "full UUID" "$(uuids_of "$U2")" "$U2"
expect_eq "UUID prefix" "$(uuids_of "${U2:0:12}")" "$U2"
expect_eq "UUID and index mixed" "$(uuids_of "$U1,0")" "$U1 $U0"
expect_eq "invalid index truncates" "$(uuids_of 0,2,-1,1)" "$U0 $U2"
expect_eq "index out of range truncates" "$(uuids_of 1,7,0)" "$U1"
expect_eq "unknown UUID truncates" "$(uuids_of "2,GPU-ffffffff-0000,0")" "$U2"
expect_eq "garbage truncates" "$(uuids_of 0,abc,1)" "$U0"
expect_eq "a UUID prefix with a wrong character" "$(uuids_of "0,${U1:0:9}x,1")" "$U0"
# The PCI bus id stays the physical device's.
expect_eq "bus id" "$(CUDA_VISIBLE_DEVICES=2 devs | sed -n 's/^device 0 .*bus=//p')" "00000000:03:00.0"
# No device: cuInit says CUDA_ERROR_NO_DEVICE (100), and the driver stays uninitialized (3).
expect_eq "empty" "$(CUDA_VISIBLE_DEVICES= devs)" "init err=100 count_err=3"
expect_eq "nothing valid" "$(CUDA_VISIBLE_DEVICES=-1 devs)" "init err=100 count_err=3"
expect_eq "ambiguous UUID prefix" "$(CUDA_VISIBLE_DEVICES=GPU- devs)" "init err=100 count_err=3"
expect_eq "a device listed twice" "$(CUDA_VISIBLE_DEVICES=1,0,1 devs)" "init err=100 count_err=3"

# Memory allocated through the program's device 0 is physical device 1's.
CUDA_VISIBLE_DEVICES=1 "$TBIN/sim_client_linked" hold $((512 * MiB)) > "$T/hold" 2>&1 &
holder=$!
for _ in $(seq 200); do grep -q holding "$T/hold" && break; sleep 0.05; done
grep -q holding "$T/hold" || fail "holder: $(cat "$T/hold")"
info=$("$BIN/gslice-sim" info --json)
expect_eq "physical device 0" "$(jq '.devices[0].memory_used' <<<"$info")" 0
expect_eq "physical device 1" "$(jq '.devices[1].memory_used' <<<"$info")" $((768 * MiB))
expect_eq "holder listed on device 1" "$(jq ".devices[1].processes[] | select(.pid == $holder) | .contexts" <<<"$info")" 1
# NVML does not apply CUDA_VISIBLE_DEVICES: every physical device, the holder's memory on 1.
nv=$(CUDA_VISIBLE_DEVICES=1 "$TBIN/sim_nvml")
expect_eq "NVML device count" "$(grep '^devices=' <<<"$nv")" "devices=3"
expect_eq "NVML device 1" "$(grep '^dev=1 ' <<<"$nv" | tr ' ' '\n' | sed -n 's/^used=//p')" $((768 * MiB))
expect_eq "NVML device 1 uuid" "$(grep '^dev=1 ' <<<"$nv" | tr ' ' '\n' | sed -n 's/^uuid=//p')" "$U1"
# Filling through the program's device 0 fills physical device 1 only: 4GiB less the
# holder's 768MiB and the filler's own context.
out=$(CUDA_VISIBLE_DEVICES=1 SIM_CLIENT_DEVICE=0 "$TBIN/sim_client_linked" fill $((256 * MiB)))
expect_eq "fill next to the holder" "$out" "allocated=$((3072 * MiB)) free=0 total=$((4096 * MiB))"
expect_eq "physical device 2 untouched" "$("$BIN/gslice-sim" info --json | jq '.devices[2].memory_used')" 0
kill -9 $holder
wait $holder 2>/dev/null || true
pass "sim visible devices"
