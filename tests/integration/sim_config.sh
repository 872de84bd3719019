#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bad configuration is refused with the variable and value named; a machine in use wins
# over a newcomer's different settings, with a note; an unused one is rebuilt.
source "$GSLICE_SRC/tests/integration/lib.sh"

check_refused() { # VAR VALUE
  local out
  if out=$(env "$1=$2" "$TBIN/sim_client_linked" fill 1048576 2>&1); then
    fail "$1=$2 accepted"
  fi
  grep -q "$1='$2'" <<<"$out" || fail "$1=$2: message does not name it: $out"
  grep -q CUDA_ERROR_INVALID_VALUE <<<"$out" || fail "$1=$2: cuInit did not fail: $out"
  if out=$(env "$1=$2" "$TBIN/sim_nvml" 2>&1); then fail "NVML accepted $1=$2"; fi
  grep -q "$1='$2'" <<<"$out" || fail "NVML $1=$2: $out"
}
check_refused GSLICE_SIM_MEMORY lots
check_refused GSLICE_SIM_MEMORY 12QiB
check_refused GSLICE_SIM_DEVICES 0
check_refused GSLICE_SIM_DEVICES two
check_refused GSLICE_SIM_SMS 0
check_refused GSLICE_SIM_CONTEXT_MEMORY 1PB
check_refused GSLICE_SIM_KERNEL_US gemm

# Devices, sizes and UUIDs as configured.
GSLICE_SIM_DEVICES=3 GSLICE_SIM_MEMORY=4GiB "$TBIN/sim_nvml" >"$T/nv3"
grep -q devices=3 "$T/nv3" || fail "3 devices: $(cat "$T/nv3")"
[ "$(grep -c "total=$((4 << 30))" "$T/nv3")" = 3 ] || fail "sizes: $(cat "$T/nv3")"
[ "$(grep -o 'uuid=GPU-[0-9a-f-]*' "$T/nv3" | sort -u | wc -l)" = 3 ] || fail "uuids differ"

# Each device has its own memory: a process on device 1 leaves device 0 untouched.
GSLICE_SIM_DEVICES=2 SIM_CLIENT_DEVICE=1 "$TBIN/sim_client_linked" hold $((1 << 20)) >"$T/d1" 2>&1 &
d1=$!
for _ in $(seq 200); do grep -q holding "$T/d1" && break; sleep 0.05; done
json=$("$BIN/gslice-sim" info --json)
expect_eq "device 0 used" "$(jq '.devices[0].memory_used' <<<"$json")" 0
expect_eq "device 1 used" "$(jq '.devices[1].memory_used' <<<"$json")" $(((1 << 20) + (256 << 20)))
expect_eq "device 1 process" "$(jq '.devices[1].processes[0].pid' <<<"$json")" $d1
GSLICE_SIM_DEVICES=2 "$TBIN/sim_nvml" | qgrep "dev=1 .* procs=1 $d1:" || fail "NVML device 1"
kill -9 $d1
wait $d1 2>/dev/null || true
"$BIN/gslice-sim" reset >/dev/null

# In use with 1 GiB: a newcomer asking 2 GiB joins the 1 GiB machine, with a note.
GSLICE_SIM_MEMORY=1GiB "$TBIN/sim_client_linked" hold 1 >"$T/h" 2>&1 &
h=$!
for _ in $(seq 200); do grep -q holding "$T/h" && break; sleep 0.05; done
out=$(GSLICE_SIM_MEMORY=2GiB "$TBIN/sim_client_linked" fill $((64 << 20)) 2>&1) || fail "$out"
grep -q "in use with" <<<"$out" || fail "no note: $out"
grep -q "total=$((1 << 30))" <<<"$out" || fail "newcomer did not join: $out"
kill -9 $h
wait $h 2>/dev/null || true
# Nobody left: the next process rebuilds it with its own settings, silently.
out=$(GSLICE_SIM_MEMORY=2GiB "$TBIN/sim_client_linked" fill $((64 << 20)) 2>&1) || fail "$out"
grep -q "total=$((2 << 30))" <<<"$out" || fail "not rebuilt: $out"
grep -q "in use" <<<"$out" && fail "spurious note: $out"
"$BIN/gslice-sim" reset | qgrep removed || fail "reset"
[ ! -e "$GSLICE_SIM_STATE" ] || fail "state file still there"
pass "sim config"
