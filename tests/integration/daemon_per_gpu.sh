#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A slice over two GPUs asks each its own request and memory cap (issue 16 item 10): a container
# given 31% over two GPUs is assigned 16% + 15%, and gslice-node's REGISTER carries both
# (gs_slice_spec.per_gpu, gpu_compute_request[], gpu_memory_cap[]). Before, gsliced had one
# request for every GPU of a slice (16% on both), and a pod placed into the exact 85% left on
# GPU 1 was refused. Admission, STATUS and each GPU's region cap go by GPU; `gslice run` still
# gives one value for every GPU of its mask.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
export GSLICE_SIM_DEVICES=2
K="$TBIN/daemon_k8s"
start_daemon

"$K" register "$GSLICE_SOCKET" split 0x3 100 16,15 2147483648,1073741824 3 >"$T/reg" ||
  fail "the per-GPU REGISTER was refused: $(cat "$T/reg")"
id=$(sed -n 's/^id=\([0-9]*\) .*/\1/p' "$T/reg")
[ -n "$id" ] || fail "no slice id: $(cat "$T/reg")"
json=$("$BIN/gslice" status --json)
py() { python3 -c "import json,sys; d=json.load(sys.stdin); $1" <<<"$json"; }
expect_eq "GPU 0's request" "$(py "print([g['compute_request_percent'] for s in d['slices'] if s['id']==$id for g in s['gpus'] if g['index']==0][0])")" 16
expect_eq "GPU 1's request" "$(py "print([g['compute_request_percent'] for s in d['slices'] if s['id']==$id for g in s['gpus'] if g['index']==1][0])")" 15
expect_eq "GPU 0's cap (from the slice's region)" "$(py "print([g['memory_cap_bytes'] for s in d['slices'] if s['id']==$id for g in s['gpus'] if g['index']==0][0])")" 2147483648
expect_eq "GPU 1's cap (from the slice's region)" "$(py "print([g['memory_cap_bytes'] for s in d['slices'] if s['id']==$id for g in s['gpus'] if g['index']==1][0])")" 1073741824
expect_eq "GPU 0 committed" "$(py "print(d['gpus'][0]['compute_requested_percent'])")" 16
expect_eq "GPU 1 committed" "$(py "print(d['gpus'][1]['compute_requested_percent'])")" 15
# The slice's region itself holds each GPU's cap (what its processes' hooks enforce).
"$BIN/gslice" status | qgrep "2GiB" || fail "status shows no 2GiB cap: $("$BIN/gslice" status)"
pass "a slice over two GPUs carries a request and a cap per GPU"

# The exact rest of GPU 1 is admitted; one point more is not; GPU 0 has 84% left.
gsrun --gpu 1 --compute 85 -- true 2>"$T/err" || fail "85% on GPU 1 beside 15% refused: $(cat "$T/err")"
if gsrun --gpu 1 --compute 86 -- true 2>"$T/err"; then fail "86% on GPU 1 beside 15% admitted"; fi
grep -q "GPU 1 has 15% of compute committed already" "$T/err" || fail "no clear refusal: $(cat "$T/err")"
if gsrun --gpu 0 --compute 85 -- true 2>"$T/err"; then fail "85% on GPU 0 beside 16% admitted"; fi
grep -q "at most 84% is left" "$T/err" || fail "no clear refusal: $(cat "$T/err")"
# gslice run over both GPUs: one value for each, as before.
out=$(gsrun --gpu 0,1 --compute 20 -- "$BIN/gslice" status --json)
python3 -c "import json,sys; d=json.load(sys.stdin); s=[s for s in d['slices'] if s['name']!='split'][0]; assert [g['compute_request_percent'] for g in s['gpus']]==[20,20], s['gpus']" <<<"$out" ||
  fail "gslice run --gpu 0,1 --compute 20 is not 20% on each"
pass "admission per GPU: the exact 85% left on GPU 1 is taken"

# SET of one value sets every GPU of the slice; the slice keeps its own per-GPU figures after a
# daemon restart (slices.state).
"$BIN/gslice" set "$id" --compute 10 >/dev/null || fail "set --compute 10 refused"
stop_daemon
start_daemon
json=$("$BIN/gslice" status --json)
expect_eq "requests after set and restart" "$(py "print([g['compute_request_percent'] for s in d['slices'] if s['id']==$id for g in s['gpus']])")" "[10, 10]"
expect_eq "caps after restart" "$(py "print([g['memory_cap_bytes'] for s in d['slices'] if s['id']==$id for g in s['gpus']])")" "[2147483648, 1073741824]"
pass "per-GPU figures survive SET and a restart"
