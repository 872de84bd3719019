#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A kubelet stand-in for gslice-node's tests (python3-grpcio + python3-protobuf, Debian's).

It plays the parts of the kubelet a device plugin meets, as the device plugin API (v1beta1)
and the PodResources API (v1) document them:

  - the Registration service on DIR/kubelet.sock; on Register it dials the plugin's endpoint
    DIR/<endpoint>, asks GetDevicePluginOptions and reads ListAndWatch for as long as it lasts;
  - admission of a pod: for each container asking for the resource (init containers first, in
    order, then the others), GetPreferredAllocation when the plugin offers it, then Allocate;
    devices of init containers are reused by the containers after them, as the kubelet's
    device manager does (devicesToReuse), except a sidecar's ("sidecar": true, an init
    container with restartPolicy Always: it takes reusable devices first too, but keeps
    them); only Healthy, unallocated devices are given;
  - starting each container: PreStartContainer when the plugin asked for it (a failed one is
    retried, as the kubelet's back-off does, and the container is not started until it
    succeeds), then the "container": a process with the Allocate response's environment, in
    its own mount and pid namespaces (unshare --mount --pid --fork --mount-proc, as root) with
    real bind mounts of what Allocate returned, in order of destination depth as containerd and
    CRI-O mount, read_only honoured, over a fresh tmpfs on /run (so /run/gslice/... can be
    made). Mounts outside /run (the hook, /etc/ld.so.preload) are not made: the libraries
    /etc/ld.so.preload names become LD_PRELOAD of their host paths, and the rest of the host's
    file system stays visible (a container's root could reach more than it would in a real
    runtime: tests of what a container can do use only what the mounts give). Without
    namespaces (not root, no unshare; or --no-namespaces) the old way: the mounts mapped to the
    host paths (an env value under a mount's container path is rewritten to the host path) —
    /state says which ("namespaces"), and tests of a container's reach skip (77) without them.
    Init containers run one after the other to completion before the others start; a sidecar
    is started in its turn and left running (the next starts once it runs);
  - with --api URL, the init containers' states in the pod's status (initContainerStatuses:
    running, terminated with the exit code), as the kubelet reports them;
  - PodResourcesLister.List on --pod-resources: pods and their containers and sidecars (not
    the regular init containers) with the devices allocated to them, as the kubelet (1.29+)
    lists them;
  - CDI (--cdi-dir DIR): an Allocate answer's cdi_devices are resolved at each container start
    from the specs in DIR by tests/k8s/cdi_read.py (the CDI library's rules: a spec it refuses
    or a name it cannot resolve fails the start, as CreateContainerError), and their env and
    mounts are applied after the answer's own, as containerd and CRI-O with CDI on do (device
    nodes are not made); without --cdi-dir a container with cdi_devices does not start;
  - a restart: the Registration server stops, every socket in DIR is deleted (as the kubelet
    does when it starts), a new kubelet.sock comes up a moment later; allocations survive (the
    kubelet checkpoints them), the plugin must register again.

Control interface, HTTP JSON on 127.0.0.1 (--port 0 and --port-file FILE: the port chosen):
  POST   /pods   {"namespace","name","containers":[{"name","init":false,"sidecar":false,"devices":N,
                  "command":[..],"env":{..}}]}
                 admits and starts the pod; 201 {"containers":[{"name","devices":[..],
                 "env":{..},"mounts":[..],"cdi_devices":[..]}]}; 409 {"error"} when it cannot
                 be admitted
  DELETE /pods/NS/NAME   kills its processes, frees its devices
  GET    /pods/NS/NAME   {"containers":[{"name","pid","exit","log","prestart_failures",
                          "prestart_error","starts","create_error"}]}
  POST   /pods/NS/NAME/restart {"container","command":[..] (optional: what runs this time)}
                 a container restart as the kubelet does one: the process is killed if it
                 still runs, then PreStartContainer and a new process with the same devices,
                 environment and mounts; answers once it started (or PreStart gave up)
  POST   /restart        {"down_s": 0.3} acts a kubelet restart
  GET    /state          {"registrations","endpoint","options","devices":{id: health},
                          "streams","allocated":{id: "ns/pod/container"},"namespaces",
                          "prestart_failures"}
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from concurrent import futures

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdi_read  # noqa: E402
import kubelet_common  # noqa: E402
from kubelet_common import kill_container, namespaces_work  # noqa: E402


def load_pb(pb_dir):
    sys.path.insert(0, pb_dir)
    import deviceplugin_pb2  # noqa: E402
    import podresources_pb2  # noqa: E402
    return deviceplugin_pb2, podresources_pb2


class Kubelet:
    def __init__(self, args, dp, pr):
        self.args = args
        self.dp = dp
        self.pr = pr
        self.lock = threading.RLock()
        self.registrations = 0
        self.endpoint = None
        self.resource = None
        self.options = None
        self.devices = {}  # id -> health
        self.streams = 0
        self.stream_gen = 0
        self.pods = {}  # "ns/name" -> pod dict
        self.allocated = {}  # device id -> "ns/pod/container"
        self.reg_server = None
        self.pr_server = None
        self.channel = None
        self.namespaces = not args.no_namespaces and namespaces_work()
        self.prestart_failures = 0

    # ---- Registration ----
    def register(self, req, ctx):
        if req.version != "v1beta1":
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "unsupported version " + req.version)
        with self.lock:
            self.registrations += 1
            self.endpoint = req.endpoint
            self.resource = req.resource_name
            self.options = {"pre_start_required": req.options.pre_start_required,
                            "get_preferred_allocation_available":
                                req.options.get_preferred_allocation_available}
            self.stream_gen += 1
            gen = self.stream_gen
            if self.channel:
                self.channel.close()
            self.channel = grpc.insecure_channel("unix:" + os.path.join(self.args.dir, req.endpoint))
        log("registered %s at %s options %s" % (req.resource_name, req.endpoint, self.options))
        threading.Thread(target=self.watch, args=(gen,), daemon=True).start()
        return self.dp.Empty()

    def call(self, method, req, resp_cls, timeout=30):
        with self.lock:
            ch = self.channel
        if ch is None:
            raise RuntimeError("no plugin registered")
        fn = ch.unary_unary("/v1beta1.DevicePlugin/" + method,
                            request_serializer=req.SerializeToString,
                            response_deserializer=resp_cls.FromString)
        return fn(req, timeout=timeout)

    def watch(self, gen):
        time.sleep(0.05)
        try:
            opts = self.call("GetDevicePluginOptions", self.dp.Empty(), self.dp.DevicePluginOptions)
            log("options %s" % str(opts).replace("\n", " "))
        except Exception as e:  # noqa: BLE001
            log("GetDevicePluginOptions failed: %s" % e)
        with self.lock:
            ch = self.channel
        stream = ch.unary_stream("/v1beta1.DevicePlugin/ListAndWatch",
                                 request_serializer=self.dp.Empty.SerializeToString,
                                 response_deserializer=self.dp.ListAndWatchResponse.FromString)
        with self.lock:
            self.streams += 1
        try:
            for resp in stream(self.dp.Empty()):
                with self.lock:
                    if gen != self.stream_gen:
                        break
                    self.devices = {d.ID: d.health for d in resp.devices}
                log("ListAndWatch: %d devices, %d healthy" % (
                    len(resp.devices), sum(d.health == "Healthy" for d in resp.devices)))
        except grpc.RpcError as e:
            log("ListAndWatch ended: %s" % e.code())
        finally:
            with self.lock:
                self.streams -= 1
                if gen == self.stream_gen:
                    # The endpoint is gone: its devices are not allocatable until it is back.
                    self.devices = {k: "Unhealthy" for k in self.devices}

    # ---- PodResources ----
    def list_pods(self, req, ctx):
        resp = self.pr.ListPodResourcesResponse()
        with self.lock:
            for pod in self.pods.values():
                p = resp.pod_resources.add(name=pod["name"], namespace=pod["namespace"])
                for c in pod["containers"]:
                    if c.get("init") and not c.get("sidecar"):
                        continue  # regular init containers are not listed by the kubelet
                    cr = p.containers.add(name=c["name"])
                    if c.get("devices_given"):
                        cr.devices.add(resource_name=self.resource, device_ids=c["devices_given"])
        return resp

    # ---- servers ----
    def start_servers(self):
        reg = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        reg.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1beta1.Registration", {
            "Register": grpc.unary_unary_rpc_method_handler(
                self.register, request_deserializer=self.dp.RegisterRequest.FromString,
                response_serializer=self.dp.Empty.SerializeToString)}),))
        reg.add_insecure_port("unix:" + os.path.join(self.args.dir, "kubelet.sock"))
        reg.start()
        pr = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pr.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
            "List": grpc.unary_unary_rpc_method_handler(
                self.list_pods, request_deserializer=self.pr.ListPodResourcesRequest.FromString,
                response_serializer=self.pr.ListPodResourcesResponse.SerializeToString)}),))
        if os.path.exists(self.args.pod_resources):
            os.unlink(self.args.pod_resources)
        pr.add_insecure_port("unix:" + self.args.pod_resources)
        pr.start()
        self.reg_server, self.pr_server = reg, pr

    def restart(self, down_s):
        log("acting a restart")
        self.reg_server.stop(0)
        self.pr_server.stop(0)
        with self.lock:
            self.stream_gen += 1
            self.devices = {k: "Unhealthy" for k in self.devices}
            if self.channel:
                self.channel.close()
                self.channel = None
        for f in os.listdir(self.args.dir):
            p = os.path.join(self.args.dir, f)
            if not os.path.isdir(p) and f != "kubelet_internal_checkpoint":
                os.unlink(p)
        time.sleep(down_s)
        self.start_servers()
        log("back up")

    # ---- pods ----
    def admit(self, spec):
        key = "%s/%s" % (spec["namespace"], spec["name"])
        with self.lock:
            if key in self.pods:
                return 409, {"error": "pod %s exists" % key}
            pod = {"namespace": spec["namespace"], "name": spec["name"], "containers": []}
            order = [c for c in spec["containers"] if c.get("init")] + \
                    [c for c in spec["containers"] if not c.get("init")]
            reusable = []
            taken = []
            for c in order:
                c = dict(c)
                want = int(c.get("devices", 0))
                c["devices_given"] = []
                if want:
                    free = sorted(d for d, h in self.devices.items()
                                  if h == "Healthy" and d not in self.allocated and d not in taken)
                    give = reusable[:want]
                    if len(give) < want:
                        need = want - len(give)
                        avail = [d for d in free if d not in give]
                        if len(avail) < need:
                            for d in taken:
                                self.allocated.pop(d, None)
                            return 409, {"error": "UnexpectedAdmissionError: %d of %s wanted, %d "
                                                  "healthy and free" % (want, self.resource, len(avail))}
                        if self.options and self.options["get_preferred_allocation_available"]:
                            req = self.dp.PreferredAllocationRequest()
                            req.container_requests.add(available_deviceIDs=avail,
                                                       must_include_deviceIDs=give,
                                                       allocation_size=want)
                            pref = self.call("GetPreferredAllocation", req,
                                             self.dp.PreferredAllocationResponse)
                            chosen = [d for d in pref.container_responses[0].deviceIDs
                                      if d in avail][:need]
                            chosen += [d for d in avail if d not in chosen][:need - len(chosen)]
                        else:
                            chosen = avail[:need]
                        give = give + chosen
                        taken += chosen
                    req = self.dp.AllocateRequest()
                    req.container_requests.add(devices_ids=give)
                    try:
                        resp = self.call("Allocate", req, self.dp.AllocateResponse)
                    except grpc.RpcError as e:
                        for d in taken:
                            self.allocated.pop(d, None)
                        return 409, {"error": "Allocate failed: %s %s" % (e.code(), e.details())}
                    cr = resp.container_responses[0]
                    c["devices_given"] = give
                    c["env_given"] = dict(cr.envs)
                    c["mounts_given"] = [{"container_path": m.container_path,
                                          "host_path": m.host_path, "read_only": m.read_only}
                                         for m in cr.mounts]
                    c["cdi_given"] = [d.name for d in cr.cdi_devices]
                    for d in give:
                        self.allocated[d] = "%s/%s" % (key, c["name"])
                    if c.get("init") and not c.get("sidecar"):
                        reusable = [d for d in give if d not in reusable] + reusable
                    else:  # a sidecar keeps its devices as an app container does
                        reusable = [d for d in reusable if d not in give]
                pod["containers"].append(c)
            self.pods[key] = pod
        threading.Thread(target=self.run_pod, args=(pod,), daemon=True).start()
        return 201, {"containers": [{"name": c["name"], "devices": c["devices_given"],
                                     "env": c.get("env_given", {}),
                                     "mounts": c.get("mounts_given", []),
                                     "cdi_devices": c.get("cdi_given", [])}
                                    for c in pod["containers"]]}

    def start_container(self, pod, c):
        c["starts"] = c.get("starts", 0) + 1
        if c["devices_given"] and self.options and self.options["pre_start_required"]:
            req = self.dp.PreStartContainerRequest(devices_ids=c["devices_given"])
            for attempt in range(100):
                try:
                    self.call("PreStartContainer", req, self.dp.PreStartContainerResponse)
                    c["prestart_error"] = None
                    break
                except Exception as e:  # noqa: BLE001
                    # The kubelet retries a container whose start failed (back-off).
                    with self.lock:
                        self.prestart_failures += 1
                    c["prestart_failures"] = c.get("prestart_failures", 0) + 1
                    why = ("%s %s" % (e.code().name, e.details())) if isinstance(
                        e, grpc.RpcError) else str(e)
                    c["prestart_error"] = why
                    log("PreStartContainer %s failed: %s (retrying)" % (c["name"], why))
                    if pod.get("deleted"):
                        return False
                    time.sleep(0.2)
            else:
                log("PreStartContainer %s: giving up, the container is not started" % c["name"])
                return False
        mounts = c.get("mounts_given", [])
        given = dict(c.get("env_given", {}))
        if c.get("cdi_given"):
            cdi = self.cdi_edits(c)
            if cdi is None:
                return False
            given.update(cdi["env"])
            ctr = set(m["container_path"] for m in cdi["mounts"])
            mounts = [m for m in mounts if m["container_path"] not in ctr] + cdi["mounts"]
        # GSLICE_K8S_SLOTS names slots, not a path: never rewritten.
        p = kubelet_common.launch(pod, c, given, mounts, self.namespaces, self.args.log_dir,
                                  as_is=("GSLICE_K8S_SLOTS",))
        log("started %s/%s/%s pid %d" % (pod["namespace"], pod["name"], c["name"], p.pid))
        return True

    def cdi_edits(self, c):
        """The CDI edits of c's cdi_devices, as a runtime resolves them when it creates the
        container; None (and why in c["create_error"]) when it cannot."""
        try:
            if not self.args.cdi_dir:
                raise cdi_read.CDIError("CDI devices %s, but this runtime has no CDI (no "
                                        "--cdi-dir)" % ", ".join(c["cdi_given"]))
            edits = cdi_read.kubelet_view(cdi_read.resolve([self.args.cdi_dir], c["cdi_given"]))
        except cdi_read.CDIError as e:
            c["create_error"] = "CreateContainerError: %s" % e
            log("%s: %s" % (c["name"], c["create_error"]))
            return None
        c["create_error"] = None
        return edits

    def restart_container(self, key, spec):
        with self.lock:
            pod = self.pods.get(key)
            if not pod:
                return 404, {"error": "no pod " + key}
            cs = [c for c in pod["containers"] if c["name"] == spec.get("container")]
            if not cs:
                return 404, {"error": "no container %s in %s" % (spec.get("container"), key)}
            c = cs[0]
        kill_container(c)
        if spec.get("command"):
            c["command"] = spec["command"]
        started = self.start_container(pod, c)
        return 200, {"started": started, "prestart_failures": c.get("prestart_failures", 0),
                     "prestart_error": c.get("prestart_error")}

    def report_inits(self, pod):
        """The init containers' states in the pod's status, as the kubelet's status manager
        writes them (with --api): a merge patch replaces the whole list."""
        if not self.args.api:
            return
        sts = []
        for c in pod["containers"]:
            if not c.get("init"):
                continue
            p = c.get("proc")
            if p is None:
                state = {"waiting": {"reason": "PodInitializing"}}
            elif p.poll() is None:
                state = {"running": {}}
            else:
                state = {"terminated": {"exitCode": p.returncode}}
            sts.append({"name": c["name"], "state": state})
        body = json.dumps({"status": {"initContainerStatuses": sts}}).encode()
        url = "%s/api/v1/namespaces/%s/pods/%s" % (self.args.api, pod["namespace"], pod["name"])
        req = urllib.request.Request(url, data=body, method="PATCH",
                                     headers={"Content-Type": "application/merge-patch+json"})
        try:
            urllib.request.urlopen(req, timeout=10).read()
        except Exception as e:  # noqa: BLE001
            log("cannot report init container states: %s" % e)

    def run_pod(self, pod):
        for c in pod["containers"]:
            if pod.get("deleted"):
                return
            if c.get("command") is None:
                continue
            if not self.start_container(pod, c):
                return
            if c.get("init") and c.get("sidecar"):
                self.report_inits(pod)  # running, to the pod's end
            elif c.get("init"):
                self.report_inits(pod)
                c["proc"].wait()
                self.report_inits(pod)
                if c["proc"].returncode != 0:
                    log("init container %s failed (%d): the pod stops here" % (c["name"], c["proc"].returncode))
                    return

    def delete(self, key):
        with self.lock:
            pod = self.pods.pop(key, None)
            if not pod:
                return 404, {"error": "no pod " + key}
            pod["deleted"] = True
            for c in pod["containers"]:
                for d in c.get("devices_given", []):
                    self.allocated.pop(d, None)
        for c in pod["containers"]:
            kill_container(c)
        return 200, {}

    def pod_status(self, key):
        with self.lock:
            pod = self.pods.get(key)
            if not pod:
                return 404, {"error": "no pod " + key}
            out = []
            for c in pod["containers"]:
                p = c.get("proc")
                out.append({"name": c["name"], "pid": p.pid if p else None,
                            "exit": p.poll() if p else None, "log": c.get("log"),
                            "prestart_failures": c.get("prestart_failures", 0),
                            "prestart_error": c.get("prestart_error"),
                            "starts": c.get("starts", 0),
                            "create_error": c.get("create_error")})
            return 200, {"containers": out}

    def state(self):
        with self.lock:
            return 200, {"registrations": self.registrations, "endpoint": self.endpoint,
                         "resource": self.resource, "options": self.options,
                         "devices": self.devices, "streams": self.streams,
                         "allocated": self.allocated, "namespaces": self.namespaces,
                         "prestart_failures": self.prestart_failures}


def log(msg):
    sys.stderr.write("%.3f kubelet: %s\n" % (time.time(), msg))
    sys.stderr.flush()


def make_handler(k):
    class H(kubelet_common.Handler):
        def post(self, path):
            if path == "/pods":
                return k.admit(self.body())
            parts = path.strip("/").split("/")
            if len(parts) == 4 and parts[0] == "pods" and parts[3] == "restart":
                return k.restart_container(parts[1] + "/" + parts[2], self.body())
            return None

        def do_DELETE(self):
            if self.pod_key():
                return self.reply(*k.delete(self.pod_key()))
            self.reply(404, {"error": "no such endpoint"})
    H.k = k
    return H


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="the device plugin directory (kubelet.sock)")
    ap.add_argument("--pod-resources", required=True, help="PodResources socket path")
    ap.add_argument("--pb-dir", required=True, help="where protoc --python_out put the messages")
    ap.add_argument("--log-dir", required=True, help="containers' output goes here")
    ap.add_argument("--api", default="", help="API server URL: init container states are reported there")
    ap.add_argument("--no-namespaces", action="store_true",
                    help="start containers as plain processes, mounts mapped to host paths")
    ap.add_argument("--cdi-dir", default="", help="CDI spec directory: cdi_devices are applied")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    dp, pr = load_pb(args.pb_dir)
    k = Kubelet(args, dp, pr)
    k.start_servers()
    kubelet_common.serve(make_handler(k), args.port, args.port_file, k.pods, lambda port: log(
        "up: %s, control port %d, containers %s" % (
            args.dir, port, "in their own namespaces" if k.namespaces
            else "as plain processes (no namespaces)")))


if __name__ == "__main__":
    main()
