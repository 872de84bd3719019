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
