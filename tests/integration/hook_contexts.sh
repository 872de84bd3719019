#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A context's memory goes with it: destroying a cuCtxCreate context, or releasing the primary
# context to zero, gives back the context's cost and everything allocated in it (no frees).
# IPC imports add no device memory on the sim (the exporter holds it) and are not counted twice.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=2GiB

for mode in create primary; do
  start "$mode" --lookup procaddr --ctx "$mode" --path alloc --chunk 256MiB
  send "$mode" "alloc 2"
  await "$mode" '^alloc' > /dev/null
  send "$mode" ctxdrop
  expect_eq "$mode: ctxdrop" "$(field "$(await "$mode" '^ctxdrop')" err)" 0
  expect_eq "$mode: region after the context went" "$(region_used)" 0
  # The driver frees a destroyed context's allocations with it (the sim does too).
  expect_eq "$mode: device after the context went" "$(sim_used)" 0
  # Whatever the device still holds for the process, the slice follows it once the hook
  # reconciles with NVML's per-process figure (here: at cuMemGetInfo), memory the hook could
  # not see included.
  send "$mode" ctxnew
  expect_eq "$mode: ctxnew" "$(field "$(await "$mode" '^ctxnew')" err)" 0
  send "$mode" info
  line=$(await "$mode" '^info')
  used=$(sim_used)
  expect_eq "$mode: region follows the device" "$(region_used)" "$used"
  expect_eq "$mode: the view follows the device" "$(field "$line" free)" $((2 * GiB - used))
  finish "$mode"
done

start exporter --lookup dlsym --path alloc --chunk 512MiB --script "alloc 1;export $T/handle;wait"
expect_eq "export" "$(field "$(await exporter '^export')" err)" 0
start importer --lookup dlsym --path alloc --chunk 256MiB
send importer "import $T/handle"
expect_eq "import" "$(field "$(await importer '^import')" err)" 0
# exporter: context + 512 MiB; importer: its context only.
expect_eq "slice with an import" "$(region_used)" $((1024 * MiB))
expect_eq "device with an import" "$(sim_used)" $((1024 * MiB))
send importer unimport
expect_eq "unimport" "$(field "$(await importer '^unimport')" err)" 0
send importer fill
expect_eq "importer fills the rest" "$(field "$(await importer '^fill')" n)" 4
finish importer
finish exporter
pass "contexts take their memory with them; imports are not counted twice"
