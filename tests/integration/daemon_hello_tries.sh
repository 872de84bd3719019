#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# One connection may have at most 3 HELLOs refused (HELLO_REFUSED_MAX): the third refusal's ERROR
# is sent, then the connection is closed. A refused HELLO used to leave the connection open for
# another, so one connection could try slice nonces (or ids) for the whole hello_timeout_ms, as
# fast as the daemon answered. On the main socket and on the hook socket, for a wrong nonce and
# a slice that does not exist (on the hook socket, the -EPERM of a HELLO it does not serve); a
# right nonce within the tries is still taken.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
K="$TBIN/daemon_k8s"
H="$T/hook/gsliced.sock"
start_daemon --set hello_timeout_ms=60000

# A container's slice (any uid, held), as gslice-node registers it.
"$K" register "$GSLICE_SOCKET" ctr 0x1 30 30 1073741824 3 >"$T/reg" || fail "register: $(cat "$T/reg")"
id=$(sed -n 's/^id=\([0-9]*\) .*/\1/p' "$T/reg")
nonce=$(sed -n 's/.* nonce=\([0-9a-f]*\) .*/\1/p' "$T/reg")
[ -n "$id" ] && [ -n "$nonce" ] || fail "no slice: $(cat "$T/reg")"
bad="1111111111111111 2222222222222222 3333333333333333 4444444444444444 5555555555555555"

# guess NAME WANT SOCK ROLE ID NONCE...: the HELLOs on one connection must go as WANT (a regex).
guess() {
  local name=$1 want=$2 out
  shift 2
  out=$("$K" guess "$@")
  echo "$name: $out"
  grep -Eq "^$want$" <<<"$out" || fail "$name: got '$out', want '$want'"
}
guess "main, wrong nonces" "refused -116 refused -116 refused -116 closed -[0-9]+" \
  "$GSLICE_SOCKET" hook "$id" $bad
guess "main, no such slice" "refused -2 refused -2 refused -2 closed -[0-9]+" \
  "$GSLICE_SOCKET" cli 999 0 0 0 0 0
guess "hook socket, wrong nonces" "refused -116 refused -116 refused -116 closed -[0-9]+" \
  "$H" hook "$id" $bad
guess "hook socket, no such slice" "refused -1 refused -1 refused -1 closed -[0-9]+" \
  "$H" hook 999 0 0 0 0 0
grep -q "too many refused HELLOs" "$T/gsliced.log" || fail "the close is not said in the log"
pass "a connection is closed at its third refused HELLO, on either socket"

# Within the tries, the right nonce is taken: a client that retries once is not punished.
guess "main, right nonce third" "refused -116 refused -116 ok" "$GSLICE_SOCKET" hook "$id" \
  1111111111111111 2222222222222222 "$nonce"
guess "hook socket, right nonce second" "refused -116 ok" "$H" hook "$id" 1111111111111111 "$nonce"
"$BIN/gslice" status >/dev/null || fail "the daemon does not answer after the guesses"
pass "a right HELLO within the tries is served"
