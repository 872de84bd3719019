#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A Kubernetes container's slice.env, as the hook reads it before main: its KEY=VALUE lines set
# what the hook and the driver read; a malformed file, a key gslice-node does not write, an
# empty file, a missing one, or gslice-node's GSLICE_K8S_ERROR leave the container no device,
# with a message saying why at cuInit.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
D="$T/k8s"
mkdir -p "$D"
run() {
  GSLICE_K8S_SLOTS=slot-7 GSLICE_K8S_DIR="$D" \
    client --lookup dlsym --path alloc --chunk 256MiB --script "${SCRIPT:-info;fill}"
}
# run, the program changing its environment in main first (hook_client --setenv/--unsetenv).
run_with() {
  GSLICE_K8S_SLOTS=slot-7 GSLICE_K8S_DIR="$D" \
    client --lookup dlsym --path alloc --chunk 256MiB "$@" --script "${SCRIPT:-info;fill}"
}

# Its memory limit is the container's: the same number of chunks as from the environment.
want=$(GSLICE_MEMORY_LIMIT=768MiB client --lookup dlsym --path alloc --chunk 256MiB \
  --script fill 2> /dev/null | grep '^fill')
printf 'GSLICE_MEMORY_LIMIT=768MiB\nGSLICE_COMPUTE_LIMIT=100\n' > "$D/slice.env"
out=$(run 2> "$T/err" | grep '^fill')
[ -n "$want" ] || fail "no fill line without slice.env"
expect_eq "slice.env memory limit: chunks" "$(field "$out" n)" "$(field "$want" n)"

# refused CONTENT WHY: no device, and the message at cuInit says WHY.
# The container's own changes to its environment after the hook read slice.env hold nothing:
# GSLICE_MEMORY_LIMIT unset, the cap stays; CUDA_VISIBLE_DEVICES pointed elsewhere (in the
# device plugin's containers, at another tenant's GPU), no device, saying why. Before, the first
# filled the GPU and the second ran on the GPU it named.
out=$(run_with --unsetenv GSLICE_MEMORY_LIMIT 2> "$T/err" | grep '^fill')
expect_eq "slice.env memory limit, GSLICE_MEMORY_LIMIT unset in main: chunks" "$(field "$out" n)" \
  "$(field "$want" n)"
printf 'GSLICE_MEMORY_LIMIT=768MiB\nCUDA_VISIBLE_DEVICES=0\n' > "$D/slice.env"
rc=0
SCRIPT=info run_with --setenv CUDA_VISIBLE_DEVICES=1 > "$T/out" 2> "$T/err" || rc=$?
[ "$rc" -ne 0 ] || fail "CUDA_VISIBLE_DEVICES changed in main ran: $(cat "$T/out")"
grep -q 'CUDA_VISIBLE_DEVICES was changed to "1" after the hook set it' "$T/err" ||
  fail "CUDA_VISIBLE_DEVICES changed in main: no reason in: $(cat "$T/err")"
SCRIPT=info run_with --setenv CUDA_VISIBLE_DEVICES=0 > "$T/out" 2> "$T/err" ||
  fail "CUDA_VISIBLE_DEVICES set to the same value refused: $(cat "$T/err")"

refused() {
  printf "$1" > "$D/slice.env"
  rc=0
  SCRIPT=info run > "$T/out" 2> "$T/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "slice.env '$1' ran: $(cat "$T/out")"
  grep -q "this container has no GPU slice: .*$2" "$T/err" ||
    fail "slice.env '$1': no '$2' in: $(cat "$T/err")"
}
refused 'GSLICE_MEMORY_LIMIT=1GiB\nnot a record\n' "is malformed: not the KEY=VALUE lines"
refused 'GSLICE_MEMORY_LIMIT=1GiB\n=1\n' "is malformed"
refused 'LD_PRELOAD=/tmp/evil.so\n' "is malformed"
refused '' "is malformed"
refused 'GSLICE_K8S_ERROR=pod default/x has no slot on this GPU\nGSLICE_SLICE=1\n' \
  "pod default/x has no slot on this GPU"
rm -f "$D/slice.env"
refused_missing() {
  rc=0
  SCRIPT=info run > "$T/out" 2> "$T/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "no slice.env ran: $(cat "$T/out")"
  grep -q "no slice for this container" "$T/err" || fail "no slice.env: $(cat "$T/err")"
}
refused_missing
pass "slice.env: its lines set the container's slice; anything else leaves it no device, saying why"
