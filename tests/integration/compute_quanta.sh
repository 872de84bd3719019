#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# One kernel-length estimate: the daemon makes a slice's quantum of the kernel lengths its hooks
# report with their releases (its time per launch over its latest token's processes: their launch
# rates add), never of charges; a report of an hour gets the largest quantum, no more. Quanta far
# above a loaded machine's stalls (200 ms to 2.5 s), so that no token is revoked and the second
# process joins the first one's token while the client talks: nothing here is timed.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
# A slice alone on its GPU would hold quantum_max whatever its kernels (lone_quantum): off here.
start_daemon --set window_ms=10000 --set quantum_min_us=200000 --set quantum_init_us=2000000 \
  --set quantum_max_us=2500000 --set quantum_kernels=8 --set lone_quantum=false
gsrun --name quanta -- "$TBIN/daemon_attack" "$GSLICE_SOCKET" quanta > "$T/q" || { cat "$T/q" "$T/gsliced.log"; fail "quanta run failed"; }
cat "$T/q"
# init (2000); still init after a charge of one 1 s launch; 8 x 100 (two processes of 150 and
# 300 ms per launch: 1 / (1/150 + 1/300)); 8 x 40 (one process on the next token); the largest.
grep -qx "quanta: 2000 2000 800 320 2500" "$T/q" || fail "quanta do not follow the hooks' kernel lengths: $(cat "$T/q")"
stop_daemon

# The real hook sends its measurement: a process of 20 ms kernels alone gets the largest quantum
# (8 x 20 ms, held to 50 ms) once it has reported, where without a report it would keep the
# initial 10 ms (the daemon's defaults but lone_quantum; its grants' quanta from the hook's
# debug log).
start_daemon --set lone_quantum=false
GSLICE_LOG_LEVEL=debug GSLICE_LOG_FILE="$T/hook.log" gsrun --name spin -- \
  "$TBIN/compute_spin" --kernel-us 20000 --warmup 0 --duration 1 --label s > "$T/s" || fail "spin run failed"
grep -o "quantum [0-9.]* ms" "$T/hook.log" | sort | uniq -c
n=$(grep -c "quantum 50.000 ms" "$T/hook.log" || true)
first=$(grep -o "quantum [0-9.]* ms" "$T/hook.log" | head -1)
[ "$first" = "quantum 10.000 ms" ] || fail "the first grant's quantum is not the initial 10 ms: $first"
[ "$n" -ge 3 ] || fail "the hook's 20 ms kernels did not make 50 ms quanta ($n grants of 50 ms)"
stop_daemon

# The defaults: a slice of 1 ms kernels alone holds tokens valid for quantum_max (50 ms) from
# its first grant (lone_quantum), its launch budget still its usual quantum's (8 x 1 ms; the
# first, before any report, the initial 10 ms), so it queues no more at a time than before.
start_daemon
GSLICE_LOG_LEVEL=debug GSLICE_LOG_FILE="$T/lone.log" gsrun --name lone -- \
  "$TBIN/compute_spin" --kernel-us 1000 --warmup 0 --duration 1 --label l > "$T/l" || fail "lone run failed"
grep -o "quantum [0-9.]* ms, valid for [0-9.]* ms" "$T/lone.log" | awk '{ print $2, int($6) }' |
  sort | uniq -c | sort -rn | head -5
# Valid for 50 ms less the grant's way here and the daemon's loop clock, read when its turn
# began: a host loaded by a build beside the test makes that 10-15 ms for one grant in five.
# Without the lone quantum every grant would be valid for its usual 8-10 ms.
read -r long short big < <(grep -o "quantum [0-9.]* ms, valid for [0-9.]* ms" "$T/lone.log" |
  awk '$6 >= 20 { l++ } $6 < 20 { s++ } $2 >= 40 { b++ } END { print l + 0, s + 0, b + 0 }')
[ "$long" -ge 3 ] && [ "$short" -le $((long / 2)) ] ||
  fail "a slice alone did not hold 50 ms tokens ($long of 20 ms or more, $short shorter)"
[ "$big" = 0 ] || fail "a lone slice's launch budget is not its usual quantum ($big grants of 40 ms or more)"
pass "quanta are made of the kernel lengths the hooks report"
