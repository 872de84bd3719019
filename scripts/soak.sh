#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Soak: `make test` N times in a row on a clean clone, with a parallel build of a second clone
# looping beside it (as on a busy CI machine), stopping at the first failure and naming the
# test that failed. One summary line per run, one at the end.
#
# Usage: scripts/soak.sh [-n RUNS] [-s] [-k] [--no-load] [REPO]
#   -n RUNS     runs of `make test` (default 20)
#   -s          the sanitizer suite instead (make test SANITIZE=1)
#   -k          keep the work directory even when every run passed
#   --no-load   no parallel build beside the runs
#   REPO        the repository to clone (default: this one); its committed HEAD is tested,
#               not the working tree
set -euo pipefail

runs=20 sanitize=0 keep=0 load=1
src=$(cd "$(dirname "$0")/.." && pwd)
while [ $# -gt 0 ]; do
  case "$1" in
  -n) runs=${2:?-n needs a number}; shift 2 ;;
  -s) sanitize=1; shift ;;
  -k) keep=1; shift ;;
  --no-load) load=0; shift ;;
  -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "soak: unknown option $1 (see --help)" >&2; exit 2 ;;
  *) src=$1; shift ;;
  esac
done
case "$runs" in '' | *[!0-9]*) echo "soak: -n wants a whole number, not '$runs'" >&2; exit 2 ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/gslice-soak.XXXXXX")
# mktemp makes it 0700: the tests that run a slice as another user need to reach the build.
chmod 755 "$work"
load_pid=""
failed=0
cleanup() {
  if [ -n "$load_pid" ]; then
    # The load loop runs in its own process group (setsid): end the group, builds included.
    kill -TERM -- "-$load_pid" 2> /dev/null || true
    wait "$load_pid" 2> /dev/null || true
  fi
  if [ "$failed" = 0 ] && [ "$keep" = 0 ]; then
    rm -rf "$work"
  else
    echo "soak: logs and clones kept in $work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

commit=$(git -C "$src" rev-parse --short HEAD)
git clone -q --no-hardlinks "$src" "$work/test"
make_args=()
[ "$sanitize" = 1 ] && make_args+=(SANITIZE=1)

if [ "$load" = 1 ]; then
  git clone -q --no-hardlinks "$src" "$work/load"
  # A full rebuild of the second clone, again and again, with as many jobs as cores.
  setsid bash -c '
    cd "$1"
    n=0
    while :; do
      rm -rf build-load
      nice -n 0 make build BUILD=build-load > "$2" 2>&1 || { echo "load build failed" >> "$2"; sleep 5; }
      n=$((n + 1)); echo "$n" > "$3"
    done' _ "$work/load" "$work/load.log" "$work/load.count" < /dev/null > /dev/null 2>&1 &
  load_pid=$!
fi

echo "soak: $runs runs of make test ${make_args[*]:-} on a clean clone of $commit in $work/test" \
  "($([ "$load" = 1 ] && echo "a parallel build looping beside it" || echo "no parallel load"))"
passed=0
t_all=$(date +%s)
for i in $(seq 1 "$runs"); do
  log="$work/run-$i.log"
  t0=$(date +%s)
  rc=0
  make -C "$work/test" test "${make_args[@]}" > "$log" 2>&1 || rc=$?
  t1=$(date +%s)
  summary=$(grep -E '^[0-9]+% tests passed' "$log" | tail -1 || true)
  skipped=$(grep -c '(Skipped)$' "$log" || true)
  builds=$(cat "$work/load.count" 2> /dev/null || echo 0)
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
    echo "run $i/$runs: PASS in $((t1 - t0)) s: ${summary:-?}; $skipped skipped; parallel builds so far: $builds"
    continue
  fi
  failed=1
  # ctest's list at the end: "  12 - integration.daemon_malformed (Failed)"
  bad=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (\(.*\))$/\1 (\2)/p' "$log" | grep -v '(Skipped)' |
    tr '\n' ' ' || true)
  echo "run $i/$runs: FAIL in $((t1 - t0)) s: ${bad:-the build or ctest itself failed (see the log)}"
  echo "soak: stopped at run $i; its log: $log"
  for t in $bad; do
    case "$t" in unit.* | integration.*) ;; *) continue ;; esac
    echo "---- output of $t ----"
    awk -v t="$t" '$0 ~ "Test +#[0-9]+: " t " " { p = 1 } p && /^ *[0-9]+\/[0-9]+ Test +#/ && $0 !~ t { p = 0 } p' \
      "$log" | tail -40
  done
  break
done
echo "soak: $passed/$runs runs passed, commit $commit, $(($(date +%s) - t_all)) s," \
  "$(cat "$work/load.count" 2> /dev/null || echo 0) parallel builds completed beside them"
[ "$failed" = 0 ]
