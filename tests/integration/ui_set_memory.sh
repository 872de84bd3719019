#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice set --memory: raising applies at once; lowering below use is refused with the
# figures; --force accepts it and only stops new allocations until use falls under the cap.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/ui_lib.sh"

UI_DAEMON_LOG="$T/gsliced.log" ui_start_daemon || { cat "$T/gsliced.log"; fail "daemon did not start"; }
# Caps count the context too (256MiB on the sim): 128MiB allocated is 384MiB used.
"$GSLICE" run --name mem --compute 20 --memory 512MiB \
  -- "$SPIN" --ptx "$SPIN_PTX" --kernel-us 500 --seconds 25 --alloc 128MiB --late-alloc 32MiB \
  > "$T/mem.out" 2>&1 &
ui_wait_slice mem || fail "slice did not start: $(cat "$T/mem.out")"
for i in $(seq 50); do grep -q asked "$T/mem.out" && break; sleep 0.1; done
used=$(ui_slice_field mem '.gpus[0].memory_used_bytes')
[ "$used" -ge $((128 << 20)) ] || fail "slice should hold 128MiB, status says $used"

# Lower than use: refused, figures given, nothing changed.
"$GSLICE" set mem --memory 256MiB > "$T/out" 2> "$T/err" && fail "cap below use accepted without --force"
grep -q "256MiB" "$T/err" && grep -Eq "uses [0-9.]+MiB" "$T/err" && grep -q -- "--force" "$T/err" ||
  fail "refusal lacks the figures: $(cat "$T/err")"
expect_eq "cap unchanged" "$(ui_slice_field mem '.gpus[0].memory_cap_bytes')" $((512 << 20))

# Raise: at once.
"$GSLICE" set mem --memory 1GiB > "$T/out" 2>&1 || fail "raise refused: $(cat "$T/out")"
expect_eq "raised cap" "$(ui_slice_field mem '.gpus[0].memory_cap_bytes')" $((1 << 30))

# Lower below use with --force: accepted, flagged, new allocations fail, nothing freed.
"$GSLICE" set mem --memory 256MiB --force > "$T/out" 2>&1 || fail "--force refused: $(cat "$T/out")"
expect_eq "forced cap" "$(ui_slice_field mem '.gpus[0].memory_cap_bytes')" $((256 << 20))
expect_eq "forced flag" "$(ui_slice_field mem '.memory_force')" true
pid=$(ui_slice_field mem '.pids[0]')
kill -USR1 "$pid"
for i in $(seq 50); do grep -q "late allocation" "$T/mem.out" && break; sleep 0.1; done
grep -q "late allocation of 32MiB: out of memory" "$T/mem.out" ||
  fail "allocation under a forced cap should fail: $(cat "$T/mem.out")"
kill -0 "$pid" || fail "the workload died under the forced cap"
used2=$(ui_slice_field mem '.gpus[0].memory_used_bytes')
[ "$used2" -ge $((128 << 20)) ] || fail "--force must not free memory: used $used2"
"$GSLICE" status | qgrep '!' || fail "table does not mark the forced cap"

# Raising the cap again lets allocations through.
"$GSLICE" set mem --memory 1GiB > /dev/null || fail "raise after force refused"
kill -USR1 "$pid"
for i in $(seq 50); do [ "$(grep -c 'late allocation' "$T/mem.out")" -ge 2 ] && break; sleep 0.1; done
grep -q "late allocation of 32MiB: ok" "$T/mem.out" || fail "allocation under a raised cap failed: $(cat "$T/mem.out")"
pass "set --memory raises at once, refuses lowering below use, --force stops new allocations"
