#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tests/gpu/run.sh's exit status, on the simulated GPU with its two isolation parts stubbed out:
# 0 only when everything ran and passed, 77 when a part did not run (no gsliced built, a partial
# memory run) and nothing failed, 1 when a part failed.
source "$GSLICE_SRC/tests/integration/lib.sh"
G="$T/tree/tests/gpu"
mkdir -p "$G" "$T/tree/src" "$T/with/bin" "$T/without/bin"
ln -s "$GSLICE_SRC/tests/progs" "$T/tree/tests/progs"
ln -s "$GSLICE_SRC/src/common" "$T/tree/src/common"
cp "$GSLICE_SRC/tests/gpu/run.sh" "$GSLICE_SRC/tests/gpu/spin.ptx" "$G/"
printf '#!/bin/bash\nexit "${STUB_COMPUTE:-0}"\n' > "$G/compute_shares.sh"
printf '#!/bin/bash\nexit "${STUB_MEMORY:-0}"\n' > "$G/hook_gpu.sh"
printf '#!/bin/bash\nexit "${STUB_SMI:-0}"\n' > "$G/nvidia_smi.sh"
printf '#!/bin/sh\n' > "$T/with/bin/gsliced"
chmod +x "$T/with/bin/gsliced"
export GSLICE_GPU_LIBDIR="$GSLICE_BUILD/sim"

# status BUILD COMPUTE MEMORY WANT [SMI]
status() {
  local rc=0
  GSLICE_BUILD="$T/$1" STUB_COMPUTE=$2 STUB_MEMORY=$3 STUB_SMI=${5:-0} bash "$G/run.sh" \
    > "$T/out" 2>&1 || rc=$?
  [ "$rc" = "$4" ] || fail "gsliced $1, compute $2, memory $3, nvidia-smi ${5:-0}: exit $rc, want $4: $(tail -3 "$T/out")"
}
status with 0 0 0
grep -q "gpu tests: 14 passed, 0 failed, 0 skipped" "$T/out" || fail "summary: $(tail -1 "$T/out")"
status with 0 0 77 77
status with 0 0 1 1
status without 0 0 77
grep -q "compute-isolation .*SKIP" "$T/out" || fail "no SKIP row: $(cat "$T/out")"
status with 0 77 77
status with 1 0 1
pass "tests/gpu/run.sh passes only what ran: a skipped part is a skip (77), a failed one a failure"
