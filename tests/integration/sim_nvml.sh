#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The sim's NVML answers as a GPU's driver does (observed on an H200, driver 580):
# - memory: v1's used includes the driver's reservation (GSLICE_SIM_RESERVED_MEMORY); v2 gives it
#   apart (used = allocations only, 0 when idle; reserved + used + free = total); cuMemGetInfo's
#   total leaves it out, cuDeviceTotalMem's keeps it;
# - nvmlDeviceGetProcessUtilization: the size call and any count below NVML's sample buffer (72)
#   are INSUFFICIENT_SIZE with the count 72; a full call is NOT_FOUND (count untouched) with no
#   samples, else SUCCESS with the samples; samples after now are NOT_FOUND;
# - video engines, GPM, MIG and topology by their documented protocols (docs/nvml.md, "The sim").
source "$GSLICE_SRC/tests/integration/lib.sh"
PTX="$GSLICE_SRC/tests/gpu/spin.ptx"
MiB=$((1 << 20))
export GSLICE_SIM_MEMORY=4GiB GSLICE_SIM_CONTEXT_MEMORY=256MiB GSLICE_SIM_RESERVED_MEMORY=512MiB
TOTAL=$((4096 * MiB)) RES=$((512 * MiB))
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

nv=$("$TBIN/sim_nvml")
expect_eq "idle v1 used" "$(field "$nv" used)" $RES
expect_eq "idle v2 used" "$(field "$nv" used_v2)" 0
expect_eq "idle v2 reserved" "$(field "$nv" reserved_v2)" $RES
expect_eq "idle free" "$(field "$nv" free)" $((TOTAL - RES))
expect_eq "idle total" "$(field "$nv" total)" $TOTAL

"$TBIN/sim_client_linked" hold $((512 * MiB)) >"$T/holder" 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding "$T/holder" && break; sleep 0.05; done
nv=$("$TBIN/sim_nvml")
expect_eq "v1 used" "$(field "$nv" used)" $((RES + 768 * MiB))
expect_eq "v2 used" "$(field "$nv" used_v2)" $((768 * MiB))
expect_eq "v2 reserved" "$(field "$nv" reserved_v2)" $RES
expect_eq "free" "$(field "$nv" free)" $((TOTAL - RES - 768 * MiB))
grep -q "procs=1 $holder:$((768 * MiB))" <<<"$nv" || fail "process line: $nv"
json=$("$BIN/gslice-sim" info --json)
expect_eq "info reserved" "$(jq .reserved_memory <<<"$json")" $RES
expect_eq "info used" "$(jq '.devices[0].memory_used' <<<"$json")" $((768 * MiB))
expect_eq "info free" "$(jq '.devices[0].memory_free' <<<"$json")" $((TOTAL - RES - 768 * MiB))
kill -9 $holder
wait $holder 2>/dev/null || true

# cuMemGetInfo (total without the reservation) and cuDeviceTotalMem (with it), no hook.
# Its (empty) input from a here-string, not `echo |`: hook_client may exit before echo writes,
# and echo's SIGPIPE failed the pipeline under pipefail (1 run in ~20 on a loaded machine).
info=$("$TBIN/hook_client" --lookup dlsym --script info <<<"" | grep "^info")
expect_eq "cuMemGetInfo total" "$(field "$info" total)" $((TOTAL - RES))
expect_eq "cuMemGetInfo free" "$(field "$info" free)" $((TOTAL - RES - 256 * MiB))
expect_eq "cuDeviceTotalMem" "$(field "$info" devtotal)" $TOTAL

# A context as large as the device less its reservation is refused at once.
if GSLICE_SIM_CONTEXT_MEMORY=3584MiB GSLICE_SIM_STATE="$T/other" "$TBIN/sim_nvml" 2>"$T/err"; then
  fail "a context leaving no room accepted"
fi
grep -q "GSLICE_SIM_CONTEXT_MEMORY (3758096384) must be below" "$T/err" || fail "$(cat "$T/err")"

# Process utilization: nothing ran yet.
p=$("$TBIN/sim_nvml" protocol)
expect_eq "protocol, idle" "$p" "size rc=7 n=72 short rc=7 n=72 full rc=6 n=72 future rc=6 n=72"
# While a kernel runs: one sample, the spinning process's. The kernel outlasts every check below
# (it is killed after them): a 2 s one could end before a loaded host had run them all.
"$TBIN/sim_client_linked" spin "$PTX" 120000000 1 >"$T/long" 2>&1 &
long=$!
for _ in $(seq 300); do
  p=$("$TBIN/sim_nvml" protocol)
  grep -q "full rc=0 n=1 $long:" <<<"$p" && break
  sleep 0.05
done
grep -Eq "^size rc=7 n=72 short rc=7 n=72 full rc=0 n=1 $long:[0-9]+ future rc=6 n=72$" <<<"$p" ||
  fail "protocol while $long runs: $p"
# The default client follows the protocol: its sample is listed, no error.
grep -Eq "sm=$long:[0-9]+$" <<<"$("$TBIN/sim_nvml")" || fail "client: $("$TBIN/sim_nvml")"
# Hidden pids: no process listed, no samples.
expect_eq "hidden" "$(GSLICE_SIM_NVML_HIDE_PIDS=1 "$TBIN/sim_nvml" | grep -o 'procs=.*')" "procs=0 sm=none"
# Video engines, GPM and MIG (docs/nvml.md, "The sim"): the spinning process's encoder and NvFBC
# sessions, by the count protocols; the encoder 10% busy per session; PCIe throughput and GPM's
# SM utilization from the device's busy share (the kernel keeps it busy); MIG off.
# The long kernel follows a short warm-up one: wait until it keeps the device busy.
for _ in $(seq 300); do
  e=$("$TBIN/sim_nvml" engines)
  grep -q "^pcie tx=0:busy" <<<"$e" && break
  sleep 0.05
done
expect_eq "encoder sessions" "$(grep ^enc <<<"$e")" \
  "enc count rc=0 n=1 full rc=0 n=1 pid=$long 1920x1080 fps=30 lat=2000 null rc=2 stats rc=0 n=1 fps=30 lat=2000"
expect_eq "NvFBC sessions" "$(grep ^fbc <<<"$e")" \
  "fbc count rc=0 n=1 full rc=0 n=1 pid=$long type=2 fps=60 lat=1000 stats rc=0 n=1 fps=60 lat=1000"
expect_eq "engine utilization" "$(grep ^util <<<"$e")" \
  "util enc=0:10:167000 dec=0:0 jpg=0:0 ofa=0:0 cap=0:90 badtype=2"
expect_eq "PCIe throughput" "$(grep ^pcie <<<"$e")" "pcie tx=0:busy rx=0:busy bad=2"
grep -Eq "^gpm support bad=25 rc=0 supported=1 unfilled=2 mig=3 badversion=25 metrics rc=0 sm=0:(9[0-9]|100) pcie=3 reversed=2$" <<<"$e" ||
  fail "GPM while $long runs: $(grep ^gpm <<<"$e")"
expect_eq "MIG" "$(grep ^mig <<<"$e")" "mig mode=0:0:0 max=0:7 handle0=6 handle7=2 gis=3 gi=3"
expect_eq "hidden: no sessions" "$(GSLICE_SIM_NVML_HIDE_PIDS=1 "$TBIN/sim_nvml" engines | grep -o '^enc count rc=0 n=0')" \
  "enc count rc=0 n=0"
kill -9 $long
# Topology of four GPUs: pairs on a PCIe switch, all on one host bridge.
expect_eq "topology" "$(GSLICE_SIM_DEVICES=4 GSLICE_SIM_STATE="$T/four" "$TBIN/sim_nvml" topo)" \
  "topo 01=10 02=30 single=1 host=3 short=1:1 set=4 badlevel=2 badcpu=2 p2p=0:0 badcaps=2 board=0"
pass "NVML memory v1/v2 with a reservation, the process utilization protocol, video engines, GPM, MIG and topology"
