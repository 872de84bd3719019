#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A node-local user cannot join a container's slice (issue 16 item 8). A held, any-uid slice's dir
# holds its memory region (0666: the container's processes run as any uid) and, beside it,
# slice.env with the slice's nonce; user nobody read the nonce, joined a Kubernetes slice, took
# half of its hard 30% and allocated from its cap. Now such dirs live under
# <state_dir>/held, 0700 and the daemon's: no local user reaches them by path, while the
# container, which gets the slice's dir bind-mounted, still uses them as any uid.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_daemon.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a root daemon, and user nobody)"
id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null || skip "needs user nobody and setpriv"
reach_for_others
K="$TBIN/daemon_k8s"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
start_daemon

"$K" register "$GSLICE_SOCKET" ctr 0x1 30 30 1073741824 3 >"$T/reg" || fail "register: $(cat "$T/reg")"
id=$(sed -n 's/^id=\([0-9]*\) .*/\1/p' "$T/reg")
nonce=$(sed -n 's/.* nonce=\([0-9a-f]*\) .*/\1/p' "$T/reg")
dir=$(sed -n 's/.* dir=\(.*\)$/\1/p' "$T/reg")
# What gslice-node wrote there for the container (0644), as before.
printf 'GSLICE_SLICE=%s\nGSLICE_SLICE_NONCE=%s\n' "$id" "$nonce" >"$dir/slice.env"
chmod 0644 "$dir/slice.env"
[ -f "$dir/memory.region" ] || fail "no memory region in $dir"
expect_eq "the region's mode" "$(stat -c %a "$dir/memory.region")" 666
expect_eq "the slice dir's mode" "$(stat -c %a "$dir")" 755
expect_eq "its parent" "$(stat -c '%a %u' "$(dirname "$dir")")" "700 0"

# User nobody on the node: neither file, and no HELLO without the nonce.
if got=$(as_nobody cat "$dir/slice.env" 2>/dev/null); then fail "nobody read the slice's nonce: $got"; fi
if as_nobody python3 -c 'import sys; open(sys.argv[1], "r+b")' "$dir/memory.region" 2>/dev/null; then
  fail "nobody opened the slice's memory region"
fi
if as_nobody ls "$(dirname "$dir")" >/dev/null 2>&1; then fail "nobody listed the held slices"; fi
out=$(as_nobody "$K" hello "$GSLICE_SOCKET" hook "$id" 0)
grep -q "^refused -116 " <<<"$out" || fail "nobody joined the slice without its nonce: $out"
out=$(as_nobody "$K" hello "$T/hook/gsliced.sock" hook "$id" 0)
grep -q "^refused -116 " <<<"$out" || fail "nobody joined the slice over the hook socket without its nonce: $out"
pass "a local user reaches neither the nonce nor the region of a container's slice"

# The container's user, given the slice's dir by a bind mount, uses both.
if unshare --mount true 2>/dev/null; then
  mkdir -p "$T/c"
  out=$(unshare --mount bash -c 'mount --bind "$1" "$2" || exit 77
    setpriv --reuid=65534 --regid=65534 --clear-groups -- bash -c \
      "cat \"\$0/slice.env\" >/dev/null && python3 -c \"import sys; open(sys.argv[1], \\\"r+b\\\")\" \"\$0/memory.region\" && echo usable" "$2"' \
    _ "$dir" "$T/c" 2>&1) || true
  grep -q usable <<<"$out" || fail "the container's user cannot use its slice's dir: $out"
  pass "the container's user, with the dir mounted, reads slice.env and writes the region"
else
  skip_part "no private mount namespace: the container's view not checked"
fi

# gslice run's slices stay where they were, the user's own.
gsrun --name plain -- bash -c 'echo "$GSLICE_STATE_DIR"' >"$T/plain" || fail "gslice run failed"
grep -q "^$DSTATE/slices/[0-9]*$" "$T/plain" || fail "gslice run's slice dir moved: $(cat "$T/plain")"
