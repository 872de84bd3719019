#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice top: plain repeated output off a terminal; on a terminal (tmux) it redraws in
# place, quits on q and gives the terminal back as it was.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/ui_lib.sh"

"$GSLICE" top --interval 0 2> "$T/err" && fail "interval 0 accepted"
grep -q "bad --interval" "$T/err" || fail "bad interval error unclear: $(cat "$T/err")"
"$GSLICE" top --iterations 1 > /dev/null 2> "$T/err" && fail "top without a daemon succeeded off a terminal"

UI_DAEMON_LOG="$T/gsliced.log" ui_start_daemon || { cat "$T/gsliced.log"; fail "daemon did not start"; }
"$GSLICE" run --name topped --compute 40 \
  -- "$SPIN" --ptx "$SPIN_PTX" --kernel-us 1000 --seconds 20 > "$T/w.out" 2>&1 &
ui_wait_slice topped || fail "slice did not start"

# Not a terminal: N plain snapshots, no escape sequences.
"$GSLICE" top --iterations 3 --interval 0.2 > "$T/plain" || fail "top off a terminal failed"
expect_eq "snapshots" "$(grep -c '^gslice: ' "$T/plain")" 3
grep -q $'\033' "$T/plain" && fail "escape sequences in plain output"
grep -q '^  topped ' "$T/plain" || fail "slice missing from top: $(cat "$T/plain")"
# NOW (share since the last snapshot) is a column from the first snapshot on.
grep -q ' NOW ' "$T/plain" || fail "no NOW column in later snapshots"

if ! command -v tmux > /dev/null; then
  pass "top off a terminal"
  skip "tmux not installed (scripts/deps.sh installs it): terminal mode not checked"
fi
sock="$T/tmux.sock"
tmux -S "$sock" new-session -d -x 120 -y 30 -s top \
  "env GSLICE_SOCKET='$GSLICE_SOCKET' '$GSLICE' top --interval 0.2; echo \"TOP EXITED \$?\"; stty -a; sleep 30"
at_exit 'tmux -S "$sock" kill-server 2> /dev/null'
for i in $(seq 50); do tmux -S "$sock" capture-pane -p -t top | qgrep '^  topped ' && break; sleep 0.1; done
tmux -S "$sock" capture-pane -p -t top > "$T/screen"
grep -q 'q quits' "$T/screen" || fail "no header on the terminal: $(cat "$T/screen")"
grep -q '^  topped ' "$T/screen" || fail "slice missing on the terminal: $(cat "$T/screen")"
# Alternate screen while running.
expect_eq "alternate screen" "$(tmux -S "$sock" display -p -t top '#{alternate_on}')" 1
tmux -S "$sock" send-keys -t top q
# Until stty -a has printed too (its line with icanon), not just the echo before it.
for i in $(seq 50); do tmux -S "$sock" capture-pane -p -t top | qgrep 'icanon' && break; sleep 0.1; done
tmux -S "$sock" capture-pane -p -t top > "$T/after"
grep -q 'TOP EXITED 0' "$T/after" || fail "q did not quit top cleanly: $(cat "$T/after")"
expect_eq "alternate screen after q" "$(tmux -S "$sock" display -p -t top '#{alternate_on}')" 0
grep -Eq '(^| )icanon( |$)' "$T/after" && grep -Eq '(^| )echo( |$)' "$T/after" ||
  fail "terminal not restored (icanon/echo): $(cat "$T/after")"

# SIGTERM (a closing ssh session, a kill) restores the terminal too.
tmux -S "$sock" new-window -t top -n term \
  "env GSLICE_SOCKET='$GSLICE_SOCKET' '$GSLICE' top --interval 0.2; echo \"TOP EXITED \$?\"; stty -a; sleep 30"
for i in $(seq 50); do tmux -S "$sock" capture-pane -p -t top:term | qgrep 'q quits' && break; sleep 0.1; done
shell=$(tmux -S "$sock" display -p -t top:term '#{pane_pid}')
toppid=$(ps -o pid= --ppid "$shell" | head -1 | tr -d ' ')
[ -n "$toppid" ] || fail "cannot find top's pid under the tmux shell $shell"
kill -TERM "$toppid"
for i in $(seq 50); do tmux -S "$sock" capture-pane -p -t top:term | qgrep 'icanon' && break; sleep 0.1; done
tmux -S "$sock" capture-pane -p -t top:term > "$T/term"
grep -q 'TOP EXITED 0' "$T/term" || fail "SIGTERM did not end top cleanly: $(cat "$T/term")"
expect_eq "alternate screen after SIGTERM" "$(tmux -S "$sock" display -p -t top:term '#{alternate_on}')" 0
grep -Eq '(^| )icanon( |$)' "$T/term" && grep -Eq '(^| )echo( |$)' "$T/term" ||
  fail "terminal not restored after SIGTERM: $(cat "$T/term")"
pass "top: plain off a terminal, in place on one, q and SIGTERM quit and restore the terminal"
