#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gslice-extender placement: policies on a seeded trace, and filter+prioritize latency over
# 5,000 nodes x 8 GPUs, in process and over HTTP (see docs/benchmarks.md).
# Knobs: K8S_BENCH_NODES (5000), K8S_BENCH_TRACE_NODES (500), K8S_BENCH_SAMPLES (500), K8S_BENCH_SEED (42)
set -euo pipefail
: "${GSLICE_BUILD:?set GSLICE_BUILD (make bench does)}"
exec "$GSLICE_BUILD/tests/k8s_place" --nodes "${K8S_BENCH_NODES:-5000}" \
  --trace-nodes "${K8S_BENCH_TRACE_NODES:-500}" --samples "${K8S_BENCH_SAMPLES:-500}" \
  --seed "${K8S_BENCH_SEED:-42}"
