#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gslice-webhook called by the API server stand-in, as kube-apiserver calls a mutating
admission webhook: the stand-in is given the MutatingWebhookConfiguration of deploy/ (webhook
scheduler.gslice.io, CREATE of pods, the namespaceSelector leaving out kube-system and
gslice-system, timeoutSeconds 5; the url and caBundle of a test CA made by openssl instead of
the Service), and pods are created through its API. A pod asking for gslice.io/gpu-memory is
stored (GET) with spec.schedulerName gslice-scheduler and nothing else changed, one asking in
an init container only and naming no scheduler too; a pod without gslice resources is stored
as sent; a malformed gslice request is refused with 400 and the extender's message in the API
error, and not stored; in kube-system the webhook is not called. The CA is verified: with
another CA's caBundle the call fails. With the webhook killed, failurePolicy Fail refuses the
gslice pod (500, "failed calling webhook") and Ignore stores it unchanged; a webhook that does
not answer within timeoutSeconds is the same. Skipped (77) without openssl."""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from k8stest import BUILD, SRC, check, passed, wait_for
import scheduler

WEBHOOK = os.path.join(BUILD, "bin", "gslice-webhook")
NAME = "scheduler.gslice.io"
SVC = "gslice-webhook.gslice-system.svc"
if not shutil.which("openssl"):
    print("SKIP: openssl is needed to make the test certificates")
    sys.exit(77)

D = tempfile.mkdtemp(prefix="gslice-webhook-api.")
PROCS = []
API = None


def sh(*args):
    subprocess.run(args, cwd=D, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_ca(name):
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
       "-subj", "/CN=" + name, "-days", "2", "-out", name + ".crt")


def make_certs():
    make_ca("ca")
    make_ca("other-ca")
    sh("openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-subj",
       "/CN=" + SVC, "-out", "tls.csr")
    with open(os.path.join(D, "tls.ext"), "w") as f:
        f.write("subjectAltName=DNS:%s,IP:127.0.0.1\n" % SVC)
    sh("openssl", "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
       "-CAcreateserial", "-days", "2", "-extfile", "tls.ext", "-out", "tls.crt")


def logtext():
    return "".join("--- %s\n%s\n" % (f, open(os.path.join(D, f)).read()[-3000:])
                   for f in sorted(os.listdir(D)) if f.endswith(".log"))


def start_api():
    port_file = os.path.join(D, "api.port")
    log = open(os.path.join(D, "apiserver.log"), "w")
    PROCS.append(subprocess.Popen(["/usr/bin/python3", os.path.join(SRC, "tests/k8s/apiserver.py"),
                                   "--port", "0", "--port-file", port_file],
                                  stdout=log, stderr=subprocess.STDOUT))
    wait_for("the API server stand-in", lambda: os.path.exists(port_file))
    return "http://127.0.0.1:%s" % open(port_file).read().strip()


def start_webhook():
    path = os.path.join(D, "webhook.log")
    log = open(path, "w")
    p = subprocess.Popen([WEBHOOK, "--listen", "127.0.0.1:0", "--tls-cert",
                          os.path.join(D, "tls.crt"), "--tls-key", os.path.join(D, "tls.key")],
                         stdout=log, stderr=subprocess.STDOUT)
    PROCS.append(p)

    def port():
        check(p.poll() is None, "gslice-webhook exited %s" % p.returncode)
        for line in open(path).read().splitlines():
            if "listening on port" in line:
                return int(line.split("listening on port ")[1].split()[0])
        return None
    return p, wait_for("gslice-webhook to listen", port)


def req(method, path, body=None):
    return scheduler.http(method, API + path, body)


def configure(port, policy="Fail", timeout=5, ca="ca.crt"):
    """The configuration of deploy/overlays/managed/webhook.yaml, less its matchConditions
    (CEL: not modelled), with a url instead of the Service."""
    with open(os.path.join(D, ca), "rb") as f:
        bundle = base64.b64encode(f.read()).decode()
    cfg = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
           "metadata": {"name": "gslice-webhook"},
           "webhooks": [{
               "name": NAME, "admissionReviewVersions": ["v1"], "sideEffects": "None",
               "failurePolicy": policy, "timeoutSeconds": timeout,
               "clientConfig": {"url": "https://127.0.0.1:%d/mutate" % port, "caBundle": bundle},
               "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                          "resources": ["pods"], "scope": "Namespaced"}],
               "namespaceSelector": {"matchExpressions": [{
                   "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                   "values": ["kube-system", "gslice-system"]}]}}]}
    st, body = req("POST", "/_test/webhooks", cfg)
    check(st == 200, "configure the webhook: %s %s" % (st, body))


def calls():
    return req("GET", "/_test/webhooks")[1]["calls"]


def pod(name, resources, scheduler_name="default-scheduler", init=None):
    spec = {"containers": [{"name": "main", "image": "x", "resources": resources}]}
    if scheduler_name is not None:
        spec["schedulerName"] = scheduler_name
    if init:
        spec["initContainers"] = [{"name": "prep", "image": "x", "resources": init}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


GPU = {"limits": {"gslice.io/gpu": "1", "gslice.io/gpu-memory": "4Gi",
                  "gslice.io/gpu-compute": "30"}}


def create(ns, obj):
    return req("POST", "/api/v1/namespaces/%s/pods" % ns, obj)


def get(ns, name):
    return req("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name))


def created(ns, obj):
    st, made = create(ns, obj)
    check(st == 201, "create %s/%s: %s %s" % (ns, obj["metadata"]["name"], st, made))
    st, got = get(ns, obj["metadata"]["name"])
    check(st == 200, "GET %s/%s: %s %s" % (ns, obj["metadata"]["name"], st, got))
    check(made["spec"] == got["spec"], "the create's answer %s and GET %s differ" % (made, got))
    return got


def refused(ns, obj, code, what):
    st, body = create(ns, obj)
    check(st == code and isinstance(body, dict) and body.get("kind") == "Status" and
          body.get("code") == code, "%s: want %d and a Status, got %s %s" % (what, code, st, body))
    st, _ = get(ns, obj["metadata"]["name"])
    check(st == 404, "%s: the refused pod was stored (GET %s)" % (what, st))
    return body["message"]


def test_admitted(port):
    configure(port)
    obj = pod("train-1", GPU)
    got = created("team", obj)
    check(got["spec"].get("schedulerName") == "gslice-scheduler",
          "a gslice pod: schedulerName %r, want gslice-scheduler; calls %s" %
          (got["spec"].get("schedulerName"), calls()))
    check(dict(got["spec"], schedulerName=None) == dict(obj["spec"], schedulerName=None),
          "the patch changed more than schedulerName: %s" % got["spec"])
    check(calls()[-1]["outcome"] == "patched", "calls %s" % calls())
    passed("a pod asking for gslice.io/gpu-memory is stored with schedulerName gslice-scheduler")

    obj = pod("prep-1", {}, scheduler_name=None,
              init={"requests": {"gslice.io/gpu": "1", "gslice.io/gpu-memory": "1Gi"}})
    got = created("team", obj)
    check(got["spec"].get("schedulerName") == "gslice-scheduler", "init only: %s" % got["spec"])
    passed("a pod asking in an init container only, no schedulerName: gslice-scheduler added")

    n = len(calls())
    obj = pod("web-1", {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}})
    got = created("team", obj)
    check(got["spec"] == obj["spec"], "a pod without gslice resources changed: %s" % got["spec"])
    check(len(calls()) == n + 1 and calls()[-1]["outcome"] == "allowed",
          "the webhook was not asked about it: %s" % calls()[n:])
    passed("a pod without gslice resources is stored as sent (the webhook asked, no patch)")


def test_denied(port):
    bad = pod("bad-1", {"limits": {"gslice.io/gpu": "1", "gslice.io/gpu-memory": "lots"}})
    msg = refused("team", bad, 400, "a malformed gslice request")
    want = ('admission webhook "%s" denied the request: container main: '
            'resources.limits[gslice.io/gpu-memory]: "lots" is not a quantity' % NAME)
    check(msg.startswith(want), "the API error's message %r, want %r..." % (msg, want))
    passed("a malformed gslice request is refused: %s" % msg)

    msg = refused("team", pod("volcano-1", GPU, scheduler_name="volcano"), 400,
                  "another scheduler")
    check(msg.startswith('admission webhook "%s" denied the request: ' % NAME) and
          "volcano" in msg, "another scheduler: %r" % msg)
    passed("a gslice pod naming another scheduler is refused: %s" % msg)

    n = len(calls())
    got = created("kube-system", bad)
    check(got["spec"] == bad["spec"] and len(calls()) == n,
          "kube-system: the webhook was called (%s) or the pod changed" % calls()[n:])
    passed("in kube-system (namespaceSelector) the webhook is not called")

    configure(port, ca="other-ca.crt")
    msg = refused("team", pod("train-ca", GPU), 500, "a caBundle of another CA")
    check('failed calling webhook "%s"' % NAME in msg and "certificate" in msg,
          "another CA: %r" % msg)
    passed("the webhook's certificate is verified against the caBundle: %s" % msg)


def test_down(p, port):
    p.kill()
    p.wait()
    configure(port, policy="Fail")
    msg = refused("team", pod("train-down", GPU), 500, "webhook down, failurePolicy Fail")
    check(msg.startswith('Internal error occurred: failed calling webhook "%s"' % NAME),
          "Fail: %r" % msg)
    passed("webhook down, failurePolicy Fail: refused: %s" % msg)
    configure(port, policy="Ignore")
    obj = pod("train-down", GPU)
    got = created("team", obj)
    check(got["spec"] == obj["spec"], "Ignore: the pod changed: %s" % got["spec"])
    passed("webhook down, failurePolicy Ignore: stored as sent")


def test_timeout():
    """A peer that accepts and never answers (not even the TLS handshake)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    port = s.getsockname()[1]
    try:
        configure(port, policy="Fail", timeout=1)
        t = time.monotonic()
        msg = refused("team", pod("train-slow", GPU), 500, "a silent webhook, Fail")
        took = time.monotonic() - t
        check("context deadline exceeded" in msg and took < 4,
              "Fail after %.1f s: %r" % (took, msg))
        passed("a webhook silent past timeoutSeconds 1, Fail: refused after %.1f s" % took)
        configure(port, policy="Ignore", timeout=1)
        obj = pod("train-slow", GPU)
        got = created("team", obj)
        check(got["spec"] == obj["spec"], "Ignore: the pod changed: %s" % got["spec"])
        passed("a silent webhook, Ignore: stored as sent")
    finally:
        s.close()


def main():
    global API
    try:
        make_certs()
        API = start_api()
        p, port = start_webhook()
        test_admitted(port)
        test_denied(port)
        test_down(p, port)
        test_timeout()
    except SystemExit as e:
        if e.code:
            print(logtext(), file=sys.stderr)
        raise
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(D, ignore_errors=True)


if __name__ == "__main__":
    main()
