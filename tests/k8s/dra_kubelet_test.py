#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The DRA kubelet stand-in (dra_kubelet.py) against a minimal DRA plugin written here from
the registration and dra/v1 APIs: what the stand-in does is what the e2e tests rely on, so it
is checked on its own, without gslice-node. Cases: registration (GetInfo, the v1 version
chosen, NotifyRegistrationStatus true) and refusal (another type, no known version: told
why); the startup wipe (only the node's slices go) and its repeat at a restart; a pod's two
claims prepared in one batch, a claim already prepared not prepared again for a second pod,
unprepare only after its last pod, in one batch per driver; a claim not reserved for the pod
refused; the containers' env from the CDI spec the plugin wrote; a plugin whose socket goes
away is deregistered and registers again when it comes back; prepared claims survive an acted
restart (no second Prepare)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
PB = os.path.join(os.environ.get("GSLICE_BUILD", ""), "tests", "k8s-pb")
try:
    import grpc
    sys.path.insert(0, PB)
    import dra_pb2
    import pluginregistration_pb2 as reg_pb2
except ImportError as e:
    print("SKIP: %s (GSLICE_BUILD=%s: the DRA messages are built with protoc)" % (
        e, os.environ.get("GSLICE_BUILD")))
    sys.exit(77)
import dra_alloc as A  # noqa: E402


class FakePlugin:
    """A DRA kubelet plugin: registration socket, DRAPlugin v1 on its service socket, one CDI
    spec per claim (kind example.com/claim, one device per claim, env CLAIM=<uid>)."""

    def __init__(self, reg_dir, svc_dir, cdi_dir, name="example.com", type_="DRAPlugin",
                 versions=("v1.DRAPlugin", "v1beta1.DRAPlugin")):
        self.name, self.type, self.versions = name, type_, versions
        self.reg_sock = os.path.join(reg_dir, name + "-reg.sock")
        self.svc_sock = os.path.join(svc_dir, name + ".sock")
        self.cdi_dir = cdi_dir
        self.calls, self.notified = [], []
        self.lock = threading.Lock()

    def info(self, req, ctx):
        return reg_pb2.PluginInfo(type=self.type, name=self.name, endpoint=self.svc_sock,
                                  supported_versions=list(self.versions))

    def notify(self, req, ctx):
        with self.lock:
            self.notified.append((req.plugin_registered, req.error))
        return reg_pb2.RegistrationStatusResponse()

    def prepare(self, req, ctx):
        with self.lock:
            self.calls.append(("prepare", sorted(c.name for c in req.claims)))
        resp = dra_pb2.NodePrepareResourcesResponse()
        for c in req.claims:
            if c.name.startswith("bad"):
                resp.claims[c.uid].error = "claim %s refused" % c.name
                continue
            spec = {"cdiVersion": "0.5.0", "kind": "example.com/claim", "devices": [{
                "name": c.uid, "containerEdits": {"env": ["CLAIM=%s" % c.uid]}}],
                "containerEdits": {"env": ["COMMON=1"]}}
            with open(os.path.join(self.cdi_dir, "example.com-claim_%s.json" % c.uid), "w") as f:
                json.dump(spec, f)
            resp.claims[c.uid].devices.add(request_names=["gpu"], pool_name="node-a",
                                           device_name="dev-0",
                                           cdi_device_ids=["example.com/claim=" + c.uid])
        return resp

    def unprepare(self, req, ctx):
        with self.lock:
            self.calls.append(("unprepare", sorted(c.name for c in req.claims)))
        resp = dra_pb2.NodeUnprepareResourcesResponse()
        for c in req.claims:
            resp.claims[c.uid].error = ""
        return resp

    def start(self):
        def h(fn, req, resp):
            return grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString)
        self.svc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.svc.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", {
                "NodePrepareResources": h(self.prepare, dra_pb2.NodePrepareResourcesRequest,
                                          dra_pb2.NodePrepareResourcesResponse),
                "NodeUnprepareResources": h(self.unprepare, dra_pb2.NodeUnprepareResourcesRequest,
                                            dra_pb2.NodeUnprepareResourcesResponse)}),))
        self.svc.add_insecure_port("unix:" + self.svc_sock)
        self.svc.start()
        self.start_reg()

    def start_reg(self):
        self.reg = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.reg.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "pluginregistration.Registration", {
                "GetInfo": grpc.unary_unary_rpc_method_handler(
                    self.info, request_deserializer=reg_pb2.InfoRequest.FromString,
                    response_serializer=reg_pb2.PluginInfo.SerializeToString),
                "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(
                    self.notify, request_deserializer=reg_pb2.RegistrationStatus.FromString,
                    response_serializer=reg_pb2.RegistrationStatusResponse.SerializeToString)}),))
        self.reg.add_insecure_port("unix:" + self.reg_sock)
        self.reg.start()

    def stop_reg(self):
        self.reg.stop(0)
        if os.path.exists(self.reg_sock):
            os.unlink(self.reg_sock)


def stop(p):
    p.terminate()
    p.wait()


def read(path):
    with open(path) as f:
        return f.read()


def until(what, fn, secs=10):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class DraKubelet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.t = tempfile.mkdtemp(prefix="dra-kubelet-test.")
        cls.addClassCleanup(shutil.rmtree, cls.t, ignore_errors=True)
        for d in ("reg", "svc", "cdi", "logs"):
            os.makedirs(os.path.join(cls.t, d))
        cls.api = A.Api("http://127.0.0.1:%s" % cls.spawn("api.port", [
            os.path.join(HERE, "apiserver.py"), "--port-file"]))
        for node in ("node-a", "node-b"):
            code, out = cls.api.call("POST", A.R + "/resourceslices", {
                "metadata": {"name": node + "-x"}, "spec": {
                    "driver": "example.com", "nodeName": node, "devices": [],
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}})
            assert code == 201, out
        cls.plugin = FakePlugin(*(os.path.join(cls.t, d) for d in ("reg", "svc", "cdi")))
        cls.plugin.start()
        cls.wrong = FakePlugin(os.path.join(cls.t, "reg"), os.path.join(cls.t, "svc"),
                               os.path.join(cls.t, "cdi"), name="csi.example.com",
                               type_="CSIPlugin")
        cls.wrong.start()
        cls.old = FakePlugin(os.path.join(cls.t, "reg"), os.path.join(cls.t, "svc"),
                             os.path.join(cls.t, "cdi"), name="old.example.com",
                             versions=("v1alpha3.DRAPlugin",))
        cls.old.start()
        cls.kl = "http://127.0.0.1:%s" % cls.spawn("kl.port", [
            os.path.join(HERE, "dra_kubelet.py"), "--plugins-registry",
            os.path.join(cls.t, "reg"), "--cdi-dir", os.path.join(cls.t, "cdi"), "--api",
            cls.api.base, "--node-name", "node-a", "--pb-dir", PB, "--log-dir",
            os.path.join(cls.t, "logs"), "--port-file"])

    @classmethod
    def spawn(cls, port_file, argv):
        pf = os.path.join(cls.t, port_file)
        with open(os.path.join(cls.t, port_file + ".log"), "w") as err:
            p = subprocess.Popen([sys.executable] + argv + [pf], stderr=err)
        cls.addClassCleanup(stop, p)  # also when setUpClass fails
        until(port_file, lambda: os.path.exists(pf))
        return read(pf).strip()

    def kl_call(self, method, path, body=None):
        req = urllib.request.Request(self.kl + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    def state(self):
        return self.kl_call("GET", "/state")[1]

    def claim(self, name, pods):
        code, out = self.api.call("POST", A.R + "/namespaces/default/resourceclaims", {
            "metadata": {"name": name}, "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "example"}}]}}})
        self.assertEqual(code, 201, out)
        out["status"] = {"allocation": {"devices": {"results": [{
            "request": "gpu", "driver": "example.com", "pool": "node-a", "device": "dev-0"}]}},
            "reservedFor": [{"resource": "pods", "name": p, "uid": p + "-uid"} for p in pods]}
        code, out = self.api.call("PUT", A.R + "/namespaces/default/resourceclaims/%s/status"
                                  % name, out)
        self.assertEqual(code, 200, out)
        return out["metadata"]["uid"]

    def pod(self, name, claims, want=201):
        body = {"namespace": "default", "name": name, "uid": name + "-uid",
                "claims": [{"name": c, "resourceClaimName": c} for c in claims],
                "containers": [{"name": "main", "claims": [{"name": c} for c in claims],
                                "command": ["sh", "-c", "echo CLAIM=$CLAIM COMMON=$COMMON"]}]}
        code, out = self.kl_call("POST", "/pods", body)
        self.assertEqual(code, want, out)
        return out

    def test_all(self):  # one flow: the steps depend on each other
        until("registration", lambda: "example.com" in self.state()["plugins"])
        st = self.state()
        self.assertEqual(st["plugins"]["example.com"]["version"], "v1.DRAPlugin")
        self.assertEqual(self.plugin.notified, [(True, "")])
        until("refusals", lambda: len(self.state()["refusals"]) == 2)
        self.assertFalse(self.wrong.notified[0][0])
        self.assertIn("CSIPlugin", self.wrong.notified[0][1])
        self.assertFalse(self.old.notified[0][0])
        self.assertIn("none of the versions", self.old.notified[0][1])
        left = [s["spec"]["nodeName"] for s in self.api.get(A.R + "/resourceslices")["items"]]
        self.assertEqual(left, ["node-b"])  # the wipe: node-a's only

        ua, ub = self.claim("ca", ["p1", "p2"]), self.claim("cb", ["p1"])
        self.claim("cc", ["someone"])
        out = self.pod("p1", ["ca", "cb"])
        self.assertEqual(self.plugin.calls, [("prepare", ["ca", "cb"])])
        self.assertEqual(sorted(out["containers"][0]["cdi"]),
                         sorted(["example.com/claim=" + ua, "example.com/claim=" + ub]))
        log = os.path.join(self.t, "logs", "default_p1_main.log")
        until("p1's output", lambda: os.path.exists(log) and read(log))
        self.assertIn("COMMON=1", read(log))
        self.pod("p2", ["ca"])
        self.assertEqual(len(self.plugin.calls), 1)  # ca is prepared already
        err = self.pod("p3", ["cc"], want=409)["error"]
        self.assertIn("not allowed to use resource claim cc", err)

        self.kl_call("POST", "/restart", {"down_s": 0.2})
        until("re-registration", lambda: self.state()["registrations"] == 2)
        self.assertEqual(self.state()["wipes"], 2)
        self.assertEqual(sorted(c["name"] for c in self.state()["claims"].values()), ["ca", "cb"])

        self.kl_call("DELETE", "/pods/default/p1")
        self.assertEqual(self.plugin.calls[-1], ("unprepare", ["cb"]))
        self.kl_call("DELETE", "/pods/default/p2")
        self.assertEqual(self.plugin.calls[-1], ("unprepare", ["ca"]))
        self.assertEqual(len(self.plugin.calls), 3)

        self.plugin.stop_reg()
        until("deregistration", lambda: "example.com" not in self.state()["plugins"])
        self.plugin.start_reg()
        until("registration again", lambda: "example.com" in self.state()["plugins"])
        self.assertEqual(self.state()["registrations"], 3)
        # Made again at once at the same path (a plugin restarting faster than a poll): the
        # kubelet's watcher sees the new socket and registers it again.
        self.plugin.reg.stop(0)
        self.plugin.start_reg()
        until("registration of the new socket", lambda: self.state()["registrations"] == 4)
        self.assertEqual(self.state()["wiped"], [1, 0])


if __name__ == "__main__":
    unittest.main()
