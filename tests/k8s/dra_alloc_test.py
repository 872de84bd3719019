#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the allocator stand-in (dra_alloc.py) against the rules of KEP-5075 and the
resource.k8s.io/v1 reference it is written from, and of the API server stand-in's
resource.k8s.io validation (apiserver_resource.py)."""

import copy
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apiserver_resource as res  # noqa: E402
import dra_alloc as A  # noqa: E402
from apiserver_resource import quantity as q  # noqa: E402

GiB = 2**30
CLASS = {"gslice.io": {"metadata": {"name": "gslice.io"}, "spec": {
    "selectors": [{"cel": {"expression": "device.driver == 'gslice.io'"}}],
    "config": [{"opaque": {"driver": "gslice.io", "parameters": {
        "apiVersion": "gslice.io/v1", "kind": "SliceConfig", "priority": "high"}}}]}}}


def gpu(name, multi=True, mem="8Gi", mem_policy=None, compute_policy=None, extra=None):
    caps = {"memory": {"value": mem}, "compute": {"value": "100"}}
    if mem_policy:
        caps["memory"]["requestPolicy"] = mem_policy
    if compute_policy:
        caps["compute"]["requestPolicy"] = compute_policy
    caps.update(extra or {})
    d = {"name": name, "attributes": {"index": {"int": int(name.split("-")[1])}}, "capacity": caps}
    if multi:
        d["allowMultipleAllocations"] = True
    return d


def rslice(devices, node="node-a", driver="gslice.io", name=None, gen=1):
    return {"metadata": {"name": name or "%s-%s" % (node, driver)}, "spec": {
        "driver": driver, "nodeName": node, "devices": devices,
        "pool": {"name": node, "generation": gen, "resourceSliceCount": 1}}}


def claim(requests, config=None, name="c", status=None):
    reqs = []
    for i, r in enumerate(requests):
        ex = {"deviceClassName": "gslice.io"}
        ex.update(r)
        reqs.append({"name": "r%d" % i, "exactly": ex})
    c = {"metadata": {"name": name, "namespace": "default", "uid": str(uuid.uuid4())},
         "spec": {"devices": {"requests": reqs}}}
    if config:
        c["spec"]["devices"]["config"] = config
    if status:
        c["status"] = status
    return c


def cap(memory=None, compute=None):
    r = {}
    if memory is not None:
        r["memory"] = memory
    if compute is not None:
        r["compute"] = compute
    return {"capacity": {"requests": r}}


MEM_RANGE = {"default": "256Mi", "validRange": {"min": "256Mi", "step": "256Mi"}}
COMPUTE_RANGE = {"default": "1", "validRange": {"min": "1", "max": "100", "step": "1"}}


class Rounding(unittest.TestCase):
    def test_range_rounds_up_to_step(self):
        c = {"value": "8Gi", "requestPolicy": MEM_RANGE}
        self.assertEqual(A.consumed_amount(c, q("300Mi")), q("512Mi"))
        self.assertEqual(A.consumed_amount(c, q("512Mi")), q("512Mi"))

    def test_range_below_min_is_min(self):
        c = {"value": "8Gi", "requestPolicy": MEM_RANGE}
        self.assertEqual(A.consumed_amount(c, q("1Mi")), q("256Mi"))

    def test_range_over_max_does_not_fit(self):
        c = {"value": "100", "requestPolicy": {"default": "1", "validRange": {
            "min": "1", "max": "50", "step": "1"}}}
        self.assertIsNone(A.consumed_amount(c, q("51")))
        self.assertEqual(A.consumed_amount(c, q("50")), 50)

    def test_range_rounding_past_max_does_not_fit(self):
        c = {"value": "100", "requestPolicy": {"default": "10", "validRange": {
            "min": "10", "max": "90", "step": "20"}}}
        self.assertEqual(A.consumed_amount(c, q("11")), 30)
        self.assertIsNone(A.consumed_amount(c, q("91")))  # 91 -> 110 > 90

    def test_range_without_step_is_as_is(self):
        c = {"value": "100", "requestPolicy": {"default": "5", "validRange": {"min": "5"}}}
        self.assertEqual(A.consumed_amount(c, q("37")), 37)

    def test_valid_values_next_up(self):
        c = {"value": "100", "requestPolicy": {"default": "25", "validValues": ["25", "50", "100"]}}
        self.assertEqual(A.consumed_amount(c, q("26")), 50)
        self.assertEqual(A.consumed_amount(c, q("50")), 50)
        self.assertEqual(A.consumed_amount(c, q("1")), 25)
        self.assertIsNone(A.consumed_amount(c, q("101")))

    def test_unrequested_default_or_whole(self):
        self.assertEqual(A.consumed_amount({"value": "8Gi", "requestPolicy": MEM_RANGE}, None),
                         q("256Mi"))
        self.assertEqual(A.consumed_amount({"value": "8Gi"}, None), 8 * GiB)
        self.assertEqual(A.consumed_amount({"value": "8Gi"}, q("3Gi")), 3 * GiB)


# The memory policy gslice-node publishes (dra_api.c): from one CUDA context (768Mi) in 2 MiB
# steps to the GPU's memory. CapacityRequestPolicyRange's reference: "If the requested amount is
# less than Min, it is rounded up to the Min value"; "rounded up to the next value equal to Min +
# (n * Step)"; "If the requested or rounded amount exceeds Max (if set), the request does not
# satisfy the policy, and the device cannot be allocated"; no entry: Default.
FLOOR = q("768Mi")
NODE_MEM = {"default": "80Gi", "validRange": {"min": "768Mi", "max": "80Gi", "step": "2Mi"}}


class ContextFloor(unittest.TestCase):
    def test_below_the_floor_is_the_floor(self):
        c = {"value": "81921Mi", "requestPolicy": NODE_MEM}
        for asked in ("0", "1", "2Mi", "256Mi", "767Mi", "768Mi"):
            self.assertEqual(A.consumed_amount(c, q(asked)), FLOOR, asked)
        self.assertEqual(A.consumed_amount(c, q("769Mi")), q("770Mi"))
        self.assertEqual(A.consumed_amount(c, q("1001Mi")), q("1002Mi"))
        self.assertEqual(A.consumed_amount(c, q("80Gi")), q("80Gi"))
        self.assertIsNone(A.consumed_amount(c, q("80Gi") + 1))
        self.assertEqual(A.consumed_amount(c, None), q("80Gi"))

    def test_allocation_never_below_the_floor(self):
        s = [rslice([gpu("gpu-0", mem="81921Mi", mem_policy=NODE_MEM,
                         compute_policy=COMPUTE_RANGE)])]
        a = A.allocate(claim([cap("2Mi", "5")]), s, CLASS, [], "node-a")
        self.assertEqual(a["devices"]["results"][0]["consumedCapacity"]["memory"], "768Mi")
        # A GPU of 1 GiB holds one floor-sized share of 2Mi requests, not 512 of them.
        s = [rslice([gpu("gpu-0", mem="1Gi", mem_policy={
            "default": "1Gi", "validRange": {"min": "768Mi", "max": "1Gi", "step": "2Mi"}},
            compute_policy=COMPUTE_RANGE)])]
        first = claim([cap("2Mi", "5")], name="a")
        first["status"] = {"allocation": A.allocate(first, s, CLASS, [], "node-a")}
        with self.assertRaises(A.Unschedulable):
            A.allocate(claim([cap("2Mi", "5")], name="b"), s, CLASS, [first], "node-a")

    def test_the_api_server_checks_the_range_against_the_value(self):
        def bad(pol, value, field):
            d = gpu("gpu-0", mem=value, mem_policy=pol)
            with self.assertRaises(res.Invalid) as e:
                res.validate("ResourceSlice", rslice([d]), None)
            self.assertEqual(e.exception.args[0],
                             "spec.devices[0].capacity[memory].requestPolicy" + field)
        # "Min ... less than or equal to the capacity value"; "Min + Step must be less than or
        # equal to the capacity value"; "requestPolicy.default must be more than or equal to
        # the minimum"; "Max (if set) and requestPolicy.default must be a multiple of Step".
        bad({"default": "512Mi", "validRange": {"min": "768Mi", "step": "2Mi"}}, "512Mi",
            ".validRange.min")
        bad({"default": "768Mi", "validRange": {"min": "768Mi", "step": "2Mi"}}, "768Mi",
            ".validRange.step")
        bad({"default": "512Mi", "validRange": {"min": "768Mi", "step": "2Mi"}}, "8Gi",
            ".default")
        bad({"default": "769Mi", "validRange": {"min": "768Mi", "step": "2Mi"}}, "8Gi",
            ".default")
        res.validate("ResourceSlice", rslice([gpu("gpu-0", mem="770Mi", mem_policy={
            "default": "770Mi", "validRange": {"min": "768Mi", "max": "770Mi", "step": "2Mi"}})]),
            None)


class Allocate(unittest.TestCase):
    def one(self, c, slices, claims=()):
        return A.allocate(c, slices, CLASS, list(claims), "node-a")

    def test_result_shape(self):
        s = [rslice([gpu("gpu-0", mem_policy=MEM_RANGE, compute_policy=COMPUTE_RANGE)])]
        cl = claim([cap("1Gi", "60")], config=[{"requests": ["r0"], "opaque": {
            "driver": "gslice.io", "parameters": {"apiVersion": "gslice.io/v1",
                                                  "kind": "SliceConfig", "computeLimit": 60}}}])
        a = self.one(cl, s)
        r = a["devices"]["results"]
        self.assertEqual(len(r), 1)
        self.assertEqual((r[0]["request"], r[0]["driver"], r[0]["pool"], r[0]["device"]),
                         ("r0", "gslice.io", "node-a", "gpu-0"))
        self.assertRegex(r[0]["shareID"], res.UUID)
        self.assertEqual(r[0]["consumedCapacity"], {"compute": "60", "memory": "1Gi"})
        self.assertEqual([c["source"] for c in a["devices"]["config"]], ["FromClass", "FromClaim"])
        self.assertEqual(a["devices"]["config"][0]["requests"], ["r0"])
        self.assertEqual(a["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
                         ["node-a"])

    def test_every_capacity_consumed_including_unrequested(self):
        extra = {"shares": {"value": "4", "requestPolicy": {"default": "1", "validRange": {
            "min": "1", "max": "4", "step": "1"}}}}
        s = [rslice([gpu("gpu-0", mem_policy=MEM_RANGE, compute_policy=COMPUTE_RANGE,
                         extra=extra)])]
        r = self.one(claim([cap(memory="1Gi")]), s)["devices"]["results"][0]
        self.assertEqual(r["consumedCapacity"], {"compute": "1", "memory": "1Gi", "shares": "1"})

    def test_no_policy_unrequested_takes_whole(self):
        s = [rslice([gpu("gpu-0"), gpu("gpu-1")])]
        first = claim([cap(memory="1Gi")], name="a")
        first["status"] = {"allocation": self.one(first, s)}
        r = first["status"]["allocation"]["devices"]["results"][0]
        self.assertEqual(r["consumedCapacity"]["compute"], "100")  # whole: no policy
        nxt = self.one(claim([cap(memory="1Gi")]), s, [first])
        self.assertEqual(nxt["devices"]["results"][0]["device"], "gpu-1")

    def test_sum_of_shares_bounded_first_fit(self):
        s = [rslice([gpu("gpu-0", compute_policy=COMPUTE_RANGE, mem_policy=MEM_RANGE),
                     gpu("gpu-1", compute_policy=COMPUTE_RANGE, mem_policy=MEM_RANGE)])]
        held = []
        for want, where in (("60", "gpu-0"), ("30", "gpu-0"), ("20", "gpu-1"), ("10", "gpu-0"),
                            ("80", "gpu-1"), ("1", None)):
            c = claim([cap("256Mi", want)])
            if where is None:
                with self.assertRaises(A.Unschedulable):
                    self.one(c, s, held)
                continue
            c["status"] = {"allocation": self.one(c, s, held)}
            self.assertEqual(c["status"]["allocation"]["devices"]["results"][0]["device"], where)
            held.append(c)

    def test_memory_bounded(self):
        s = [rslice([gpu("gpu-0", mem="2Gi", mem_policy=MEM_RANGE, compute_policy=COMPUTE_RANGE)])]
        a = claim([cap("1536Mi", "1")])
        a["status"] = {"allocation": self.one(a, s)}
        self.assertEqual(a["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]
                         ["memory"], "1536Mi")
        with self.assertRaises(A.Unschedulable):
            self.one(claim([cap("600Mi", "1")]), s, [a])  # 1536 + 768 > 2048
        self.one(claim([cap("500Mi", "1")]), s, [a])  # 1536 + 512 = 2048

    def test_share_ids_distinct(self):
        s = [rslice([gpu("gpu-0", compute_policy=COMPUTE_RANGE, mem_policy=MEM_RANGE)])]
        a = self.one(claim([cap("1Gi", "10"), cap("1Gi", "10")]), s)
        ids = [r["shareID"] for r in a["devices"]["results"]]
        self.assertEqual([r["device"] for r in a["devices"]["results"]], ["gpu-0", "gpu-0"])
        self.assertEqual(len(set(ids)), 2)

    def test_exclusive_device_once_no_share(self):
        s = [rslice([gpu("gpu-0", multi=False)])]
        a = claim([cap("1Gi")])
        a["status"] = {"allocation": self.one(a, s)}
        r = a["status"]["allocation"]["devices"]["results"][0]
        self.assertNotIn("shareID", r)
        self.assertNotIn("consumedCapacity", r)
        with self.assertRaises(A.Unschedulable):
            self.one(claim([{}]), s, [a])

    def test_capacity_filter_missing_or_short(self):
        s = [rslice([gpu("gpu-0", multi=False, mem="4Gi")])]
        with self.assertRaises(A.Unschedulable):
            self.one(claim([cap("5Gi")]), s)
        with self.assertRaises(A.Unschedulable):
            self.one(claim([{"capacity": {"requests": {"bandwidth": "1"}}}]), s)

    def test_policy_violation_skips_device(self):
        tight = {"default": "1", "validRange": {"min": "1", "max": "50", "step": "1"}}
        s = [rslice([gpu("gpu-0", compute_policy=tight, mem_policy=MEM_RANGE),
                     gpu("gpu-1", compute_policy=COMPUTE_RANGE, mem_policy=MEM_RANGE)])]
        a = self.one(claim([cap("1Gi", "60")]), s)
        self.assertEqual(a["devices"]["results"][0]["device"], "gpu-1")

    def test_count_and_all(self):
        s = [rslice([gpu("gpu-0", multi=False), gpu("gpu-1", multi=False)])]
        a = self.one(claim([{"count": 2}]), s)
        self.assertEqual([r["device"] for r in a["devices"]["results"]], ["gpu-0", "gpu-1"])
        with self.assertRaises(A.Unschedulable):
            self.one(claim([{"count": 3}]), s)
        held = claim([{}])
        held["status"] = {"allocation": self.one(held, s)}
        with self.assertRaises(A.Unschedulable):
            self.one(claim([{"allocationMode": "All"}]), s, [held])

    def test_selectors_and_other_nodes_and_generations(self):
        s = [rslice([gpu("gpu-0")], driver="other.io"),
             rslice([gpu("gpu-5")], node="node-b"),
             rslice([gpu("gpu-1")], name="old", gen=1), rslice([gpu("gpu-2")], name="new", gen=2)]
        a = self.one(claim([{}]), s)
        self.assertEqual(a["devices"]["results"][0]["device"], "gpu-2")
        c = claim([{"selectors": [{"cel": {"expression": "device.attributes['gslice.io'].index"
                                                         " == 7"}}]}])
        with self.assertRaises(A.Unschedulable):
            self.one(c, s)
        with self.assertRaises(ValueError):
            self.one(claim([{"selectors": [{"cel": {"expression": "device.x > 1"}}]}]), s)

    def test_missing_class(self):
        with self.assertRaises(A.Unschedulable):
            self.one(claim([{"deviceClassName": "nope"}]), [rslice([gpu("gpu-0")])])

    def test_written_allocation_is_valid(self):
        s = [rslice([gpu("gpu-0", mem_policy=MEM_RANGE, compute_policy=COMPUTE_RANGE)])]
        res.validate("ResourceSlice", s[0], None)
        c = claim([cap("1Gi", "30")])
        res.validate("ResourceClaim", c, None)
        c2 = copy.deepcopy(c)
        c2["status"] = {"allocation": self.one(c, s), "reservedFor": [
            {"resource": "pods", "name": "p", "uid": "u"}]}
        res.validate("ResourceClaim", c2, c)


class Validation(unittest.TestCase):
    def bad(self, kind, obj, field, old=None):
        with self.assertRaises(res.Invalid) as e:
            res.validate(kind, obj, old)
        self.assertEqual(e.exception.args[0], field)

    def test_slice(self):
        ok = rslice([gpu("gpu-0", mem_policy=MEM_RANGE, compute_policy=COMPUTE_RANGE)])
        res.validate("ResourceSlice", ok, None)
        b = copy.deepcopy(ok)
        b["spec"]["devices"][0]["name"] = "GPU_0"
        self.bad("ResourceSlice", b, "spec.devices[0].name")
        b = copy.deepcopy(ok)
        b["spec"]["allNodes"] = True
        self.bad("ResourceSlice", b, "spec")
        b = copy.deepcopy(ok)
        del b["spec"]["devices"][0]["allowMultipleAllocations"]
        self.bad("ResourceSlice", b, "spec.devices[0].capacity[memory].requestPolicy")
        b = copy.deepcopy(ok)
        b["spec"]["devices"][0]["capacity"]["compute"]["requestPolicy"]["default"] = "0"
        self.bad("ResourceSlice", b, "spec.devices[0].capacity[compute].requestPolicy.default")
        b = copy.deepcopy(ok)
        del b["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"]["default"]
        self.bad("ResourceSlice", b, "spec.devices[0].capacity[memory].requestPolicy.default")
        b = copy.deepcopy(ok)
        b["spec"]["devices"][0]["capacity"]["compute"]["requestPolicy"] = {
            "default": "30", "validValues": ["50", "30"]}
        self.bad("ResourceSlice", b, "spec.devices[0].capacity[compute].requestPolicy.validValues")
        b = copy.deepcopy(ok)
        b["spec"]["nodeName"] = "node-b"
        self.bad("ResourceSlice", b, "spec.nodeName", old=ok)

    def test_claim(self):
        ok = claim([cap("1Gi", "30")])
        res.validate("ResourceClaim", ok, None)
        b = copy.deepcopy(ok)
        b["spec"]["devices"]["requests"][0]["exactly"]["count"] = 0
        self.bad("ResourceClaim", b, "spec.devices.requests[0].exactly.count")
        b = copy.deepcopy(ok)
        b["spec"]["devices"]["config"] = [{"requests": ["nope"], "opaque": {
            "driver": "gslice.io", "parameters": {}}}]
        self.bad("ResourceClaim", b, "spec.devices.config[0].requests")
        b = copy.deepcopy(ok)
        b["status"] = {"allocation": {"devices": {"results": [{
            "request": "r0", "driver": "gslice.io", "pool": "node-a", "device": "gpu-0",
            "shareID": "share-1"}]}}}
        self.bad("ResourceClaim", b, "status.allocation.devices.results[0].shareID", old=ok)
        b = copy.deepcopy(ok)
        b["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}
        self.bad("ResourceClaim", b, "status.reservedFor", old=ok)

    def test_quantities(self):
        self.assertEqual(q("1Gi"), GiB)
        self.assertEqual(q("1.5Gi"), 3 * GiB // 2)
        self.assertEqual(q("500M"), 500 * 10**6)
        self.assertEqual(q("2e3"), 2000)
        self.assertEqual(q("100m") * 10, 1)
        with self.assertRaises(res.Invalid):
            q("1 GiB")
        self.assertEqual(res.quantity_str(1536 * 2**20, True), "1536Mi")
        self.assertEqual(res.quantity_str(60, False), "60")
        self.assertEqual(res.quantity_str(0, True), "0")


class ThroughTheApiServer(unittest.TestCase):
    """The allocator as the e2e tests run it: against apiserver.py, through /status."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dra-alloc-test.")
        pf = os.path.join(cls.dir, "port")
        cls.proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "apiserver.py"), "--port-file", pf],
            stderr=subprocess.DEVNULL)
        cls.addClassCleanup(cls.proc.wait)
        cls.addClassCleanup(cls.proc.kill)
        for _ in range(200):
            if os.path.exists(pf):
                break
            time.sleep(0.05)
        cls.api = A.Api("http://127.0.0.1:%s" % open(pf).read().strip())

    def post(self, path, obj, want=201):
        code, out = self.api.call("POST", A.R + path, obj)
        self.assertEqual(code, want, out)
        return out

    def test_allocate_reserve_release(self):
        self.post("/deviceclasses", CLASS["gslice.io"])
        self.post("/resourceslices", rslice([gpu("gpu-0", mem_policy=MEM_RANGE,
                                                 compute_policy=COMPUTE_RANGE)]))
        c = claim([cap("1Gi", "60")], name="one")
        del c["metadata"]["uid"]
        self.post("/namespaces/default/resourceclaims", c)
        out = A.allocate_claim(self.api, "default", "one", "node-a", [("p1", "u1")])
        out = A.allocate_claim(self.api, "default", "one", "node-a", [("p2", "u2")])
        st = out["status"]
        self.assertEqual([r["uid"] for r in st["reservedFor"]], ["u1", "u2"])
        self.assertEqual(st["allocation"]["devices"]["results"][0]["consumedCapacity"],
                         {"compute": "60", "memory": "1Gi"})
        c2 = claim([cap("1Gi", "50")], name="two")
        del c2["metadata"]["uid"]
        self.post("/namespaces/default/resourceclaims", c2)
        with self.assertRaises(A.Unschedulable):  # 60 + 50 > 100
            A.allocate_claim(self.api, "default", "two", "node-a", [("p3", "u3")])
        A.release_claim(self.api, "default", "one", "u1")
        out = A.release_claim(self.api, "default", "one", "u2")
        self.assertNotIn("allocation", out.get("status") or {})
        out = A.allocate_claim(self.api, "default", "two", "node-a", [("p3", "u3")])
        self.assertEqual(out["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-0")
        # The kubelet's wipe: deletecollection by node.
        code, gone = self.api.call("DELETE", A.R + "/resourceslices?fieldSelector=spec.nodeName="
                                   "node-a")
        self.assertEqual((code, len(gone["items"])), (200, 1))
        self.assertEqual(self.api.get(A.R + "/resourceslices")["items"], [])
        code, _ = self.api.call("GET", A.R + "/resourceslices?fieldSelector=spec.devices=x")
        self.assertEqual(code, 400)

    def apply(self, path, obj, query):
        req = urllib.request.Request(
            self.api.base + A.R + path + "?" + query, method="PATCH",
            data=json.dumps(obj).encode(),
            headers={"Content-Type": "application/apply-patch+yaml"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    def test_status_devices_apply(self):
        """Server-side apply of status.devices: a list map by driver, device, pool and shareID;
        each manager's own entries, others' kept; a conflict without force; only allocated
        devices; at most 8 conditions, data of at most 10 KiB; gone with the allocation."""
        self.api.call("POST", A.R + "/deviceclasses", CLASS["gslice.io"])
        self.post("/resourceslices", rslice([gpu("gpu-0", mem_policy=MEM_RANGE,
                                                 compute_policy=COMPUTE_RANGE),
                                             gpu("gpu-1", mem_policy=MEM_RANGE,
                                                 compute_policy=COMPUTE_RANGE)], node="node-b"))
        c = claim([cap("1Gi", "10"), cap("1Gi", "10")], name="st")
        del c["metadata"]["uid"]
        self.post("/namespaces/default/resourceclaims", c)
        out = A.allocate_claim(self.api, "default", "st", "node-b", [("p", "pu")])
        res = out["status"]["allocation"]["devices"]["results"]
        path = "/namespaces/default/resourceclaims/st/status"
        ready = [{"type": "Ready", "status": "True", "reason": "SlicePrepared", "message": "m",
                  "lastTransitionTime": "2026-12-02T08:00:00Z"}]

        def entry(r, **kw):
            e = {k: r[k] for k in ("driver", "pool", "device", "shareID")}
            e.update(kw)
            return e

        def body(*devs):
            return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "st", "namespace": "default"},
                    "status": {"devices": list(devs)}}
        code, out = self.apply(path, body(entry(res[0], conditions=ready, data={"a": 1})),
                               "fieldManager=gslice.io&force=true")
        self.assertEqual(code, 200, out)
        self.assertEqual(out["status"]["devices"][0]["data"], {"a": 1})
        self.assertEqual(out["status"]["reservedFor"][0]["uid"], "pu")  # the rest kept
        code, out = self.apply(path, body(entry(res[0])), "force=true")
        self.assertEqual(code, 422, out)  # no fieldManager
        # Another manager's entry beside ours; ours again without force: no conflict.
        code, out = self.apply(path, body(entry(res[1], data={"b": 2})), "fieldManager=other")
        self.assertEqual(code, 200, out)
        code, out = self.apply(path, body(entry(res[0], conditions=ready, data={"a": 3})),
                               "fieldManager=gslice.io")
        self.assertEqual(code, 200, out)
        self.assertEqual(sorted((d["device"], json.dumps(d["data"]))
                                for d in out["status"]["devices"]),
                         sorted([(res[0]["device"], '{"a": 3}'), (res[1]["device"], '{"b": 2}')]))
        # Taking the other's entry: a conflict, unless forced.
        code, out = self.apply(path, body(entry(res[1], data={"c": 4})), "fieldManager=gslice.io")
        self.assertEqual(code, 409, out)
        # Leaving our entry out removes it; the other's stays.
        code, out = self.apply(path, body(), "fieldManager=gslice.io")
        self.assertEqual(code, 200, out)
        self.assertEqual([d["data"] for d in out["status"]["devices"]], [{"b": 2}])
        # Refused: a device not allocated, 9 conditions, 10 KiB + of data.
        bad = dict(entry(res[0]), device="gpu-7")
        code, out = self.apply(path, body(bad), "fieldManager=gslice.io")
        self.assertEqual(code, 422, out)
        nine = [dict(ready[0], type="T%d" % i) for i in range(9)]
        code, out = self.apply(path, body(entry(res[0], conditions=nine)), "fieldManager=gslice.io")
        self.assertEqual(code, 422, out)
        self.assertIn("at most 8", out["message"])
        code, out = self.apply(path, body(entry(res[0], data={"x": "y" * 10240})),
                               "fieldManager=gslice.io")
        self.assertEqual(code, 422, out)
        self.assertIn("10240", out["message"])
        # Released: the allocation and the devices' status go together.
        out = A.release_claim(self.api, "default", "st", "pu")
        self.assertEqual(out.get("status") or {}, {})


if __name__ == "__main__":
    unittest.main()
