# SPDX-License-Identifier: Apache-2.0
"""Helpers of the gslice-extender tests (tests/k8s/ext_*.py): a private API server
stand-in, gslice-extender against it, nodes with a gslice.io/gpus inventory and a
heartbeat, pods, and the kube-scheduler stand-in. Run by ctest with /usr/bin/python3;
GSLICE_BUILD and GSLICE_SRC come from the environment."""

import atexit
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scheduler  # noqa: E402
import signing  # noqa: E402
from signing import sign_assigned, make_key  # noqa: E402,F401  (for the tests)

GiB = 1 << 30
BUILD = os.environ.get("GSLICE_BUILD")
SRC = os.environ.get("GSLICE_SRC")
if not BUILD or not SRC:
    sys.exit("run through ctest (make test), which sets GSLICE_BUILD and GSLICE_SRC")
EXTENDER = os.path.join(BUILD, "bin", "gslice-extender")


def fail(msg):
    print("FAIL: %s" % (msg,), file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def passed(msg):
    print("PASS: " + msg, flush=True)


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro():
    """The API's MicroTime, as gslice-node writes a Lease's renewTime."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


LEASES = "/apis/coordination.k8s.io/v1/namespaces/%s/leases"


def wait_for(what, fn, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    fail("timed out (%.0f s) waiting for %s" % (timeout, what))


class Cluster:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gslice-ext.")
        self.procs = []
        self.ext = None
        self.ext_url = None
        self.metrics_url = None
        self.tls = None
        self.hb_nodes = {}  # name -> gpus annotation dict (heartbeat refreshed)
        self.hb_changed = {}  # name -> monotonic time its heartbeat value last changed
        self.hb_stop = threading.Event()
        self.lease_nodes = {}  # node -> (namespace, holderIdentity): Leases renewed
        self.lease_changed = {}  # node -> monotonic time its renewTime last changed
        self.hb_lock = threading.Lock()
        atexit.register(self.close)
        port_file = os.path.join(self.dir, "api.port")
        self.api_log = open(os.path.join(self.dir, "apiserver.log"), "w")
        p = subprocess.Popen(["/usr/bin/python3", os.path.join(SRC, "tests/k8s/apiserver.py"),
                              "--port", "0", "--port-file", port_file, "--bookmark-s", "0.5"],
                             stdout=self.api_log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        wait_for("the API server stand-in", lambda: os.path.exists(port_file))
        self.api = "http://127.0.0.1:%s" % open(port_file).read().strip()
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write("current-context: t\nclusters:\n- name: c\n  cluster:\n    server: %s\n"
                    "contexts:\n- name: t\n  context: {cluster: c}\n" % self.api)
        # The cluster's signing key (the Secret gslice-extender and gslice-node mount).
        self.signing_key = make_key(os.path.join(self.dir, "signing.key"))
        self.hb_thread = threading.Thread(target=self._heartbeats, daemon=True)
        self.hb_thread.start()

    def close(self):
        self.hb_stop.set()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if os.environ.get("KEEP_TMP"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def dump_logs(self):
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".log"):
                print("--- " + name, file=sys.stderr)
                print(open(os.path.join(self.dir, name)).read()[-4000:], file=sys.stderr)

    # ---- the API server ----------------------------------------------------------------
    def req(self, method, path, body=None, ok=(200, 201)):
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        st, obj = scheduler.http(method, self.api + path, body, ctype=ctype)
        if st not in ok:
            fail("%s %s: HTTP %d: %s" % (method, path, st, obj))
        return obj

    def add_node(self, name, gpus, slots=16, heartbeat=True, annotation=None):
        """gpus: list of memory sizes in bytes (or (memory, healthy))."""
        inv = {"version": 1, "heartbeat": now_rfc3339(), "slotsPerGpu": slots, "gpus": []}
        for i, g in enumerate(gpus):
            mem, healthy = g if isinstance(g, tuple) else (g, True)
            inv["gpus"].append({"index": i, "uuid": "GPU-%s-%d" % (name, i), "memory": mem,
                                "healthy": healthy, "slots": slots})
        ann = {"gslice.io/gpus": json.dumps(inv) if annotation is None else annotation}
        self.req("POST", "/api/v1/nodes", {
            "metadata": {"name": name, "annotations": ann},
            "status": {"allocatable": {"gslice.io/gpu": str(slots * len(gpus))},
                       "capacity": {"gslice.io/gpu": str(slots * len(gpus))}}})
        if heartbeat and annotation is None:
            with self.hb_lock:
                self.hb_nodes[name] = inv

    def stop_heartbeat(self, name):
        with self.hb_lock:
            self.hb_nodes.pop(name, None)

    def renew_lease(self, node, ns="gslice-system", holder=None):
        """Creates or renews Lease gslice-node-<node> as gslice-node does (holder: the node)."""
        path = LEASES % ns
        name = "gslice-node-" + node
        st, cur = scheduler.http("GET", self.api + path + "/" + name)
        spec = {"holderIdentity": node if holder is None else holder,
                "leaseDurationSeconds": 40, "renewTime": now_micro()}
        if st == 404:
            st, _ = scheduler.http("POST", self.api + path, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": ns}, "spec": spec})
        elif st == 200:
            cur["spec"] = spec
            st, _ = scheduler.http("PUT", self.api + path + "/" + name, cur)
        if st in (200, 201):
            self.lease_changed[node] = time.monotonic()
        return st

    def keep_lease(self, node, ns="gslice-system", holder=None):
        """Renews the node's Lease every 0.5 s from now (stop_lease ends it)."""
        self.renew_lease(node, ns, holder)
        with self.hb_lock:
            self.lease_nodes[node] = (ns, holder)

    def stop_lease(self, node):
        with self.hb_lock:
            self.lease_nodes.pop(node, None)

    def _heartbeats(self):
        # gslice-node refreshes the heartbeat every 10 s; the tests use a short
        # --node-timeout, so every 0.5 s here (a new value each second).
        while not self.hb_stop.wait(0.5):
            with self.hb_lock:
                todo = list(self.hb_nodes.items())
                leases = list(self.lease_nodes.items())
            for node, (ns, holder) in leases:
                try:
                    self.renew_lease(node, ns, holder)
                except OSError:
                    pass
            for name, inv in todo:
                old = inv["heartbeat"]
                inv["heartbeat"] = now_rfc3339()
                try:
                    scheduler.http("PATCH", self.api + "/api/v1/nodes/" + name,
                                   {"metadata": {"annotations": {"gslice.io/gpus": json.dumps(inv)}}},
                                   ctype="application/merge-patch+json")
                    if inv["heartbeat"] != old:
                        self.hb_changed[name] = time.monotonic()
                except OSError:
                    pass

    def add_pod(self, ns, name, containers, annotations=None, init=None, node=None,
                priority_class=None):
        """containers: [(name, gpus, memory, compute)] with memory/compute as quantities;
        node: spec.nodeName set at creation, as a namespace user may write it."""
        def ctr(c):
            cname, n, mem, cpu = c
            lim = {"gslice.io/gpu": str(n)}
            if mem is not None:
                lim["gslice.io/gpu-memory"] = str(mem)
            if cpu is not None:
                lim["gslice.io/gpu-compute"] = str(cpu)
            return {"name": cname, "image": "x", "resources": {"limits": lim}}
        pod = {"metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
               "spec": {"containers": [ctr(c) for c in containers],
                        "schedulerName": "default-scheduler"},
               "status": {"phase": "Pending"}}
        if init:
            pod["spec"]["initContainers"] = [ctr(c) for c in init]
        if node:
            pod["spec"]["nodeName"] = node
        if priority_class:
            pod["spec"]["priorityClassName"] = priority_class
        return self.req("POST", "/api/v1/namespaces/%s/pods" % ns, pod)

    def annotate(self, ns, name, annotations):
        """A merge patch of the pod's annotations (None deletes one), as its namespace's
        edit role may write them."""
        return self.req("PATCH", "/api/v1/namespaces/%s/pods/%s" % (ns, name),
                        {"metadata": {"annotations": annotations}})

    def signature(self, ns, name):
        return (self.pod(ns, name)["metadata"].get("annotations") or {}).get(
            "gslice.io/assigned-signature")

    def pod(self, ns, name):
        return self.req("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name))

    def assigned(self, ns, name):
        a = (self.pod(ns, name)["metadata"].get("annotations") or {}).get("gslice.io/assigned")
        return json.loads(a) if a else None

    def delete_pod(self, ns, name):
        self.req("DELETE", "/api/v1/namespaces/%s/pods/%s" % (ns, name))

    def finish_pod(self, ns, name):
        self.req("PATCH", "/api/v1/namespaces/%s/pods/%s" % (ns, name),
                 {"status": {"phase": "Succeeded"}})

    def requests_log(self):
        return self.req("GET", "/_test/requests")

    # ---- TLS ----------------------------------------------------------------------------
    def pki(self):
        """Test certificates (openssl, made once): ca.crt signs server (127.0.0.1) and client
        (kube-scheduler, clientAuth); other-ca.crt signs other-client. Exits 77 without
        openssl. Returns the directory."""
        d = os.path.join(self.dir, "pki")
        if os.path.exists(os.path.join(d, "done")):
            return d
        if not shutil.which("openssl"):
            print("SKIP: openssl is needed to make test certificates")
            sys.exit(77)
        os.makedirs(d, exist_ok=True)

        def ossl(*a):
            subprocess.run(["openssl"] + list(a), cwd=d, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for ca in ("ca", "other-ca"):
            ossl("req", "-x509", *ec, "-keyout", ca + ".key", "-out", ca + ".crt",
                 "-subj", "/CN=" + ca, "-days", "2")
        for name, ca, ext in (
                ("server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                 "extendedKeyUsage=serverAuth"),
                ("client", "ca", "extendedKeyUsage=clientAuth"),
                ("other-client", "other-ca", "extendedKeyUsage=clientAuth")):
            with open(os.path.join(d, name + ".ext"), "w") as f:
                f.write(ext + "\n")
            ossl("req", "-new", *ec, "-keyout", name + ".key", "-out", name + ".csr",
                 "-subj", "/CN=" + ("kube-scheduler" if "client" in name else "gslice-extender"))
            ossl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
                 "-CAcreateserial", "-days", "2", "-extfile", name + ".ext", "-out", name + ".crt")
        open(os.path.join(d, "done"), "w").close()
        return d

    def tls_args(self):
        d = self.pki()
        return ["--tls-cert", os.path.join(d, "server.crt"), "--tls-key",
                os.path.join(d, "server.key"), "--client-ca", os.path.join(d, "ca.crt")]

    def client_tls(self, client="client"):
        """(CA file, certificate, key) for scheduler.Scheduler(tls=...); client None: no
        certificate."""
        d = self.pki()
        if client is None:
            return (os.path.join(d, "ca.crt"), None, None)
        return (os.path.join(d, "ca.crt"), os.path.join(d, client + ".crt"),
                os.path.join(d, client + ".key"))

    # ---- gslice-extender --------------------------------------------------------------
    def start_extender(self, *args, wait_ready=True, may_fail=False, tls=False):
        """Starts gslice-extender (verbs on 127.0.0.1, plain HTTP, or with tls HTTPS and client
        certificates of pki()'s CA; /metrics on a port of its own); with may_fail, None when
        it exits at once (a port taken)."""
        log_path = os.path.join(self.dir, "extender.log")
        self.ext_log = open(log_path, "a")
        start = self.ext_log.tell()
        keys = [] if any(a == "--signing-key" for a in args) else [
            "--signing-key", self.signing_key]
        self.ext = subprocess.Popen([EXTENDER, "--listen", "127.0.0.1:0", "--metrics-listen",
                                     "127.0.0.1:0", "--kubeconfig", self.kubeconfig] + keys +
                                    (self.tls_args() if tls else []) + list(args),
                                    stdout=self.ext_log, stderr=subprocess.STDOUT)
        self.procs.append(self.ext)

        def port():
            with open(log_path) as f:
                f.seek(start)
                m = re.search(r"listening on port (\d+).*metrics on port (\d+)", f.read())
            if self.ext.poll() is not None:
                if may_fail:
                    return "exited"
                fail("gslice-extender exited with %s" % self.ext.returncode)
            return m and m.groups()
        got = wait_for("gslice-extender to listen", port)
        if got == "exited":
            self.ext = None
            return None
        self.tls = self.client_tls() if tls else None
        self.ext_url = "%s://127.0.0.1:%s" % ("https" if tls else "http", got[0])
        self.metrics_url = "http://127.0.0.1:%s" % got[1]
        if wait_ready:
            wait_for("gslice-extender's first sync",
                     lambda: "gslice_extender_ready 1" in self.metrics())
        return self.ext_url

    def stop_extender(self, sig=signal.SIGKILL):
        self.ext.send_signal(sig)
        self.ext.wait()
        self.ext = None

    def metrics(self):
        with urllib.request.urlopen(self.metrics_url + "/metrics", timeout=5) as r:
            return r.read().decode()

    def metric(self, name, labels=""):
        m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), self.metrics(), re.M)
        return float(m.group(1)) if m else None

    def wait_metric(self, name, labels, value, timeout=10.0):
        """Until the extender's /metrics shows value (its view caught up with the watch)."""
        wait_for("%s%s == %s (now %s)" % (name, labels, value, self.metric(name, labels)),
                 lambda: self.metric(name, labels) == value, timeout)

    def scheduler(self, **kw):
        kw.setdefault("tls", self.tls)
        return scheduler.Scheduler(self.api, self.ext_url, **kw)

    def schedule(self, ns, name, **kw):
        s = self.scheduler(**kw)
        return s.schedule_one(self.pod(ns, name))


def run(test):
    """Runs test(cluster); on failure shows the logs."""
    c = Cluster()
    try:
        test(c)
    except SystemExit as e:
        if e.code:
            c.dump_logs()
        raise
    except BaseException:
        c.dump_logs()
        raise
