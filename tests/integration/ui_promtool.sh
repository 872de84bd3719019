#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# promtool check metrics accepts what the /metrics renderer writes (hand-built snapshot).
source "$GSLICE_SRC/tests/integration/lib.sh"
promtool=$(sh "$GSLICE_SRC/scripts/promtool.sh") || skip "no promtool (see the message above)"
"$TBIN/test_metrics" --dump > "$T/metrics.txt"
grep -q '^gslice_slice_token_wait_seconds_bucket{' "$T/metrics.txt" || fail "no histogram in the dump"
"$promtool" check metrics < "$T/metrics.txt" || fail "promtool check metrics rejected the output"
pass "promtool check metrics accepts the rendered metrics"
