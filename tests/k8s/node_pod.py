#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A pod for gslice-node's tests, as the API server would hold it once gslice-extender bound it:
declared gslice.io resources, spec.nodeName, gslice.io/assigned and its signature (signing.py,
made for the pod's UID the API server gave it). Prints the pod's UID.

  node_pod.py --api URL --key FILE --name NAME [--namespace NS] [--node NODE]
              [--assigned-node NODE] [--no-sign] [--no-assign] [--assigned TEXT]
              CONTAINER...

CONTAINER is NAME=UUID:MEMORY:COMPUTE[,UUID:MEMORY:COMPUTE...][/LIMIT][@init]: the container
asks for as many gslice.io/gpu as it has parts, for the parts' memory and compute in total, and
the assignment gives it those parts, in that order, with computeLimit LIMIT (default 100).
--assigned TEXT writes TEXT as the annotation instead (signed unless --no-sign); --no-assign
writes no annotation. Standard library only."""

import argparse
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import signing  # noqa: E402


def req(api, method, path, body=None, ctype="application/json"):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(api + path, data=data, method=method,
                               headers={"Content-Type": ctype})
    with urllib.request.urlopen(r, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def parse(spec):
    name, rest = spec.split("=", 1)
    init = rest.endswith("@init")
    if init:
        rest = rest[:-5]
    limit = 100
    if "/" in rest:
        rest, lim = rest.rsplit("/", 1)
        limit = int(lim)
    parts = []
    for p in rest.split(","):
        uuid, mem, comp = p.split(":")
        parts.append({"uuid": uuid, "memory": int(mem), "compute": int(comp)})
    return {"name": name, "init": init, "parts": parts, "limit": limit}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--node", default="node-a")
    ap.add_argument("--assigned-node")
    ap.add_argument("--no-sign", action="store_true")
    ap.add_argument("--no-assign", action="store_true")
    ap.add_argument("--assigned")
    ap.add_argument("containers", nargs="+")
    a = ap.parse_args()
    cs = [parse(c) for c in a.containers]
    # Each GPU's index as the node's inventory (gslice.io/gpus) says, as the extender writes it.
    index = {}
    try:
        node = req(a.api, "GET", "/api/v1/nodes/%s" % a.node)
        inv = json.loads(node["metadata"]["annotations"]["gslice.io/gpus"])
        index = {g["uuid"]: g["index"] for g in inv["gpus"]}
    except Exception:  # noqa: BLE001
        pass

    def ctr(c):
        return {"name": c["name"], "image": "x", "resources": {"limits": {
            "gslice.io/gpu": str(len(c["parts"])),
            "gslice.io/gpu-memory": str(sum(p["memory"] for p in c["parts"])),
            "gslice.io/gpu-compute": str(sum(p["compute"] for p in c["parts"]))}}}
    spec = {"nodeName": a.node, "containers": [ctr(c) for c in cs if not c["init"]]}
    inits = [ctr(c) for c in cs if c["init"]]
    if inits:
        spec["initContainers"] = inits
    pod = req(a.api, "POST", "/api/v1/namespaces/%s/pods" % a.namespace,
              {"metadata": {"name": a.name, "namespace": a.namespace}, "spec": spec})
    uid = pod["metadata"]["uid"]
    if not a.no_assign:
        text = a.assigned
        if text is None:
            text = json.dumps({"version": 1, "node": a.assigned_node or a.node, "containers": [
                {"name": c["name"], "init": c["init"],
                 "gpus": [{"uuid": p["uuid"], "index": index.get(p["uuid"], j),
                           "memory": p["memory"],
                           "compute": p["compute"]} for j, p in enumerate(c["parts"])],
                 "computeLimit": c["limit"], "priority": "normal", "weight": 1} for c in cs]},
                separators=(",", ":"))
        ann = {"gslice.io/assigned": text}
        if not a.no_sign:
            ann["gslice.io/assigned-signature"] = signing.sign_assigned(
                a.key, uid, a.assigned_node or a.node, text)
        req(a.api, "PATCH", "/api/v1/namespaces/%s/pods/%s" % (a.namespace, a.name),
            {"metadata": {"annotations": ann}}, "application/merge-patch+json")
    print(uid)


if __name__ == "__main__":
    main()
