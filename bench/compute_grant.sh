#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Bench (b): token grant latency, p50/p99, with 1, 16 and 64 clients (one slice each, 50 us
# bursts, 0-1 ms think time), as the daemon serves them on one GPU. Two runs per count: every
# client looping (latency includes the queue behind the others' bursts), and one client looping
# while the others stay connected and idle (the GPU is free at each request). "service" is the
# daemon's own time per grant, from when the GPU was free for the request (the later of the
# request and the previous holder's release) to the grant read: queueing left out.
source "$GSLICE_SRC/bench/compute_env.inc"
bench_daemon
echo "| clients connected | looping | grants | request→grant p50 µs | p99 µs | service p50 µs | service p99 µs | revoked |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in 1 16 64; do
  for act in $n 1; do
    [ "$n" = 1 ] && [ "$act" = 1 ] && [ -n "${done1:-}" ] && continue
    done1=1
    r=$("$TBIN/compute_grant" "$n" "${SECONDS_PER:-3}" 50000 "$act")
    echo "| $n | $act | $(field "$r" grants) | $(field "$r" p50_us) | $(field "$r" p99_us) | $(field "$r" svc_p50_us) | $(field "$r" svc_p99_us) | $(field "$r" revokes) |"
  done
done
