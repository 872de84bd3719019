#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
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
# one spins on GPU 1 (its only GPU); two's process uses its first GPU, 0: each GPU's busy time
# is its own slice's, two's share of GPU 1 none. What is checked is where the device time is
# put, not how much there was: a loaded host that kept the spinners from a CPU took GPU busy
# below one half of the window (any fixed floor there measures the host).
jq -e '.gpus[0].busy_ratio > 0.1 and .gpus[1].busy_ratio > 0.1' "$T/s.json" > /dev/null ||
  fail "both GPUs should be busy: $(jq -c '[.gpus[].busy_ratio]' "$T/s.json")"
share() { jq --arg n "$1" --argjson g "$2" '.slices[] | select(.name == $n) | .gpus[] | select(.index == $g) | .share_ratio' "$T/s.json"; }
jq -e --argjson a "$(share two 0)" --argjson b "$(share one 1)" --argjson c "$(share two 1)" \
  '($a - .gpus[0].busy_ratio | fabs) < 0.01 and ($b - .gpus[1].busy_ratio | fabs) < 0.01 and $c == 0' \
  "$T/s.json" > /dev/null ||
  fail "GPU busy not its slices' shares: GPUs $(jq -c '[.gpus[].busy_ratio]' "$T/s.json"), two on 0: $(share two 0), one on 1: $(share one 1), two on 1: $(share two 1)"
"$GSLICE" status > "$T/table"
# The table: one under GPU 1 only, two under both.
awk '/^GPU /{ g = $2 } /^  (one|two) /{ print g, $1 }' "$T/table" | sort > "$T/rows"
expect_eq "rows" "$(tr '\n' ' ' < "$T/rows")" "0 two 1 one 1 two "
pass "status lists every GPU and each slice under its GPUs"
