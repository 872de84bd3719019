#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gsliced --config: a line longer than the parser reads, and a path that is not a regular
# file, are errors that name the file (issue 8); neither may be applied or read as empty.
source "$GSLICE_SRC/tests/integration/lib.sh"

# '#' + 510 x + ' window_ms = 400': read in 511-byte pieces, the tail became a line of its own.
{ printf '#'; printf 'x%.0s' $(seq 510); printf ' window_ms = 400\n'; } >"$T/long.conf"
if out=$("$BIN/gsliced" --config "$T/long.conf" --state-dir "$T/d1" --print-config 2>&1); then
  fail "a 527-byte line was accepted: $(grep window_ms <<<"$out")"
fi
grep -q "long.conf:1: line longer than 510 bytes" <<<"$out" || fail "no clear error for a long line: $out"
pass "a line over the limit is an error naming file and line"

# Exactly at the limit still works (510 bytes + newline).
{ printf '#'; printf 'x%.0s' $(seq 509); printf '\nwindow_ms = 400\n'; } >"$T/ok.conf"
out=$("$BIN/gsliced" --config "$T/ok.conf" --state-dir "$T/d2" --print-config) || fail "510-byte comment refused"
grep -Eq "window_ms +number +400 " <<<"$out" || fail "window_ms not read after a 510-byte line: $out"
pass "a 510-byte line is read whole"

mkdir "$T/confdir"
if out=$("$BIN/gsliced" --config "$T/confdir" --state-dir "$T/d3" --print-config 2>&1); then
  fail "a directory was accepted as a config file"
fi
grep -q "confdir is not a regular file" <<<"$out" || fail "no clear error for a directory: $out"
pass "a directory given as --config is an error"
