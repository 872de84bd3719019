#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A non-root daemon's default state dir sits in a shared directory (/tmp, or here a 1777 stand-in
# for it): another user who makes it first, with symlinks in it, must not get the daemon to
# write through them (issue 8: its pid replaced a file of the victim's). The daemon refuses a
# state dir that is not its own and private, saying what to do; its log is 0600.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/lib_users.sh"

new_user A
new_user B
RT="$T/rt"
mkdir "$RT"
chmod 1777 "$RT"
echo "A's own file" >"$T/a-file"
chown "$A" "$T/a-file"

# B makes A's default state dir first, with the lock and log pointing at A's file.
as_user "$B" bash -c "mkdir -m 0777 '$RT/gslice-$A_UID' && ln -s '$T/a-file' '$RT/gslice-$A_UID/gsliced.lock' && ln -s '$T/a-file' '$RT/gslice-$A_UID/gsliced.log'"
rc=0
as_user "$A" env XDG_RUNTIME_DIR="$RT" GSLICE_SOCKET="$RT/a-run/a.sock" timeout 5 "$BIN/gsliced" \
  --foreground >"$T/out" 2>&1 || rc=$?
[ "$rc" != 124 ] || fail "gsliced ran in a state dir another user made"
[ "$rc" != 0 ] || fail "gsliced exited 0 in a state dir another user made"
expect_eq "A's file" "$(cat "$T/a-file")" "A's own file"
grep -q "refusing state dir $RT/gslice-$A_UID: it is owned by uid $B_UID" "$T/out" ||
  fail "no clear refusal: $(cat "$T/out")"
grep -q "remove it" "$T/out" || fail "the refusal does not say what to do: $(cat "$T/out")"
pass "a state dir made by another user is refused, nothing written through its links"

# Its own but writable by others: refused too (anyone could plant links in it).
as_user "$A" bash -c "mkdir -m 0700 '$RT/a-dir' && chmod 0777 '$RT/a-dir'"
rc=0
as_user "$A" env GSLICE_SOCKET="$RT/a-run/a.sock" timeout 5 "$BIN/gsliced" --foreground \
  --state-dir "$RT/a-dir" >"$T/out" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a world-writable state dir was accepted (rc $rc)"
grep -q "mode 0777" "$T/out" || fail "no refusal naming the mode: $(cat "$T/out")"
pass "a state dir others can write is refused"

# A symlink in place of the state dir is refused, not followed.
as_user "$A" bash -c "mkdir -m 0700 '$RT/a-real' && ln -s '$RT/a-real' '$RT/a-link'"
rc=0
as_user "$A" env GSLICE_SOCKET="$RT/a-run/a.sock" timeout 5 "$BIN/gsliced" --foreground \
  --state-dir "$RT/a-link" >"$T/out" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a symlinked state dir was accepted (rc $rc)"
grep -q "symbolic link" "$T/out" || fail "no refusal naming the link: $(cat "$T/out")"
pass "a symlink as state dir is refused"

# A's own default dir works, and the log it writes in the background is 0600 (it was 0644).
rm -rf "$RT/gslice-$A_UID"
as_user "$A" env XDG_RUNTIME_DIR="$RT" GSLICE_SOCKET="$RT/a-run/a.sock" "$BIN/gsliced" ||
  fail "gsliced did not start in A's own default dir"
# The daemon writes its pid into the lock once in the background, just after its parent returns.
dpid=""
for _ in $(seq 100); do
  dpid=$(cat "$RT/gslice-$A_UID/gsliced.lock")
  [ -n "$dpid" ] && break
  sleep 0.02
done
[ -n "$dpid" ] || fail "no pid in the lock file"
expect_eq "state dir owner" "$(stat -c %u "$RT/gslice-$A_UID")" "$A_UID"
expect_eq "state dir mode" "$(stat -c %a "$RT/gslice-$A_UID")" 700
expect_eq "log mode" "$(stat -c %a "$RT/gslice-$A_UID/gsliced.log")" 600
kill "$dpid"
for _ in $(seq 50); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
pass "the daemon's own default dir works; its log is 0600"

# A relative --state-dir is the working directory's, made absolute at start (issue 16 item 13):
# it was taken as given, and every `gslice run` then died on GSLICE_STATE_DIR="st/slices/1"
# (malformed: the hook wants an absolute path). And a default dir whose parents are missing is
# made, parents too.
mkdir -p "$T/wd"
(cd "$T/wd" && exec "$BIN/gsliced" --state-dir st --print-config) >"$T/cfg"
grep -q "^  state_dir  *string  *$T/wd/st " "$T/cfg" || fail "--state-dir st is not made absolute: $(grep state_dir "$T/cfg")"
(cd "$T/wd" && exec "$BIN/gsliced" --state-dir st --socket "$T/rel.sock" --foreground) 2>"$T/rel.log" &
RP=$!
for _ in $(seq 100); do GSLICE_SOCKET="$T/rel.sock" "$BIN/gslice" status >/dev/null 2>&1 && break; sleep 0.05; done
out=$(cd / && GSLICE_SOCKET="$T/rel.sock" "$BIN/gslice" run -- bash -c 'echo "dir=$GSLICE_STATE_DIR"' 2>&1) ||
  fail "gslice run under a daemon started with --state-dir st failed: $out"
grep -q "^dir=$T/wd/st/slices/[0-9]*$" <<<"$out" || fail "the slice dir is not under $T/wd/st: $out"
[ -f "$T/wd/st/gsliced.lock" ] || fail "no lock in $T/wd/st"
kill "$RP"
wait "$RP" 2>/dev/null || true
pass "a relative state dir is made absolute at start"

as_user "$A" env XDG_RUNTIME_DIR="$RT/not/yet" GSLICE_SOCKET="$RT/a-run/a2.sock" "$BIN/gsliced" ||
  fail "gsliced did not make its default dir under a missing parent"
[ -d "$RT/not/yet/gslice-$A_UID" ] || fail "no default state dir made"
dpid=""
for _ in $(seq 100); do
  dpid=$(cat "$RT/not/yet/gslice-$A_UID/gsliced.lock" 2>/dev/null || true)
  [ -n "$dpid" ] && break
  sleep 0.02
done
[ -n "$dpid" ] && kill "$dpid"
pass "the default state dir is made, parents too"
