#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice run: exit status, signals, children, refusals that say what is committed, autostart.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
# No daemon yet: the first run starts one and says so once.
gsrun -- true 2>"$T/err1" || fail "run true failed"
grep -q "started gsliced in the background" "$T/err1" || fail "no autostart message: $(cat "$T/err1")"
gsrun -- true 2>"$T/err2" || fail "second run failed"
[ ! -s "$T/err2" ] || fail "second run said: $(cat "$T/err2")"
DAEMON_PID=$(cat "$DSTATE/gsliced.lock")
set +e
gsrun -- sh -c 'exit 3'; rc=$?
expect_eq "exit status" "$rc" 3
gsrun -- sh -c 'kill -9 $$'; rc=$?
expect_eq "killed status" "$rc" 137
set -e
# The environment the command sees.
gsrun --memory 1GiB --compute 10 -- sh -c 'echo "$GSLICE_SLICE $GSLICE_MEMORY_LIMIT $GSLICE_COMPUTE_LIMIT"; case "$LD_PRELOAD" in *libgslice.so*) echo preload;; esac; [ -d "$GSLICE_STATE_DIR" ] && echo dir' >"$T/env"
grep -q '^[0-9]* 1073741824 100$' "$T/env" || fail "env: $(cat "$T/env")"
grep -q preload "$T/env" && grep -q dir "$T/env" || fail "env: $(cat "$T/env")"
# Signals reach the command; the run waits for what the command left behind.
gsrun -- sh -c 'trap "echo got-term; exit 5" TERM; (sleep 1; echo grandchild-done) & echo ready; while :; do sleep 0.1; done' >"$T/sig" &
R=$!
for _ in $(seq 100); do grep -q ready "$T/sig" 2>/dev/null && break; sleep 0.05; done
G=$(pgrep -P $R -x gslice || echo $R)
kill -TERM "$G"
set +e
wait $R; rc=$?
set -e
expect_eq "status after SIGTERM" "$rc" 5
grep -q got-term "$T/sig" || fail "the command did not get SIGTERM"
grep -q grandchild-done "$T/sig" || fail "the run ended before the command's child"
# Refusals say why and what is committed already.
gsrun --compute 70 --name big -- sleep 2 &
BIG=$!
sleep 0.5
set +e
gsrun --compute 40 -- true 2>"$T/refused"; rc=$?
set -e
[ "$rc" -ne 0 ] || fail "over-commit was accepted"
grep -q "70% of compute committed already" "$T/refused" || fail "refusal says: $(cat "$T/refused")"
set +e
gsrun --compute 50 --compute-limit 40 -- true 2>"$T/refused2"; rc=$?
[ "$rc" -ne 0 ] && grep -q "limit is below the request" "$T/refused2" || fail "limit<request: $(cat "$T/refused2")"
gsrun --gpu 7 -- true 2>"$T/refused3"; rc=$?
[ "$rc" -ne 0 ] && grep -q "no GPU 7" "$T/refused3" || fail "unknown GPU: $(cat "$T/refused3")"
set -e
wait $BIG || fail "the 70% run failed"
sleep 0.2
n=$(nslices)
[ "$n" -eq 0 ] || fail "$n slice(s) left behind"
kill "$DAEMON_PID" || fail "the autostarted daemon is gone"
# Not our child: wait it out by hand, or the cleanup's rm races its last registry save.
for _ in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.05; done
pass "gslice run: status, signals, children, refusals, autostart"
