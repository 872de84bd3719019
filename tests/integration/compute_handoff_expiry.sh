#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The handoff at expiry (docs/compute.md, "The handoff", 6): a slice of 0.2 ms kernels that
# synchronizes every 8 of them fills its 5 ms quantum with 24 launches plus its own gaps, so its
# token often expires before the budget is spent. A burst that expires past its handoff mark
# hands the token on 0.5 ms before its tail ends, as one that spent its budget does; before, the
# helper closed it at expiry and held the token until the queue had drained (79% of the 0.2 ms
# slice's bursts handed off in 50/30/20 on a quiet host, 98% now). Beside it, a slice of 2 ms
# kernels; both 50%, 3 s. From the hooks' debug logs: the share of the 0.2 ms slice's bursts
# that end in a handoff, and that no burst was closed at expiry with a thread handing it off.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
start_daemon
S=$(at 1)
GSLICE_LOG_LEVEL=debug GSLICE_LOG_FILE="$T/hook.a" gsrun --compute 50 --name a -- \
  "$TBIN/compute_spin" --start "$S" --warmup 1.5 --duration 3 --kernel-us 200 --label a >"$T/a" &
Pa=$!
GSLICE_LOG_LEVEL=debug GSLICE_LOG_FILE="$T/hook.b" gsrun --compute 50 --name b -- \
  "$TBIN/compute_spin" --start "$S" --warmup 1.5 --duration 3 --kernel-us 2000 --label b >"$T/b" &
Pb=$!
daemon_wait_over "$(awk -v s="$S" 'BEGIN { printf "%.3f", s + 1.5 }')" 3
wait "$Pa" || fail "slice a failed"
wait "$Pb" || fail "slice b failed"
cat "$T/a" "$T/b"
# Every burst of the run, warm-up included (the first, of unknown kernel length, cannot hand off).
handed=$(grep -c "handed off" "$T/hook.a" || true)
closed=$(grep -c "closed by" "$T/hook.a" || true)
expired_handing=$(grep -c "expired:.*a thread handing off" "$T/hook.a" || true)
echo "slice a (0.2 ms kernels): $closed bursts closed, $handed handed off while their tail ran," \
  "$expired_handing closed at expiry under a thread handing off"
[ "$closed" -gt 100 ] || fail "only $closed bursts of slice a closed: the hook's debug log is missing"
[ "$expired_handing" = 0 ] ||
  fail "$expired_handing bursts closed at expiry while a thread was handing them off"
if [ $((100 * handed)) -lt $((90 * closed)) ]; then
  if starved "$T/a $T/b" 2>"$T/starved"; then
    skip_part "handoffs of slice a: $handed of $closed: $(cat "$T/starved")"
  else
    fail "only $handed of $closed bursts of slice a handed their token off (want 90%)"
  fi
fi
pass "handoff at expiry: $handed of $closed bursts of a 0.2 ms-kernel slice handed off"
