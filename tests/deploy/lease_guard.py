#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/base/lease-guard.yaml, the ValidatingAdmissionPolicy that holds gslice-node to its own
liveness Lease: its structure (v1, leases CREATE and UPDATE -- every write verb gslice-node's
Role grants -- matched on gslice-node's service account only, bound with Deny), and, where a
CEL evaluator is at hand (celpolicy.py: node and the npm package @marcbachmann/cel-js, found
through GSLICE_CEL_JS), its rules on the cases that matter: the agent creating or renewing
gslice-system/gslice-node-<its node> held by its node -- allowed; another node's Lease, its own
Lease's name with another holder or none, its Lease's name in another namespace, a token with
no node (or two) -- denied, the last saying the token names no node; anyone else's Leases (the
kubelet's, the scheduler's, a namesake account in another namespace) -- not matched. Without
an evaluator that part is skipped (said so, exit 77 when nothing else failed)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import celpolicy  # noqa: E402 (it skips, 77, without python3-yaml)
from celpolicy import check  # noqa: E402

DEPLOY = celpolicy.deploy_dir()
GUARD = os.path.join(DEPLOY, "base", "lease-guard.yaml")
NODE = os.path.join(DEPLOY, "base", "node", "node.yaml")
AGENT = "system:serviceaccount:gslice-system:gslice-node"
NS = "gslice-system"


guard = celpolicy.Policy(GUARD)
spec = guard.spec
check(not guard.problems(AGENT), "; ".join(guard.problems(AGENT)))
rules = spec["matchConstraints"]["resourceRules"]
check([(r["apiGroups"], r["resources"]) for r in rules] == [(["coordination.k8s.io"], ["leases"])],
      "rules %s" % rules)
ops = set(rules[0]["operations"])
# Every write gslice-node's Role allows on leases is matched (a verb left out is unguarded).
role = next(d for d in celpolicy.objects(NODE)
            if d["kind"] == "Role" and d["metadata"]["name"] == "gslice-node")
writes = celpolicy.writes(role, "leases")
check({"CREATE", "UPDATE"} <= writes <= ops,
      "operations %s do not cover the Role's writes %s" % (sorted(ops), sorted(writes)))
print("PASS: the policy parses: v1, leases %s (the Role's writes %s), gslice-node's service "
      "account, Deny" % (sorted(ops), sorted(writes)))


def lease(name="gslice-node-node-a", ns=NS, holder="node-a"):
    spec_ = {"leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"}
    if holder is not None:
        spec_["holderIdentity"] = holder
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "7"}, "spec": spec_}


def user(name=AGENT, on=("node-a",)):
    return celpolicy.user(name, on, "gslice-node-x")


def req(u, obj, op="UPDATE"):
    """obj created, or renewed (over itself: the renewal's change does not matter here)."""
    return celpolicy.request(op, obj, obj if op == "UPDATE" else None, u)


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
    ("the kubelet renewing its node Lease",
     req(user("system:node:node-a", on=None), lease("node-a", "kube-node-lease", "node-a")),
     celpolicy.UNMATCHED, None),
    ("gslice-scheduler's leader Lease",
     req(user("system:serviceaccount:gslice-system:gslice-scheduler", on=("node-c",)),
         lease("gslice-scheduler", holder="gslice-scheduler-x_1")), celpolicy.UNMATCHED, None),
    ("a gslice-node account of another namespace",
     req(user("system:serviceaccount:other:gslice-node", on=("node-b",)), lease()),
     celpolicy.UNMATCHED, None),
]

celpolicy.verify(guard, cases)
