#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Single-process semantics (invalid frees, what counts, created contexts, per-thread
# current context, legacy / per-thread / non-blocking streams, events), configured
# kernel times, and IPC: an imported allocation shares bytes and adds no memory.
source "$GSLICE_SRC/tests/integration/lib.sh"
PTX="$GSLICE_SRC/tests/gpu/spin.ptx"

"$TBIN/sim_client_linked" misc "$PTX" || fail "misc"

cat >"$T/k.ptx" <<'PTX'
.version 7.0
.target sm_70
.address_size 64
.visible .entry gemm()
{
	ret;
}
.visible .entry relu()
{
	ret;
}
PTX
out=$(GSLICE_SIM_KERNEL_US=gemm=7000 "$TBIN/sim_client_linked" kernel-ms "$T/k.ptx" gemm)
awk '{ exit !($2 >= 7.0 && $2 < 7.1) }' <<<"$out" || fail "configured kernel time: $out"
out=$(GSLICE_SIM_KERNEL_US=gemm=7000 "$TBIN/sim_client_linked" kernel-ms "$T/k.ptx" relu)
# Takes no device time: the two events are only the host's calls apart.
awk '{ exit !($2 < 0.1) }' <<<"$out" || fail "unconfigured kernel time: $out"

export GSLICE_SIM_MEMORY=4GiB GSLICE_SIM_CONTEXT_MEMORY=256MiB
"$TBIN/sim_client_linked" ipc-export $((512 << 20)) "$T/handle" >"$T/exp" 2>&1 &
exp=$!
for _ in $(seq 200); do [ -e "$T/handle" ] && break; sleep 0.05; done
[ -e "$T/handle" ] || fail "exporter: $(cat "$T/exp")"
"$TBIN/sim_client_linked" ipc-import "$T/handle" || fail "ipc import"
json=$("$BIN/gslice-sim" info --json)
expect_eq "memory with the importer gone" \
  "$(grep -o '"memory_used":[0-9]*' <<<"$json" | cut -d: -f2)" $(((512 << 20) + (256 << 20)))
kill -9 $exp
wait $exp 2>/dev/null || true
pass "sim misc"
