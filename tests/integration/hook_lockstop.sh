#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A process stopped (or stuck) while holding the slice region's lock hangs nobody: readers (the
# daemon, hook_region) give up after GS_REGION_LOCK_TIMEOUT_S with ETIMEDOUT, a starting hooked
# program stops with a line saying why; once the holder dies, the lock is repaired and all works.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=1GiB

out=$(client --lookup dlsym --path alloc --chunk 256MiB --script "alloc 1" 2> /dev/null)
expect_eq "first client" "$(field "$out" n)" 1

"$TBIN/hook_region_hold" "$GSLICE_STATE_DIR" > "$T/hold.out" &
holder=$!
for _ in $(seq 600); do grep -q held "$T/hold.out" && break; sleep 0.05; done
grep -q held "$T/hold.out" || fail "the holder never took the lock"
kill -STOP "$holder"

rc=0
timeout 60 "$TBIN/hook_region" "$GSLICE_STATE_DIR" show > /dev/null 2> "$T/show.err" || rc=$?
expect_eq "reader beside a stopped holder" "$rc" 1
grep -q 'timed out' "$T/show.err" || fail "reader: $(cat "$T/show.err")"

rc=0
timeout 60 env LD_PRELOAD="$HOOK_PRELOAD" "$TBIN/hook_client" --lookup dlsym --path alloc \
  --chunk 256MiB --script "alloc 1" > /dev/null 2> "$T/client.err" || rc=$?
expect_eq "hooked program beside a stopped holder" "$rc" 1
grep -q 'locked by a process that does not let go' "$T/client.err" || fail "client: $(cat "$T/client.err")"

kill -CONT "$holder"
kill -9 "$holder"
wait "$holder" 2> /dev/null || true
out=$(client --lookup dlsym --path alloc --chunk 256MiB --script "fill" 2> /dev/null)
expect_eq "after the holder died" "$(field "$out" n)" 3
pass "a stopped lock holder hangs neither readers nor hooked programs"
