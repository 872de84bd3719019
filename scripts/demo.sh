#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The main job (make demo). Grown by each issue; see README.
set -e
BUILD=${1:-build}
export GSLICE_BUILD=$(cd "$BUILD" && pwd) GSLICE_SRC=$(pwd)
exec bash demo/demo.sh
