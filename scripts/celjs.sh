#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Prints a directory whose node_modules holds @marcbachmann/cel-js, the CEL evaluator the
# admission-policy tests (k8s.ext_forge_policy, deploy.node_guard, k8s.webhook_manifests) run the
# policies' expressions with, fetching it with npm into a cache dir when it is not there yet.
# Exits 1 (saying why) without node and npm, or when the registry cannot be reached: those
# tests then skip their CEL part, as they do without GSLICE_CEL_JS.
set -e
version=8.0.0
dir=${GSLICE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/gslice}/cel-js-$version
if [ -f "$dir/node_modules/@marcbachmann/cel-js/package.json" ]; then
  echo "$dir"
  exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "gslice: no node/npm: the admission policies' CEL is not evaluated by the tests" >&2
  echo "        (sudo apt-get install nodejs npm, or set GSLICE_CEL_JS)" >&2
  exit 1
fi
mkdir -p "$dir"
if ! npm install --prefix "$dir" --no-audit --no-fund --fetch-retries=1 \
  --fetch-timeout=20000 "@marcbachmann/cel-js@$version" >/dev/null 2>&1; then
  echo "gslice: could not fetch @marcbachmann/cel-js@$version with npm: the admission" >&2
  echo "        policies' CEL is not evaluated by the tests (set GSLICE_CEL_JS to a copy)" >&2
  exit 1
fi
echo "$dir"
