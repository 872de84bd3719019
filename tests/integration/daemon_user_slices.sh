#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# user_slices = false (a Kubernetes node's gsliced): REGISTER from anyone but an admin is refused
# with why and which setting allows it. A node-local user's `gslice run --compute 50` committed
# half a GPU that the cluster's placement (the extender) could not see, and gslice-node's
# REGISTER of a pod placed at 60% was then refused. An admin (root here, as gslice-node) still
# registers; user_slices = true (the default, SIGHUP) lets users in again.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
[ "$(id -u)" = 0 ] || skip "needs root (an admin beside another user)"
id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null || skip "needs user nobody and setpriv"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
reach_for_others
K="$TBIN/daemon_k8s"
printf 'user_slices = false\n' >"$T/gsliced.conf"
start_daemon --config "$T/gsliced.conf"
# qgrep, not grep -q: under pipefail gsliced's SIGPIPE once grep -q had its match failed the
# check now and then (the sanitizer build, slower to write the rest).
"$BIN/gsliced" --config "$T/gsliced.conf" --state-dir "$T/d2" --print-config | qgrep "^  user_slices  *bool  *false " ||
  fail "--print-config does not show user_slices false: $("$BIN/gsliced" --config "$T/gsliced.conf" --state-dir "$T/d2" --print-config | grep user_slices)"

# A node-local user: refused, with the reason and the setting.
if as_nobody "$BIN/gslice" run --compute 50 -- true >"$T/run" 2>&1; then
  fail "user nobody registered a slice with user_slices = false: $(cat "$T/run")"
fi
cat "$T/run"
grep -q "user_slices = false.*user_slices = true in gsliced's config allows users' slices" "$T/run" ||
  fail "the refusal does not say why and which setting: $(cat "$T/run")"
grep -q "REGISTER refused: user_slices is false" "$T/gsliced.log" || fail "the refusal is not in the log"
expect_eq "slices after the refused user" "$(nslices)" 0

# gslice-node (an admin): its pod's 60% is registered, the user's 50% committed nothing.
"$K" register "$GSLICE_SOCKET" pod 0x1 60 60 0 3 >"$T/reg" || fail "an admin's REGISTER was refused: $(cat "$T/reg")"
gsrun --compute 20 -- true || fail "root's gslice run was refused"
pass "user_slices = false: only admins register slices"

# SIGHUP with user_slices = true: the user is served again.
printf 'user_slices = true\n' >"$T/gsliced.conf"
kill -HUP "$DAEMON_PID"
for _ in $(seq 100); do grep -q "settings reloaded" "$T/gsliced.log" && break; sleep 0.05; done
as_nobody "$BIN/gslice" run --compute 20 -- true 2>"$T/run2" || fail "user nobody refused with user_slices = true: $(cat "$T/run2")"
printf 'user_slices = maybe\n' >"$T/bad.conf"
if "$BIN/gsliced" --config "$T/bad.conf" --state-dir "$T/d3" --print-config >"$T/bad" 2>&1; then fail "user_slices = maybe taken"; fi
grep -q "user_slices: 'maybe' is not true or false" "$T/bad" || fail "no clear refusal: $(cat "$T/bad")"
pass "user_slices = true (SIGHUP) serves users again; a value not true or false is refused"
