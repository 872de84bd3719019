#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# cuMemGetInfo in one process of a slice follows the others': their allocations and frees at
# once, a killed one's memory gone from the view; and a loop of calls does not read /proc for
# every entry of the slice at every call (the full liveness check runs at most every 10 ms).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=4GiB
ctx=$((256 * MiB)) # GSLICE_SIM_CONTEXT_MEMORY (hook_lib.sh): a context's cost

start a --lookup dlsym --path alloc --chunk 256MiB
send a "alloc 1"
expect_eq "a: alloc" "$(field "$(await a '^alloc')" n)" 1
send a info
free0=$(field "$(await a '^info' 1)" free)
expect_eq "a's view alone" "$free0" $((4 * GiB - ctx - 256 * MiB))

start b --lookup dlsym --path alloc --chunk 256MiB
send b "alloc 2"
expect_eq "b: alloc" "$(field "$(await b '^alloc' 1)" n)" 2
send a info
expect_eq "a's view after b allocated" "$(field "$(await a '^info' 2)" free)" $((free0 - ctx - 512 * MiB))
send b free
await b '^free' > /dev/null
send a info
expect_eq "a's view after b freed" "$(field "$(await a '^info' 3)" free)" $((free0 - ctx))
send b "alloc 1"
expect_eq "b: alloc again" "$(field "$(await b '^alloc' 2)" n)" 1
send a info
expect_eq "a's view after b allocated again" "$(field "$(await a '^info' 4)" free)" $((free0 - ctx - 256 * MiB))
kill -9 "$PID_b"
wait "$PID_b" 2> /dev/null || true
sleep 0.05 # past the 10 ms between a's full liveness checks
send a info
expect_eq "a's view after b was killed" "$(field "$(await a '^info' 5)" free)" "$free0"
finish a

# While another process holds memory in the slice, every view would be a full liveness check,
# which reads /proc/<pid>/stat of every entry; 500 views in a row do at most one every 10 ms.
# The other process is hook_region's holder, which no simulated driver knows: the reads of its
# stat file are the hook's alone (the simulated driver reads its own processes').
"$TBIN/hook_region" "$GSLICE_STATE_DIR" hold 256MiB > "$T/holder.out" &
holder=$!
for _ in $(seq 100); do grep -q held "$T/holder.out" && break; sleep 0.05; done
grep -q held "$T/holder.out" || fail "the holder did not take its entry"
if ! command -v strace > /dev/null; then
  skip_part "no strace: the count of /proc reads per cuMemGetInfo is not checked"
else
  out=$(strace -f -qq -e trace=openat -o "$T/strace" -E "LD_PRELOAD=$HOOK_PRELOAD" \
    "$TBIN/hook_client" --lookup dlsym --path alloc --chunk 256MiB --script "alloc 1;infos 500")
  line=$(echo "$out" | grep '^infos')
  expect_eq "infos" "$(field "$line" err)" 0
  ms=$(field "$line" ms)
  reads=$(grep -cE "openat\\(.*\"/proc/$holder/stat\"" "$T/strace" || true)
  most=$((ms / 10 + 1))
  echo "500 views in $ms ms: $reads reads of the holder's /proc/$holder/stat (at most $most)"
  [ "$reads" -ge 1 ] || fail "no full liveness check at all in 500 views"
  [ "$reads" -le "$most" ] ||
    fail "$reads full liveness checks in 500 views over $ms ms: more than one every 10 ms ($most)"
fi
kill "$holder"
pass "the view follows other processes' allocations, frees and death, without a sweep per call"
