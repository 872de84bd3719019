#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A slice is a share of a whole GPU: no NVML call gives it a MIG device, a GPU instance, a GPU it
# does not see (by UUID, R560's versioned lookup too, or at the far end of an NVLink), and other
# tenants' sessions never decide its session list's size (docs/nvml.md, "MIG"). On the sim
# (GSLICE_SIM_NVML_MIG, docs/sim.md), without the hook (what NVML answers) and through it:
#  - MIG: the mode and the MIG device count are NVML's; no MIG device at any index
#    (NOT_FOUND, 6), no GPU instance (SUCCESS with none; by id NOT_FOUND); a MIG device handle
#    (forged from the offset NVML's came at) is no device (2) in every call, its UUID finds none;
#  - nvmlDeviceGetHandleByUUIDV: ASCII and binary, the version word and type checked; a GPU the
#    slice does not see is NOT_FOUND;
#  - NVLink: the far end's PCI info where it is one of the slice's GPUs or an NVSwitch; another
#    GPU NVML_ERROR_NO_PERMISSION (4);
#  - lists by pid: with 20 more sessions and processes of another tenant at each call
#    (GSLICE_SIM_NVML_CHURN) the slice's encoder, NvFBC and accounting lists are its own process's,
#    not INSUFFICIENT_SIZE (7) or UNKNOWN (999);
#  - gsliced refuses to start over a GPU in MIG mode (naming it and what to do), warns of a
#    pending mode, and starts with gpus=N leaving the MIG GPU out.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
MIG="$TBIN/nvml_mig"
[ -x "$MIG" ] || skip "nvml_mig not built"
export GSLICE_SIM_DEVICES=2
raw() { LD_PRELOAD= "$MIG" "$@"; }
hooked() { LD_PRELOAD="$HOOK" GSLICE_STATE_DIR="$T/slice-h" "$MIG" "$@"; }
line() { grep "^$1" | head -1; }

# MIG off (the default) and pending, without the hook.
expect_eq "MIG off" "$(raw mig | line mig)" \
  "mig mode=0:0:0 max=0:7 byindex=6,6,6 gis=3:0 gi1=3 gi9=3 ismig=0:0 util=0"
expect_eq "MIG pending" "$(GSLICE_SIM_NVML_MIG=0:pending raw mig | line mig)" \
  "mig mode=0:0:1 max=0:7 byindex=6,6,6 gis=3:0 gi1=3 gi9=3 ismig=0:0 util=0"

# MIG on, two MIG devices on GPU 0: what NVML answers.
export GSLICE_SIM_NVML_MIG=0:2
out=$(raw mig)
expect_eq "MIG on, without the hook" "$(line mig <<<"$out")" \
  "mig mode=0:1:1 max=0:7 byindex=0,0,6 gis=0:2 gi1=0 gi9=6 ismig=0:0 util=3"
off=$(sed -n 's/^migoff=//p' <<<"$out")
[ -n "$off" ] || fail "no MIG device handle without the hook: $out"
expect_eq "a MIG device, without the hook" "$(line migdev <<<"$out")" \
  "migdev got=index ismig=0:1 index=0:0 mem=0:2147483648 mem2=0:2147483648 gi=0:1 ci=0:0 parent=0 procs=0 ancestor=2"
miguuid=$(line miglookup <<<"$out" | sed -n 's/.*uuid=\(MIG-[^ ]*\).*/\1/p')
expect_eq "its UUID, without the hook" "$(line miglookup <<<"$out")" \
  "miglookup uuid=$miguuid byuuid=0 byuuidv=0 byuuidvbin=0"
# Through the hook, the slice given GPU 0, and with no CUDA_VISIBLE_DEVICES (every GPU shown).
for cvd in 0 unset; do
  if [ $cvd = unset ]; then out=$(unset CUDA_VISIBLE_DEVICES; hooked mig "$off"); else
    out=$(CUDA_VISIBLE_DEVICES=$cvd hooked mig "$off")
  fi
  expect_eq "MIG on, CUDA_VISIBLE_DEVICES=$cvd" "$(line mig <<<"$out")" \
    "mig mode=0:1:1 max=0:7 byindex=6,6,6 gis=0:0 gi1=6 gi9=6 ismig=0:0 util=3"
  expect_eq "a MIG device handle forged, CUDA_VISIBLE_DEVICES=$cvd" "$(line migdev <<<"$out")" \
    "migdev got=forged ismig=2:9 index=2:99 mem=2:0 mem2=2:0 gi=2:99 ci=2:99 parent=2 procs=2 ancestor=2"
  expect_eq "its UUID, CUDA_VISIBLE_DEVICES=$cvd" "$(line miglookup <<<"$out")" \
    "miglookup uuid=$miguuid byuuid=6 byuuidv=6 byuuidvbin=6"
done
unset GSLICE_SIM_NVML_MIG

# nvmlDeviceGetHandleByUUIDV of GPU 0, and the slice given GPU 1.
u0=$("$TBIN/sim_nvml" | sed -n 's/^dev=0 .*uuid=\([^ ]*\).*/\1/p')
[ -n "$u0" ] || fail "no UUID for GPU 0"
expect_eq "UUIDV, without the hook" "$(raw uuidv "$u0")" \
  "uuidv byuuid=0 byuuidv=0 byuuidvbin=0 badversion=25 badtype=2 unterminated=2 null=2"
expect_eq "UUIDV, CUDA_VISIBLE_DEVICES=1 (NOT_FOUND is 6)" "$(CUDA_VISIBLE_DEVICES=1 hooked uuidv "$u0")" \
  "uuidv byuuid=6 byuuidv=6 byuuidvbin=6 badversion=25 badtype=2 unterminated=2 null=2"
expect_eq "UUIDV, CUDA_VISIBLE_DEVICES=0" "$(CUDA_VISIBLE_DEVICES=0 hooked uuidv "$u0")" \
  "uuidv byuuid=0 byuuidv=0 byuuidvbin=0 badversion=25 badtype=2 unterminated=2 null=2"

# NVLink: GPUs 0 and 1 bridged (links 0-3), links 4-5 to the NVSwitch.
nv() { sed -n "s/^nvlink link=$1 //p"; }
out=$(raw nvlink)
expect_eq "NVLink 0 without the hook" "$(nv 0 <<<"$out")" "state=0:1 type=0:0 remote=0:00000000:02:00.0"
expect_eq "NVLink 4 without the hook" "$(nv 4 <<<"$out")" "state=0:1 type=0:2 remote=0:00000000:C0:00.0"
expect_eq "NVLink 6 without the hook" "$(nv 6 <<<"$out")" "state=2:9 type=2:99 remote=2:-"
out=$(CUDA_VISIBLE_DEVICES=1 hooked nvlink)
for l in 0 3; do
  expect_eq "NVLink $l to the GPU not the slice's (NO_PERMISSION is 4)" "$(nv $l <<<"$out")" \
    "state=0:1 type=0:0 remote=4:-"
done
expect_eq "NVLink 5 to the NVSwitch, CUDA_VISIBLE_DEVICES=1" "$(nv 5 <<<"$out")" \
  "state=0:1 type=0:2 remote=0:00000000:C0:00.0"
expect_eq "NVLink 0, both GPUs the slice's" "$(CUDA_VISIBLE_DEVICES=0,1 hooked nvlink | nv 0)" \
  "state=0:1 type=0:0 remote=0:00000000:02:00.0"

# gsliced over a GPU in MIG mode: refused, with the GPU named and what to do.
rc=0
GSLICE_SIM_NVML_MIG=1:2 timeout 20 "$BIN/gsliced" --state-dir "$T/refused" --foreground \
  >"$T/refused.log" 2>&1 || rc=$?
# 0 or 124 (still serving when timeout stopped it): it did not refuse.
[ $rc != 0 ] && [ $rc != 124 ] || fail "gsliced served over a GPU in MIG mode: $(cat "$T/refused.log")"
grep -q "GPU 1 (.*) has MIG mode on: gslice shares whole GPUs" "$T/refused.log" ||
  fail "no reason given: $(cat "$T/refused.log")"
grep -q "nvidia-smi -i 1 -mig 0" "$T/refused.log" && grep -q "gpus=1 in the config" "$T/refused.log" ||
  fail "no remedy given: $(cat "$T/refused.log")"
echo "ok: gsliced refused: $(grep -o 'GPU 1 .*' "$T/refused.log" | head -1)"
# A mode pending on GPU 0 is warned of; gpus=1 leaves GPU 1 (MIG on) out.
export GSLICE_SIM_NVML_MIG=0:pending,1:2
start_daemon --set gpus=1
grep -q "GPU 0 (.*) has MIG mode pending" "$T/gsliced.log" || fail "no warning: $(cat "$T/gsliced.log")"
unset GSLICE_SIM_NVML_MIG

# Lists by pid: the slice's process holds a context on GPU 0 (one encoder and one NvFBC session in
# the sim, accounted); another tenant starts 20 sessions or processes between any two calls.
cat >"$T/s.sh" <<EOS
"$TBIN/sim_client_linked" hold $((64 << 20)) > "$T/holder" 2>&1 &
for _ in \$(seq 300); do grep -q holding "$T/holder" && break; sleep 0.05; done
echo \$! > "$T/holder.pid"
GSLICE_SIM_NVML_CHURN=20 "$MIG" sessions > "$T/s.out" 2>&1
LD_PRELOAD= GSLICE_SIM_NVML_CHURN=20 "$MIG" sessions > "$T/s.raw" 2>&1
kill \$(cat "$T/holder.pid")
EOS
CUDA_VISIBLE_DEVICES=0 gsrun --memory 1GiB --name s -- bash "$T/s.sh" || fail "slice s: $(cat "$T/s.out" "$T/holder")"
h=$(cat "$T/holder.pid")
expect_eq "churn, without the hook: INSUFFICIENT_SIZE" "$(line enc <"$T/s.raw" | cut -d' ' -f3 | cut -d: -f1)" "full=7"
# (A count of 0 asks the session lists for the count; the accounting list says INSUFFICIENT_SIZE
# with the count, its documented protocol.)
for kind in enc:0 fbc:0 acct:7; do
  expect_eq "${kind%:*} list, another tenant's entries starting between the calls" \
    "$(line ${kind%:*} <"$T/s.out")" "${kind%:*} count=${kind#*:}:1 full=0:1 pids=$h"
done
pass "no MIG device, GPU instance, hidden GPU (by UUIDV or NVLink) or other tenants' session count reaches a slice; gsliced refuses a GPU in MIG mode"
