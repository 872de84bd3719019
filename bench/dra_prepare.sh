#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# DRA Prepare latency (issue 19, deliverable 9): gsliced on 4 simulated GPUs, gslice-node --mode
# dra, the API server and DRA kubelet stand-ins (tests/k8s/lib_dra.sh); bench/dra_prepare.py
# times NodePrepareResources for a batch of 1 and of 32 claims (p50/p99 over the runs, Unprepare
# between) and the time from a pod's Prepare to its container seeing the slice's memory cap.
# Knobs: DRA_BENCH_RUNS1 (100), DRA_BENCH_RUNS32 (20), DRA_BENCH_RUNS_ENFORCED (10).
: "${GSLICE_BUILD:?set GSLICE_BUILD (make bench does)}"
export GSLICE_SRC=${GSLICE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
(
  # 16 GiB GPUs: the 1 + 32 + DRA_BENCH_RUNS_ENFORCED claims of 768Mi stay allocated.
  export GSLICE_SIM_DEVICES=4 GSLICE_SIM_MEMORY=16GiB
  source "$GSLICE_SRC/tests/k8s/lib.sh"
  source "$GSLICE_SRC/tests/k8s/lib_dra.sh"
  dra_up
  "$PY" "$GSLICE_SRC/bench/dra_prepare.py" --api "$API" --kubelet "$KUBELET" --tbin "$TBIN" \
    --log-dir "$T" --runs1 "${DRA_BENCH_RUNS1:-100}" --runs32 "${DRA_BENCH_RUNS32:-20}" \
    --runs-enforced "${DRA_BENCH_RUNS_ENFORCED:-10}"
)
rc=$?
[ $rc = 77 ] && exit 0 # skipped, and said why
exit $rc
