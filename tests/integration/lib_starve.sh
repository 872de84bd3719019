# SPDX-License-Identifier: Apache-2.0
# Starvation, for tests whose shares are of the wall clock (sourced after lib.sh or
# tests/k8s/lib.sh: uses $T, fail and skip_part; the daemon is $STARVE_PID, else $DAEMON_PID).
# A loaded host takes CPU time from the workloads and the daemon, and a share of the wall clock
# then drops for no fault of gslice: a hard limit is checked as a ceiling always, and any floor
# on wall-clock time only where the host did not starve them (below). The measure is each
# process's own wait for a CPU while runnable (schedstat), not a wider bound.
# cpu_wait PID: the seconds PID's threads have waited for a CPU so far.
cpu_wait() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $2 } END { printf "%.4f", s / 1e9 }'; }
# daemon_wait_over START_EPOCH SECONDS: in the background, the daemon's wait for a CPU over
# [START, START + SECONDS] into $T/daemon_wait (read by starved).
daemon_wait_over() {
  rm -f "$T/daemon_wait"
  (
    d=$(awk -v s="$1" -v n="$(date +%s.%N)" 'BEGIN { d = s - n; printf "%.3f", (d > 0 ? d : 0) }')
    sleep "$d"
    a=$(cpu_wait "${STARVE_PID:-$DAEMON_PID}")
    sleep "$2"
    b=$(cpu_wait "${STARVE_PID:-$DAEMON_PID}")
    awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f\n", b - a }' >"$T/daemon_wait"
  ) &
}
# starved "FILES...": true (and says why) when the host kept a workload of FILES (cpu_wait_s
# over its window_s) or the daemon ($T/daemon_wait over the same window) from a CPU more than
# STARVE_PCT (5) percent of the window; false, quietly, when neither was.
STARVE_PCT=${STARVE_PCT:-5}
_starve_field() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" "$1"; }
starved() {
  local f w win why="" dw
  for f in $1; do
    w=$(_starve_field "$f" cpu_wait_s) win=$(_starve_field "$f" window_s)
    if [ -z "$w" ] || awk -v w="$w" 'BEGIN { exit !(w < 0) }'; then
      why="$why $(_starve_field "$f" label): its CPU wait unknown;"
    elif awk -v w="$w" -v n="$win" -v p="$STARVE_PCT" 'BEGIN { exit !(w > n * p / 100) }'; then
      why="$why $(_starve_field "$f" label) waited ${w} s of ${win} s for a CPU;"
    fi
  done
  # STARVE_NO_DAEMON=1: a share the daemon takes no part in (a slice pacing itself without it).
  if [ "${STARVE_NO_DAEMON:-0}" = 1 ]; then
    [ -n "$why" ] || return 1
    echo "host starved:$why" >&2
    return 0
  fi
  for _ in $(seq 50); do [ -s "$T/daemon_wait" ] && break; sleep 0.1; done
  dw=$(cat "$T/daemon_wait" 2>/dev/null || echo -1)
  win=$(_starve_field "${1%% *}" window_s)
  if awk -v w="$dw" -v n="$win" -v p="$STARVE_PCT" 'BEGIN { exit !(w < 0 || w > n * p / 100) }'; then
    why="$why the daemon waited ${dw} s for a CPU;"
  fi
  [ -n "$why" ] || return 1
  echo "host starved:$why" >&2
}
# share_ceiling_floor NAME GOT LO HI "FILES": GOT (percent of the wall clock) never above HI;
# below LO a failure unless the host starved FILES' workloads or the daemon, when the floor is
# reported not checked (skip_part) rather than passed.
share_ceiling_floor() {
  [ "$2" -le "$4" ] || fail "$1: got $2%, above its ceiling $4%"
  if [ "$2" -ge "$3" ]; then
    echo "ok: $1 = $2% (want $3..$4)"
  elif starved "$5" 2>"$T/starved"; then
    skip_part "$1's floor of $3% (got $2%, ceiling $4% held): $(cat "$T/starved")"
  else
    fail "$1: got $2%, want $3..$4%"
  fi
}
