#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A kubelet stand-in for DRA drivers (python3-grpcio + python3-protobuf, Debian's), playing
the parts of the kubelet a DRA kubelet plugin meets, as the kubelet documents them
(KEP-4381 "DRA: structured parameters", KEP-3063's kubelet plugin API, the plugin
registration API pluginregistration/v1 and its plugin watcher, the dra/v1 and v1beta1
api.proto):

  - the plugin watcher: watches --plugins-registry for sockets (new ones every 100 ms; the
    kubelet uses inotify); for each one calls pluginregistration.Registration/GetInfo; the
    plugin is accepted when its type is "DRAPlugin", its name a driver name, its endpoint set,
    and its supported_versions hold v1.DRAPlugin or v1beta1.DRAPlugin (v1 chosen when both
    are there, as the kubelet 1.34+ prefers it); then NotifyRegistrationStatus
    {plugin_registered, error} tells the plugin the outcome (error: why it was refused). A
    registration socket that goes away deregisters the plugin; a socket that comes back (or a
    new one) registers it again;
  - at its own start (and at each acted restart) it deletes all ResourceSlices of its node:
    DELETE /apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName=NODE, the
    DeleteCollection the KEP says the kubelet does whenever it starts ("This ensures that no
    pods depending in DRA get scheduled to the node until the required DRA drivers have
    started up again");
  - a pod's claims: each claim the pod references is read from the API server (--api); it
    must exist, be allocated and be reserved for the pod (status.reservedFor holds its uid,
    else "pod is not allowed to use resource claim"); claims not yet prepared on this node are
    prepared with one NodePrepareResources call per driver holding all of that pod's claims
    of the driver (namespace, uid, name), as the kubelet's DRA manager batches them; a claim
    already prepared (for another pod) is not prepared again, the pod joins it. Each answer
    must hold every claim asked (by UID); a claim with an error fails the pod. The CDI ids
    returned are kept per claim and per request (Device.request_names);
  - the pod's end: its claims that no other pod uses are unprepared with one
    NodeUnprepareResources call per driver; an error keeps the claim prepared (the kubelet
    retries): DELETE answers it and it is retried on the next DELETE or POST /unprepare-retry;
  - prepared claims survive an acted restart (the kubelet checkpoints them): after a restart
    nothing is prepared again for running pods;
  - a container gets the CDI devices of the claims (and requests) it names, resolved in the
    CDI specs of --cdi-dir (cdi_read.py's strict reader when it is there, else a reader here:
    kind + device name, the spec's containerEdits then the device's); it is started with the
    edits' env, and its mounts applied as tests/k8s/kubelet.py applies a device plugin's (in
    its own mount and pid namespaces as root with real bind mounts of what is under /run; the
    hook named by /etc/ld.so.preload as LD_PRELOAD of its host path); deviceNodes must exist
    on the host (a runtime fails the container otherwise); CDI hooks are not run.

  - device health (the ResourceHealthStatus feature): after registration it reads the plugin's
    DRAResourceHealth/NodeWatchResources stream (v1, else v1beta1, else v1alpha1 where the
    plugin answers UNIMPLEMENTED; none is not an error: the stream is optional) and keeps each
    device's last health by pool/device, as the kubelet's health cache does.

Not modelled: the 30 s grace before a gone plugin's slices are wiped, the health timeout
(a device not reported for health_check_timeout_seconds turning UNKNOWN), pod status'
allocatedResourcesStatus, the kubelet's retries of a failed Prepare.

Control interface, HTTP JSON on 127.0.0.1 (--port-file FILE: the port chosen):
  POST   /pods  {"namespace","name","uid","claims":[{"name","resourceClaimName"}],
                 "containers":[{"name","claims":[{"name","request"?}],"command":[..],"env":{}}]}
                 201 {"containers":[{"name","cdi":[ids],"env":{..},"mounts":[..]}]} once
                 started; 409 {"error"} when a claim cannot be prepared (nothing started)
  DELETE /pods/NS/NAME   kills its containers; unprepares the claims it was the last of
  GET    /pods/NS/NAME   {"containers":[{"name","pid","exit","log"}]}
  POST   /prepare   {"driver","claims":[{"namespace","uid","name"}]}  one raw batch call:
                 {"claims":{uid:{"devices","error"}},"seconds"}   (the bench)
  POST   /unprepare {"driver","claims":[..]}  the same for NodeUnprepareResources
  POST   /restart {"down_s":0.3}  acts a kubelet restart: forgets the plugins, wipes the
                 node's ResourceSlices, discovers the registry's sockets again
  GET    /state  {"plugins":{name:{"endpoint","version","health_version"}},"health":{driver:
                  {"pool/device":{"health","message"}}},"registrations","refusals":[..],
                  "wipes","claims":{uid:{"namespace","name","driver","pods","cdi"}},"prepares",
                  "unprepares","namespaces"}
"""

import argparse
import json
import os
import re
import stat
import sys
import threading
import time
import urllib.error
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet_common  # noqa: E402
from kubelet_common import kill_container, namespaces_work  # noqa: E402

VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # the kubelet's preference order
SERVICE = {"v1.DRAPlugin": "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/",
           "v1beta1.DRAPlugin": "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"}
DRIVER = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
CALL_TIMEOUT = 45  # the kubelet's timeout of a DRA plugin call
HEALTH_VERSIONS = ("v1", "v1beta1", "v1alpha1")


def log(msg):
    sys.stderr.write("%.3f dra-kubelet: %s\n" % (time.time(), msg))
    sys.stderr.flush()


def load_pb(pb_dir):
    sys.path.insert(0, pb_dir)
    import dra_pb2  # noqa: E402
    import pluginregistration_pb2  # noqa: E402
    return dra_pb2, pluginregistration_pb2


# ---- CDI ------------------------------------------------------------------------------------
def cdi_specs(cdi_dir):
    """{kind: [spec]} of the .json and .yaml specs in cdi_dir (a spec that cannot be read is
    skipped with a word, as the CDI cache reports and skips it)."""
    out = {}
    for f in sorted(os.listdir(cdi_dir)) if os.path.isdir(cdi_dir) else []:
        if not f.endswith((".json", ".yaml")):
            continue
        try:
            with open(os.path.join(cdi_dir, f)) as fh:
                if f.endswith(".json"):
                    spec = json.load(fh)
                else:
                    import yaml
                    spec = yaml.safe_load(fh)
        except (OSError, ValueError) as e:
            log("CDI spec %s skipped: %s" % (f, e))
            continue
        out.setdefault(spec.get("kind"), []).append(spec)
    return out


def cdi_resolve(cdi_dir, ids):
    """The container edits of CDI devices `ids` ("vendor/class=name"): {"env": [..],
    "mounts": [..], "deviceNodes": [..], "hooks": [..]}; ValueError naming an unresolvable id.
    cdi_read.py (the project's strict reader) does it when it is there."""
    try:
        import cdi_read
    except ImportError:
        cdi_read = None
    if cdi_read is not None:
        try:
            return cdi_read.resolve([cdi_dir], ids)
        except cdi_read.CDIError as e:
            raise ValueError(str(e))
    specs = cdi_specs(cdi_dir)
    edits = {"env": [], "mounts": [], "deviceNodes": [], "hooks": []}
    used = []
    for qid in ids:
        kind, _, name = qid.partition("=")
        found = None
        for spec in specs.get(kind, []):
            for d in spec.get("devices") or []:
                if d.get("name") == name:
                    found = (spec, d)
        if not found:
            raise ValueError("unresolvable CDI devices %s" % qid)
        spec, d = found
        if id(spec) not in used:
            used.append(id(spec))
            merge_edits(edits, spec.get("containerEdits") or {})
        merge_edits(edits, d.get("containerEdits") or {})
    return edits


def merge_edits(into, e):
    for k in ("env", "mounts", "deviceNodes", "hooks"):
        into[k] += list(e.get(k) or [])


# ---- the kubelet --------------------------------------------------------------------------------
class Kubelet:
    def __init__(self, args, dra, reg):
        self.args, self.dra, self.reg = args, dra, reg
        self.lock = threading.RLock()
        self.plugins = {}  # driver -> {"endpoint", "version", "socket", "channel"}
        self.sockets = {}  # registration socket path -> driver (or None: refused)
        self.seen = {}  # registration socket path -> (device, inode, ctime) when registered
        self.registrations = 0
        self.refusals = []
        self.wipes = 0
        self.wiped = []  # how many slices each wipe deleted
        self.prepares = 0
        self.unprepares = 0
        self.claims = {}  # uid -> {"namespace","name","driver","pods":set,"cdi":{request:[ids]}}
        self.health = {}  # driver -> {"pool/device": {"health", "message"}}
        self.pods = {}
        self.gen = 0
        self.namespaces = not args.no_namespaces and namespaces_work()

    # ---- the API server ----
    def api(self, method, path):
        req = urllib.request.Request(self.args.api + path, method=method,
                                     headers={"Authorization": "Bearer " + self.args.token})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    def wipe(self):
        code, out = self.api("DELETE", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector="
                                       "spec.nodeName=" + self.args.node_name)
        with self.lock:
            self.wipes += 1
            self.wiped.append(len(out.get("items") or []))
        log("startup wipe of node %s's ResourceSlices: %d, %d deleted" % (
            self.args.node_name, code, len(out.get("items") or [])))

    # ---- the plugin watcher ----
    def watch(self, gen):
        while True:
            with self.lock:
                if gen != self.gen:
                    return
            try:
                now = {os.path.join(self.args.plugins_registry, f)
                       for f in os.listdir(self.args.plugins_registry)}
            except OSError:
                now = set()
            now = {p: socket_id(p) for p in now}
            now = {p: i for p, i in now.items() if i is not None}
            with self.lock:
                known = dict(self.seen)
            for p in sorted(set(known) - set(now)):
                self.deregister(p)
            # A new socket, or one made again at the same path (inotify's CREATE to the kubelet).
            for p in sorted(p for p in now if known.get(p) != now[p]):
                if p in known:
                    self.deregister(p)
                with self.lock:
                    self.seen[p] = now[p]
                if not self.register(p):
                    with self.lock:
                        self.seen.pop(p, None)  # GetInfo failed: tried again
            time.sleep(0.1)

    def register(self, path):
        ch = grpc.insecure_channel("unix:" + path)
        try:
            info = ch.unary_unary("/pluginregistration.Registration/GetInfo",
                                  request_serializer=self.reg.InfoRequest.SerializeToString,
                                  response_deserializer=self.reg.PluginInfo.FromString)(
                self.reg.InfoRequest(), timeout=10)
        except grpc.RpcError as e:
            log("GetInfo on %s failed: %s (retried)" % (path, e.code()))
            ch.close()
            return False
        why = self.validate(info)
        version = next((v for v in VERSIONS if v in info.supported_versions), None)
        try:
            ch.unary_unary("/pluginregistration.Registration/NotifyRegistrationStatus",
                           request_serializer=self.reg.RegistrationStatus.SerializeToString,
                           response_deserializer=self.reg.RegistrationStatusResponse.FromString)(
                self.reg.RegistrationStatus(plugin_registered=why is None, error=why or ""),
                timeout=10)
        except grpc.RpcError as e:
            log("NotifyRegistrationStatus on %s failed: %s" % (path, e.code()))
        ch.close()
        with self.lock:
            self.sockets[path] = info.name if why is None else None
            if why is not None:
                self.refusals.append({"socket": path, "name": info.name, "error": why})
                log("refused plugin %r at %s: %s" % (info.name, path, why))
                return True
            old = self.plugins.get(info.name)
            if old and old.get("channel"):
                old["channel"].close()
            self.plugins[info.name] = {
                "endpoint": info.endpoint, "version": version, "socket": path,
                "channel": grpc.insecure_channel("unix:" + info.endpoint)}
            self.registrations += 1
            plugin = self.plugins[info.name]
        log("registered DRA plugin %s at %s, %s" % (info.name, info.endpoint, version))
        threading.Thread(target=self.watch_health, args=(info.name, plugin), daemon=True).start()
        return True

    def watch_health(self, driver, plugin):
        """The plugin's health stream, for as long as the plugin stays registered."""
        for ver in HEALTH_VERSIONS:
            stream = plugin["channel"].unary_stream(
                "/%s.DRAResourceHealth/NodeWatchResources" % ver,
                request_serializer=self.dra.NodeWatchResourcesRequest.SerializeToString,
                response_deserializer=self.dra.NodeWatchResourcesResponse.FromString)
            try:
                for resp in stream(self.dra.NodeWatchResourcesRequest()):
                    with self.lock:
                        plugin["health_version"] = ver
                        h = self.health.setdefault(driver, {})
                        for d in resp.devices:
                            key = "%s/%s" % (d.device.pool_name, d.device.device_name)
                            now = {"health": self.dra.HealthStatus.Name(d.health),
                                   "message": d.message}
                            if h.get(key) != now:
                                log("health of %s %s: %s %s" % (driver, key, now["health"],
                                                                now["message"]))
                            h[key] = now
                return
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    log("health stream of %s ended: %s" % (driver, e.code()))
                    return
        log("%s serves no DRAResourceHealth stream" % driver)

    def validate(self, info):
        """Why the plugin is refused, or None (the plugin watcher's and the DRA handler's
        checks)."""
        if info.type != "DRAPlugin":
            return "no handler registered for plugin type: %s" % info.type
        if not DRIVER.fullmatch(info.name) or len(info.name) > 63:
            return "invalid DRA driver name %r" % info.name
        if not info.endpoint:
            return "plugin %s: no endpoint" % info.name
        if not any(v in info.supported_versions for v in VERSIONS):
            return "none of the versions supported %s is handled (%s)" % (
                list(info.supported_versions), ", ".join(VERSIONS))
        return None

    def deregister(self, path):
        with self.lock:
            self.seen.pop(path, None)
            name = self.sockets.pop(path, None)
            p = self.plugins.get(name)
            if p and p["socket"] == path:
                del self.plugins[name]
                self.health.pop(name, None)
                if p.get("channel"):
                    p["channel"].close()
        if name:
            log("deregistered DRA plugin %s (%s gone)" % (name, path))

    # ---- Prepare / Unprepare ----
    def call(self, driver, method, req, resp_cls):
        with self.lock:
            p = self.plugins.get(driver)
        if p is None:
            raise RuntimeError("DRA driver %s is not registered" % driver)
        fn = p["channel"].unary_unary(SERVICE[p["version"]] + method,
                                      request_serializer=req.SerializeToString,
                                      response_deserializer=resp_cls.FromString)
        return fn(req, timeout=CALL_TIMEOUT)

    def prepare_batch(self, driver, claims):
        """One NodePrepareResources; {uid: ("error"|None, devices)}; RuntimeError when the
        call fails or skips a claim."""
        req = self.dra.NodePrepareResourcesRequest()
        for c in claims:
            req.claims.add(namespace=c["namespace"], uid=c["uid"], name=c["name"])
        with self.lock:
            self.prepares += 1
        try:
            resp = self.call(driver, "NodePrepareResources", req,
                             self.dra.NodePrepareResourcesResponse)
        except grpc.RpcError as e:
            raise RuntimeError("NodePrepareResources failed: %s %s" % (e.code(), e.details()))
        out = {}
        for c in claims:
            if c["uid"] not in resp.claims:
                raise RuntimeError("NodePrepareResources skipped ResourceClaim %s/%s"
                                   % (c["namespace"], c["name"]))
            r = resp.claims[c["uid"]]
            out[c["uid"]] = (r.error or None, [
                {"requests": list(d.request_names), "pool": d.pool_name, "device": d.device_name,
                 "cdi": list(d.cdi_device_ids)} for d in r.devices])
        return out

    def unprepare_batch(self, driver, claims):
        req = self.dra.NodeUnprepareResourcesRequest()
        for c in claims:
            req.claims.add(namespace=c["namespace"], uid=c["uid"], name=c["name"])
        with self.lock:
            self.unprepares += 1
        try:
            resp = self.call(driver, "NodeUnprepareResources", req,
                             self.dra.NodeUnprepareResourcesResponse)
        except grpc.RpcError as e:
            raise RuntimeError("NodeUnprepareResources failed: %s %s" % (e.code(), e.details()))
        return {c["uid"]: (resp.claims[c["uid"]].error or None) if c["uid"] in resp.claims
                else "NodeUnprepareResources skipped the claim" for c in claims}

    def read_claim(self, ns, name, pod):
        code, c = self.api("GET", "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s"
                           % (ns, name))
        if code != 200:
            raise RuntimeError("ResourceClaim %s/%s: %d %s" % (ns, name, code, c.get("message")))
        st = c.get("status") or {}
        if not st.get("allocation"):
            raise RuntimeError("ResourceClaim %s/%s is not allocated" % (ns, name))
        if not any(r.get("uid") == pod["uid"] for r in st.get("reservedFor") or []):
            raise RuntimeError("pod %s/%s (%s) is not allowed to use resource claim %s"
                               % (ns, pod["name"], pod["uid"], name))
        drivers = sorted({r["driver"] for r in st["allocation"]["devices"].get("results") or []})
        return {"namespace": ns, "name": name, "uid": c["metadata"]["uid"], "drivers": drivers}

    def prepare_pod(self, pod):
        """Prepares what the pod's claims need; {claim name in pod: uid}."""
        ns = pod["namespace"]
        byref, todo = {}, {}
        for pc in pod.get("claims") or []:
            c = self.read_claim(ns, pc["resourceClaimName"], pod)
            byref[pc["name"]] = c["uid"]
            with self.lock:
                known = c["uid"] in self.claims
            if not known:
                for d in c["drivers"]:
                    todo.setdefault(d, []).append(c)
        for driver, claims in sorted(todo.items()):
            got = self.prepare_batch(driver, claims)
            errs = ["%s/%s: %s" % (c["namespace"], c["name"], got[c["uid"]][0]) for c in claims
                    if got[c["uid"]][0]]
            with self.lock:
                for c in claims:
                    if got[c["uid"]][0]:
                        continue
                    e = self.claims.setdefault(c["uid"], {
                        "namespace": c["namespace"], "name": c["name"], "drivers": c["drivers"],
                        "pods": set(), "cdi": {}})
                    for d in got[c["uid"]][1]:
                        for r in d["requests"] or [""]:
                            e["cdi"].setdefault(r, []).extend(d["cdi"])
            if errs:
                raise RuntimeError("NodePrepareResources: " + "; ".join(errs))
        with self.lock:
            for uid in byref.values():
                self.claims[uid]["pods"].add(pod["uid"])
        return byref

    def unprepare_unused(self):
        """Unprepares every prepared claim no pod uses any more, per driver in one batch;
        a claim whose unprepare failed stays (tried again next time)."""
        with self.lock:
            idle = {u: c for u, c in self.claims.items() if not c["pods"]}
        per = {}
        for uid, c in idle.items():
            for d in c["drivers"]:
                per.setdefault(d, []).append(dict(c, uid=uid))
        failed = []
        for driver, claims in sorted(per.items()):
            try:
                got = self.unprepare_batch(driver, claims)
            except RuntimeError as e:
                failed += [(c["uid"], str(e)) for c in claims]
                continue
            failed += [(u, e) for u, e in got.items() if e]
        with self.lock:
            for uid in idle:
                if uid not in dict(failed):
                    self.claims.pop(uid, None)
        return failed

    # ---- pods and containers ----
    def add_pod(self, spec):
        key = "%s/%s" % (spec["namespace"], spec["name"])
        with self.lock:
            if key in self.pods:
                return 409, {"error": "pod %s exists" % key}
            self.pods[key] = spec
        try:
            byref = self.prepare_pod(spec)
            out = []
            for c in spec.get("containers") or []:
                ids = []
                for ref in c.get("claims") or []:
                    cdi = self.claims[byref[ref["name"]]]["cdi"]
                    if ref.get("request"):
                        ids += cdi.get(ref["request"], [])
                    else:
                        ids += [i for v in cdi.values() for i in v]
                c["cdi"] = list(dict.fromkeys(ids))
                c["edits"] = cdi_resolve(self.args.cdi_dir, c["cdi"])
                out.append({"name": c["name"], "cdi": c["cdi"], "env": c["edits"]["env"],
                            "mounts": c["edits"]["mounts"]})
        except (RuntimeError, ValueError, KeyError) as e:
            with self.lock:
                self.pods.pop(key, None)
            log("pod %s not started: %s" % (key, e))
            return 409, {"error": str(e)}
        try:
            for c in spec.get("containers") or []:
                if c.get("command"):
                    self.start_container(spec, c)
        except (OSError, RuntimeError, ValueError, KeyError) as e:  # a runtime's CreateContainer error
            log("pod %s: a container did not start: %s" % (key, e))
            return 500, {"error": "container not started: %s" % e, "containers": out}
        return 201, {"containers": out}

    def start_container(self, pod, c):
        edits = c["edits"]
        for d in edits["deviceNodes"]:
            if not os.path.exists(d.get("hostPath") or d["path"]):
                raise RuntimeError("CDI device node %s is not on the host" % d["path"])
        mounts = [{"container_path": m["containerPath"], "host_path": m["hostPath"],
                   "read_only": "ro" in (m.get("options") or [])} for m in edits["mounts"]]
        given = {k: v for k, _, v in (kv.partition("=") for kv in edits["env"])}
        p = kubelet_common.launch(pod, c, given, mounts, self.namespaces, self.args.log_dir)
        log("started %s/%s/%s pid %d with %s" % (pod["namespace"], pod["name"], c["name"],
                                                 p.pid, c["cdi"]))

    def delete_pod(self, key):
        with self.lock:
            pod = self.pods.pop(key, None)
        if pod is None:
            return 404, {"error": "no pod " + key}
        for c in pod.get("containers") or []:
            kill_container(c)
        with self.lock:
            for c in self.claims.values():
                c["pods"].discard(pod["uid"])
        failed = self.unprepare_unused()
        return 200, {"unprepare_failed": failed}

    def pod_status(self, key):
        with self.lock:
            pod = self.pods.get(key)
        if pod is None:
            return 404, {"error": "no pod " + key}
        out = []
        for c in pod.get("containers") or []:
            p = c.get("proc")
            out.append({"name": c["name"], "pid": p.pid if p else None,
                        "exit": p.poll() if p else None, "log": c.get("log")})
        return 200, {"containers": out}

    def raw(self, kind, spec):
        t0 = time.monotonic()
        if kind == "prepare":
            got = self.prepare_batch(spec["driver"], spec["claims"])
            ans = {u: {"error": e, "devices": d} for u, (e, d) in got.items()}
        else:
            ans = {u: {"error": e} for u, e in self.unprepare_batch(spec["driver"],
                                                                    spec["claims"]).items()}
        return 200, {"claims": ans, "seconds": time.monotonic() - t0}

    # ---- life ----
    def start(self):
        self.wipe()
        with self.lock:
            self.gen += 1
            gen = self.gen
        threading.Thread(target=self.watch, args=(gen,), daemon=True).start()

    def restart(self, down_s):
        log("acting a restart")
        with self.lock:
            self.gen += 1
            for p in self.plugins.values():
                if p.get("channel"):
                    p["channel"].close()
            self.plugins.clear()
            self.sockets.clear()
            self.seen.clear()
        time.sleep(down_s)
        self.start()
        log("back up")

    def state(self):
        with self.lock:
            return 200, {
                "plugins": {n: {"endpoint": p["endpoint"], "version": p["version"],
                                "health_version": p.get("health_version")}
                            for n, p in self.plugins.items()},
                "health": {d: dict(h) for d, h in self.health.items()},
                "registrations": self.registrations, "refusals": list(self.refusals),
                "wipes": self.wipes, "wiped": list(self.wiped), "prepares": self.prepares, "unprepares": self.unprepares,
                "claims": {u: {"namespace": c["namespace"], "name": c["name"],
                               "drivers": c["drivers"], "pods": sorted(c["pods"]),
                               "cdi": c["cdi"]} for u, c in self.claims.items()},
                "namespaces": self.namespaces}


def socket_id(p):
    """(device, inode, ctime) of the socket at p, None when p is not a socket."""
    try:
        st = os.stat(p)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns) if stat.S_ISSOCK(st.st_mode) else None


def make_handler(k):
    class H(kubelet_common.Handler):
        def post(self, path):
            if path == "/pods":
                return k.add_pod(self.body())
            if path in ("/prepare", "/unprepare"):
                return k.raw(path[1:], self.body())
            if path == "/unprepare-retry":
                return 200, {"unprepare_failed": k.unprepare_unused()}
            return None

        def do_DELETE(self):
            if self.pod_key():
                try:
                    return self.reply(*k.delete_pod(self.pod_key()))
                except Exception as e:  # noqa: BLE001
                    return self.reply(500, {"error": repr(e)})
            self.reply(404, {"error": "no such endpoint"})
    H.k = k
    return H


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plugins-registry", required=True)
    ap.add_argument("--cdi-dir", required=True)
    ap.add_argument("--api", required=True, help="the API server (claims, the startup wipe)")
    ap.add_argument("--token", default="none")
    ap.add_argument("--node-name", required=True)
    ap.add_argument("--pb-dir", required=True, help="where protoc --python_out put dra_pb2")
    ap.add_argument("--log-dir", required=True, help="containers' output goes here")
    ap.add_argument("--no-namespaces", action="store_true")
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    dra, reg = load_pb(args.pb_dir)
    k = Kubelet(args, dra, reg)
    k.start()
    kubelet_common.serve(make_handler(k), 0, args.port_file, k.pods, lambda port: log(
        "up: registry %s, control port %d, containers %s" % (
            args.plugins_registry, port,
            "in their own namespaces" if k.namespaces else "as plain processes")))


if __name__ == "__main__":
    main()
