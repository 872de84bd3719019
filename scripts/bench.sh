#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs every benchmark script under bench/ against the given build dir and prints its table.
set -e
BUILD=${1:-build}
export GSLICE_BUILD=$(cd "$BUILD" && pwd) GSLICE_SRC=$(pwd)
found=0
for b in bench/*.sh; do
  [ -f "$b" ] || continue
  found=1
  echo "== $b"
  bash "$b"
done
[ $found = 1 ] || echo "no benchmarks yet"
