#!/bin/bash
# gslice status on a two-GPU node: every GPU listed, each slice under the GPUs it has.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/ui_lib.sh"
export GSLICE_SIM_DEVICES=2

UI_DAEMON_LOG="$T/gsliced.log" ui_start_daemon || { cat "$T/gsliced.log"; fail "daemon did not start"; }
"$GSLICE" run --name one --gpu 1 --compute 30 \
  -- "$SPIN" --ptx "$SPIN_PTX" --kernel-us 1000 --seconds 10 > "$T/one.out" 2>&1 &
"$GSLICE" run --name two --gpu 0,1 --compute 10 \
  -- "$SPIN" --ptx "$SPIN_PTX" --kernel-us 1000 --seconds 10 > "$T/two.out" 2>&1 &
ui_wait_slice one || fail "one did not start: $(cat "$T/one.out")"
ui_wait_slice two || fail "two did not start: $(cat "$T/two.out")"
sleep 1.5
ui_json > "$T/s.json"
expect_eq "GPUs" "$(jq -c '[.gpus[].index]' "$T/s.json")" "[0,1]"
expect_eq "one's GPUs" "$(jq -c '[.slices[] | select(.name == "one") | .gpus[].index]' "$T/s.json")" "[1]"
expect_eq "two's GPUs" "$(jq -c '[.slices[] | select(.name == "two") | .gpus[].index]' "$T/s.json")" "[0,1]"
expect_eq "GPU 1 requested" "$(jq '.gpus[1].compute_requested_percent' "$T/s.json")" 40
# one spins on GPU 1 (its only GPU); two's process uses its first GPU, 0.
jq -e '.gpus[0].busy_ratio > 0.5 and .gpus[1].busy_ratio > 0.5' "$T/s.json" > /dev/null ||
  fail "both GPUs should be busy: $(jq -c '[.gpus[].busy_ratio]' "$T/s.json")"
"$GSLICE" status > "$T/table"
# The table: one under GPU 1 only, two under both.
awk '/^GPU /{ g = $2 } /^  (one|two) /{ print g, $1 }' "$T/table" | sort > "$T/rows"
expect_eq "rows" "$(tr '\n' ' ' < "$T/rows")" "0 two 1 one 1 two "
pass "status lists every GPU and each slice under its GPUs"
