#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice status [--json] matches what the slices are and do: limits as given, live pids,
# memory used under the cap, shares that add up, and clear errors without a daemon.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/ui_lib.sh"

# No daemon: a clear error naming the socket, non-zero exit.
if "$GSLICE" status > "$T/out" 2> "$T/err"; then fail "status without a daemon succeeded"; fi
grep -q "$GSLICE_SOCKET" "$T/err" || fail "no-daemon error does not name the socket: $(cat "$T/err")"
"$GSLICE" status --bogus 2> "$T/err" && fail "unknown flag accepted"
grep -q "unknown option '--bogus'" "$T/err" || fail "unknown flag error unclear: $(cat "$T/err")"

UI_DAEMON_LOG="$T/gsliced.log" ui_start_daemon || { cat "$T/gsliced.log"; fail "daemon did not start"; }
"$GSLICE" run --name alpha --compute 30 --compute-limit 50 --priority high --weight 3 --memory 512MiB \
  -- "$SPIN" --ptx "$SPIN_PTX" --kernel-us 1000 --seconds 20 --alloc 64MiB > "$T/alpha.out" 2>&1 &
"$GSLICE" run --name beta --compute 20 --priority low \
  -- "$SPIN" --ptx "$SPIN_PTX" --kernel-us 1000 --seconds 20 > "$T/beta.out" 2>&1 &
ui_wait_slice alpha || fail "alpha did not start: $(cat "$T/alpha.out")"
ui_wait_slice beta || fail "beta did not start: $(cat "$T/beta.out")"
# Busy and shares are of the wall clock: a host that keeps the slices or the daemon from a CPU
# lowers them (busy 41%, a third of the window lost to revoked holders, beside a soak's build).
cpu_wait=$(ui_sleep_cpu_wait 2 "$DAEMON_PID" $(ui_slice_field alpha '.pids[]') $(ui_slice_field beta '.pids[]'))

ui_json > "$T/s.json" || fail "status --json failed"
jq -e . "$T/s.json" > /dev/null || fail "status --json is not JSON"
expect_eq version "$(jq -r .version "$T/s.json")" 1
jq -e '.gpus | length >= 1' "$T/s.json" > /dev/null || fail "no GPU in status"
jq -e '.gpus[0].memory_total_bytes > 0 and .gpus[0].busy_ratio > 0' "$T/s.json" > /dev/null ||
  fail "GPU 0 should be busy with two spinning slices: $(jq -c '.gpus[0]' "$T/s.json")"
busy_half() { jq -e '.gpus[0].busy_ratio > 0.5' "$T/s.json" > /dev/null; }
ui_floor "GPU 0 over half busy with two spinning slices" "$cpu_wait" busy_half ||
  fail "GPU 0 should be over half busy with two spinning slices: $(jq -c '.gpus[0]' "$T/s.json")"
a() { jq -r ".slices[] | select(.name == \"alpha\") | $1" "$T/s.json"; }
b() { jq -r ".slices[] | select(.name == \"beta\") | $1" "$T/s.json"; }
expect_eq "alpha request" "$(a .compute_request_percent)" 30
expect_eq "alpha limit" "$(a .compute_limit_percent)" 50
expect_eq "alpha priority" "$(a .priority)" high
expect_eq "alpha weight" "$(a .weight)" 3
expect_eq "beta request" "$(b .compute_request_percent)" 20
expect_eq "beta priority" "$(b .priority)" low
expect_eq "alpha processes" "$(a .processes)" 1
expect_eq "alpha cap" "$(a '.gpus[0].memory_cap_bytes')" $((512 << 20))
expect_eq "beta cap" "$(b '.gpus[0].memory_cap_bytes')" null
used=$(a '.gpus[0].memory_used_bytes')
# 64MiB + the context (the sim charges 256MiB per context, as a GPU charges some).
[ "$used" -ge $((64 << 20)) ] && [ "$used" -le $((512 << 20)) ] ||
  fail "alpha holds 64MiB (+ context) under a 512MiB cap, status says $used bytes"
# The pids are the slice's live workload processes.
for p in $(a '.pids[]') $(b '.pids[]'); do
  grep -q demo_spin "/proc/$p/cmdline" 2> /dev/null || fail "pid $p in status is not a live demo_spin"
done
# Shares: both run, together no more than the whole device.
sa=$(a '.gpus[0].share_ratio'); sb=$(b '.gpus[0].share_ratio')
awk -v a="$sa" -v b="$sb" 'BEGIN { exit !(a > 0.05 && b > 0.05 && a + b <= 1.05) }' ||
  fail "shares alpha=$sa beta=$sb: both should run, together <= 1"
# Each at least its request (within a loaded box's tolerance), alpha at most its limit.
awk -v a="$sa" 'BEGIN { exit !(a <= 0.57) }' || fail "alpha's share $sa is above its 50% limit"
ui_floor "shares alpha=$sa (want 0.30..0.50) beta=$sb (want >= 0.20)" "$cpu_wait" \
  awk -v a="$sa" -v b="$sb" 'BEGIN { exit !(a >= 0.23 && b >= 0.13) }' ||
  fail "shares alpha=$sa (want 0.30..0.50) beta=$sb (want >= 0.20)"
jq -e '[.slices[].gpus[0] | .launches_total > 0 and .tokens_total > 0] | all' "$T/s.json" > /dev/null ||
  fail "launches/tokens not counted: $(jq -c '[.slices[].gpus[0] | {launches_total, tokens_total}]' "$T/s.json")"

# The table says the same for people.
"$GSLICE" status > "$T/table" || fail "status failed"
grep -Eq '^  alpha +[0-9]+ +1 +[0-9.]+MiB / 512MiB +30% +50% +high +3 ' "$T/table" ||
  fail "alpha's row is wrong: $(cat "$T/table")"
grep -q '^GPU 0 ' "$T/table" || fail "no GPU 0 block: $(cat "$T/table")"
pass "status and status --json match the slices"
