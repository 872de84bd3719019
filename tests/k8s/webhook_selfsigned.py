#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gslice-webhook --self-signed-secret NAME --webhook-config NAME makes its certificates at
start, for clusters without cert-manager. Two webhooks started at once against one API server
stand-in (tests/k8s/apiserver.py's store, with the MutatingWebhookConfiguration path added
here; each GET of the Secret held until both have come, so both find none): one Secret is made
(kubernetes.io/tls: tls.crt, tls.key, ca.crt, ca.key), the other's create is a 409 and it
reads that one; both serve its certificate, which verifies against the caBundle written into
the configuration for the service name and for NAME.cluster.local (python ssl with that CA,
server_hostname the name, connected to 127.0.0.1), and an AdmissionReview over that TLS is
patched. The files are 0600 in a 0700 directory of their own, removed at exit; no key is in a
log. A restart reuses the Secret (no write). A serving certificate ending in 10 days is
renewed at start from the same CA (one PUT; the caBundle unchanged; 1 year); when that PUT
fails (500), the old pair is served and the renewal is written on the reload tick a minute
later, then served without a restart. The flags: with
--tls-cert, or without --webhook-config, refused. Skipped (77) without openssl (the test's
near-expiry certificate)."""
import base64
import json
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time
from argparse import Namespace
from http.server import ThreadingHTTPServer

from k8stest import BUILD, check, passed, wait_for
import apiserver

WEBHOOK = os.path.join(BUILD, "bin", "gslice-webhook")
SVC = "gslice-webhook.gslice-system.svc"
NS = "gslice-system"
SECRET = "gslice-webhook-selfsigned"
SECRETS = "/api/v1/namespaces/%s/secrets" % NS
MWC = "MutatingWebhookConfiguration"
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
if not shutil.which("openssl"):
    print("SKIP: openssl is needed to make the near-expiry certificate")
    sys.exit(77)

D = tempfile.mkdtemp(prefix="gslice-webhook-ss.")
RELOAD_CUTS = []
BARRIER = {"cv": threading.Condition(), "n": 0, "seen": 0}
PROCS = []


class Handler(apiserver.Handler):
    """apiserver.py's, with MutatingWebhookConfigurations held as any object (cluster-wide)."""

    def serve_api(self):
        # While BARRIER["n"] > 0: a GET of the Secret waits until that many have come (30 s at
        # most), so the webhooks started together all find it absent.
        if self.command == "GET" and self.path == SECRETS + "/" + SECRET:
            with BARRIER["cv"]:
                if BARRIER["n"] > 0:
                    BARRIER["seen"] += 1
                    BARRIER["cv"].notify_all()
                    BARRIER["cv"].wait_for(lambda: BARRIER["seen"] >= BARRIER["n"], timeout=30)
        return super().serve_api()

    def route(self):
        path = self.path.split("?")[0]
        if path.startswith(MWC_PATH) and "/" not in path[len(MWC_PATH):]:
            return MWC, None, path[len(MWC_PATH):], None, {}
        return super().route()


def start_api():
    apiserver.ARGS = Namespace(token=None)
    apiserver.STORE = apiserver.Store(1000)
    apiserver.API_VERSION[MWC] = "admissionregistration.k8s.io/v1"
    apiserver.STORE.create(MWC, None, {"metadata": {"name": "gslice-webhook"}, "webhooks": [
        {"name": "scheduler.gslice.io", "clientConfig": {"service": {
            "name": "gslice-webhook", "namespace": NS, "path": "/mutate"}}}]})
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    kc = os.path.join(D, "kubeconfig")
    with open(kc, "w") as f:
        f.write("current-context: t\nclusters:\n- name: c\n  cluster:\n    server: "
                "http://127.0.0.1:%d\ncontexts:\n- name: t\n  context: {cluster: c}\n" %
                srv.server_address[1])
    return kc


def logtext():
    return "".join("--- %s\n%s\n" % (f, open(os.path.join(D, f)).read()[-3000:])
                   for f in sorted(os.listdir(D)) if f.endswith(".log"))


def start(kc, n, *extra):
    """gslice-webhook number n (its own TMPDIR and log): (process, log path)."""
    tmp = os.path.join(D, "tmp%d" % n)
    os.makedirs(tmp, exist_ok=True)
    path = os.path.join(D, "webhook-%d-%d.log" % (n, len(PROCS)))
    p = subprocess.Popen([WEBHOOK, "--listen", "127.0.0.1:0", "--kubeconfig", kc,
                          "--namespace", NS, "--self-signed-secret", SECRET,
                          "--webhook-config", "gslice-webhook"] + list(extra),
                         stdout=open(path, "w"), stderr=subprocess.STDOUT,
                         env=dict(os.environ, TMPDIR=tmp))
    PROCS.append(p)
    return p, path


def port_of(p, path):
    def port():
        check(p.poll() is None, "gslice-webhook exited %s: %s" % (p.returncode, logtext()))
        for line in open(path).read().splitlines():
            if "listening on port" in line:
                return int(line.split("listening on port ")[1].split()[0])
        return None
    return wait_for("gslice-webhook to listen", port, timeout=30)


def stop(p):
    p.send_signal(signal.SIGTERM)
    check(p.wait(timeout=10) == 0, "SIGTERM: exit %s" % p.returncode)


def secret():
    return apiserver.STORE.get("Secret", NS, SECRET)


def field(name):
    return base64.b64decode(secret()["data"][name]).decode()


def writes(method, path):
    with apiserver.STORE.lock:
        return sum(1 for r in apiserver.STORE.requests
                   if r["method"] == method and r["path"] == path and r["status"] // 100 == 2)


def ca_bundle():
    cfg = apiserver.STORE.get(MWC, None, "gslice-webhook")
    b = cfg["webhooks"][0]["clientConfig"].get("caBundle")
    return base64.b64decode(b).decode() if b else None


def served(port, name, ca_pem):
    """The DER certificate served on port, verified with ca_pem for name; and a patched review."""
    ctx = ssl.create_default_context(cadata=ca_pem)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=name) as s:
            der = s.getpeercert(binary_form=True)
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "t"},
                   "spec": {"containers": [{"name": "main", "image": "x", "resources": {
                       "limits": {"gslice.io/gpu": "1", "gslice.io/gpu-memory": "1Gi"}}}]}}
            body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "request": {"uid": "u1", "operation": "CREATE", "namespace": "t",
                                           "kind": {"group": "", "version": "v1",
                                                    "kind": "Pod"},
                                           "resource": {"group": "", "version": "v1",
                                                        "resource": "pods"},
                                           "object": pod}}).encode()
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    ans = json.loads(data.split(b"\r\n\r\n", 1)[1])
    patch = json.loads(base64.b64decode(ans["response"]["patch"]))
    check(ans["response"]["allowed"] and
          any(op["path"] == "/spec/schedulerName" and op["value"] == "gslice-scheduler"
              for op in patch), "the review over TLS: %r" % ans)
    return der


def pem_der(pem):
    return ssl.PEM_cert_to_DER_cert(pem)


def not_after(pem):
    path = os.path.join(D, "probe.crt")
    with open(path, "w") as f:
        f.write(pem)
    return ssl.cert_time_to_seconds(ssl._ssl._test_decode_cert(path)["notAfter"])


def test_flags(kc):
    base = [WEBHOOK, "--kubeconfig", kc, "--namespace", NS]
    p = subprocess.run(base + ["--self-signed-secret", SECRET, "--webhook-config", "x",
                               "--tls-cert", "a", "--tls-key", "b"], capture_output=True,
                       timeout=10)
    check(p.returncode == 2 and b"not both" in p.stderr, "with --tls-cert: %s %r" %
          (p.returncode, p.stderr))
    p = subprocess.run(base + ["--self-signed-secret", SECRET], capture_output=True, timeout=10)
    check(p.returncode == 2 and b"--webhook-config" in p.stderr, "without --webhook-config: "
          "%s %r" % (p.returncode, p.stderr))
    p = subprocess.run(base + ["--tls-cert", "a", "--tls-key", "b"], capture_output=True,
                       timeout=10)
    check(p.returncode == 2 and b"--self-signed-secret" in p.stderr, "--namespace alone: %s %r"
          % (p.returncode, p.stderr))
    check(not apiserver.STORE.requests, "API calls: %s" % apiserver.STORE.requests)
    passed("the two ways refused together, --self-signed-secret without --webhook-config too")


def test_two(kc):
    # Each GET waits for the other: both find no Secret and both create one; one is a 409.
    with BARRIER["cv"]:
        BARRIER["n"] = 2
    (a, la), (b, lb) = start(kc, 0), start(kc, 1)
    pa, pb = port_of(a, la), port_of(b, lb)
    with BARRIER["cv"]:
        check(BARRIER["seen"] >= 2, "GETs of the Secret: %d" % BARRIER["seen"])
        BARRIER["n"] = 0
    check(writes("POST", SECRETS) == 1, "Secret creates: %s" % apiserver.STORE.requests)
    refused = [r for r in apiserver.STORE.requests if r["method"] == "POST" and r["status"] == 409]
    check(len(refused) == 1, "the loser's create not a 409: %s" % apiserver.STORE.requests)
    sec = secret()
    check(sec["type"] == "kubernetes.io/tls" and
          sorted(sec["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"], "Secret %r" %
          {k: v for k, v in sec.items() if k != "data"})
    ca = wait_for("the caBundle written", ca_bundle, timeout=15)
    check(ca == field("ca.crt") and "gslice-webhook-ca" in subprocess.run(
        ["openssl", "x509", "-noout", "-subject"], input=ca.encode(),
        capture_output=True).stdout.decode(), "caBundle is not the Secret's CA")
    for port in (pa, pb):
        for name in (SVC, SVC + ".cluster.local"):
            check(served(port, name, ca) == pem_der(field("tls.crt")),
                  "port %d does not serve the Secret's certificate" % port)
    try:
        served(pa, "other.gslice-system.svc", ca)
        check(False, "a certificate for another name was accepted")
    except ssl.SSLCertVerificationError:
        pass
    days = (not_after(field("tls.crt")) - time.time()) / 86400
    check(360 < days < 366, "serving certificate for %.0f days" % days)
    for n in (0, 1):
        dirs = os.listdir(os.path.join(D, "tmp%d" % n))
        check(len(dirs) == 1, "tmp%d: %s" % (n, dirs))
        d = os.path.join(D, "tmp%d" % n, dirs[0])
        check(stat.S_IMODE(os.stat(d).st_mode) == 0o700, "dir mode %o" % os.stat(d).st_mode)
        for f in ("tls.crt", "tls.key", "ca.crt"):
            check(stat.S_IMODE(os.stat(os.path.join(d, f)).st_mode) == 0o600, "%s mode" % f)
    text = logtext()
    key = sec["data"]["tls.key"]
    check("PRIVATE KEY" not in text and key[:40] not in text and
          field("tls.key").split("\n")[1][:40] not in text, "a key in the logs")
    passed("two at once: one Secret (the other's create a 409, then read), both serve its "
           "certificate, verified with the caBundle for %s and .cluster.local; a review "
           "patched over it; files 0600 in a private dir; no key logged" % SVC)
    return a, b


def test_restart(kc, a, b):
    before = secret()["metadata"]["resourceVersion"]
    stop(a)
    check(not os.listdir(os.path.join(D, "tmp0")), "the private dir is left at exit")
    a, la = start(kc, 0)
    pa = port_of(a, la)
    check(served(pa, SVC, ca_bundle()) == pem_der(field("tls.crt")), "not the Secret's cert")
    check(secret()["metadata"]["resourceVersion"] == before and writes("PUT", SECRETS + "/" +
          SECRET) == 0, "the Secret was written on a restart")
    stop(a)
    stop(b)
    passed("a restart reuses the Secret (no write); the private dir removed at exit")


def near_expiry():
    """The Secret's serving pair replaced by one of the same CA ending in 10 days: its PEM."""
    for name in ("ca.crt", "ca.key"):
        with open(os.path.join(D, name), "w") as f:
            f.write(field(name))
    with open(os.path.join(D, "ext"), "w") as f:
        f.write("subjectAltName=DNS:%s\n" % SVC)
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", "old.key", "-subj",
                    "/CN=" + SVC, "-out", "old.csr"], cwd=D, check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", "old.csr", "-CA", "ca.crt", "-CAkey",
                    "ca.key", "-CAcreateserial", "-days", "10", "-extfile", "ext", "-out",
                    "old.crt"], cwd=D, check=True, capture_output=True)
    sec = secret()
    for name in ("tls.crt", "tls.key"):
        sec["data"][name] = base64.b64encode(open(os.path.join(D, "old." + name[4:]),
                                                  "rb").read()).decode()
    apiserver.STORE.update("Secret", NS, SECRET, sec)
    return open(os.path.join(D, "old.crt")).read()


def test_renewal(kc):
    near_expiry()
    ca_before = field("ca.crt")
    puts = writes("PUT", SECRETS + "/" + SECRET)
    a, la = start(kc, 0)
    pa = port_of(a, la)
    check(writes("PUT", SECRETS + "/" + SECRET) == puts + 1, "not one PUT of the Secret")
    days = (not_after(field("tls.crt")) - time.time()) / 86400
    check(360 < days < 366 and field("ca.crt") == ca_before,
          "renewed for %.0f days, CA same: %s" % (days, field("ca.crt") == ca_before))
    check(served(pa, SVC, ca_bundle()) == pem_der(field("tls.crt")), "not the renewed cert")
    check("made the serving certificate" in open(la).read(), "renewal not logged")
    stop(a)
    passed("a serving certificate ending in 10 days renewed at start from the same CA "
           "(one PUT, 365 days, caBundle unchanged)")


def test_renewal_tick(kc):
    old = near_expiry()
    path = SECRETS + "/" + SECRET
    with apiserver.STORE.lock:
        apiserver.STORE.faults.append({"method": "PUT", "path": path + "$", "status": 500,
                                       "count": 1, "message": "etcd is down (injected)"})
    puts = writes("PUT", path)
    a, la = start(kc, 0)
    pa = port_of(a, la)
    check(served(pa, SVC, ca_bundle()) == pem_der(old) and writes("PUT", path) == puts,
          "a failed renewal: not the old pair served")
    check("not renewed" in open(la).read() and "etcd is down" in open(la).read(),
          "the failed renewal not logged")
    # The reload tick tries again a minute later; the server takes the new files within 5 s.
    wait_for("the renewal on the tick", lambda: writes("PUT", path) == puts + 1, timeout=90)
    new = field("tls.crt")
    def renewed():
        try:
            return served(pa, SVC, ca_bundle()) == pem_der(new)
        except (OSError, IndexError):  # a connection the reload closed unanswered
            RELOAD_CUTS.append(1)
            return False
    wait_for("the renewed certificate served", renewed, timeout=15)
    stop(a)
    passed("a renewal the API refused: the old pair served, renewed on the tick a minute later "
           "and served without a restart (%d connection(s) cut in the reload)" % len(RELOAD_CUTS))


def main():
    kc = start_api()
    try:
        test_flags(kc)
        a, b = test_two(kc)
        test_restart(kc, a, b)
        test_renewal(kc)
        test_renewal_tick(kc)
    except SystemExit:
        print(logtext(), file=sys.stderr)
        raise
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(D, ignore_errors=True)


if __name__ == "__main__":
    main()
