#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/admission-policy.yaml, the ValidatingAdmissionPolicy that keeps namespace users from
writing what only gslice-extender decides: it parses, is GA v1, matches
pod CREATE and UPDATE but not the pods/binding subresource (the extender's only write), is
bound with Deny, and kustomize takes it (when kubectl is installed). Where a CEL evaluator is
at hand (node and the npm package @marcbachmann/cel-js, found through GSLICE_CEL_JS = the
directory holding its node_modules), its rules are also evaluated on the cases that matter:
an assignment or signature at creation, one set/changed/removed by an update, spec.nodeName
at creation on a pod asking for gslice.io/ resources -- refused; an ordinary pod, an update
that leaves them alone -- allowed. Without one that part is skipped (said so) and the rest
still decides."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

SRC = os.environ.get("GSLICE_SRC") or sys.exit("run through ctest (make test)")
POLICY = os.path.join(SRC, "deploy", "admission-policy.yaml")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


docs = list(yaml.safe_load_all(open(POLICY)))
kinds = {d["kind"]: d for d in docs if d}
check(set(kinds) == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
      "kinds: %s" % list(kinds))
pol, bnd = kinds["ValidatingAdmissionPolicy"], kinds["ValidatingAdmissionPolicyBinding"]
for d in (pol, bnd):
    check(d["apiVersion"] == "admissionregistration.k8s.io/v1", d["apiVersion"])
spec = pol["spec"]
check(spec.get("failurePolicy") == "Fail", "failurePolicy %s" % spec.get("failurePolicy"))
rules = spec["matchConstraints"]["resourceRules"]
res = [r for rule in rules for r in rule["resources"]]
ops = {o for rule in rules for o in rule["operations"]}
check("pods" in res and {"CREATE", "UPDATE"} <= ops, "rules %s" % rules)
check(not any(r in ("pods/binding", "pods/*", "*", "*/*") for r in res),
      "the Binding (gslice-extender's write) must not be matched: %s" % res)
check(bnd["spec"]["policyName"] == pol["metadata"]["name"], "binding names %s" %
      bnd["spec"]["policyName"])
check(bnd["spec"]["validationActions"] == ["Deny"], "actions %s" % bnd["spec"]["validationActions"])
text = open(POLICY).read()
for word in ("gslice.io/assigned", "gslice.io/assigned-signature", "nodeName", "gslice.io/"):
    check(word in text, "the policy never mentions %s" % word)
print("PASS: the policy parses: v1, pods CREATE/UPDATE (not pods/binding), bound with Deny")

skipped = []
kubectl = shutil.which("kubectl")
if kubectl:
    d = tempfile.mkdtemp(prefix="gslice-vap.")
    try:
        shutil.copy(POLICY, d)
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            f.write("resources:\n- admission-policy.yaml\n")
        p = subprocess.run([kubectl, "kustomize", d], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        out = p.stdout.decode()
        check(p.returncode == 0, "kubectl kustomize: %s" % out)
        check("kind: ValidatingAdmissionPolicyBinding" in out, out)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("PASS: kubectl kustomize takes it")
else:
    skipped.append("kubectl kustomize (no kubectl)")


def pod(ann=None, node=None, gslice=True, init=False):
    lim = {"gslice.io/gpu": "1", "gslice.io/gpu-memory": "512Mi"} if gslice else {"cpu": "1"}
    c = {"name": "main", "image": "x", "resources": {"limits": lim}}
    p = {"metadata": {"name": "p", "namespace": "t"}, "spec": {"containers": [
        c if not init else {"name": "main", "image": "x"}]}}
    if init:
        p["spec"]["initContainers"] = [c]
    if ann is not None:
        p["metadata"]["annotations"] = ann
    if node:
        p["spec"]["nodeName"] = node
    return p


A, S = "gslice.io/assigned", "gslice.io/assigned-signature"
signed = {A: '{"version":1}', S: "v1:x:y", "team": "a"}
cases = [  # (what, operation, object, oldObject, allowed)
    ("an ordinary pod", "CREATE", pod(), None, True),
    ("a pod asking nothing of gslice, with nodeName", "CREATE", pod(node="n1", gslice=False),
     None, True),
    ("an assignment at creation", "CREATE", pod({A: "{}"}), None, False),
    ("a signature at creation", "CREATE", pod({S: "v1:x:y"}), None, False),
    ("an empty assignment at creation", "CREATE", pod({A: ""}), None, False),
    ("nodeName at creation", "CREATE", pod(node="n1"), None, False),
    ("nodeName at creation, init container asking", "CREATE", pod(node="n1", init=True), None,
     False),
    ("an update leaving them alone", "UPDATE", pod(dict(signed, team="b")), pod(signed), True),
    ("an update of a pod without them", "UPDATE", pod({"x": "1"}), pod(), True),
    ("an assignment set by update", "UPDATE", pod({A: "{}"}), pod(), False),
    ("an assignment changed", "UPDATE", pod(dict(signed, **{A: '{"version":2}'})), pod(signed),
     False),
    ("a signature changed", "UPDATE", pod(dict(signed, **{S: "v1:x:z"})), pod(signed), False),
    ("the assignment removed", "UPDATE", pod({S: "v1:x:y"}), pod(signed), False),
    ("all annotations removed", "UPDATE", pod(), pod(signed), False),
]

cel_dir = os.environ.get("GSLICE_CEL_JS")
node = shutil.which("node")
if cel_dir and node and os.path.isdir(os.path.join(cel_dir, "node_modules", "@marcbachmann",
                                                   "cel-js")):
    js = r"""
import {evaluate} from '@marcbachmann/cel-js'
let input = ''
process.stdin.on('data', d => input += d)
process.stdin.on('end', () => {
  const {spec, cases} = JSON.parse(input)
  const out = cases.map(([op, object, oldObject]) => {
    const ctx = {object, oldObject, request: {operation: op}, variables: {}}
    for (const v of spec.variables) ctx.variables[v.name] = evaluate(v.expression, ctx)
    return spec.validations.map(v => evaluate(v.expression, ctx) === true)
  })
  console.log(JSON.stringify(out))
})
"""
    script = os.path.join(cel_dir, "gslice-vap-eval.mjs")
    with open(script, "w") as f:
        f.write(js)
    p = subprocess.run([node, script], input=json.dumps({
        "spec": spec, "cases": [[op, o, old] for _, op, o, old, _ in cases]}).encode(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, cwd=cel_dir)
    out = p.stdout.decode()
    check(p.returncode == 0, "CEL evaluation: %s" % out)
    got = json.loads(out)
    for (what, op, _, _, allowed), verdicts in zip(cases, got):
        check(all(verdicts) == allowed, "%s (%s): %s, want %s (rules %s)" % (
            what, op, "allowed" if all(verdicts) else "denied",
            "allowed" if allowed else "denied", verdicts))
    print("PASS: CEL: %d cases, each allowed or denied as it should be" % len(cases))
else:
    skipped.append("CEL evaluation (set GSLICE_CEL_JS to a directory with node_modules/"
                   "@marcbachmann/cel-js)")
for s in skipped:
    print("SKIP (part): " + s)
