#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/base/node-guard.yaml, the ValidatingAdmissionPolicy that holds gslice-node to its own
Node (issue 18, deliverable 3): its structure (v1, nodes UPDATE, matched on gslice-node's
service account only, bound with Deny), and, where a CEL evaluator is at hand (node and the
npm package @marcbachmann/cel-js, found through GSLICE_CEL_JS = the directory holding its
node_modules, as k8s.ext_forge_policy does), its rules on the cases that matter: the agent
writing its own Node's gslice.io/gpus -- allowed; another Node, a token without a node, a
label, a taint, another annotation changed, added or removed -- denied; anyone else's writes --
not matched. Without an evaluator that part is skipped (said so, exit 77 when nothing else
failed)."""
import copy
import json
import os
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("SKIP: no python3-yaml for /usr/bin/python3")
    sys.exit(77)

SRC = os.environ.get("GSLICE_SRC") or sys.exit("run through ctest (make test)")
DEPLOY = os.environ.get("GSLICE_DEPLOY_DIR") or os.path.join(SRC, "deploy")
GUARD = os.path.join(DEPLOY, "base", "node-guard.yaml")
AGENT = "system:serviceaccount:gslice-system:gslice-node"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


docs = {d["kind"]: d for d in yaml.safe_load_all(open(GUARD)) if d}
pol, bnd = docs.get("ValidatingAdmissionPolicy"), docs.get("ValidatingAdmissionPolicyBinding")
check(pol and bnd, "kinds %s" % list(docs))
spec = pol["spec"]
check(pol["apiVersion"] == bnd["apiVersion"] == "admissionregistration.k8s.io/v1",
      "apiVersion %s" % pol["apiVersion"])
check(spec.get("failurePolicy") == "Fail", "failurePolicy %s" % spec.get("failurePolicy"))
rules = spec["matchConstraints"]["resourceRules"]
check([r["resources"] for r in rules] == [["nodes"]] and
      all("UPDATE" in r["operations"] for r in rules), "rules %s" % rules)
check(bnd["spec"]["policyName"] == pol["metadata"]["name"] and
      bnd["spec"]["validationActions"] == ["Deny"], "binding %s" % bnd["spec"])
check(any(AGENT in c["expression"] for c in spec.get("matchConditions", [])),
      "matchConditions do not name %s" % AGENT)
print("PASS: the policy parses: v1, nodes UPDATE, gslice-node's service account, Deny")


def node(name="node-a", ann=None, labels=None, taints=None):
    n = {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": name, "uid": "u-" + name},
         "spec": {"podCIDR": "10.0.0.0/24"}}
    if ann is not None:
        n["metadata"]["annotations"] = ann
    if labels is not None:
        n["metadata"]["labels"] = labels
    if taints:
        n["spec"]["taints"] = taints
    return n


def user(name=AGENT, on="node-a"):
    u = {"username": name, "groups": ["system:serviceaccounts"]}
    if on:
        u["extra"] = {"authentication.kubernetes.io/node-name": [on],
                      "authentication.kubernetes.io/pod-name": ["gslice-node-x"]}
    return u


G = "gslice.io/gpus"
base_ann = {"node.alpha.kubernetes.io/ttl": "0", G: '{"version":1}'}
base_lab = {"kubernetes.io/hostname": "node-a", "gslice.io/gpu-node": "true"}
old = node(ann=base_ann, labels=base_lab)


def edit(f):
    n = copy.deepcopy(old)
    f(n)
    return n


cases = [  # (what, userInfo, object, oldObject, allowed)
    ("its own node's gslice.io/gpus", user(),
     edit(lambda n: n["metadata"]["annotations"].update({G: '{"version":1,"x":2}'})), old, True),
    ("the first inventory on a node without annotations", user(),
     node(ann={G: "{}"}, labels=base_lab), node(labels=base_lab), True),
    ("another node", user(on="node-b"),
     edit(lambda n: n["metadata"]["annotations"].update({G: "{}"})), old, False),
    ("a token without a node", user(on=None),
     edit(lambda n: n["metadata"]["annotations"].update({G: "{}"})), old, False),
    ("a label changed", user(),
     edit(lambda n: n["metadata"]["labels"].update({"gslice.io/gpu-node": "false"})), old, False),
    ("a label added", user(),
     edit(lambda n: n["metadata"]["labels"].update({"x": "1"})), old, False),
    ("a taint added", user(),
     edit(lambda n: n["spec"].update({"taints": [{"key": "k", "effect": "NoSchedule"}]})), old,
     False),
    ("another annotation changed", user(),
     edit(lambda n: n["metadata"]["annotations"].update({"node.alpha.kubernetes.io/ttl": "5"})),
     old, False),
    ("another annotation added", user(),
     edit(lambda n: n["metadata"]["annotations"].update({"x": "1"})), old, False),
    ("another annotation removed", user(),
     edit(lambda n: n["metadata"]["annotations"].pop("node.alpha.kubernetes.io/ttl")), old, False),
    ("the kubelet changing labels (not matched)", user("system:node:node-a", on=None),
     edit(lambda n: n["metadata"]["labels"].update({"x": "1"})), old, True),
]

cel_dir = os.environ.get("GSLICE_CEL_JS")
nodejs = shutil.which("node")
if not (cel_dir and nodejs and os.path.isdir(os.path.join(cel_dir, "node_modules", "@marcbachmann",
                                                              "cel-js"))):
    print("SKIP (part): CEL evaluation (set GSLICE_CEL_JS to a directory with "
          "node_modules/@marcbachmann/cel-js)")
    sys.exit(77)
js = r"""
import {evaluate} from '@marcbachmann/cel-js'
let input = ''
process.stdin.on('data', d => input += d)
process.stdin.on('end', () => {
  const {spec, cases} = JSON.parse(input)
  const out = cases.map(([userInfo, object, oldObject]) => {
    const ctx = {object, oldObject, request: {operation: 'UPDATE', userInfo}, variables: {}}
    const matched = (spec.matchConditions || []).every(c => evaluate(c.expression, ctx) === true)
    if (!matched) return {matched, verdicts: []}
    return {matched, verdicts: spec.validations.map(v => {
      try { return evaluate(v.expression, ctx) === true } catch (e) { return 'error: ' + e.message }
    })}
  })
  console.log(JSON.stringify(out))
})
"""
script = os.path.join(cel_dir, "gslice-node-guard-eval.mjs")
with open(script, "w") as f:
    f.write(js)
p = subprocess.run([nodejs, script], input=json.dumps({
    "spec": spec, "cases": [[u, o, old_] for _, u, o, old_, _ in cases]}).encode(),
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, cwd=cel_dir)
out = p.stdout.decode()
check(p.returncode == 0, "CEL evaluation: %s" % out)
bad = []
for (what, _, _, _, allowed), r in zip(cases, json.loads(out)):
    ok = all(v is True for v in r["verdicts"])
    if any(isinstance(v, str) for v in r["verdicts"]):
        bad.append("%s: %s" % (what, r["verdicts"]))
    elif ok != allowed:
        bad.append("%s: %s, want %s (rules %s)" % (what, "allowed" if ok else "denied",
                                                   "allowed" if allowed else "denied",
                                                   r["verdicts"]))
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
if bad:
    sys.exit(1)
print("PASS: CEL: %d cases, each allowed or denied as it should be" % len(cases))
