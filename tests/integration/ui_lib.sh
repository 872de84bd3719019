# SPDX-License-Identifier: Apache-2.0
# Helpers of the status/top/set tests and the demo: a daemon, slices, shares from status.
# Usage (after lib.sh, or with GSLICE_BUILD/GSLICE_SRC/GSLICE_SOCKET set):
#   source "$GSLICE_SRC/tests/integration/ui_lib.sh"
GSLICE=${GSLICE:-$GSLICE_BUILD/bin/gslice}
GSLICED=${GSLICED:-$GSLICE_BUILD/bin/gsliced}
SPIN=${SPIN:-$GSLICE_BUILD/tests/demo_spin}
SPIN_PTX=${SPIN_PTX:-$GSLICE_SRC/tests/gpu/spin.ptx}

# ui_start_daemon [gsliced args...]: starts gsliced on $GSLICE_SOCKET, waits until it answers.
# Its state (slices, persisted) lives next to the socket unless UI_STATE_DIR says otherwise.
ui_start_daemon() {
  local state=${UI_STATE_DIR:-$(dirname "$GSLICE_SOCKET")/gsliced-state}
  "$GSLICED" --foreground --socket "$GSLICE_SOCKET" --state-dir "$state" "$@" \
    >> "${UI_DAEMON_LOG:-/dev/stderr}" 2>&1 &
  DAEMON_PID=$!
  local i
  for i in $(seq 1 100); do
    if "$GSLICE" status --json > /dev/null 2>&1; then return 0; fi
    kill -0 "$DAEMON_PID" 2> /dev/null || { echo "gsliced exited early" >&2; return 1; }
    sleep 0.1
  done
  echo "gsliced did not answer on $GSLICE_SOCKET within 10 s" >&2
  return 1
}

# ui_metrics_port: the port gsliced says it serves /metrics on (start it with
# --metrics 127.0.0.1:0 so the kernel picks a free one; needs UI_DAEMON_LOG).
ui_metrics_port() {
  local i p
  for i in $(seq 50); do
    p=$(sed -n 's/.*serving \/metrics on port \([0-9]*\).*/\1/p' "$UI_DAEMON_LOG" | tail -1)
    if [ -n "$p" ]; then echo "$p"; return 0; fi
    sleep 0.1
  done
  echo "gsliced did not say which port /metrics is on" >&2
  return 1
}

# ui_json: the node snapshot as JSON.
ui_json() { "$GSLICE" status --json; }

# ui_slice_field NAME JQ: a field of the slice named NAME (jq path relative to the slice).
ui_slice_field() { ui_json | jq -r --arg n "$1" ".slices[] | select(.name == \$n) | $2"; }

# ui_wait_slice NAME [PROCS]: waits (10 s) until the slice has PROCS (default 1) processes.
ui_wait_slice() {
  local i n
  for i in $(seq 1 100); do
    n=$(ui_slice_field "$1" '.processes' 2> /dev/null | head -1 || true)
    if [ -n "$n" ] && [ "$n" -ge "${2:-1}" ]; then return 0; fi
    sleep 0.1
  done
  echo "slice $1 never got ${2:-1} process(es)" >&2
  return 1
}

# ui_busy NAME: "TIME BUSY_SECONDS" of the slice on its first GPU.
ui_busy() { ui_json | jq -r --arg n "$1" '.time as $t | .slices[] | select(.name == $n) | "\($t) \(.gpus[0].busy_seconds_total // 0)"'; }

# ui_share NAME SECONDS: percent of device time the slice got over the next SECONDS.
ui_share() {
  local a b
  a=$(ui_busy "$1")
  sleep "$2"
  b=$(ui_busy "$1")
  echo "$a $b" | awk '{ printf "%.1f\n", 100 * ($4 - $2) / ($3 - $1) }'
}

# ui_within VALUE WANT TOL: true when |VALUE - WANT| <= TOL.
ui_within() { awk -v v="$1" -v w="$2" -v t="$3" 'BEGIN { d = v - w; if (d < 0) d = -d; exit !(d <= t) }'; }

# ui_cpu_wait PID: seconds PID's threads have waited for a CPU while runnable (schedstat).
ui_cpu_wait() { cat /proc/"$1"/task/*/schedstat 2> /dev/null | awk '{ s += $2 } END { printf "%.4f", s / 1e9 }'; }

# ui_share_wait NAME SECONDS: "SHARE WAIT": ui_share's share, and the longest any of the slice's
# processes or the daemon waited for a CPU over the window, in percent of it. A loaded host
# lowers a share of the wall clock for no fault of gslice; WAIT says how much it took.
ui_share_wait() {
  local pids p a b w0="" w1="" max
  pids="$DAEMON_PID $(ui_slice_field "$1" '.pids[]' | tr '\n' ' ')"
  for p in $pids; do w0="$w0 $(ui_cpu_wait "$p")"; done
  a=$(ui_busy "$1")
  sleep "$2"
  b=$(ui_busy "$1")
  for p in $pids; do w1="$w1 $(ui_cpu_wait "$p")"; done
  max=$(awk -v x="$w0" -v y="$w1" 'BEGIN { n = split(x, u); split(y, v); m = 0
    for (i = 1; i <= n; i++) if (v[i] - u[i] > m) m = v[i] - u[i]; print m }')
  echo "$a $b $max" | awk '{ printf "%.1f %.1f\n", 100 * ($4 - $2) / ($3 - $1), 100 * $5 / ($3 - $1) }'
}

# ui_sleep_cpu_wait SECONDS PID...: sleeps SECONDS and prints the longest any of PIDS waited for
# a CPU meanwhile, in percent of SECONDS (the host's part in a share measured over that sleep).
ui_sleep_cpu_wait() {
  local s=$1 p w0="" w1=""
  shift
  for p in "$@"; do w0="$w0 $(ui_cpu_wait "$p")"; done
  sleep "$s"
  for p in "$@"; do w1="$w1 $(ui_cpu_wait "$p")"; done
  awk -v x="$w0" -v y="$w1" -v s="$s" 'BEGIN { n = split(x, u); split(y, v); m = 0
    for (i = 1; i <= n; i++) if (v[i] - u[i] > m) m = v[i] - u[i]; printf "%.1f\n", 100 * m / s }'
}

# ui_floor WHAT WAIT_PCT CONDITION-COMMAND...: a floor that held passes; one that did not fails,
# unless the host kept a process from a CPU more than 5% of the window (skip_part, never passed).
ui_floor() {
  local what=$1 wait=$2
  shift 2
  if "$@"; then
    echo "ok: $what"
  elif awk -v x="$wait" 'BEGIN { exit !(x > 5) }'; then
    skip_part "$what (the host kept a process from a CPU $wait% of the window)"
  else
    return 1
  fi
}

# ui_check_share WHAT "SHARE WAIT" WANT TOL: a hard-limited share: never above WANT + TOL; at
# least WANT - TOL, a failure below unless the host kept the slice or the daemon from a CPU more
# than 5% of the window (then that floor is reported not checked, skip_part, never passed).
ui_check_share() {
  local share=${2% *} wait=${2#* }
  awk -v s="$share" -v w="$3" -v t="$4" 'BEGIN { exit !(s <= w + t) }' ||
    fail "$1: got $share%, above $3 + $4%"
  if ui_within "$share" "$3" "$4"; then
    echo "ok: $1 = $share% (want $3 +- $4)"
  elif awk -v x="$wait" 'BEGIN { exit !(x > 5) }'; then
    skip_part "$1's floor of $3 - $4% (got $share%): the host kept a process from a CPU $wait% of the window"
  else
    fail "$1: got $share%, want $3 +- $4%"
  fi
}
