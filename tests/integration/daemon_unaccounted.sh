#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Work that escapes the hook is seen (issue 8): a process that unset LD_PRELOAD inside a slice
# took 15 GiB and half the device while `gslice status` showed the slice at 0 B and the GPU 44%
# busy. The daemon sets the device's own figures (NVML: utilization, compute processes and
# their memory and samples) against the slices' accounting, in status (text, --json) and
# /metrics (gslice_unaccounted_*). Here on the simulated GPU: an unhooked process inside a
# slice, one outside any slice, and a hooked one that must not be listed.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon --metrics 127.0.0.1:0
port=""
for _ in $(seq 50); do
  port=$(sed -n 's/.*serving \/metrics on port \([0-9]*\).*/\1/p' "$T/gsliced.log" | tail -1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || fail "no metrics port in the log"

# Inside a 512 MiB, 10% slice, the workload drops the hook for a child.
gsrun --name escape --memory 512MiB --compute 10 --compute-limit 10 -- bash -c \
  'exec env -u LD_PRELOAD "$0" --warmup 0 --duration 6 --label "$1"' "$TBIN/compute_spin" "esc$$" \
  >"$T/esc" 2>&1 &
# A hooked, well-behaved slice beside it.
gsrun --name good --compute 10 -- "$TBIN/compute_spin" --warmup 0 --duration 6 --label good$$ \
  >"$T/good" 2>&1 &
# And a process outside every slice.
env -u LD_PRELOAD "$TBIN/compute_spin" --warmup 0 --duration 6 --label out$$ >"$T/out" 2>&1 &

# Labels carry this test's pid: another run's workloads may still be about.
find_pid() { pgrep -f "^$TBIN/compute_spin --warmup 0 --duration 6 --label $1$$\$" | head -1 || true; }
for _ in $(seq 100); do
  esc=$(find_pid esc); good=$(find_pid good); out=$(find_pid out)
  [ -n "$esc" ] && [ -n "$good" ] && [ -n "$out" ] && break
  sleep 0.05
done
[ -n "$esc" ] && [ -n "$good" ] && [ -n "$out" ] || fail "workloads did not start"
sleep 2
json=$("$BIN/gslice" status --json)
text=$("$BIN/gslice" status)
curl -sf "http://127.0.0.1:$port/metrics" >"$T/metrics" || fail "GET /metrics failed"
echo "$text"
escape_id=$(sed -n 's/.*"id":\([0-9]*\),"name":"escape".*/\1/p' <<<"$json")
[ -n "$escape_id" ] || fail "no slice 'escape' in status"

unacc=$(grep -o '"unaccounted":{[^}]*\(}[^]]*\)*\]}' <<<"$json" | head -1)
echo "unaccounted: $unacc"
grep -q '"processes":2,' <<<"$unacc" || fail "want 2 unaccounted processes: $unacc"
grep -q "{\"pid\":$esc,\"slice\":$escape_id,\"memory_bytes\":[1-9][0-9]*,\"busy_ratio\":0\.[0-9]" <<<"$unacc" ||
  fail "the unhooked process inside slice $escape_id (pid $esc) is not listed with its slice, memory and share: $unacc"
grep -q "{\"pid\":$out,\"slice\":null,\"memory_bytes\":[1-9]" <<<"$unacc" ||
  fail "the process outside every slice (pid $out) is not listed: $unacc"
! grep -q "\"pid\":$good," <<<"$unacc" || fail "the hooked process $good is listed as unaccounted"
grep -Eq '"device_busy_ratio":(0\.[5-9]|1)' <<<"$json" || fail "the device's own busy ratio is missing or low: $json"
pass "status --json lists the processes outside every slice's accounting"

grep -q "! 2 processes on this GPU outside every slice's accounting" <<<"$text" || fail "the table does not say so"
grep -Eq "pid $esc +inside slice $escape_id " <<<"$text" || fail "the table does not name pid $esc in slice $escape_id"
grep -Eq "pid $out +in no slice " <<<"$text" || fail "the table does not name pid $out"
grep -Eq "busy [0-9.]+% \(device [0-9]+%\)" <<<"$text" || fail "no device busy figure in the table"
pass "status shows them"

grep -Eq '^gslice_unaccounted_processes\{gpu="0",.*\} 2$' "$T/metrics" || fail "metrics: $(grep unaccounted "$T/metrics")"
grep -Eq '^gslice_unaccounted_memory_bytes\{gpu="0",.*\} [1-9]' "$T/metrics" || fail "no unaccounted memory metric"
grep -Eq '^gslice_unaccounted_busy_ratio\{gpu="0",.*\} 0\.[0-9]' "$T/metrics" || fail "no unaccounted busy metric"
grep -Eq '^gslice_gpu_device_busy_ratio\{gpu="0",.*\} (0\.[5-9]|1)' "$T/metrics" || fail "no device busy metric"
pass "/metrics has gslice_unaccounted_*"
kill "$esc" "$good" "$out" 2>/dev/null || true
stop_daemon
