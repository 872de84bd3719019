#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The main socket's dir is made and checked through descriptors, as the hook socket's is: whoever
# can write in it can replace gsliced.sock and answer the daemon's clients (gslice-node would
# take a fake daemon's word for a slice's dir), and a root daemon unlinked and bound there by
# path, through whatever link it found. It was made by path with mkdir and never checked: a dir
# of another user, a link in its place or a dir anyone may write were all taken. Now each is
# refused at start with what to do, nothing made in it; a missing dir is made 0755, the
# daemon's; the socket in it is 0666 and unlinked through the dir at exit.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"

# refused NAME SOCKET: gsliced must stop (rc 1) at once, saying why in $T/NAME.out.
refused() {
  local rc=0
  timeout 10 "$BIN/gsliced" --state-dir "$T/st-$1" --socket "$2" --foreground >"$T/$1.out" 2>&1 ||
    rc=$?
  [ "$rc" = 1 ] || fail "$1: gsliced did not refuse $(dirname "$2") (rc $rc): $(cat "$T/$1.out")"
  [ ! -e "$2" ] || fail "$1: a socket was made at $2"
}

# A dir of another user.
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  mkdir "$T/foreign"
  chown nobody "$T/foreign"
  chmod 0755 "$T/foreign"
  refused foreign "$T/foreign/g.sock"
  grep -q "refusing socket dir $T/foreign: it is owned by uid $(id -u nobody) with mode 0755, and must be this daemon's (uid 0)" \
    "$T/foreign.out" || fail "no clear refusal of another user's dir: $(cat "$T/foreign.out")"
  grep -q "remove it .*or give another --socket" "$T/foreign.out" ||
    fail "the refusal does not say what to do: $(cat "$T/foreign.out")"
  [ ! -e "$T/foreign/hook" ] || fail "a hook dir was made in another user's dir"
  pass "a socket dir of another user is refused, nothing made in it"
else
  skip_part "not root, or no user nobody: another user's socket dir"
fi

# A link in place of the dir: refused, not followed.
mkdir "$T/real"
ln -s "$T/real" "$T/link"
refused link "$T/link/g.sock"
grep -q "$T/link is a symbolic link, not a directory: .*remove it, or give another --socket" \
  "$T/link.out" || fail "no clear refusal of a link: $(cat "$T/link.out")"
[ -z "$(ls -A "$T/real")" ] || fail "something was made through the link: $(ls -A "$T/real")"
pass "a link in place of the socket dir is refused, nothing made through it"

# The daemon's own dir, but writable by others (and by its group).
for mode in 0777 0775 1777; do
  mkdir "$T/open$mode"
  chmod "$mode" "$T/open$mode"
  refused "open$mode" "$T/open$mode/g.sock"
  grep -q "refusing socket dir $T/open$mode: it is owned by uid $(id -u) with mode $mode" \
    "$T/open$mode.out" || fail "no refusal naming mode $mode: $(cat "$T/open$mode.out")"
done
pass "a socket dir others may write is refused"

# A missing dir is made, 0755 and the daemon's; the socket is 0666, and gone after the daemon.
export GSLICE_SOCKET="$T/run/gsliced.sock"
start_daemon
expect_eq "socket dir" "$(stat -c '%a %u' "$T/run")" "755 $(id -u)"
expect_eq "socket mode" "$(stat -c '%a' "$GSLICE_SOCKET")" 666
"$BIN/gslice" status >/dev/null || fail "gslice status does not answer on $GSLICE_SOCKET"
stop_daemon
[ ! -e "$GSLICE_SOCKET" ] || fail "the socket is left after the daemon stopped"
[ ! -e "$T/run/hook/gsliced.sock" ] || fail "the hook socket is left after the daemon stopped"
# And once there, the same dir is taken again.
start_daemon
"$BIN/gslice" status >/dev/null || fail "gslice status does not answer in the dir made before"
stop_daemon
pass "a missing socket dir is made the daemon's, 0755; the socket 0666, unlinked at exit"
