#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gslice-webhook --ca-bundle-from FILE --webhook-config NAME keeps the caBundle of each webhook
of the MutatingWebhookConfiguration NAME equal to FILE: written at start (GET, then PUT at the
object's resourceVersion), written again after a conflict (a 409: the object changed since
the GET), again when FILE changes, and not at all while it already matches. Against a small
API stand-in of its own (tests/k8s/apiserver.py holds no admission objects). Without the flags
no API call is made; one flag without the other is refused. Skipped (77) without openssl."""
import base64
import http.server
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import ctlhttp  # noqa: E402
from k8stest import BUILD, check, passed, wait_for

WEBHOOK = os.path.join(BUILD, "bin", "gslice-webhook")
PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gslice-webhook"
if not shutil.which("openssl"):
    print("SKIP: openssl is needed to make the test certificates")
    sys.exit(77)

D = tempfile.mkdtemp(prefix="gslice-webhook-ca.")
LOCK = threading.Lock()
STATE = {"rv": 1, "conflicts": 0, "calls": [],
         "obj": {"apiVersion": "admissionregistration.k8s.io/v1",
                 "kind": "MutatingWebhookConfiguration",
                 "metadata": {"name": "gslice-webhook", "resourceVersion": "1"},
                 "webhooks": [{"name": "scheduler.gslice.io",
                               "clientConfig": {"service": {"name": "gslice-webhook"}}},
                              {"name": "other.gslice.io",
                               "clientConfig": {"caBundle": "b2xk", "service": {"name": "x"}}}]}}


class Handler(ctlhttp.JSONHandler):

    def do_GET(self):
        with LOCK:
            STATE["calls"].append(("GET", self.path))
            if self.path != PATH:
                return self.reply(404, {"kind": "Status", "code": 404, "message": "not found"})
            self.reply(200, STATE["obj"])

    def do_PUT(self):
        body = self.body()
        with LOCK:
            STATE["calls"].append(("PUT", self.path))
            if STATE["conflicts"] > 0:  # someone else wrote it since the GET
                STATE["conflicts"] -= 1
                STATE["rv"] += 1
                STATE["obj"]["metadata"]["resourceVersion"] = str(STATE["rv"])
            if body["metadata"].get("resourceVersion") != str(STATE["rv"]):
                return self.reply(409, {"kind": "Status", "code": 409, "reason": "Conflict",
                                         "message": "the object has been modified"})
            STATE["rv"] += 1
            body["metadata"]["resourceVersion"] = str(STATE["rv"])
            STATE["obj"] = body
            self.reply(200, body)


def sh(*args):
    subprocess.run(args, cwd=D, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ca(name):
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
       "-subj", "/CN=" + name, "-days", "2", "-out", name + ".crt")
    return open(os.path.join(D, name + ".crt"), "rb").read()


def bundles():
    with LOCK:
        return [h["clientConfig"].get("caBundle") for h in STATE["obj"]["webhooks"]]


def puts():
    with LOCK:
        return sum(1 for m, _ in STATE["calls"] if m == "PUT")


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    kc = os.path.join(D, "kubeconfig")
    with open(kc, "w") as f:
        f.write("current-context: t\nclusters:\n- name: c\n  cluster:\n    server: "
                "http://127.0.0.1:%d\ncontexts:\n- name: t\n  context: {cluster: c}\n" %
                srv.server_address[1])
    first = ca("ca1")
    sh("openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-subj",
       "/CN=gslice-webhook.gslice-system.svc", "-out", "tls.csr")
    sh("openssl", "x509", "-req", "-in", "tls.csr", "-CA", "ca1.crt", "-CAkey", "ca1.key",
       "-CAcreateserial", "-days", "2", "-out", "tls.crt")
    shutil.copy(os.path.join(D, "ca1.crt"), os.path.join(D, "ca.crt"))
    base = [WEBHOOK, "--listen", "127.0.0.1:0", "--tls-cert", os.path.join(D, "tls.crt"),
            "--tls-key", os.path.join(D, "tls.key"), "--kubeconfig", kc]

    p = subprocess.run(base + ["--webhook-config", "gslice-webhook"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=10)
    check(p.returncode == 2 and b"go together" in p.stderr, "one flag alone: %s %r" %
          (p.returncode, p.stderr))
    log = open(os.path.join(D, "plain.log"), "w")
    q = subprocess.Popen(base, stdout=log, stderr=subprocess.STDOUT)
    wait_for("gslice-webhook to listen",
             lambda: "listening" in open(os.path.join(D, "plain.log")).read())
    q.send_signal(signal.SIGTERM)
    check(q.wait(timeout=10) == 0 and not STATE["calls"], "without the flags: %s" %
          STATE["calls"])
    passed("one flag without the other refused; without them no API call")

    STATE["conflicts"] = 1
    log = open(os.path.join(D, "webhook.log"), "w")
    w = subprocess.Popen(base + ["--ca-bundle-from", os.path.join(D, "ca.crt"),
                                 "--webhook-config", "gslice-webhook"],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        want = base64.b64encode(first).decode()
        wait_for("the caBundle written", lambda: bundles() == [want, want], timeout=30)
        check(puts() == 2, "PUTs %s: one refused by the conflict, then one" % STATE["calls"])
        text = open(os.path.join(D, "webhook.log")).read()
        check("is not written" in text and "the object has been modified" in text,
              "the conflict not logged: %s" % text)
        passed("written into both webhooks at start, after a 409 conflict")

        second = ca("ca2")
        tmp = os.path.join(D, ".ca.crt.new")
        with open(tmp, "wb") as f:
            f.write(second)
        os.rename(tmp, os.path.join(D, "ca.crt"))
        want = base64.b64encode(second).decode()
        wait_for("the new caBundle written", lambda: bundles() == [want, want], timeout=30)
        n = len(STATE["calls"])
        # Ten seconds: two more looks at an unchanged file, no API call.
        time.sleep(11)
        check(len(STATE["calls"]) == n, "calls while nothing changed: %s" % STATE["calls"][n:])
        passed("a new CA file: written again; while it matches, no call at all")
        w.send_signal(signal.SIGTERM)
        check(w.wait(timeout=10) == 0, "SIGTERM: exit %s" % w.returncode)
    except SystemExit:
        print(open(os.path.join(D, "webhook.log")).read()[-3000:], file=sys.stderr)
        raise
    finally:
        if w.poll() is None:
            w.kill()
        shutil.rmtree(D, ignore_errors=True)


if __name__ == "__main__":
    main()
