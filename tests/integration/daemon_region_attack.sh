#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A slice process truncates its own memory region (the file is the slice's to write) while the
# daemon reads it for STATUS: the daemon, which maps every slice's region, must not die of
# SIGBUS. It gives up on that slice's region (memory shows as 0, one warning in its log) and
# keeps serving the others, holding nothing of the lost region (tests/progs/daemon_truncate.c).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
fds() { find "/proc/$DAEMON_PID/fd" -mindepth 1 | wc -l; }
fd0=$(fds)

# A neighbour slice that runs through the attack.
gsrun --name other --memory 1GiB -- sleep 4 &
O=$!
for _ in $(seq 100); do [ "$(nslices)" -ge 1 ] && break; sleep 0.05; done

gsrun --name atk --memory 1GiB -- bash -c \
  'exec "$0" "$GSLICE_STATE_DIR/memory.region" 2 "$GSLICE_SOCKET"' "$TBIN/daemon_truncate" \
  > "$T/atk" 2>&1 || { cat "$T/atk" "$T/gsliced.log"; fail "the attacker saw the daemon stop answering"; }
cat "$T/atk"
kill -0 "$DAEMON_PID" 2>/dev/null || { tail -5 "$T/gsliced.log"; fail "the daemon died"; }

# The region is left truncated to 0 while its slice lives on: status still answers.
gsrun --name atk2 --memory 1GiB -- bash -c \
  'truncate -s 0 "$GSLICE_STATE_DIR/memory.region"; "$0" status > "$1"' "$BIN/gslice" "$T/st2" \
  || fail "status after a one-shot truncation"
grep -q "atk2" "$T/st2" || fail "status after a one-shot truncation does not list the slice"

"$BIN/gslice" status > "$T/st" || fail "status does not answer after the attack"
cat "$T/st"
grep -q "other" "$T/st" || fail "the neighbour slice is gone"
wait $O || fail "the neighbour slice did not run to its end"
kill -0 "$DAEMON_PID" 2>/dev/null || fail "the daemon died"
# Nothing of the abandoned region stays open (the jump out of the read releases it).
for _ in $(seq 40); do [ "$(nslices)" -eq 0 ] && break; sleep 0.05; done
[ "$(fds)" -le "$fd0" ] || fail "the daemon holds $(fds) descriptors after the attack, $fd0 before"
n=$(grep -c "memory region .* was truncated" "$T/gsliced.log" || true)
echo "warnings about truncated regions: $n"
[ "$n" -le 1 ] || fail "the warning was logged $n times, want at most once per slice"
pass "a slice truncating its region does not take the daemon down"
