#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/overlays/dra/resourceslice-guard.yaml, the ValidatingAdmissionPolicy that holds
gslice-node --mode dra to the ResourceSlices of its own node and of driver gslice.io: as
`kubectl kustomize deploy/overlays/dra` renders it (where kubectl is at hand; the file itself
otherwise), its structure (v1, Fail, resourceslices matched for every write the ClusterRole
gslice-node-dra grants, on the service account the DaemonSet runs as, bound with Deny), and,
where a CEL evaluator is at hand (celpolicy.py: node and @marcbachmann/cel-js through
GSLICE_CEL_JS), its rules: the agent whose token names node-a creating, updating and deleting
a gslice.io slice of node-a -- allowed; another node's slice created, updated or deleted, a
slice moved from node-b to node-a or from node-a to node-b, one for all nodes, another
driver's slice (or one turned into or out of gslice.io), a token without the node-name extra
(or with no extras, or naming two nodes) -- denied, each by the rule that says so; everyone
else (the kubelet, another driver's agent, gslice-node of the device-plugin mode, a namesake
account in another namespace) -- not matched. Without an evaluator that part is skipped (said
so, exit 77 when nothing else failed)."""
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import celpolicy  # noqa: E402 (it skips, 77, without python3-yaml)
from celpolicy import check  # noqa: E402

DEPLOY = celpolicy.deploy_dir()
OVERLAY = os.path.join(DEPLOY, "overlays", "dra")
GUARD = os.path.join(OVERLAY, "resourceslice-guard.yaml")
NAME = "gslice-resourceslice-guard"
AGENT = "system:serviceaccount:gslice-system:gslice-node-dra"
RESOURCE = ("resource.k8s.io", "v1", "resourceslices")


def check_rendered(objs, ops):
    """The DaemonSet's service account is the one matched; the ClusterRole's writes are."""
    ds = [o for o in objs if o["kind"] == "DaemonSet" and
          o["metadata"]["name"] == "gslice-node-dra"]
    check(len(ds) == 1, "no DaemonSet gslice-node-dra in the render")
    sa = "system:serviceaccount:%s:%s" % (ds[0]["metadata"].get("namespace", "default"),
                                          ds[0]["spec"]["template"]["spec"]["serviceAccountName"])
    check(sa == AGENT, "gslice-node-dra runs as %s, the policy matches %s" % (sa, AGENT))
    roles = [o for o in objs if o["kind"] == "ClusterRole" and
             o["metadata"]["name"] == "gslice-node-dra"]
    check(len(roles) == 1, "no ClusterRole gslice-node-dra in the render")
    writes = celpolicy.writes(roles[0], "resourceslices")
    check("CREATE" in writes and (writes <= ops or "*" in ops),
          "operations %s do not cover the ClusterRole's writes %s" % (sorted(ops), sorted(writes)))
    return writes


objs = celpolicy.render(OVERLAY)
pol = celpolicy.Policy(objs if objs is not None else GUARD, NAME)
spec = pol.spec
check(not pol.problems(AGENT), "; ".join(pol.problems(AGENT)))
rules = spec["matchConstraints"]["resourceRules"]
check([(r["apiGroups"], r["resources"]) for r in rules] ==
      [(["resource.k8s.io"], ["resourceslices"])], "rules %s" % rules)
ops = set(rules[0]["operations"])
if objs is not None:
    writes = check_rendered(objs, ops)
    print("PASS: the rendered policy: v1, Fail, resourceslices %s (the ClusterRole's writes %s), "
          "gslice-node-dra's service account (the DaemonSet's), Deny" % (sorted(ops),
                                                                         sorted(writes)))
else:
    print("PASS: the policy parses: v1, Fail, resourceslices %s, gslice-node-dra's service "
          "account, Deny" % sorted(ops))
    print("SKIP (part): the render (no kubectl): the DaemonSet's account, the ClusterRole's "
          "writes")


def rslice(node="node-a", driver="gslice.io"):
    s = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
         "metadata": {"name": "%s-%s-x7k2p" % (node or "all", driver), "resourceVersion": "3"},
         "spec": {"driver": driver,
                  "pool": {"name": node or "all", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0"}]}}
    if node:
        s["spec"]["nodeName"] = node
    else:
        s["spec"]["allNodes"] = True
    return s


def user(name=AGENT, on=("node-a",)):
    return celpolicy.user(name, on, "gslice-node-dra-x")


def newer(s):
    s = copy.deepcopy(s)
    s["spec"]["pool"]["generation"] += 1
    return s


def req(op, new=None, old=None, u=None):
    return celpolicy.request(op, new, old, u or user(), RESOURCE)


A, B, OTHER = rslice(), rslice("node-b"), rslice(driver="gpu.example.com")
NODE, DRIVER = "of the node its pod runs on", "of driver gslice.io"
cases = [  # (what, request, verdict, a word the refusal's message must hold)
    ("its node's slice created", req("CREATE", A), True, None),
    ("its node's slice updated", req("UPDATE", newer(A), A), True, None),
    ("its node's slice deleted", req("DELETE", old=A), True, None),
    ("another node's slice created", req("CREATE", B), False, NODE),
    ("another node's slice updated", req("UPDATE", newer(B), B), False, NODE),
    ("another node's slice deleted", req("DELETE", old=B), False, NODE),
    ("a slice moved from node-b to node-a", req("UPDATE", rslice(), B), False, NODE),
    ("its node's slice moved to node-b", req("UPDATE", B, A), False, NODE),
    ("a slice for all nodes created", req("CREATE", rslice(None)), False, NODE),
    ("another driver's slice on its node created", req("CREATE", OTHER), False, DRIVER),
    ("another driver's slice on its node updated", req("UPDATE", newer(OTHER), OTHER), False,
     DRIVER),
    ("another driver's slice on its node deleted", req("DELETE", old=OTHER), False, DRIVER),
    ("another driver's slice made gslice.io's", req("UPDATE", A, OTHER), False, DRIVER),
    ("its slice made another driver's", req("UPDATE", OTHER, A), False, DRIVER),
    ("a token whose extras lack the node", req("CREATE", A, u=user(on=())), False, NODE),
    ("a token with no extras", req("DELETE", old=A, u=user(on=None)), False, NODE),
    ("a token naming two nodes", req("CREATE", A, u=user(on=("node-a", "node-b"))), False, NODE),
    ("a token naming two nodes, deleting", req("DELETE", old=A, u=user(on=("node-a", "node-b"))),
     False, NODE),
    ("the kubelet deleting its node's slices", req("DELETE", old=OTHER,
                                                   u=user("system:node:node-a", None)),
     celpolicy.UNMATCHED, None),
    ("another driver's agent", req("CREATE", OTHER, u=user(
        "system:serviceaccount:kube-system:gpu-example-kubelet-plugin")), celpolicy.UNMATCHED,
     None),
    ("gslice-node of the device-plugin mode",
     req("CREATE", OTHER, u=user("system:serviceaccount:gslice-system:gslice-node")),
     celpolicy.UNMATCHED, None),
    ("a gslice-node-dra account of another namespace",
     req("CREATE", B, u=user("system:serviceaccount:other:gslice-node-dra")),
     celpolicy.UNMATCHED, None),
]

celpolicy.verify(pol, cases)
