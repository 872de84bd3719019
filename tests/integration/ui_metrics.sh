#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A live daemon's /metrics: promtool check metrics passes and the slices are in it.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/ui_lib.sh"
promtool=$(sh "$GSLICE_SRC/scripts/promtool.sh") || fail "no promtool (see the message above)"
command -v curl > /dev/null || fail "curl missing: run scripts/deps.sh (apt-get install curl)"

UI_DAEMON_LOG="$T/gsliced.log"
ui_start_daemon --metrics 127.0.0.1:0 || { cat "$T/gsliced.log"; fail "daemon did not start"; }
port=$(ui_metrics_port) || fail "no metrics port in the log: $(cat "$T/gsliced.log")"
"$GSLICE" run --name m1 --compute 30 --memory 512MiB \
  -- "$SPIN" --ptx "$SPIN_PTX" --kernel-us 1000 --seconds 15 --alloc 16MiB > "$T/m1.out" 2>&1 &
ui_wait_slice m1 || fail "slice did not start: $(cat "$T/m1.out")"
sleep 2
curl -sf -D "$T/headers" "http://127.0.0.1:$port/metrics" > "$T/metrics" || fail "GET /metrics failed"
grep -qi '^content-type: text/plain; version=0.0.4' "$T/headers" || fail "content type: $(cat "$T/headers")"
"$promtool" check metrics < "$T/metrics" || fail "promtool check metrics rejected the daemon's output"
grep -q '^gslice_slice_compute_request_ratio{slice="m1",slice_id="[0-9]*"} 0.3$' "$T/metrics" ||
  fail "no request ratio for the slice: $(grep request_ratio "$T/metrics")"
grep -q '^gslice_slice_memory_cap_bytes{slice="m1",.*} 536870912$' "$T/metrics" || fail "no cap series"
grep -Eq '^gslice_slice_launches_total\{slice="m1",.*\} [1-9]' "$T/metrics" || fail "no launches counted"
grep -Eq '^gslice_slice_token_wait_seconds_count\{slice="m1",.*\} [1-9]' "$T/metrics" || fail "no token waits"
grep -Eq '^gslice_gpu_busy_ratio\{gpu="0",.*\} 0\.[1-9]' "$T/metrics" || fail "GPU not busy: $(grep busy "$T/metrics")"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")
expect_eq "other paths" "$code" 404

# Off unless asked; a bad address is refused at start, clearly.
if "$GSLICED" --foreground --socket "$T/other.sock" --state-dir "$T/other" --metrics 'example.org:80' \
  > "$T/bad.log" 2>&1; then fail "bad metrics address accepted"; fi
grep -q "cannot serve /metrics on 'example.org:80'" "$T/bad.log" || fail "bad metrics address error unclear: $(cat "$T/bad.log")"
pass "live /metrics passes promtool check metrics"
