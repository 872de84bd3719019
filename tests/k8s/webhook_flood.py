#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gslice-webhook flooded from one address (127.0.0.2, a pod on the pod network) while the API
server (127.0.0.1) keeps asking: its AdmissionReviews are still answered.

1. Stalled bodies: connections that declare up to 4 MiB and send one byte, as many as the
   address may open (a greedy attacker halves what it declares after each 503, so it fills
   whatever budget is left). Bytes of bodies are charged as they arrive, so they hold a few KiB,
   and every review of the API server is answered 200 (before: 503 for every one, failurePolicy
   Fail refusing every gslice pod's creation).
2. Whole bodies, held: connections that send 4 MiB less a byte and wait. One address holds at
   most its share (16 MiB of the 64 MiB), so the reviews are still answered.
Skipped (77) without openssl, or where 127.0.0.2 cannot be a source address."""
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

from k8stest import BUILD, check, passed, wait_for

WEBHOOK = os.path.join(BUILD, "bin", "gslice-webhook")
SVC = "gslice-webhook.gslice-system.svc"
ATTACKER, PROBER = "127.0.0.2", "127.0.0.1"
MAX = 4 << 20
if not shutil.which("openssl"):
    print("SKIP: openssl is needed to make the test certificates")
    sys.exit(77)
try:
    socket.create_server((ATTACKER, 0)).close()
except OSError as e:
    print("SKIP: %s cannot be bound here (%s)" % (ATTACKER, e))
    sys.exit(77)

D = tempfile.mkdtemp(prefix="gslice-webhook-flood.")
CTX = None


def sh(*args):
    subprocess.run(args, cwd=D, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_certs():
    global CTX
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-subj",
       "/CN=flood-ca", "-days", "2", "-out", "ca.crt")
    sh("openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-subj",
       "/CN=" + SVC, "-out", "tls.csr")
    with open(os.path.join(D, "tls.ext"), "w") as f:
        f.write("subjectAltName=DNS:%s\n" % SVC)
    sh("openssl", "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
       "-CAcreateserial", "-days", "2", "-extfile", "tls.ext", "-out", "tls.crt")
    CTX = ssl.create_default_context(cafile=os.path.join(D, "ca.crt"))


def start():
    log_path = os.path.join(D, "webhook.log")
    log = open(log_path, "w")
    # A deadline longer than the test: what holds the budget here is the bytes, not the time
    # (a peer cut at the deadline reconnects at once).
    p = subprocess.Popen([WEBHOOK, "--listen", "127.0.0.1:0", "--request-timeout", "120",
                          "--tls-cert", os.path.join(D, "tls.crt"),
                          "--tls-key", os.path.join(D, "tls.key")],
                         stdout=log, stderr=subprocess.STDOUT)

    def port():
        check(p.poll() is None, "gslice-webhook exited: %s" % open(log_path).read()[-2000:])
        for line in open(log_path).read().splitlines():
            if "listening on port" in line:
                return int(line.split("listening on port ")[1].split()[0])
        return None
    return p, wait_for("gslice-webhook to listen", port)


def tls(port, source, timeout=5):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                   source_address=(source, 0))
    return CTX.wrap_socket(raw, server_hostname=SVC)


def status_of(s):
    """The status of what s has answered (None: nothing, or closed unanswered)."""
    try:
        data = s.recv(64)
    except (socket.timeout, ssl.SSLError, OSError):
        return None
    return int(data.split()[1]) if data.startswith(b"HTTP/1.") else None


REVIEW = json.dumps({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {"uid": "flood-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE", "namespace": "team",
                "object": {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": "p", "namespace": "team"},
                           "spec": {"containers": [{"name": "main", "image": "x", "resources": {
                               "limits": {"gslice.io/gpu": "1",
                                          "gslice.io/gpu-memory": "1Gi"}}}]}}}}).encode()


def probe(port):
    """One review as the API server sends it: its status (None: no answer in 5 s)."""
    try:
        s = tls(port, PROBER)
        s.sendall(b"POST /mutate HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                  % (SVC.encode(), len(REVIEW), REVIEW))
        st = status_of(s)
        s.close()
        return st
    except OSError:
        return None


def probes(port, n=20):
    got = [probe(port) for _ in range(n)]
    return sum(st == 200 for st in got), got


def stall(port, declared, sent):
    """A connection from the attacker declaring `declared` bytes and sending `sent`; (socket or
    None, its status if answered at once)."""
    try:
        s = tls(port, ATTACKER)
        s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % declared)
        s.sendall(b"{" + b" " * (sent - 1))
    except OSError:
        return None, None
    s.settimeout(0.3)
    st = status_of(s)
    if st is not None:
        s.close()
        return None, st
    s.settimeout(5)
    return s, None


def greedy(port, sent_of, conns=32):
    """As many stalled connections as the attacker's address may hold (32), halving what it
    declares after each 503: (sockets held, 503s seen)."""
    held, refused, declared = [], 0, MAX
    while len(held) + refused < conns * 2 and len(held) < conns and declared >= 64:
        s, st = stall(port, declared, sent_of(declared))
        if s:
            held.append(s)
        else:
            refused += 1
            declared //= 2
    return held, refused


def main():
    make_certs()
    proc, port = start()
    try:
        ok, got = probes(port, 3)
        check(ok == 3, "before the flood: %s" % got)

        held, refused = greedy(port, lambda d: 1)
        ok, got = probes(port)
        for s in held:
            s.close()
        check(ok == 20, "%d connections from %s declaring up to 4 MiB and sending a byte "
              "(%d refused): %d of 20 reviews from %s answered (%s)"
              % (len(held), ATTACKER, refused, ok, PROBER, got))
        passed("%d stalled connections from %s declaring up to 4 MiB (%d refused): %d of 20 "
               "reviews from %s answered" % (len(held), ATTACKER, refused, ok, PROBER))

        time.sleep(0.5)
        held, refused = greedy(port, lambda d: d - 1)
        time.sleep(1.0)  # the bodies read to where they stop: held, or cut past the share
        alive = [s for s in held if status_of_nowait(s)]
        ok, got = probes(port)
        for s in held:
            s.close()
        check(ok == 20, "%s sending whole bodies of up to 4 MiB less a byte (%d connections, "
              "%d still held, %d refused): %d of 20 reviews from %s answered (%s)"
              % (ATTACKER, len(held), len(alive), refused, ok, PROBER, got))
        check(len(alive) <= 4, "one address holds %d bodies of 4 MiB (its share is 16 MiB)"
              % len(alive))
        passed("%s holding bodies of 4 MiB: %d kept (its 16 MiB share), %d of 20 reviews from "
               "%s answered" % (ATTACKER, len(alive), ok, PROBER))
        check(proc.poll() is None, "gslice-webhook exited")
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(D, ignore_errors=True)


def status_of_nowait(s):
    """Whether s is still open and unanswered (the server holds its body)."""
    s.settimeout(0.05)
    try:
        s.recv(1)  # an answer, or the end: not held
        return False
    except socket.timeout:
        return True
    except (ssl.SSLError, OSError):
        return False


if __name__ == "__main__":
    main()
