#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The sim as programs see it: the same client linked with -lcuda and resolving everything
# through dlopen + cuGetProcAddress (CUDA 12.0 and 13.0 tables, legacy and per-thread).
source "$GSLICE_SRC/tests/integration/lib.sh"
PTX="$GSLICE_SRC/tests/gpu/spin.ptx"

"$TBIN/sim_client_linked" basic "$PTX" || fail "linked client"
"$TBIN/sim_client_dlopen" basic "$PTX" || fail "cuGetProcAddress client (12000, legacy)"
SIM_CLIENT_PER_THREAD=1 "$TBIN/sim_client_dlopen" basic "$PTX" \
  || fail "cuGetProcAddress client (12000, per-thread)"
SIM_CLIENT_CUDA_VERSION=13000 "$TBIN/sim_client_dlopen" basic "$PTX" \
  || fail "cuGetProcAddress client (13000)"

# Everything the clients took came back: nothing is left on the device.
out=$("$BIN/gslice-sim" info --json)
used=$(grep -o '"memory_used":[0-9]*' <<<"$out" | head -1 | cut -d: -f2)
expect_eq "device memory used after the clients exit" "$used" 0
pass "sim basic"
