#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A slice directory on a full file system: the region cannot be created, and the hooked program
# stops with a line saying so (exit 1), instead of dying of SIGBUS when it first touches pages
# the file system never had room for. Needs a private mount namespace (root): skipped otherwise.
source "$GSLICE_SRC/tests/integration/lib.sh"
source "$GSLICE_SRC/tests/integration/hook_lib.sh"
export GSLICE_MEMORY_LIMIT=1GiB

unshare -m true 2> /dev/null || skip "no private mount namespace (not root)"
mkdir "$T/full"
rc=0
unshare -m bash -c '
  mount -t tmpfs -o size=64k none "$1" || exit 77
  mkdir "$1/slice"
  dd if=/dev/zero of="$1/filler" bs=4k count=64 2> /dev/null
  GSLICE_STATE_DIR="$1/slice" LD_PRELOAD="$2" "$3" --lookup dlsym --path alloc --chunk 256MiB \
    --script "alloc 1"' _ "$T/full" "$HOOK_PRELOAD" "$TBIN/hook_client" > "$T/out" 2> "$T/err" || rc=$?
[ "$rc" = 77 ] && skip "cannot mount a tmpfs"
expect_eq "exit status on a full file system" "$rc" 1
grep -q 'No space left on device' "$T/err" || fail "no line saying why: $(cat "$T/err")"
pass "a full file system stops the program with a line, not SIGBUS"
