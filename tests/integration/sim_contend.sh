#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two processes contend for one device with time-slicing off (GSLICE_SIM_TIMESLICE=0, kernels
# in launch order): their spin kernels never overlap and together never take more device time
# than elapsed; the device's busy time is exactly theirs. sim_timeslice.sh: slicing on.
source "$GSLICE_SRC/tests/integration/lib.sh"
export GSLICE_SIM_TIMESLICE=0
PTX="$GSLICE_SRC/tests/gpu/spin.ptx"
US=20000 COUNT=10

"$TBIN/sim_client_linked" spin "$PTX" $US $COUNT >"$T/a" 2>&1 &
a=$!
"$TBIN/sim_client_dlopen" spin "$PTX" $US $COUNT >"$T/b" 2>&1 &
b=$!
wait $a || fail "client a: $(cat "$T/a")"
wait $b || fail "client b: $(cat "$T/b")"

# Intervals on the shared device clock; 0.5 ms slack for each process's time base.
awk -v slack=0.5 -v us=$US -v count=$COUNT '
  /^interval/ { n++; s[n] = $2; e[n] = $3; who[n] = FILENAME; busy += $3 - $2
                if (n == 1 || $2 < lo) lo = $2; if ($3 > hi) hi = $3 }
  END {
    if (n != 2 * count) { print "FAIL: " n " intervals"; exit 1 }
    for (i = 1; i <= n; i++) {
      if (e[i] - s[i] < us / 1000 - 0.01) { print "FAIL: short kernel " e[i] - s[i]; exit 1 }
      for (j = i + 1; j <= n; j++)
        if (who[i] != who[j] && s[i] < e[j] - slack && s[j] < e[i] - slack) {
          print "FAIL: overlap " s[i] "-" e[i] " and " s[j] "-" e[j]; exit 1 }
    }
    if (busy > hi - lo + 1) { print "FAIL: busy " busy " ms > window " hi - lo " ms"; exit 1 }
    printf "%d kernels, busy %.3f ms within a %.3f ms window, no overlap\n", n, busy, hi - lo
  }' "$T/a" "$T/b" || fail "device time"

json=$("$BIN/gslice-sim" info --json)
busy=$(grep -o '"busy_ns":[0-9]*' <<<"$json" | head -1 | cut -d: -f2)
expect_eq "device busy time" "$busy" $((2 * COUNT * US * 1000))

# NVML utilization while a long kernel runs: the device is busy the whole window.
"$TBIN/sim_client_linked" spin "$PTX" 3000000 1 >"$T/long" 2>&1 &
long=$!
util=0 sm=0
for _ in $(seq 100); do
  nv=$("$TBIN/sim_nvml")
  util=$(grep -o 'util=[0-9]*' <<<"$nv" | cut -d= -f2)
  sm=$(grep -o "sm=.*" <<<"$nv" | tr ',' '\n' | grep -o "$long:[0-9]*" | cut -d: -f2 || true)
  [ "$util" -ge 95 ] && [ "${sm:-0}" -ge 90 ] && break
  sleep 0.05
done
[ "$util" -ge 95 ] || fail "NVML utilization $util% while a kernel runs"
[ "${sm:-0}" -ge 90 ] || fail "NVML process utilization of $long: '${sm}' ($nv)"
echo "$nv"
kill -9 $long
wait $long 2>/dev/null || true
# The killed process's unrun kernel time never happens.
json=$("$BIN/gslice-sim" info --json)
busy=$(grep -o '"busy_ns":[0-9]*' <<<"$json" | head -1 | cut -d: -f2)
[ "$busy" -lt $((2 * COUNT * US * 1000 + 3000000000)) ] || fail "dead kernel still counted: $busy"
pass "sim contend"
