#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# SIGHUP reloads the settings marked runtime (and says which need a restart; a bad file keeps
# the running ones). Without any daemon, a slice keeps running at no more than its limit.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
printf 'quantum_kernels = 8\nmax_clients = 100\n' >"$T/gsliced.conf"
start_daemon --config "$T/gsliced.conf"
printf 'quantum_kernels = 4\nmax_clients = 50\n' >"$T/gsliced.conf"
kill -HUP "$DAEMON_PID"
for _ in $(seq 50); do grep -q "settings reloaded" "$T/gsliced.log" && break; sleep 0.05; done
grep -q "settings reloaded" "$T/gsliced.log" || fail "no reload: $(tail -3 "$T/gsliced.log")"
grep -q "max_clients changes only at restart" "$T/gsliced.log" || fail "restart-only setting not reported"
printf 'quantum_kernels = lots\n' >"$T/gsliced.conf"
kill -HUP "$DAEMON_PID"
for _ in $(seq 50); do grep -q "keeping the running settings" "$T/gsliced.log" && break; sleep 0.05; done
grep -q "gsliced.conf:1: quantum_kernels: 'lots' is not a number" "$T/gsliced.log" ||
  fail "bad file: $(tail -3 "$T/gsliced.log")"
kill -0 "$DAEMON_PID" || fail "the daemon died on a bad reload"

# The daemon goes away for good just after a hard-30 slice started: it paces itself.
gsrun --compute 30 --compute-limit 30 -- "$TBIN/compute_spin" --warmup 1.5 --duration 4 --label alone >"$T/alone" 2>"$T/alone.err" &
R=$!
sleep 0.5
stop_daemon
wait $R || fail "the slice failed without its daemon: $(cat "$T/alone.err")"
cat "$T/alone"
grep -q "lost the gslice daemon" "$T/alone.err" || fail "the loss was not said: $(cat "$T/alone.err")"
STARVE_NO_DAEMON=1 share_ceiling_floor "hard 30 without a daemon" "$(pct "$T/alone")" 15 35 "$T/alone"
pass "SIGHUP reload; without a daemon a slice runs at no more than its limit"
