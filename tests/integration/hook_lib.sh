# SPDX-License-Identifier: Apache-2.0
# Helpers for the hook's integration tests (source after lib.sh): run clients under the hook,
# talk to long-running ones through fifos, read the simulated device's real usage.
export GSLICE_SIM_MEMORY=${GSLICE_SIM_MEMORY:-8GiB}
export GSLICE_SIM_CONTEXT_MEMORY=${GSLICE_SIM_CONTEXT_MEMORY:-256MiB}
MiB=$((1 << 20))
GiB=$((1 << 30))
# Under ASan the hook is instrumented: the runtime has to come first in LD_PRELOAD.
HOOK_PRELOAD="$HOOK"
if [ "${GSLICE_SANITIZE:-0}" = 1 ]; then
  HOOK_PRELOAD="$(${CC:-cc} -print-file-name=libasan.so) $HOOK"
fi
[ -f "$HOOK" ] || fail "no hook at $HOOK"

# client ARGS...: hook_client (or hook_client_linked for --lookup link/default/next) under the hook.
client() {
  local bin="$TBIN/hook_client"
  case " $* " in
  *" --lookup link "* | *" --lookup default "* | *" --lookup next "*) bin="$TBIN/hook_client_linked" ;;
  esac
  if [ -n "${CLIENT_EXEC:-}" ]; then
    LD_PRELOAD="$HOOK_PRELOAD" exec "$bin" "$@"
  fi
  LD_PRELOAD="$HOOK_PRELOAD" "$bin" "$@"
}

# start NAME ARGS...: a client in the background reading commands from a fifo; $PID_NAME is
# the client's own pid (the subshell execs it).
start() {
  local name=$1 fd
  shift
  mkfifo "$T/$name.in"
  # Without the other clients' fifo ends, so closing one is the end of its input.
  (
    for v in ${!FD_@}; do eval "exec ${!v}>&-"; done
    exec < "$T/$name.in" > "$T/$name.out" 2> "$T/$name.err"
    CLIENT_EXEC=1 client "$@"
  ) &
  eval "PID_$name=$!"
  exec {fd}> "$T/$name.in"
  eval "FD_$name=$fd"
}

# send NAME COMMAND
send() {
  local fdv="FD_$1"
  echo "$2" >&"${!fdv}"
}

# finish NAME: closes its input and waits for it.
finish() {
  local fdv="FD_$1" pidv="PID_$1"
  eval "exec ${!fdv}>&-"
  wait "${!pidv}" 2>/dev/null || true
}

# await NAME PATTERN [NTH]: prints the NTH (default 1) output line of NAME matching PATTERN,
# waiting up to 30 s for it.
await() {
  local i line
  for i in $(seq 600); do
    line=$(grep -E "$2" "$T/$1.out" | sed -n "${3:-1}p" || true)
    [ -n "$line" ] && { echo "$line"; return 0; }
    sleep 0.05
  done
  echo "--- $1 stdout:" >&2; cat "$T/$1.out" >&2
  echo "--- $1 stderr:" >&2; cat "$T/$1.err" >&2
  fail "no '$2' from $1 within 30 s"
}

# field LINE KEY: the value of key=value in LINE.
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# sim_used: bytes in use on simulated device 0, by every process (the device's own count).
sim_used() { "$BIN/gslice-sim" info --json | jq '.devices[0].memory_used'; }

# region_used: what the slice's region counts on its first device, dead processes reclaimed.
region_used() {
  "$TBIN/hook_region" "$GSLICE_STATE_DIR" reclaim > /dev/null
  "$TBIN/hook_region" "$GSLICE_STATE_DIR" show | sed -n 's/^device slot=0 .*used=\([0-9]*\).*/\1/p'
}
