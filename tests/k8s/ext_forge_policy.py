#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/admission-policy.yaml, the ValidatingAdmissionPolicy that keeps namespace users from
writing what only gslice-extender decides: it parses, is GA v1, matches pod CREATE and UPDATE
but not the pods/binding subresource (the extender's only write), is bound with Deny, and
kustomize takes it (when kubectl is installed). Where a CEL evaluator is at hand
(tests/deploy/celpolicy.py: node and the npm package @marcbachmann/cel-js, found through
GSLICE_CEL_JS), its rules are also evaluated on the cases that matter: an assignment or
signature at creation, one set/changed/removed by an update, spec.nodeName at creation on a
pod asking for gslice.io/ resources -- refused, each by the rule that says so; an ordinary
pod, an update that leaves them alone -- allowed. Without one that part is skipped (said so)
and the rest still decides."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import celpolicy  # noqa: E402 (it skips, 77, without python3-yaml)
from celpolicy import check  # noqa: E402

SRC = os.environ.get("GSLICE_SRC") or sys.exit("run through ctest (make test)")
POLICY = os.path.join(SRC, "deploy", "admission-policy.yaml")

docs = celpolicy.objects(POLICY)
check(sorted(d["kind"] for d in docs) ==
      ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"],
      "kinds: %s" % [d["kind"] for d in docs])
guard = celpolicy.Policy(docs)
check(not guard.problems(), "; ".join(guard.problems()))
spec = guard.spec
rules = spec["matchConstraints"]["resourceRules"]
res = [r for rule in rules for r in rule["resources"]]
ops = {o for rule in rules for o in rule["operations"]}
check("pods" in res and {"CREATE", "UPDATE"} <= ops, "rules %s" % rules)
check(not any(r in ("pods/binding", "pods/*", "*", "*/*") for r in res),
      "the Binding (gslice-extender's write) must not be matched: %s" % res)
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
NEW, CHG, NODE = ("cannot be created with them", "cannot be set, changed or removed",
                  "leave spec.nodeName unset")
R = celpolicy.request
cases = [  # (what, request, allowed, a word the refusal's message must hold)
    ("an ordinary pod", R("CREATE", pod()), True, None),
    ("a pod asking nothing of gslice, with nodeName", R("CREATE", pod(node="n1", gslice=False)),
     True, None),
    ("an assignment at creation", R("CREATE", pod({A: "{}"})), False, NEW),
    ("a signature at creation", R("CREATE", pod({S: "v1:x:y"})), False, NEW),
    ("an empty assignment at creation", R("CREATE", pod({A: ""})), False, NEW),
    ("nodeName at creation", R("CREATE", pod(node="n1")), False, NODE),
    ("nodeName at creation, init container asking", R("CREATE", pod(node="n1", init=True)),
     False, NODE),
    ("an update leaving them alone", R("UPDATE", pod(dict(signed, team="b")), pod(signed)), True,
     None),
    ("an update of a pod without them", R("UPDATE", pod({"x": "1"}), pod()), True, None),
    ("an assignment set by update", R("UPDATE", pod({A: "{}"}), pod()), False, CHG),
    ("an assignment changed", R("UPDATE", pod(dict(signed, **{A: '{"version":2}'})), pod(signed)),
     False, CHG),
    ("a signature changed", R("UPDATE", pod(dict(signed, **{S: "v1:x:z"})), pod(signed)), False,
     CHG),
    ("the assignment removed", R("UPDATE", pod({S: "v1:x:y"}), pod(signed)), False, CHG),
    ("all annotations removed", R("UPDATE", pod(), pod(signed)), False, CHG),
]

if celpolicy.evaluator():
    celpolicy.report(guard.check(cases), len(cases))
else:
    skipped.append(celpolicy.SKIP_CEL)
for s in skipped:
    print("SKIP (part): " + s)
