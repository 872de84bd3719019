#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Every allocation path, found every way (linked, dlsym on the handle, RTLD_DEFAULT, RTLD_NEXT,
# cuGetProcAddress with and without per-thread streams), hits a 1 GiB cap: 256 MiB chunks until
# CUDA_ERROR_OUT_OF_MEMORY, the slice (context included) never over 1 GiB on the device,
# cuMemGetInfo and cuDeviceTotalMem say 1 GiB, and frees give everything back.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=1GiB

check() { # NAME ARGS...
  local name=$1
  shift
  start "$name" "$@" --chunk 256MiB --script "info;fill;info;wait;free;info"
  local first fill full after
  first=$(await "$name" '^info' 1)
  fill=$(await "$name" '^fill')
  full=$(await "$name" '^info' 2)
  await "$name" '^waiting' > /dev/null
  # While it holds everything: the device's own count of the slice's memory.
  local used
  used=$(sim_used)
  [ "$used" -le "$GiB" ] || fail "$name: the device holds $used bytes for a 1GiB slice"
  [ "$used" -gt $((GiB - 256 * MiB)) ] || fail "$name: only $used bytes used at the cap"
  finish "$name"
  after=$(grep '^info' "$T/$name.out" | sed -n 3p)
  expect_eq "$name fill error" "$(field "$fill" err)" 2
  expect_eq "$name chunks" "$(field "$fill" n)" 3
  expect_eq "$name total" "$(field "$first" total)" "$GiB"
  expect_eq "$name device total" "$(field "$first" devtotal)" "$GiB"
  expect_eq "$name free before" "$(field "$first" free)" $((GiB - 256 * MiB))
  [ "$(field "$full" free)" -lt $((256 * MiB)) ] || fail "$name: free at the cap: $full"
  expect_eq "$name free after" "$(field "$after" free)" $((GiB - 256 * MiB))
  grep -Eq "out of memory on device 0 \(GPU-[0-9a-f-]+\): asked 25[56](\.[0-9])?MiB, the slice uses [0-9.]+[MG]iB of its 1GiB cap" \
    "$T/$name.err" || fail "$name: no over-cap line on stderr: $(cat "$T/$name.err")"
  expect_eq "$name over-cap lines" "$(grep -c 'out of memory' "$T/$name.err")" 1
  ! grep -q gslice "$T/$name.out" || fail "$name: the hook wrote to stdout"
}

for path in alloc pitch managed async pool vmm array array3d mipmap; do
  check "link_$path" --lookup link --path "$path"
  check "dlsym_$path" --lookup dlsym --path "$path"
  check "procaddr_$path" --lookup procaddr --path "$path"
done
for path in alloc async pool; do
  check "default_$path" --lookup default --path "$path"
  check "ptsz_$path" --lookup procaddr --ptsz --path "$path"
done
# dlsym(RTLD_NEXT) from the program itself.
check next_alloc --lookup next --path alloc
# A context made with cuCtxCreate instead of the primary one.
check ctx_create --lookup dlsym --ctx create --path alloc
pass "every path and lookup style held to 1GiB"
