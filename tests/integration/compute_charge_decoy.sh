#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The charge check behind decoys (the fifth attack run, G3; docs/compute.md, "The charge check"):
# nvmlDeviceGetProcessUtilization gives as many samples as the room its size call asked for (72,
# as on an H200), so 72 decoy processes of the forger's slice (a 1 us kernel every 100 ms each)
# and the victim fill the answer and the zero-charge forger's samples are left out. A full answer
# is a truncated one: gsliced then reads nvmlDeviceGetProcessesUtilizationInfo (every process's)
# and says so once. Before: the 10/10 forger took 87% of the device, no warning; now 5-12%.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
NDECOY=72
# An H200-sized sim GPU (141 GiB, 512 MiB a context): the default 16 GiB fits 32 contexts.
export GSLICE_SIM_MEMORY=141GiB GSLICE_SIM_CONTEXT_MEMORY=512MiB
start_daemon
S=$(at 5)
gsrun --compute 50 --name victim -- "$TBIN/compute_spin" --start "$S" --warmup 1 --duration 5 \
  --label v >"$T/v" &
V=$!
gsrun --compute 10 --compute-limit 10 --name decoys -- sh -c "
  for i in \$(seq $NDECOY); do
    env -u LD_PRELOAD '$TBIN/compute_spin' --kernel-us 1 --batch 1 --pause-us 100000 --warmup 0 \
      --duration 12 --label d >/dev/null &
  done
  env -u LD_PRELOAD '$TBIN/compute_forge' zero --start $S --warmup 1 --duration 5 --label f
  wait" >"$T/f" 2>"$T/decoys.err" &
A=$!
wait $V || fail "victim failed"
wait $A || fail "the forger or a decoy failed: $(head -3 "$T/decoys.err")"
cat "$T/v" "$T/f"
grep "charged to it\|room for" "$T/gsliced.log" | head -2 || true
# Of the wall clock, as its limit is (compute_charge_check's bound).
within "10/10 forger behind $NDECOY decoys" "$(pct "$T/f")" 0 16
# Caught and said: as device time NVML saw and its releases did not report, or (the victim
# waiting while it held the token) as the time it held the token beyond its charge, which is
# charged first (sched_token_done) and leaves the check nothing to add.
qgrep "slice [0-9]* 'decoys': NVML saw its processes\|slice [0-9]* 'decoys' held the token .* idle" \
  "$T/gsliced.log" || fail "the forger behind $NDECOY decoys was not charged (no warning)"
# The decoys were there: the older call's answer was full, and that was said.
qgrep "gave as many samples as it has room for (72)" "$T/gsliced.log" ||
  fail "the older call's answer was never full: the decoys did not crowd it ($(grep -c . "$T/decoys.err") errors)"
stop_daemon
pass "forger behind $NDECOY decoys held to $(pct "$T/f")%"
