#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What goes with a context (cuda.h, cuCtxDestroy / cuDevicePrimaryCtxRelease / Reset): its
# plain, pitched and managed memory, arrays, modules, events and streams; not pool memory or
# VMM handles, which belong to no context. A destroyed context still current elsewhere says
# CUDA_ERROR_CONTEXT_IS_DESTROYED; stale handles are refused, not undefined; and the other
# refusals the hook passes through.
source "$GSLICE_SRC/tests/integration/lib.sh"
PTX="$GSLICE_SRC/tests/gpu/spin.ptx"
export GSLICE_SIM_MEMORY=4GiB GSLICE_SIM_CONTEXT_MEMORY=256MiB

"$TBIN/sim_client_linked" teardown "$PTX" stale || fail "teardown"
# Refusals a GPU makes: before cuInit, without a context, twice, stale handles, VMM outside
# a reservation.
"$TBIN/sim_client_linked" errors || fail "errors"
expect_eq "device memory after the client" \
  "$("$BIN/gslice-sim" info --json | jq '.devices[0].memory_used')" 0
pass "sim contexts"
