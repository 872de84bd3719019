#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Sizes near 2^64 on every path, with no cap on the device: the request fails and the slice's
# count of the process stays exact (no wrap-around in the hook's size arithmetic or in the
# region's sums, no give-back clamped to 0), so a cap set afterwards holds.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
unset GSLICE_MEMORY_LIMIT

for path in alloc pitch managed async pool vmm array array3d mipmap; do
  start "$path" --lookup dlsym --path "$path" --chunk 256MiB
  send "$path" "alloc 1"
  expect_eq "$path: first chunk" "$(field "$(await "$path" '^alloc')" n)" 1
  send "$path" huge
  err=$(field "$(await "$path" '^huge')" err)
  [ "$err" != 0 ] || fail "$path: a 16 EiB allocation succeeded"
  expect_eq "$path: the slice counts what the device holds" "$(region_used)" "$(sim_used)"
  # A cap set now: context + one chunk held, so two more chunks fit in 1 GiB.
  "$TBIN/hook_region" "$GSLICE_STATE_DIR" set-limit 1GiB > /dev/null
  send "$path" fill
  expect_eq "$path: chunks under a later cap" "$(field "$(await "$path" '^fill')" n)" 2
  finish "$path"
  rm -rf "$GSLICE_STATE_DIR"
done
# An array whose size wraps around 2^64 to almost nothing (width 2^62): refused under the hook,
# and by the simulated driver alone (it used to create it, charging the wrapped size).
line=$(LD_PRELOAD="$HOOK_PRELOAD" "$TBIN/hook_attack" wide-array 2> /dev/null)
expect_eq "wide array under the hook" "$(field "$line" err)" 2
line=$("$TBIN/hook_attack" wide-array)
expect_eq "wide array, the sim alone" "$(field "$line" err)" 2
pass "sizes near 2^64 fail on every path and leave the count exact"
