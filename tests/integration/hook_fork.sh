#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fork/exec children share the parent's budget; two processes of one slice together stay under
# the cap, and a SIGKILLed one's memory is reusable by the other.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=2GiB

# Parent: context + 2 chunks (768 MiB); its fork+exec child: context + what is left.
out=$(client --lookup dlsym --path alloc --chunk 256MiB --script "alloc 2;spawn fill;info;info" 2> "$T/fork.err")
child_fill=$(echo "$out" | grep '^fill')
expect_eq "child chunks" "$(field "$child_fill" n)" 4
expect_eq "child error" "$(field "$child_fill" err)" 2
expect_eq "child exit" "$(echo "$out" | sed -n 's/^spawn status=//p')" 0
parent_info=$(echo "$out" | grep '^info' | tail -1)
expect_eq "parent's view once the child exited" "$(field "$parent_info" free)" $((1280 * MiB))
expect_eq "child's memory back after it exited" "$(region_used)" 0

# The same through a shell's fork + exec of an unrelated binary path (procaddr lookup).
start holder --lookup procaddr --path alloc --chunk 256MiB --script "alloc 3;wait"
await holder '^waiting' > /dev/null
out=$(LD_PRELOAD="$HOOK_PRELOAD" bash -c 'exec "$0" --lookup dlsym --path managed --chunk 256MiB --script "fill"' \
  "$TBIN/hook_client" 2> /dev/null)
expect_eq "exec'd sibling chunks" "$(field "$out" n)" 3

# Two processes: A holds, B fills what is left, A is killed, B reuses A's memory.
start b --lookup dlsym --path alloc --chunk 256MiB
send b fill
line=$(await b '^fill' 1)
expect_eq "B next to the holder" "$(field "$line" n)" 3
[ "$(sim_used)" -le $((2 * GiB)) ] || fail "two processes over the cap: $(sim_used)"
kill -9 "$PID_holder"
wait "$PID_holder" 2>/dev/null || true
send b fill
line=$(await b '^fill' 2)
expect_eq "B after the holder was killed" "$(field "$line" n)" 4
send b info
line=$(await b '^info')
expect_eq "B sees the slice full" "$(field "$line" free)" 0
expect_eq "device usage" "$(sim_used)" $((2 * GiB))
finish b
pass "fork/exec children and sibling processes share one budget; a killed one's memory comes back"
