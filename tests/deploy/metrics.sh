#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# deploy/monitoring uses only series that exist (issue 18, deliverable 7): gsliced (on the
# simulated GPU, with a slice at work) and gslice-extender (on the API server stand-in) are
# started as the other tests start them and scraped, and every metric name the alert rules'
# expr and the dashboard's targets use must be one of theirs (a histogram's _bucket, _sum and
# _count by its family), with label names the series carry or the scrape adds (podmonitors.yaml).
source "$GSLICE_SRC/tests/k8s/lib.sh"
DEPLOY=${GSLICE_DEPLOY_DIR:-$GSLICE_SRC/deploy}
for b in "$BIN/gsliced" "$BIN/gslice" "$BIN/gslice-extender" "$TBIN/demo_spin"; do
  [ -x "$b" ] || { echo "SKIP: $b not built"; exit 77; }
done
"$PY" -c 'import yaml' 2>/dev/null || { echo "SKIP: $PY lacks python3-yaml"; exit 77; }
export GSLICE_SIM_STATE="$T/sim-state" GSLICE_STATE_DIR="$T/slice" GSLICE_SOCKET="$T/gsliced.sock"
export LD_LIBRARY_PATH="$GSLICE_BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

get() { "$PY" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }
until_ok() {
  local i
  for ((i = 0; i < $1 * 20; i++)); do "${@:2}" >/dev/null 2>&1 && return 0; sleep 0.05; done
  fail "timed out after $1 s: ${*:2}"
}
log_port() { sed -n "s/.*$2 on port \([0-9]*\).*/\1/p" "$1" | head -1; }

# gsliced with /metrics, and a slice running kernels (so its series, the histogram's buckets
# included, have samples).
"$BIN/gsliced" --foreground --socket "$GSLICE_SOCKET" --state-dir "$T/daemon" \
  --metrics 127.0.0.1:0 >"$T/gsliced.log" 2>&1 &
until_ok 10 "$BIN/gslice" status
until_ok 10 grep -q 'serving /metrics on port' "$T/gsliced.log"
DMET="http://127.0.0.1:$(log_port "$T/gsliced.log" 'serving \/metrics')/metrics"
"$BIN/gslice" run --name m1 --compute 30 --memory 512MiB -- "$TBIN/demo_spin" \
  --ptx "$GSLICE_SRC/tests/gpu/spin.ptx" --kernel-us 1000 --seconds 12 --alloc 16MiB >"$T/m1.log" 2>&1 &
has_waits() { get "$DMET" | grep -Eq '^gslice_slice_token_wait_seconds_count\{slice="m1".*\} [1-9]'; }
until_ok 15 has_waits
get "$DMET" >"$T/gsliced.metrics"

# gslice-extender, synced with the stand-in.
start_apiserver
"$BIN/gslice-extender" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --kubeconfig "$KUBECONFIG_FILE" \
  --signing-key "$SIGNING_KEY" 2>"$T/extender.log" &
until_ok 10 grep -q 'metrics on port [0-9]' "$T/extender.log"
EMET="http://127.0.0.1:$(log_port "$T/extender.log" metrics)"
until_ok 20 get "$EMET/healthz"
get "$EMET/metrics" >"$T/extender.metrics"
# As Prometheus reads them: promtool parses both (and lints them) where it is at hand.
if promtool=$(sh "$GSLICE_SRC/scripts/promtool.sh" 2>/dev/null); then
  for f in gsliced extender; do
    "$promtool" check metrics <"$T/$f.metrics" || fail "promtool check metrics refuses $f's /metrics"
  done
else
  skip_part "promtool check metrics (no promtool)"
fi

"$PY" - "$DEPLOY/monitoring" "$T/gsliced.metrics" "$T/extender.metrics" <<'PYEOF'
import json, os, re, sys
import yaml
mon, *scrapes = sys.argv[1:]
families, labels = {}, {}  # name -> type; series name -> label names seen
for path in scrapes:
    for line in open(path):
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            families[m.group(1)] = m.group(2)
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ", line)
        if m and not line.startswith("#"):
            labels.setdefault(m.group(1), set()).update(re.findall(r'([a-zA-Z_]\w*)="', m.group(3) or ""))
if not families or not any(n.startswith("gslice_extender_") for n in families):
    sys.exit("FAIL: the scrapes hold no families: %s" % scrapes)

def family_of(name):
    if name in families:
        return name
    for suf in ("_bucket", "_sum", "_count"):
        if name.endswith(suf) and families.get(name[: -len(suf)]) == "histogram":
            return name[: -len(suf)]
    return None

# What the scrape adds (podmonitors.yaml relabels node and job; Prometheus adds instance, the
# operator pod/namespace/container/endpoint), and le on histogram buckets.
target = {"node", "job", "instance", "pod", "namespace", "container", "endpoint"}
exprs = []
rule = yaml.safe_load(open(os.path.join(mon, "alerts.yaml")))
for g in rule["spec"]["groups"]:
    for r in g["rules"]:
        exprs.append(("alert %s" % r.get("alert", r.get("record")), r["expr"]))
dash = json.load(open(os.path.join(mon, "gslice-dashboard.json")))
for p in dash["panels"]:
    for t in p.get("targets", []):
        exprs.append(("panel %r" % p["title"], t["expr"]))
for v in dash.get("templating", {}).get("list", []):
    if v.get("type") == "query":
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        exprs.append(("variable %s" % v["name"], q))

bad, used = [], set()
for where, e in exprs:
    names = re.findall(r"\bgslice_[a-z0-9_]+", e)
    if not names and "up{" not in e:
        bad.append("%s uses no gslice series: %s" % (where, e))
    for n in names:
        fam = family_of(n)
        if not fam:
            bad.append("%s: %s is served by neither gsliced nor gslice-extender" % (where, n))
            continue
        used.add(fam)
    # Label names in selectors right after a series name.
    for n, sel in re.findall(r"\b(gslice_[a-z0-9_]+)\{([^}]*)\}", e):
        have = set().union(*[labels.get(s, set()) for s in (n, n + "_bucket", n + "_count")]) | target
        for lab in re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", sel):
            if lab not in have:
                seen = sorted(have - target)
                bad.append("%s: %s has no label %s (%s)" % (where, n, lab, "it has %s" % seen if seen
                           else "no sample in the scrape shows its labels: select by node"))
    # up: only Prometheus's own, for the scrape jobs of podmonitors.yaml.
    for job in re.findall(r'\bup\{job="([^"]+)"\}', e):
        if job not in ("gsliced", "gslice-extender"):
            bad.append("%s: up of job %s, which podmonitors.yaml does not make" % (where, job))
if bad:
    for b in bad:
        print("FAIL: " + b, file=sys.stderr)
    sys.exit(1)
print("PASS: %d queries use %d series, every one served (%d families scraped)" %
      (len(exprs), len(used), len(families)))
PYEOF
