#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Threads and processes racing to allocate (four paths, three lookups) never put the slice over
# its cap, checked against the simulated device's own count, and the slice fills exactly
# (nothing over- or under-counted).
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=2GiB
CAP=$((2 * GiB))

for round in 1 2 3; do
  names=""
  for p in 1 2 3 4; do
    # Different lookups and paths racing for the same budget.
    case $p in
    1) lk=dlsym path=alloc ;; 2) lk=procaddr path=async ;; 3) lk=link path=vmm ;; 4) lk=procaddr path=managed ;;
    esac
    start "r${round}p$p" --lookup "$lk" --path "$path" --chunk 64MiB --script "race 4;info;wait"
    names="$names r${round}p$p"
  done
  # Sample the device while they race, then once all hold what they got.
  peak=0
  for i in $(seq 20); do
    u=$(sim_used)
    [ "$u" -gt "$peak" ] && peak=$u
  done
  chunks=0 contexts=0
  for n in $names; do
    for i in $(seq 600); do
      grep -Eq '^(waiting|context)' "$T/$n.out" && break
      sleep 0.05
    done
    if grep -q '^context err=2' "$T/$n.out"; then
      continue # its context did not fit: refused before it got any memory
    fi
    line=$(await "$n" '^race')
    expect_eq "$n all threads ended on OOM" "$(field "$line" err)" 2
    chunks=$((chunks + $(field "$line" n)))
    contexts=$((contexts + 1))
  done
  u=$(sim_used)
  [ "$u" -gt "$peak" ] && peak=$u
  [ "$peak" -le "$CAP" ] || fail "round $round: the device held $peak bytes for a 2GiB slice"
  expect_eq "round $round: contexts + chunks fill the cap exactly" \
    $((contexts * 256 * MiB + chunks * 64 * MiB)) "$CAP"
  expect_eq "round $round: device usage" "$u" "$CAP"
  for n in $names; do finish "$n"; done
  expect_eq "round $round: all given back" "$(region_used)" 0
done
pass "racing threads and processes stayed within the cap and filled it exactly"
