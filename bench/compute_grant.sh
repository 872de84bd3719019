#!/bin/bash
# Bench (b): token grant latency, p50/p99, with 1, 16 and 64 clients (one slice each, 50 us
# bursts, 0-1 ms think time), as the daemon serves them on one GPU.
source "$GSLICE_SRC/bench/compute_env.inc"
bench_daemon
echo "| clients | grants | p50 us | p99 us |"
echo "|---:|---:|---:|---:|"
for n in 1 16 64; do
  r=$("$TBIN/compute_grant" "$n" "${SECONDS_PER:-3}")
  echo "| $n | $(field "$r" grants) | $(field "$r" p50_us) | $(field "$r" p99_us) |"
done
