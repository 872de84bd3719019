#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# SIGKILL at random points of an allocation loop, 100 times: never a hang (every later process
# gets through), never a lost byte (the slice fills exactly afterwards, the region and the device
# agree on zero once everyone is gone). Some kills land while the region's lock is held.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=1GiB
lookups=(dlsym procaddr link)
paths=(alloc async vmm pitch)

for i in $(seq 100); do
  lk=${lookups[$((i % 3))]}
  p=${paths[$((i % 4))]}
  CLIENT_EXEC=1 client --lookup "$lk" --path "$p" --script "churn 1000000" > /dev/null 2>&1 &
  pid=$!
  # 0-49 ms: some die starting up, some in the hook, some in the driver.
  sleep "0.0$((RANDOM % 5))$((RANDOM % 10))"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ $((i % 25)) = 0 ]; then
    # A process of the slice still gets the whole cap, in bounded time.
    out=$(LD_PRELOAD="$HOOK_PRELOAD" timeout 20 "$TBIN/hook_client" --lookup dlsym --path alloc \
      --chunk 256MiB --script fill 2>/dev/null) ||
      fail "iteration $i: a client hung or failed after the kills"
    expect_eq "iteration $i: chunks after kills" "$(field "$out" n)" 3
  fi
done
expect_eq "region after all exited" "$(region_used)" 0
expect_eq "device after all exited" "$(sim_used)" 0
pass "100 SIGKILLs: no hang, no lost byte"
