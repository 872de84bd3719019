#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Numbers and sizes as users type them (issue 8): whitespace is refused on both sides alike (a
# leading space passed through strtol while a trailing one was refused), and the largest size
# means what it says or is refused (2^64-1 was read as "no cap" and shown as 16777215.9TiB).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
G="$BIN/gslice"

refused() { # refused WHAT CMD...: CMD must exit non-zero
  local what=$1
  shift
  if "$@" >"$T/out" 2>&1; then fail "$what was accepted: $(cat "$T/out")"; fi
}
for v in " 60" "60 " "+60" " 6 0"; do refused "run --compute '$v'" gsrun --compute "$v" -- true; done
for v in " 2" "2 " "+2"; do refused "run --weight '$v'" gsrun --weight "$v" -- true; done
for v in " 0" "0 "; do refused "run --gpu '$v'" gsrun --gpu "$v" -- true; done
for v in " 1GiB" "1GiB " "18446744073709551615" "1048577TiB"; do
  refused "run --memory '$v'" gsrun --memory "$v" -- true
done
grep -q "at most 1048576TiB" "$T/out" || fail "the refusal does not say the largest size: $(cat "$T/out")"

gsrun --name v --compute 10 --memory 1GiB -- sleep 20 >/dev/null 2>&1 &
for _ in $(seq 100); do "$G" status --json | qgrep '"name":"v"' && break; sleep 0.05; done
for v in " 5" "5 " "+5"; do refused "set --compute '$v'" "$G" set v --compute "$v"; done
for v in " 1" "1 "; do refused "set --weight '$v'" "$G" set v --weight "$v"; done
for v in " 512MiB" "512MiB " "18446744073709551615"; do refused "set --memory '$v'" "$G" set v --memory "$v"; done
"$G" set v --compute 5 --memory 1048576TiB >/dev/null || fail "the largest size was refused"
"$G" status --json | qgrep '"memory_cap_bytes":1152921504606846976' ||
  fail "1048576TiB did not mean 2^60 bytes: $("$G" status --json)"
pass "gslice run and set: whitespace refused on both sides; the largest size means what it says"

for v in " 400" "400 " "+400"; do
  refused "gsliced --set 'window_ms=$v'" "$BIN/gsliced" --state-dir "$T/d" --set "window_ms=$v" --print-config
done
pass "gsliced --set: the same"
