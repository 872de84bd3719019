# SPDX-License-Identifier: Apache-2.0
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
# sleep_until EPOCH [PLUS]: sleeps until EPOCH + PLUS seconds; at once where that has passed
# already (a loaded host ran the test late: sleep refuses a negative time, and set -e ends it).
sleep_until() {
  sleep "$(awk -v e="$1" -v p="${2:-0}" -v n="$(date +%s.%N)" 'BEGIN { d = e + p - n; printf "%.3f", (d > 0 ? d : 0) }')"
}
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
# within NAME GOT LO HI
within() { [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] || fail "$1: got $2%, want $3..$4%"; echo "ok: $1 = $2% (want $3..$4)"; }
# nslices: how many slices the daemon has now
nslices() { "$BIN/gslice" status --json | { grep -o '"compute_limit_percent"' || true; } | wc -l; }
# gsrun ARGS...: gslice run; in sanitizer builds with the ASan runtime ahead of the hook, as
# an uninstrumented workload needs it (gslice run keeps it first in LD_PRELOAD).
ASAN_RT=""
if [ "${GSLICE_SANITIZE:-0}" = 1 ]; then ASAN_RT=$(${CC:-cc} -print-file-name=libasan.so); fi
gsrun() { if [ -n "$ASAN_RT" ]; then LD_PRELOAD="$ASAN_RT" "$BIN/gslice" run "$@"; else "$BIN/gslice" run "$@"; fi; }
source "$GSLICE_SRC/tests/integration/lib_starve.sh"
# device_share NAME "FILES" "ALL" LO HI: FILES' percent of ALL's device time (pct_of) within
# LO..HI. Out of bounds is a failure unless the host starved a workload of ALL or the daemon:
# a slice holding its token while its process waits for a CPU is charged that time with the
# device idle (docs/compute.md), so its share of device time drops by the host's doing; then
# the bounds are reported not checked (skip_part), never passed.
device_share() {
  local got
  got=$(pct_of "$2" "$3")
  if [ "$got" -ge "$4" ] && [ "$got" -le "$5" ]; then
    echo "ok: $1 = $got% of the device time (want $4..$5)"
  elif starved "$3" 2>"$T/starved"; then
    skip_part "$1: $got% of the device time, want $4..$5%: $(cat "$T/starved")"
  else
    fail "$1: got $got% of the device time, want $4..$5%"
  fi
}
