#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Ways around the cap a program could take (tests/progs/hook_attack.c), each held to it:
# VMM memory released while still mapped, dlvsym, a second copy of the driver (dlmopen), a
# stream-ordered pool on another device than the current context's, threads cancelled mid-call.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=1GiB

attack() { LD_PRELOAD="$HOOK_PRELOAD" "$TBIN/hook_attack" "$@" 2> "$T/$1.err"; }
dev_used() { "$BIN/gslice-sim" info --json | jq ".devices[$1].memory_used"; }

# The driver frees a released handle's memory only at its last unmap: it stays counted till then
# (context 256 MiB + 3 chunks), and comes back after the unmaps.
out=$(attack vmm-release-mapped)
line=$(echo "$out" | grep '^vmm-release-mapped')
expect_eq "released while mapped: chunks" "$(field "$line" n)" 3
expect_eq "released while mapped: error" "$(field "$line" err)" 2
line=$(echo "$out" | grep '^after-unmap')
expect_eq "after the unmaps: chunks" "$(field "$line" n)" 3
grep -q 'cuMemCreate: out of memory' "$T/vmm-release-mapped.err" || fail "no line for cuMemCreate"

# dlvsym: glibc matches no version against a library that has version information (the sim's
# libcuda, like NVIDIA's, has some), so it finds nothing; were it to, it must not pass the cap.
line=$(attack dlvsym)
[ "$(field "$line" n)" -le 3 ] || fail "dlvsym passed the cap: $line"

# A second copy of the driver (dlmopen into a new namespace) would not be held: refused. Not in
# sanitizer builds: the instrumented sim drags a second ASan runtime into the new namespace,
# which aborts.
if [ "${GSLICE_SANITIZE:-0}" != 1 ]; then
  line=$(attack dlmopen)
  expect_eq "dlmopen: chunks" "$(field "$line" n)" 0
  expect_eq "dlmopen: not handed out" "$(field "$line" err)" -1
  grep -q 'second copy of the CUDA driver' "$T/dlmopen.err" || fail "no line for the second copy"
fi

# Threads cancelled while refused at the cap (inside the hook's locks) leave no lock held.
line=$(timeout 60 env LD_PRELOAD="$HOOK_PRELOAD" "$TBIN/hook_attack" cancel 2> /dev/null) ||
  fail "cancelled threads left the hook locked (exit $?)"
expect_eq "after cancelled threads: rounds" "$(field "$line" n)" 40
expect_eq "after cancelled threads: an allocation" "$(field "$line" err)" 0

# A pool destroyed with a chunk still allocated keeps that memory (the driver frees it when the
# chunk is freed): it stays counted until then, and comes back after.
out=$(attack pool-destroy-held)
line=$(echo "$out" | grep '^pool-destroy-held')
expect_eq "pools destroyed while held: chunks" "$(field "$line" n)" 3
expect_eq "pools destroyed while held: error" "$(field "$line" err)" 2
expect_eq "after the frees: chunks" "$(field "$(echo "$out" | grep '^after-free')" n)" 3

# Frees that must give back exactly once: twice, a foreign pointer, from another thread, after
# the context went, after a primary context reset. Then the slice holds only its context.
out=$(attack accounting)
line=$(echo "$out" | grep '^accounting')
expect_eq "accounting: driver answers" "$(field "$line" bad)" 0
expect_eq "accounting: what is left" "$(field "$line" free)" $((768 * MiB))
expect_eq "accounting: fill after" "$(field "$(echo "$out" | grep '^after')" n)" 3

# Pools beyond the 64 the hook used to keep books for: their kept memory counts too (64 pools
# keep 2 MiB each; 768 - 128 MiB leaves room for 2 chunks kept in further pools).
line=$(attack many-pools)
expect_eq "pools past 64: chunks kept" "$(field "$line" n)" 2
expect_eq "pools past 64: error" "$(field "$line" err)" 2

# A region whose device table is full (16 devices registered, none this one): the device
# cannot be counted, so nothing is allocated on it.
GSLICE_STATE_DIR="$T/full-devices" client --lookup dlsym --path alloc --script quit > /dev/null 2>&1
"$TBIN/hook_region" "$T/full-devices" fill-devices > /dev/null
line=$(GSLICE_STATE_DIR="$T/full-devices" GSLICE_SIM_DEVICES=2 client --lookup dlsym --device 1 \
  --path alloc --chunk 256MiB --script fill 2> "$T/full-devices.err") || true
# (Its context is the first allocation refused.)
expect_eq "device table full: refused" "$line" "context err=2"
grep -q 'cannot register device' "$T/full-devices.err" || fail "no line: $(cat "$T/full-devices.err")"

# fork() while other threads are inside the hook: every child gets through the hook's NVML view.
line=$(timeout 100 env LD_PRELOAD="$HOOK_PRELOAD" "$TBIN/hook_attack" forkstorm 2> /dev/null) ||
  fail "fork storm: exit $?"
expect_eq "fork storm: children fine" "$(field "$line" n)" 60

# A pool on device 1 used from device 0's context: counted on device 1, against its own cap.
export GSLICE_SIM_DEVICES=2 GSLICE_MEMORY_LIMIT=0=4GiB,1=512MiB
line=$(attack pool-other-device)
expect_eq "pool on device 1: chunks" "$(field "$line" n)" 2
expect_eq "pool on device 1: error" "$(field "$line" err)" 2
# A stream of device 1's context used while device 0's is current: cuMemAllocAsync takes from
# device 1's pool, and counts there (its context 256 MiB + 3 chunks fill 1 GiB).
export GSLICE_MEMORY_LIMIT=0=4GiB,1=1GiB
line=$(attack async-other-device)
expect_eq "stream of device 1: chunks" "$(field "$line" n)" 3
expect_eq "stream of device 1: error" "$(field "$line" err)" 2
pass "VMM released while mapped, dlvsym, a second driver copy, a pool or a stream on another device and cancelled threads are held"
