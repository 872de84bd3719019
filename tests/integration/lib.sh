# Shared by the bash integration tests: a private simulated machine and temp dirs per test.
# Usage: source "$GSLICE_SRC/tests/integration/lib.sh"
set -euo pipefail
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
_gs_cleanup() {
  local rc=$?
  # Kill whatever this test started (its process group), then drop its files.
  jobs -p | xargs -r kill -9 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$T"
  exit $rc
}
trap _gs_cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
# expect_eq WHAT GOT WANT
expect_eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }
