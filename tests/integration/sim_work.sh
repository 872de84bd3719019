#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device work besides cuLaunchKernel on the sim (tests/progs/sim_work.c, on the sim's clock):
# memsets and device-to-device copies take bytes / GSLICE_SIM_MEMORY_BANDWIDTH of device time on
# their stream, in order with kernels, and their synchronous forms return at once (wait for
# managed memory), as the driver API's "API synchronization behavior" says; host copies take
# none; the legacy launches run like cuLaunchKernel; 0 turns the device time off; a bad value
# is refused.
source "$GSLICE_SRC/tests/integration/lib.sh"
PTX="$GSLICE_SRC/tests/gpu/spin.ptx"
GSLICE_SIM_MEMORY_BANDWIDTH=1 "$TBIN/sim_work" all "$PTX" >"$T/all" 2>&1 || fail "$(cat "$T/all")"
cat "$T/all"
GSLICE_SIM_MEMORY_BANDWIDTH=0 "$TBIN/sim_work" zero "$PTX" >"$T/zero" 2>&1 || fail "$(cat "$T/zero")"
echo "with GSLICE_SIM_MEMORY_BANDWIDTH=0: $(grep -c '^ok' "$T/zero") checks of no device time passed"
if GSLICE_SIM_MEMORY_BANDWIDTH=fast "$TBIN/sim_work" all "$PTX" >"$T/bad" 2>&1; then
  fail "GSLICE_SIM_MEMORY_BANDWIDTH=fast accepted"
fi
grep -q "GSLICE_SIM_MEMORY_BANDWIDTH='fast' is invalid: want a whole number of GB/s between 0 and 100000" \
  "$T/bad" || fail "bad bandwidth message: $(cat "$T/bad")"
pass "memsets, device-to-device copies and legacy launches take their device time"
