#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/base/node-guard.yaml, the ValidatingAdmissionPolicy that holds gslice-node to its own
Node (issue 18, deliverable 3): its structure (v1, nodes UPDATE, matched on gslice-node's
service account only, bound with Deny), and, where a CEL evaluator is at hand (celpolicy.py:
node and the npm package @marcbachmann/cel-js, found through GSLICE_CEL_JS), its rules on the
cases that matter: the agent writing its own Node's gslice.io/gpus -- allowed; another Node, a
token without a node, a label, a taint, another annotation changed, added or removed --
denied, each by the rule that says so; the kubelet's writes -- not matched. Without an
evaluator that part is skipped (said so, exit 77 when nothing else failed)."""
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import celpolicy  # noqa: E402 (it skips, 77, without python3-yaml)
from celpolicy import check  # noqa: E402

DEPLOY = celpolicy.deploy_dir()
GUARD = os.path.join(DEPLOY, "base", "node-guard.yaml")
AGENT = "system:serviceaccount:gslice-system:gslice-node"


guard = celpolicy.Policy(GUARD)
spec = guard.spec
check(not guard.problems(AGENT), "; ".join(guard.problems(AGENT)))
rules = spec["matchConstraints"]["resourceRules"]
check([r["resources"] for r in rules] == [["nodes"]] and
      all("UPDATE" in r["operations"] for r in rules), "rules %s" % rules)
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
    return celpolicy.user(name, (on,) if on else None, "gslice-node-x")


G = "gslice.io/gpus"
base_ann = {"node.alpha.kubernetes.io/ttl": "0", G: '{"version":1}'}
base_lab = {"kubernetes.io/hostname": "node-a", "gslice.io/gpu-node": "true"}
old = node(ann=base_ann, labels=base_lab)


def edit(f):
    n = copy.deepcopy(old)
    f(n)
    return n


def upd(u, obj):
    return celpolicy.request("UPDATE", obj, old, u)


cases = [  # (what, request, verdict, a word the refusal's message must hold)
    ("its own node's gslice.io/gpus",
     upd(user(), edit(lambda n: n["metadata"]["annotations"].update({G: '{"version":1,"x":2}'}))),
     True, None),
    ("the first inventory on a node without annotations",
     celpolicy.request("UPDATE", node(ann={G: "{}"}, labels=base_lab), node(labels=base_lab),
                       user()), True, None),
    ("another node", upd(user(on="node-b"),
                         edit(lambda n: n["metadata"]["annotations"].update({G: "{}"}))),
     False, "its pod runs on"),
    ("a token without a node", upd(user(on=None),
                                   edit(lambda n: n["metadata"]["annotations"].update({G: "{}"}))),
     False, "its pod runs on"),
    ("a label changed", upd(user(), edit(lambda n: n["metadata"]["labels"].update(
        {"gslice.io/gpu-node": "false"}))), False, "spec or labels"),
    ("a label added", upd(user(), edit(lambda n: n["metadata"]["labels"].update({"x": "1"}))),
     False, "spec or labels"),
    ("a taint added", upd(user(), edit(lambda n: n["spec"].update(
        {"taints": [{"key": "k", "effect": "NoSchedule"}]}))), False, "spec or labels"),
    ("another annotation changed", upd(user(), edit(lambda n: n["metadata"]["annotations"].update(
        {"node.alpha.kubernetes.io/ttl": "5"}))), False, "only the annotation"),
    ("another annotation added", upd(user(), edit(
        lambda n: n["metadata"]["annotations"].update({"x": "1"}))), False, "only the annotation"),
    ("another annotation removed", upd(user(), edit(
        lambda n: n["metadata"]["annotations"].pop("node.alpha.kubernetes.io/ttl"))), False,
     "only the annotation"),
    ("the kubelet changing labels", upd(user("system:node:node-a", on=None), edit(
        lambda n: n["metadata"]["labels"].update({"x": "1"}))), celpolicy.UNMATCHED, None),
]

celpolicy.verify(guard, cases)
