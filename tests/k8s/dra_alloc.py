#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for kube-scheduler's DRA allocator (structured parameters, KEP-4381, with
consumable capacity, KEP-5075), written from the resource.k8s.io/v1 API reference:

  - a request (spec.devices.requests[].exactly) names a DeviceClass, which must exist; the
    class's selectors and the request's must all hold for a device (CEL: only the forms
    `device.driver == 'X'` and `device.attributes['domain'].name == V`, joined by &&, are
    modelled; another expression is an error saying so, never a silent match);
  - the devices are those of ResourceSlices that are local to the node (spec.nodeName) or on
    all nodes (spec.allNodes), of each pool only the slices of its highest generation;
    searched in order of (driver, pool, slice name, device order): the first that fits is
    taken (no scoring: kube-scheduler's allocator takes the first fit);
  - allocationMode ExactCount (default, count default 1) takes `count` distinct devices; All
    takes every matching device of the node, and fails if one of them cannot be allocated;
  - a device without allowMultipleAllocations is allocated once in the whole cluster; its
    capacity.requests only filter (the device must have each named capacity, with a value
    >= the amount, "semantically equivalent to a CEL selector ... compareTo"), no
    consumedCapacity and no shareID are written;
  - a device with allowMultipleAllocations may be allocated many times; each allocation
    consumes every capacity of the device ("all of its capacity is consumable"): a capacity
    the request names is rounded by its requestPolicy (validValues: the smallest valid value
    >= the amount, none: the device does not fit; validRange: below min -> min, with step ->
    min + n*step rounded up, over max -> does not fit; no policy: the amount as is); a capacity
    the request does not name consumes the policy's default, or the whole value when there is
    no policy or no default; the device fits while, for every capacity, the sum consumed by
    all claims allocated on it plus this one is <= its value. Each such allocation gets a
    shareID (a fresh lowercase UUID, as the scheduler generates them) and consumedCapacity
    with every capacity of the device, zeros included;
  - status.allocation: devices.results[] {request, driver, pool, device[, shareID,
    consumedCapacity]}, devices.config[]: for each request the class's configs (source
    FromClass, requests [the request]) first, then the claim's own (source FromClaim, with
    their requests), and nodeSelector matchFields metadata.name In [node] for node-local
    devices; written with reservedFor (the pod) in one update of /status at the claim's
    resourceVersion (a 409 reads the claim again and allocates again).
Not modelled: firstAvailable, constraints (matchAttribute), adminAccess, taints and
tolerations, counters (consumesCounters), nodeSelector / perDeviceNodeSelection slices,
binding conditions, more than one share of one device inside one request.

As a program (the e2e tests use it as kube-scheduler):
  dra_alloc.py --api URL allocate --namespace NS --claim NAME --node NODE --pod NAME:UID
  dra_alloc.py --api URL release  --namespace NS --claim NAME --pod-uid UID
release takes the pod out of reservedFor and, once nobody holds the claim, clears its
allocation (and the drivers' status.devices with it, which may name allocated devices only), as
the resource claim controller does when the last consumer is gone.
"""

import argparse
import json
import math
import os
import re
import sys
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apiserver_resource import is_binary, quantity, quantity_str  # noqa: E402

R = "/apis/resource.k8s.io/v1"


class Unschedulable(Exception):
    """No allocation: why, as the scheduler's "cannot allocate all claims" says."""


# ---- selectors (a CEL subset) ----------------------------------------------------------------
CEL_TERM = re.compile(r"""\s*device\.(?:(driver)|attributes\[(['"])([^'"]+)\2\]\.([A-Za-z_]\w*))"""
                      r"""\s*==\s*(?:(['"])(.*?)\5|(-?\d+)|(true|false))\s*""")


def cel_matches(expr, drv, dev):
    """Whether the device matches a selector of the modelled subset; ValueError otherwise."""
    for term in expr.split("&&"):
        m = CEL_TERM.fullmatch(term)
        if not m:
            raise ValueError("CEL selector %r is not modelled by the allocator stand-in (only "
                             "device.driver == 'X' and device.attributes['d'].name == V, &&)"
                             % expr)
        want = m.group(6) if m.group(5) else int(m.group(7)) if m.group(7) else \
            m.group(8) == "true"
        if m.group(1):
            got = drv
        else:
            domain, name = m.group(3), m.group(4)
            attrs = dev.get("attributes") or {}
            a = attrs.get(domain + "/" + name) or (attrs.get(name) if domain == drv else None)
            got = None if a is None else next(iter(a.values()))
        if got != want or type(got) is not type(want):
            return False
    return True


# ---- capacity ---------------------------------------------------------------------------------
def consumed_amount(cap, requested):
    """What one allocation consumes of capacity `cap` ({value, requestPolicy}) when the
    request asks `requested` (a Fraction, or None when it does not name it); None when the
    request violates the policy (the device cannot be allocated)."""
    value = quantity(cap["value"])
    pol = cap.get("requestPolicy")
    if requested is None:
        if pol and pol.get("default") is not None:
            return quantity(pol["default"])
        return value
    if not pol:
        return requested
    if pol.get("validValues") is not None:
        fit = [v for v in (quantity(x) for x in pol["validValues"]) if v >= requested]
        return min(fit) if fit else None
    rng = pol.get("validRange")
    if rng is not None:
        lo = quantity(rng["min"])
        x = max(requested, lo)
        if rng.get("step") is not None:
            step = quantity(rng["step"])
            x = lo + math.ceil((x - lo) / step) * step
        if rng.get("max") is not None and x > quantity(rng["max"]):
            return None
        return x
    return requested


def share_consumption(dev, requests):
    """{capacity: amount} one share of a multi-allocatable device consumes, or None."""
    out = {}
    for name, cap in (dev.get("capacity") or {}).items():
        amount = consumed_amount(cap, requests.get(name))
        if amount is None:
            return None
        out[name] = amount
    return out


def fits(dev, used, requests):
    """The consumption of one more allocation of dev (None for an exclusive device) if it
    fits given `used` ({"exclusive": bool, "shares": [{cap: amount}]}), else False."""
    caps = dev.get("capacity") or {}
    for name, amount in requests.items():  # the filter every request applies
        if name not in caps or quantity(caps[name]["value"]) < amount:
            return False
    if not dev.get("allowMultipleAllocations"):
        return None if not used["exclusive"] and not used["shares"] else False
    want = share_consumption(dev, requests)
    if want is None:
        return False
    for name, amount in want.items():
        total = sum(s.get(name, 0) for s in used["shares"]) + amount
        if total > quantity(caps[name]["value"]):
            return False
    return want


# ---- the allocator ------------------------------------------------------------------------------
def node_devices(slices, node):
    """[(driver, pool, device)] available on node, in the order the allocator searches."""
    pools = {}
    for s in slices:
        sp = s["spec"]
        if not (sp.get("nodeName") == node or sp.get("allNodes")):
            continue
        key = (sp["driver"], sp["pool"]["name"])
        pools.setdefault(key, []).append(s)
    out = []
    for key in sorted(pools):
        gen = max(s["spec"]["pool"]["generation"] for s in pools[key])
        for s in sorted((s for s in pools[key] if s["spec"]["pool"]["generation"] == gen),
                        key=lambda s: s["metadata"]["name"]):
            out += [(key[0], key[1], d) for d in s["spec"].get("devices") or []]
    return out


def usage(claims, skip_uid=None):
    """{(driver, pool, device): {"exclusive", "shares"}} over the allocated claims."""
    use = {}
    for c in claims:
        if c["metadata"].get("uid") == skip_uid:
            continue
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                "results") or []:
            u = use.setdefault((r["driver"], r["pool"], r["device"]),
                               {"exclusive": False, "shares": []})
            if r.get("shareID") is None:
                u["exclusive"] = True
            else:
                u["shares"].append({k: quantity(v) for k, v in
                                    (r.get("consumedCapacity") or {}).items()})
    return use


def result(req_name, drv, pool, dev, want):
    r = {"request": req_name, "driver": drv, "pool": pool, "device": dev["name"]}
    if want is not None:
        caps = dev.get("capacity") or {}
        r["shareID"] = str(uuid.uuid4())
        r["consumedCapacity"] = {k: quantity_str(v, is_binary(caps[k]["value"]))
                                 for k, v in sorted(want.items())}
    return r


def allocate(claim, slices, classes, claims, node):
    """The status.allocation kube-scheduler would write for `claim` on `node`, given the
    ResourceSlices, DeviceClasses ({name: class}) and every claim (allocated ones count);
    Unschedulable when it does not fit."""
    devices = node_devices(slices, node)
    use = usage(claims, claim["metadata"].get("uid"))
    results, config = [], []
    for req in claim["spec"]["devices"].get("requests") or []:
        ex = req.get("exactly")
        if ex is None:
            raise Unschedulable("request %s: firstAvailable is not modelled" % req["name"])
        cls = classes.get(ex["deviceClassName"])
        if cls is None:
            raise Unschedulable('request %s: device class %s does not exist'
                                % (req["name"], ex["deviceClassName"]))
        sels = [s["cel"]["expression"] for s in (cls.get("spec") or {}).get("selectors") or []]
        sels += [s["cel"]["expression"] for s in ex.get("selectors") or []]
        want = {k: quantity(v) for k, v in ((ex.get("capacity") or {}).get("requests") or {}).items()}
        mode = ex.get("allocationMode", "ExactCount")
        count = ex.get("count", 1)
        chosen = []
        for drv, pool, dev in devices:
            if mode == "ExactCount" and len(chosen) == count:
                break
            if not all(cel_matches(e, drv, dev) for e in sels):
                continue
            key = (drv, pool, dev["name"])
            u = use.setdefault(key, {"exclusive": False, "shares": []})
            got = fits(dev, u, want)
            if got is False:
                if mode == "All":
                    raise Unschedulable("request %s: device %s/%s/%s matches but cannot be "
                                        "allocated (allocationMode All)" % ((req["name"],) + key))
                continue
            chosen.append(result(req["name"], drv, pool, dev, got))
            if got is None:
                u["exclusive"] = True
            else:
                u["shares"].append(got)
        if not chosen or (mode == "ExactCount" and len(chosen) < count):
            raise Unschedulable("request %s: %d of %d devices of class %s fit on node %s" % (
                req["name"], len(chosen), count if mode == "ExactCount" else 1,
                ex["deviceClassName"], node))
        results += chosen
        for c in (cls.get("spec") or {}).get("config") or []:
            config.append(dict(c, source="FromClass", requests=[req["name"]]))
    for c in claim["spec"]["devices"].get("config") or []:
        config.append(dict(c, source="FromClaim"))
    alloc = {"devices": {"results": results}}
    if config:
        alloc["devices"]["config"] = config
    alloc["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    return alloc


# ---- through the API server ---------------------------------------------------------------------
class Api:
    def __init__(self, base, token=None):
        self.base, self.token = base.rstrip("/"), token

    def call(self, method, path, body=None):
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.base + path, method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    def get(self, path):
        code, obj = self.call("GET", path)
        if code != 200:
            raise RuntimeError("GET %s: %d %s" % (path, code, obj.get("message")))
        return obj


def claim_path(ns, name):
    return "%s/namespaces/%s/resourceclaims/%s" % (R, ns, name)


def allocate_claim(api, ns, name, node, pods):
    """Allocates (unless allocated) and reserves the claim for pods [(name, uid)], as the
    scheduler's DRA plugin does in one status update; returns the claim written."""
    for _ in range(10):
        claim = api.get(claim_path(ns, name))
        st = dict(claim.get("status") or {})
        if st.get("allocation") is None:
            slices = api.get(R + "/resourceslices")["items"]
            classes = {c["metadata"]["name"]: c for c in api.get(R + "/deviceclasses")["items"]}
            claims = api.get(R + "/resourceclaims")["items"]
            st["allocation"] = allocate(claim, slices, classes, claims, node)
        held = list(st.get("reservedFor") or [])
        for pod, uid in pods:
            if not any(r["uid"] == uid for r in held):
                held.append({"resource": "pods", "name": pod, "uid": uid})
        st["reservedFor"] = held
        claim["status"] = st
        code, obj = api.call("PUT", claim_path(ns, name) + "/status", claim)
        if code == 200:
            return obj
        if code != 409:
            raise RuntimeError("PUT status of %s/%s: %d %s" % (ns, name, code, obj.get("message")))
    raise RuntimeError("claim %s/%s: conflicts 10 times in a row" % (ns, name))


def release_claim(api, ns, name, pod_uid):
    """Takes the pod out of reservedFor; the last one out clears the allocation."""
    for _ in range(10):
        claim = api.get(claim_path(ns, name))
        st = dict(claim.get("status") or {})
        st["reservedFor"] = [r for r in st.get("reservedFor") or [] if r["uid"] != pod_uid]
        if not st["reservedFor"]:
            st.pop("reservedFor")
            st.pop("allocation", None)
            st.pop("devices", None)  # they must name allocated devices: none are now
        claim["status"] = st
        code, obj = api.call("PUT", claim_path(ns, name) + "/status", claim)
        if code == 200:
            return obj
        if code != 409:
            raise RuntimeError("PUT status of %s/%s: %d %s" % (ns, name, code, obj.get("message")))
    raise RuntimeError("claim %s/%s: conflicts 10 times in a row" % (ns, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api", required=True)
    ap.add_argument("--token")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("allocate")
    a.add_argument("--namespace", default="default")
    a.add_argument("--claim", required=True)
    a.add_argument("--node", required=True)
    a.add_argument("--pod", action="append", default=[], help="NAME:UID")
    r = sub.add_parser("release")
    r.add_argument("--namespace", default="default")
    r.add_argument("--claim", required=True)
    r.add_argument("--pod-uid", required=True)
    args = ap.parse_args()
    api = Api(args.api, args.token)
    try:
        if args.cmd == "allocate":
            out = allocate_claim(api, args.namespace, args.claim, args.node,
                                 [tuple(p.split(":", 1)) for p in args.pod])
        else:
            out = release_claim(api, args.namespace, args.claim, args.pod_uid)
    except (Unschedulable, ValueError, RuntimeError) as e:
        sys.exit("dra_alloc: %s" % e)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
