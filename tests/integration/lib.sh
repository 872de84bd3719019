# SPDX-License-Identifier: Apache-2.0
# Shared by the bash integration tests: a private simulated machine and temp dirs per test.
# Usage: source "$GSLICE_SRC/tests/integration/lib.sh"
set -euo pipefail
# qgrep ARGS...: grep -q that reads its input to the end. Under pipefail, `cmd | grep -q` fails
# when grep exits at its first match and cmd, still writing, dies of SIGPIPE (status 141): a
# passing check then fails now and then (k8s.ext_cli, one soak run in 8 beside a build).
qgrep() { grep "$@" >/dev/null; }
: "${GSLICE_BUILD:?run through ctest (make test), which sets GSLICE_BUILD}"
: "${GSLICE_SRC:?run through ctest (make test), which sets GSLICE_SRC}"
T=$(mktemp -d "${TMPDIR:-/tmp}/gslice-test.XXXXXX")
export GSLICE_SIM_STATE="$T/sim-state"
export GSLICE_STATE_DIR="$T/slice"
export GSLICE_SOCKET="$T/gsliced.sock"
export LD_LIBRARY_PATH="$GSLICE_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
HOOK="$GSLICE_BUILD/lib/libgslice.so"
BIN="$GSLICE_BUILD/bin"
TBIN="$GSLICE_BUILD/tests"
# A test that cannot run here says why and exits 77, which ctest reports as skipped
# (SKIP_RETURN_CODE), never as passed. A part of a test that cannot run: skip_part says why, the
# rest runs, and a run that otherwise passed ends as skipped too (a pass would claim the part).
_gs_skipped_parts=""
skip() { echo "SKIP: $*"; exit 77; }
skip_part() { echo "SKIP (part): $*"; _gs_skipped_parts="${_gs_skipped_parts:+$_gs_skipped_parts; }$*"; }
# at_exit CMD: run CMD at exit, before the cleanup below. A test must not set its own EXIT trap:
# whatever such a trap runs before _gs_cleanup overwrites the status that cleanup exits with (a
# `|| true` in it made every later failure of ui_top exit 0).
_gs_at_exit=()
at_exit() { _gs_at_exit+=("$1"); }
_gs_cleanup() {
  local rc=$? c
  for c in "${_gs_at_exit[@]}"; do eval "$c" || true; done
  if [ "$rc" = 0 ] && [ -n "$_gs_skipped_parts" ]; then
    echo "SKIP: what ran passed; not checked here: $_gs_skipped_parts"
    rc=77
  fi
  # A failure shows the daemon's last words: a CI log is all there is to go on afterwards.
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    for c in "$T"/gsliced*.log; do
      [ -s "$c" ] && { echo "--- last lines of $(basename "$c"):"; tail -n 25 "$c"; } >&2
    done
  fi
  # Kill whatever this test started (its process group), then drop its files.
  jobs -p | xargs -r kill -9 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$T"
  exit $rc
}
trap _gs_cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# reach_for_others: for a test that runs programs as another user (lib_users.sh, or setpriv). A
# checkout under a 0700 dir (root's home, where `git clone` then `make test` put it) is out of
# that user's reach: integration.daemon_authz, daemon_chown_race and daemon_limits failed there.
# The binaries, the hook, the sim's libraries and the test programs are copied to a fresh 0755
# dir under /tmp (removed at exit), in the build's layout (gslice finds the hook at ../lib), and
# BIN, TBIN, HOOK and LD_LIBRARY_PATH point there, for root's own runs too. $T is made 0755.
reach_for_others() {
  local r
  chmod 0755 "$T"
  r=$(mktemp -d /tmp/gslice-reach.XXXXXX)
  at_exit "rm -rf '$r'"
  mkdir -p "$r/bin" "$r/lib" "$r/sim" "$r/tests"
  cp -p "$BIN"/* "$r/bin/"
  cp -p "$GSLICE_BUILD"/lib/*.so "$r/lib/"
  cp -pP "$GSLICE_BUILD"/sim/*.so* "$r/sim/" 2>/dev/null || true
  find "$TBIN" -maxdepth 1 -type f -perm -u+x -exec cp -p {} "$r/tests/" \;
  chmod -R go+rX "$r"
  chmod 0755 "$r"
  BIN="$r/bin"
  TBIN="$r/tests"
  HOOK="$r/lib/libgslice.so"
  export LD_LIBRARY_PATH="$r/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
pass() { echo "PASS: $*"; }
# expect_eq WHAT GOT WANT
expect_eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }
