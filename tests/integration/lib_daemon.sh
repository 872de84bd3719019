# Helpers of the compute_* and daemon_* tests (sourced after lib.sh): a daemon on the test's
# socket with its own state dir, and workloads started together on a common clock.
DSTATE="$T/daemon"
export GSLICE_DAEMON_STATE_DIR="$DSTATE"
start_daemon() {
  "$BIN/gsliced" --state-dir "$DSTATE" --foreground "$@" 2>>"$T/gsliced.log" &
  DAEMON_PID=$!
  for _ in $(seq 100); do
    [ -S "$GSLICE_SOCKET" ] && "$BIN/gslice" status >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  cat "$T/gsliced.log" >&2
  fail "gsliced did not come up"
}
stop_daemon() {
  kill "$DAEMON_PID" 2>/dev/null || true
  wait "$DAEMON_PID" 2>/dev/null || true
}
# epoch seconds, n seconds from now
at() { date +%s.%N | awk -v d="$1" '{ printf "%.3f", $1 + d }'; }
# field VALUE-OF KEY in a "k=v k=v" line
field() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" "$1"; }
# pct FILE: share in percent (integer)
pct() { awk -v s="$(field "$1" share)" 'BEGIN { printf "%d", s * 100 + 0.5 }'; }
# pct_of "FILE..." "FILE...": the first files' device time in percent (integer) of all the second
# files': a share of the device time the slices got, which a loaded machine that leaves the
# device idle does not move (where requests add up to 100%, that is what each is owed).
pct_of() {
  local a=0 t=0 f
  for f in $1; do a=$(awk -v x="$a" -v y="$(field "$f" device_s)" 'BEGIN { print x + y }'); done
  for f in $2; do t=$(awk -v x="$t" -v y="$(field "$f" device_s)" 'BEGIN { print x + y }'); done
  awk -v a="$a" -v t="$t" 'BEGIN { printf "%d", (t > 0 ? 100 * a / t + 0.5 : 0) }'
}
# pct_asked FILE: of the time compute_spin's slice had work at the device or waited at its gate
# (device_s + in_launch_s), the part the device ran it, in percent. Time the process did not run
# at all (a loaded machine's CPU) is in neither: what the daemon and the device gave it, not what
# the machine's CPUs let it ask for, which a wall-clock share mixes in.
pct_asked() {
  awk -v d="$(field "$1" device_s)" -v w="$(field "$1" in_launch_s)" \
    'BEGIN { printf "%d", (d + w > 0 ? d / (d + w) : 0) * 100 + 0.5 }'
}
# within NAME GOT LO HI
within() { [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] || fail "$1: got $2%, want $3..$4%"; echo "ok: $1 = $2% (want $3..$4)"; }
# nslices: how many slices the daemon has now
nslices() { "$BIN/gslice" status --json | { grep -o '"compute_request_percent"' || true; } | wc -l; }
# gsrun ARGS...: gslice run; in sanitizer builds with the ASan runtime ahead of the hook, as
# an uninstrumented workload needs it (gslice run keeps it first in LD_PRELOAD).
ASAN_RT=""
if [ "${GSLICE_SANITIZE:-0}" = 1 ]; then ASAN_RT=$(${CC:-cc} -print-file-name=libasan.so); fi
gsrun() { if [ -n "$ASAN_RT" ]; then LD_PRELOAD="$ASAN_RT" "$BIN/gslice" run "$@"; else "$BIN/gslice" run "$@"; fi; }
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
    a=$(cpu_wait "$DAEMON_PID")
    sleep "$2"
    b=$(cpu_wait "$DAEMON_PID")
    awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f\n", b - a }' >"$T/daemon_wait"
  ) &
}
# starved "FILES...": true (and says why) when the host kept a workload of FILES (cpu_wait_s
# over its window_s) or the daemon ($T/daemon_wait over the same window) from a CPU more than
# STARVE_PCT (5) percent of the window; false, quietly, when neither was.
STARVE_PCT=${STARVE_PCT:-5}
starved() {
  local f w win why="" dw
  for f in $1; do
    w=$(field "$f" cpu_wait_s) win=$(field "$f" window_s)
    if [ -z "$w" ] || awk -v w="$w" 'BEGIN { exit !(w < 0) }'; then
      why="$why $(field "$f" label): its CPU wait unknown;"
    elif awk -v w="$w" -v n="$win" -v p="$STARVE_PCT" 'BEGIN { exit !(w > n * p / 100) }'; then
      why="$why $(field "$f" label) waited ${w} s of ${win} s for a CPU;"
    fi
  done
  for _ in $(seq 50); do [ -s "$T/daemon_wait" ] && break; sleep 0.1; done
  dw=$(cat "$T/daemon_wait" 2>/dev/null || echo -1)
  win=$(field "${1%% *}" window_s)
  if awk -v w="$dw" -v n="$win" -v p="$STARVE_PCT" 'BEGIN { exit !(w < 0 || w > n * p / 100) }'; then
    why="$why the daemon waited ${dw} s for a CPU;"
  fi
  [ -n "$why" ] || return 1
  echo "host starved:$why" >&2
}
# share_ceiling_floor NAME GOT LO HI "FILES": GOT (percent of the wall clock) never above HI;
# at least LO unless the host starved FILES' workloads or the daemon, when the floor is reported
# not checked (skip_part) rather than passed.
share_ceiling_floor() {
  [ "$2" -le "$4" ] || fail "$1: got $2%, above its ceiling $4%"
  if starved "$5" 2>"$T/starved"; then
    skip_part "$1's floor of $3% (got $2%, ceiling $4% held): $(cat "$T/starved")"
  else
    within "$1" "$2" "$3" "$4"
  fi
}
