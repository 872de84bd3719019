#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A revoke that reaches the hook before any launching thread has taken up its grant (the daemon
# took the token back, for a higher class or at the release deadline, while the grant was on its
# way or while a thread slept in the gate until the previous holder's tail): the grant is dropped,
# never opened, and the hook asks again. Before, the hook closed only an open burst of that
# generation and ignored the revoke otherwise: the burst opened later under a token the daemon had
# already given to another slice, and ran beside that slice's kernels.
#
# No timing luck: a stand-in daemon (fake_gsliced.py) answers the first TOKEN_REQUEST with a GRANT
# and a REVOKE of the same generation in one write. The hook's helper reads both in one pass under
# its mutex, so the launching thread, waiting for that grant, cannot open a burst between the two.
# Then the stand-in serves ordinary 5 ms grants until the workload exits.
source "$GSLICE_SRC/tests/integration/lib.sh"
[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3 for the stand-in daemon"
[ -f "$HOOK" ] || fail "no hook at $HOOK"
PRELOAD="$HOOK"
if [ "${GSLICE_SANITIZE:-0}" = 1 ]; then PRELOAD="$(${CC:-cc} -print-file-name=libasan.so) $HOOK"; fi
mkdir -p "$GSLICE_STATE_DIR"

/usr/bin/python3 "$GSLICE_SRC/tests/integration/fake_gsliced.py" \
  --proto "$GSLICE_SRC/src/common/proto.h" --socket "$GSLICE_SOCKET" --log "$T/fake.log" \
  --revoke-first --quantum-ms 5 --timeout 60 2> "$T/fake.err" &
FAKE=$!
for _ in $(seq 100); do
  [ -S "$GSLICE_SOCKET" ] && break
  kill -0 "$FAKE" 2>/dev/null || fail "the stand-in daemon did not start: $(cat "$T/fake.err")"
  sleep 0.05
done
[ -S "$GSLICE_SOCKET" ] || fail "the stand-in daemon did not listen on $GSLICE_SOCKET"

# As `gslice run` sets a slice's process up (src/cli/run.c).
GSLICE_SLICE=7 GSLICE_SLICE_NONCE=00000000c0ffee07 GSLICE_COMPUTE_LIMIT=100 \
  GSLICE_LOG_LEVEL=debug GSLICE_LOG_FILE="$T/hook.log" LD_PRELOAD="$PRELOAD" \
  timeout 60 "$TBIN/compute_spin" --kernel-us 500 --batch 8 --warmup 0 --duration 0.5 \
  > "$T/out" 2> "$T/err" ||
  fail "the workload failed: $(cat "$T/out" "$T/err"; tail -5 "$T/hook.log" 2>/dev/null)"
wait "$FAKE" || fail "the stand-in daemon failed: $(cat "$T/fake.err")"
cat "$T/out"
show() { echo "--- stand-in daemon's log (first 30 lines):"; head -30 "$T/fake.log"; }

grep -q "in type=HELLO role=2 slice=7 " "$T/fake.log" || { show; fail "the hook never said HELLO"; }
grep -q "done timed_out=0" "$T/fake.log" || { show; fail "the stand-in daemon timed out"; }
gen=$(sed -n 's/.* out type=TOKEN_REVOKE .*gen=\([0-9]*\).*/\1/p' "$T/fake.log")
[ -n "$gen" ] || { show; fail "no TOKEN_REQUEST reached the stand-in daemon (no revoke sent)"; }

# Nothing ran under the revoked generation: no release of it with launches or device time, and no
# handoff (PENDING) or charge of a burst of it.
bad=$(grep " in type=TOKEN_RELEASE .*gen=$gen " "$T/fake.log" |
  awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
         if (v["launches"] > 0 || v["used"] > 0 || v["flags"] != 0) print }')
[ -z "$bad" ] || { show; fail "the hook ran a burst under generation $gen after its revoke: $bad"; }

# It asked again after the revoke: a TOKEN_REQUEST, or a release with more=1.
again=$(awk -v g="$gen" '/ out type=TOKEN_REVOKE / { r = 1; next }
  r && (/ in type=TOKEN_REQUEST / || (/ in type=TOKEN_RELEASE / && / more=1 /)) { print; exit }' \
  "$T/fake.log")
[ -n "$again" ] || { show; fail "the hook did not ask for the GPU again after the revoke"; }
echo "ok: after the revoke of grant $gen the hook asked again: ${again#* in }"

# And the workload ran to its end under the later grants.
later=$(awk -v g="$gen" '/ in type=TOKEN_RELEASE / {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    if (v["gen"] > g) n += v["launches"] }
  END { print n + 0 }' "$T/fake.log")
kernels=$(sed -n 's/.* kernels=\([^ ]*\).*/\1/p' "$T/out")
[ "$later" -gt 0 ] || { show; fail "no launches reported under the grants after the revoke"; }
awk -v k="$kernels" 'BEGIN { exit !(k > 0) }' || fail "the workload ran no kernels: $(cat "$T/out")"
echo "ok: $later launches released under later grants, none under the revoked one"
pass "a revoke of a grant not yet taken up drops it; the hook asks again"
