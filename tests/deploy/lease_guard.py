#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/base/lease-guard.yaml, the ValidatingAdmissionPolicy that holds gslice-node to its own
liveness Lease: its structure (v1, leases CREATE and UPDATE -- every write verb gslice-node's
Role grants -- matched on gslice-node's service account only, bound with Deny), and, where a
CEL evaluator is at hand (node and the npm package @marcbachmann/cel-js, found through
GSLICE_CEL_JS = the directory holding its node_modules, as deploy.node_guard does), its rules on
the cases that matter: the agent creating or renewing gslice-system/gslice-node-<its node> held
by its node -- allowed; another node's Lease, its own Lease's name with another holder or none,
its Lease's name in another namespace, a token with no node (or two) -- denied, the last saying
the token names no node; anyone else's Leases (the kubelet's, the scheduler's, a namesake
account in another namespace) -- not matched. Without an evaluator that part is skipped (said
so, exit 77 when nothing else failed)."""
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
GUARD = os.path.join(DEPLOY, "base", "lease-guard.yaml")
NODE = os.path.join(DEPLOY, "base", "node", "node.yaml")
AGENT = "system:serviceaccount:gslice-system:gslice-node"
NS = "gslice-system"


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
check([(r["apiGroups"], r["resources"]) for r in rules] == [(["coordination.k8s.io"], ["leases"])],
      "rules %s" % rules)
ops = set(rules[0]["operations"])
# Every write gslice-node's Role allows on leases is matched (a verb left out is unguarded).
verb_op = {"create": "CREATE", "update": "UPDATE", "patch": "UPDATE", "delete": "DELETE",
           "deletecollection": "DELETE"}
role = next(d for d in yaml.safe_load_all(open(NODE))
            if d and d["kind"] == "Role" and d["metadata"]["name"] == "gslice-node")
writes = {verb_op[v] for r in role["rules"] if "leases" in r["resources"]
          for v in r["verbs"] if v in verb_op}
check({"CREATE", "UPDATE"} <= writes <= ops,
      "operations %s do not cover the Role's writes %s" % (sorted(ops), sorted(writes)))
check(bnd["spec"]["policyName"] == pol["metadata"]["name"] and
      bnd["spec"]["validationActions"] == ["Deny"], "binding %s" % bnd["spec"])
check(any(AGENT in c["expression"] for c in spec.get("matchConditions", [])),
      "matchConditions do not name %s" % AGENT)
print("PASS: the policy parses: v1, leases %s (the Role's writes %s), gslice-node's service "
      "account, Deny" % (sorted(ops), sorted(writes)))


def lease(name="gslice-node-node-a", ns=NS, holder="node-a"):
    spec_ = {"leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"}
    if holder is not None:
        spec_["holderIdentity"] = holder
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "7"}, "spec": spec_}


def user(name=AGENT, on=("node-a",)):
    u = {"username": name, "groups": ["system:serviceaccounts"]}
    if on is not None:
        extra = {"authentication.kubernetes.io/pod-name": ["gslice-node-x"]}
        if on:
            extra["authentication.kubernetes.io/node-name"] = list(on)
        u["extra"] = extra
    return u


def req(u, obj, op="UPDATE", old=True):
    """(userInfo, request fields, object, oldObject)."""
    r = {"operation": op, "namespace": obj["metadata"]["namespace"],
         "name": obj["metadata"]["name"], "userInfo": u}
    return r, obj, (obj if old and op == "UPDATE" else None)


# (what, request, allowed, a word the refusal's message must hold)
cases = [
    ("its own Lease renewed", req(user(), lease()), True, None),
    ("its own Lease created", req(user(), lease(), "CREATE"), True, None),
    ("another node's Lease renewed", req(user(), lease("gslice-node-node-b", holder="node-b")),
     False, "gslice-system/gslice-node-node-a"),
    ("another node's Lease created", req(user(), lease("gslice-node-node-b", holder="node-b"),
                                         "CREATE"), False, "gslice-node-node-a"),
    ("another node's Lease with its own node as holder",
     req(user(), lease("gslice-node-node-b")), False, "gslice-node-node-a"),
    ("a Lease whose name only starts with its own", req(user(), lease("gslice-node-node-a2")),
     False, "gslice-node-node-a"),
    ("its own Lease with another holderIdentity", req(user(), lease(holder="node-b")), False,
     "holderIdentity node-a"),
    ("its own Lease created with another holderIdentity",
     req(user(), lease(holder="node-b"), "CREATE"), False, "holderIdentity node-a"),
    ("its own Lease with no holderIdentity", req(user(), lease(holder=None)), False,
     "holderIdentity"),
    ("its own Lease's name in another namespace",
     req(user(), lease(ns="kube-node-lease"), "CREATE"), False, "gslice-system/"),
    ("the kubelet's node Lease", req(user(), lease("node-a", "kube-node-lease")), False,
     "gslice-node-node-a"),
    ("a token with no node claim", req(user(on=None), lease()), False, "names no node"),
    ("a token whose extras lack the node", req(user(on=()), lease()), False, "names no node"),
    ("a token naming two nodes", req(user(on=("node-a", "node-b")), lease()), False,
     "names no node"),
    ("the kubelet renewing its node Lease (not matched)",
     req(user("system:node:node-a", on=None), lease("node-a", "kube-node-lease", "node-a")),
     True, None),
    ("gslice-scheduler's leader Lease (not matched)",
     req(user("system:serviceaccount:gslice-system:gslice-scheduler", on=("node-c",)),
         lease("gslice-scheduler", holder="gslice-scheduler-x_1")), True, None),
    ("a gslice-node account of another namespace (not matched)",
     req(user("system:serviceaccount:other:gslice-node", on=("node-b",)), lease()), True, None),
]

cel_dir = os.environ.get("GSLICE_CEL_JS")
nodejs = shutil.which("node")
if not (cel_dir and nodejs and os.path.isdir(os.path.join(cel_dir, "node_modules", "@marcbachmann",
                                                              "cel-js"))):
    print("SKIP (part): CEL evaluation (set GSLICE_CEL_JS to a directory with "
          "node_modules/@marcbachmann/cel-js)")
    sys.exit(77)
# The API server's order: matchConditions, then the variables, then every validation; the
# refusal's message is the first failed validation's (its messageExpression, else message).
js = r"""
import {evaluate} from '@marcbachmann/cel-js'
let input = ''
process.stdin.on('data', d => input += d)
process.stdin.on('end', () => {
  const {spec, cases} = JSON.parse(input)
  const out = cases.map(([request, object, oldObject]) => {
    const ctx = {object, oldObject, request, variables: {},
                 namespaceObject: {metadata: {name: request.namespace}}}
    const matched = (spec.matchConditions || []).every(c => evaluate(c.expression, ctx) === true)
    if (!matched) return {matched, verdicts: []}
    try {
      for (const v of spec.variables || []) ctx.variables[v.name] = evaluate(v.expression, ctx)
    } catch (e) { return {matched, verdicts: ['error: variables: ' + e.message]} }
    let message = null
    const verdicts = spec.validations.map(v => {
      try {
        const ok = evaluate(v.expression, ctx) === true
        if (!ok && message === null)
          message = v.messageExpression ? evaluate(v.messageExpression, ctx) : v.message
        return ok
      } catch (e) { return 'error: ' + e.message }
    })
    return {matched, verdicts, message}
  })
  console.log(JSON.stringify(out))
})
"""
script = os.path.join(cel_dir, "gslice-lease-guard-eval.mjs")
with open(script, "w") as f:
    f.write(js)
p = subprocess.run([nodejs, script], input=json.dumps({
    "spec": spec, "cases": [list(r) for _, r, _, _ in cases]}).encode(),
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, cwd=cel_dir)
out = p.stdout.decode()
check(p.returncode == 0, "CEL evaluation: %s" % out)
bad = []
for (what, _, allowed, word), r in zip(cases, json.loads(out)):
    ok = all(v is True for v in r["verdicts"])
    if any(isinstance(v, str) for v in r["verdicts"]):
        bad.append("%s: %s" % (what, r["verdicts"]))
    elif ok != allowed:
        bad.append("%s: %s, want %s (rules %s)" % (what, "allowed" if ok else "denied",
                                                   "allowed" if allowed else "denied",
                                                   r["verdicts"]))
    elif word and word not in (r.get("message") or ""):
        bad.append("%s: refused with %r, which does not say %r" % (what, r.get("message"), word))
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
if bad:
    sys.exit(1)
print("PASS: CEL: %d cases, each allowed or denied as it should be, with its reason" % len(cases))
