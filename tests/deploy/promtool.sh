#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# deploy/monitoring/alerts.yaml under promtool: the PrometheusRule's groups pass `promtool
# check rules`, and `promtool test rules` (tests/deploy/alerts_test.yaml) fires
# GSliceUnaccountedGPUProcesses, GSliceSliceBelowRequest and GSlicedDown when they should and
# not before, on the series they name only. Skipped (77) without promtool (scripts/promtool.sh
# fetches Debian's) or python3-yaml.
set -euo pipefail
: "${GSLICE_SRC:?run through ctest (make test)}"
DEPLOY=${GSLICE_DEPLOY_DIR:-$GSLICE_SRC/deploy}
PY=/usr/bin/python3
[ -x "$PY" ] && "$PY" -c 'import yaml' 2>/dev/null || { echo "SKIP: $PY with python3-yaml needed"; exit 77; }
promtool=$(sh "$GSLICE_SRC/scripts/promtool.sh") || { echo "SKIP: no promtool"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/gslice-deploy.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$PY" - "$DEPLOY/monitoring/alerts.yaml" "$T/rules.yaml" <<'PYEOF'
import sys, yaml
rule = yaml.safe_load(open(sys.argv[1]))
assert rule["kind"] == "PrometheusRule", rule["kind"]
yaml.safe_dump({"groups": rule["spec"]["groups"]}, open(sys.argv[2], "w"), sort_keys=False)
PYEOF
cp "$GSLICE_SRC/tests/deploy/alerts_test.yaml" "$T/"
"$promtool" check rules "$T/rules.yaml" || { echo "FAIL: promtool check rules" >&2; exit 1; }
(cd "$T" && "$promtool" test rules alerts_test.yaml) || { echo "FAIL: promtool test rules" >&2; exit 1; }
echo "PASS: promtool checks the rules and their tests pass"
