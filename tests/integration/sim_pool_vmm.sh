#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stream-ordered pools grow and trim at synchronize; VMM create counts, reserve does not.
source "$GSLICE_SRC/tests/integration/lib.sh"
"$TBIN/sim_client_linked" pool || fail "pool"
"$TBIN/sim_client_dlopen" pool || fail "pool via cuGetProcAddress"
"$TBIN/sim_client_linked" vmm || fail "vmm"
pass "sim pool + vmm"
