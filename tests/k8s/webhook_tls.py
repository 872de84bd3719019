#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gslice-webhook end to end over HTTPS, with a test CA and a certificate for its Service name
made by openssl (as the API server calls it: the CA as caBundle, the name verified).
AdmissionReviews in, AdmissionReviews out: a pod asking for gslice.io resources gets the
JSONPatch that sets spec.schedulerName gslice-scheduler (applied here to the pod), one asking
for none is allowed unchanged, a malformed gslice request is denied at creation with the field
and value, request.uid echoed each time. GET /healthz is ok. Garbage gets 400, a body over
4 MiB 413 (declared) or a cut connection (chunked), plain HTTP no answer, a peer dripping its
headers is cut at --request-timeout, a peer over --max-connections-per-ip is refused, and
after each the webhook still answers. A renewed certificate and key (files replaced, as the
kubelet updates a Secret volume) are served without a restart; a broken one is logged and the
old one kept. Without --tls-cert/--tls-key it refuses to start.
Skipped (77) without openssl."""
import base64
import json
import os
import shutil
import signal
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
if not shutil.which("openssl"):
    print("SKIP: openssl is needed to make the test certificates")
    sys.exit(77)

D = tempfile.mkdtemp(prefix="gslice-webhook.")
PROCS = []


def sh(*args):
    subprocess.run(args, cwd=D, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_certs():
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-subj",
       "/CN=gslice-webhook-ca", "-days", "2", "-out", "ca.crt")
    sh("openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-subj",
       "/CN=" + SVC, "-out", "tls.csr")
    with open(os.path.join(D, "tls.ext"), "w") as f:
        f.write("subjectAltName=DNS:%s,DNS:gslice-webhook.gslice-system.svc.cluster.local,"
                "IP:127.0.0.1\n" % SVC)
    sh("openssl", "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
       "-CAcreateserial", "-days", "2", "-extfile", "tls.ext", "-out", "tls.crt")


def start(*extra):
    """A gslice-webhook with its own log (webhook-N.log): (process, port)."""
    path = os.path.join(D, "webhook-%d.log" % len(PROCS))
    log = open(path, "w")
    p = subprocess.Popen([WEBHOOK, "--listen", "127.0.0.1:0", "--tls-cert",
                          os.path.join(D, "tls.crt"), "--tls-key", os.path.join(D, "tls.key")] +
                         list(extra), stdout=log, stderr=subprocess.STDOUT)
    PROCS.append(p)

    def port():
        check(p.poll() is None, "gslice-webhook exited %s: %s" % (p.returncode, logtext()))
        for line in open(path).read().splitlines():
            if "listening on port" in line:
                return int(line.split("listening on port ")[1].split()[0])
        return None
    return p, wait_for("gslice-webhook to listen", port)


def logtext():
    return "".join(open(os.path.join(D, f)).read()[-3000:] for f in sorted(os.listdir(D))
                   if f.startswith("webhook-"))


CTX = None  # verifies the webhook's certificate and name, as the API server does


def tls_socket(port, timeout=10):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return CTX.wrap_socket(raw, server_hostname=SVC)


def http(port, method, path, body=None, headers=None, timeout=10):
    """One request on its own TLS connection: (status, body bytes)."""
    s = tls_socket(port, timeout)
    try:
        h = {"Host": SVC, "Connection": "close"}
        if body is not None:
            h["Content-Type"] = "application/json"
            h["Content-Length"] = str(len(body))
        h.update(headers or {})
        head = "%s %s HTTP/1.1\r\n%s\r\n" % (method, path,
                                             "".join("%s: %s\r\n" % kv for kv in h.items()))
        s.sendall(head.encode() + (body or b""))
        return read_response(s)
    finally:
        s.close()


def read_response(s):
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ssl.SSLError, ConnectionError):
            break
        if not chunk:
            break
        data += chunk
    if not data.startswith(b"HTTP/1."):
        return None, data
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest


def review(uid, pod, op="CREATE", kind="Pod"):
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": kind},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "operation": op, "namespace": "team", "object": pod}}).encode()


def pod(resources, scheduler="default-scheduler", init=None):
    spec = {"schedulerName": scheduler,
            "containers": [{"name": "main", "image": "x", "resources": resources}]}
    if init:
        spec["initContainers"] = [{"name": "prep", "image": "x", "resources": init}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "train-", "namespace": "team"}, "spec": spec}


def mutate(port, uid, obj, **kw):
    st, body = http(port, "POST", "/mutate", review(uid, obj, **kw))
    check(st == 200, "POST /mutate: %s %r" % (st, body[:300]))
    ans = json.loads(body)
    check(ans.get("apiVersion") == "admission.k8s.io/v1" and ans.get("kind") == "AdmissionReview",
          "answer envelope %s" % ans)
    r = ans["response"]
    check(r.get("uid") == uid, "uid %s, want %s" % (r.get("uid"), uid))
    return r


def apply_patch(obj, ops):
    """The JSONPatch operations the webhook writes (add/replace of an object member)."""
    obj = json.loads(json.dumps(obj))
    for op in ops:
        check(op["op"] in ("add", "replace"), "patch op %s" % op)
        parts = op["path"].lstrip("/").split("/")
        target = obj
        for p in parts[:-1]:
            target = target[p]
        target[parts[-1]] = op["value"]
    return obj


def alive(port, what):
    st, body = http(port, "GET", "/healthz")
    check(st == 200 and body == b"ok\n", "after %s: /healthz %s %r; log: %s" %
          (what, st, body, logtext()))


def test_flags():
    p = subprocess.run([WEBHOOK, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=10)
    check(p.returncode == 2 and b"--tls-cert" in p.stderr,
          "no certificate: exit %s, %r" % (p.returncode, p.stderr))
    p = subprocess.run([WEBHOOK, "--listen", "127.0.0.1:0", "--tls-cert", "/nonexistent",
                        "--tls-key", os.path.join(D, "tls.key")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=10)
    check(p.returncode == 1 and b"/nonexistent" in p.stderr,
          "missing certificate: exit %s, %r" % (p.returncode, p.stderr))
    p = subprocess.run([WEBHOOK, "--help"], stdout=subprocess.PIPE, timeout=10)
    check(p.returncode == 0 and b"POST /mutate" in p.stdout, "--help: %s" % p.returncode)
    passed("without --tls-cert/--tls-key, or with a missing file, it refuses to start")


def test_reviews(port):
    st, body = http(port, "GET", "/healthz")
    check(st == 200 and body == b"ok\n", "/healthz %s %r" % (st, body))
    gpu = {"limits": {"gslice.io/gpu": "1", "gslice.io/gpu-memory": "4Gi",
                      "gslice.io/gpu-compute": "30"}}
    obj = pod(gpu)
    r = mutate(port, "0f6e-1", obj)
    check(r.get("allowed") is True and r.get("patchType") == "JSONPatch", r)
    ops = json.loads(base64.b64decode(r["patch"]))
    got = apply_patch(obj, ops)
    check(got["spec"]["schedulerName"] == "gslice-scheduler", "patched pod %s" % got)
    check(dict(got, spec=None) == dict(obj, spec=None) and
          got["spec"]["containers"] == obj["spec"]["containers"],
          "the patch changed more than schedulerName: %s" % ops)
    passed("a gslice pod: allowed with the JSONPatch %s" % json.dumps(ops))

    obj = pod({}, init={"requests": {"gslice.io/gpu": "1", "gslice.io/gpu-memory": "1Gi"}})
    del obj["spec"]["schedulerName"]
    r = mutate(port, "0f6e-2", obj)
    ops = json.loads(base64.b64decode(r["patch"]))
    check(apply_patch(obj, ops)["spec"]["schedulerName"] == "gslice-scheduler", ops)
    passed("an init container's requests, no schedulerName at all: patched")

    r = mutate(port, "0f6e-3", pod({"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}))
    check(r.get("allowed") is True and "patch" not in r and "patchType" not in r, r)
    r = mutate(port, "0f6e-4", pod(gpu), op="UPDATE")
    check(r.get("allowed") is True and "patch" not in r, r)
    r = mutate(port, "0f6e-5", pod(gpu, scheduler="gslice-scheduler"))
    check(r.get("allowed") is True and "patch" not in r, r)
    passed("no gslice resource, an UPDATE, already gslice-scheduler's: allowed, no patch")

    r = mutate(port, "0f6e-6", pod({"limits": {"gslice.io/gpu": "1",
                                               "gslice.io/gpu-memory": "lots"}}))
    msg = r.get("status", {}).get("message", "")
    check(r.get("allowed") is False and r["status"].get("code") == 400 and
          "gslice.io/gpu-memory" in msg and '"lots"' in msg and "container main" in msg,
          "a malformed request: %s" % r)
    passed("a malformed request denied at creation: %s" % msg)
    r = mutate(port, "0f6e-7", pod(gpu, scheduler="volcano"))
    check(r.get("allowed") is False and "volcano" in r["status"]["message"], r)
    passed("another scheduler named: denied (%s)" % r["status"]["message"])


def test_bad_peers(port):
    st, body = http(port, "POST", "/mutate", b"garbage{")
    check(st == 400 and b"no JSON" in body, "garbage: %s %r" % (st, body))
    st, body = http(port, "POST", "/mutate", b'{"apiVersion":"admission.k8s.io/v1beta1"}')
    check(st == 400 and b"admission.k8s.io/v1" in body, "v1beta1: %s %r" % (st, body))
    alive(port, "garbage")
    passed("garbage and a v1beta1 review: 400 saying why")

    # Declared over 4 MiB: 413 before the body is read.
    s = tls_socket(port)
    s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % (5 << 20))
    st, body = read_response(s)
    s.close()
    check(st == 413, "a declared 5 MiB body: %s %r" % (st, body))
    # Chunked, past 4 MiB: cut (or 413), never read to its end.
    s = tls_socket(port)
    s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 65536
    sent, cut = 0, False
    try:
        while sent < (32 << 20):
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
    except (ssl.SSLError, ConnectionError, socket.timeout, OSError):
        cut = True
    if not cut:
        st, _ = read_response(s)
        check(st in (None, 413), "a chunked 32 MiB body answered %s" % st)
    s.close()
    # Socket buffers take some MiB more before the cut is seen here.
    check(cut and sent < (24 << 20), "a chunked body: cut %s after %d bytes" % (cut, sent))
    alive(port, "oversized bodies")
    passed("a body over 4 MiB: 413 when declared, cut after %d KiB chunked" % (sent >> 10))

    st, _ = http(port, "GET", "/mutate")
    check(st == 405, "GET /mutate: %s" % st)
    st, _ = http(port, "POST", "/filter", b"{}")
    check(st == 404, "POST /filter: %s" % st)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            got = s.recv(4096)
        except OSError:
            got = b""
    check(not got.startswith(b"HTTP/"), "plain HTTP answered: %r" % got[:80])
    alive(port, "plain HTTP")
    passed("GET /mutate 405, another path 404, plain HTTP to the TLS port no answer")


def test_bounds(port):
    # A peer sending a header line byte by byte, one every 0.3 s, is cut at the 2 s deadline.
    s = tls_socket(port)
    t0 = time.monotonic()
    closed = False
    s.settimeout(0.3)
    try:
        s.sendall(b"POST /mutate HTTP/1.1\r\nX-Slow: ")
        while time.monotonic() - t0 < 8:
            s.sendall(b"a")
            try:
                if s.recv(1) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
    except (ssl.SSLError, ConnectionError, OSError):
        closed = True
    took = time.monotonic() - t0
    s.close()
    check(closed and took < 5, "a dripping peer: closed %s after %.1f s" % (closed, took))
    alive(port, "a slow peer")
    passed("a peer dripping its headers: cut after %.1f s (--request-timeout 2)" % took)

    # Many at once: every answer right.
    errors = []

    def worker(n):
        try:
            for i in range(10):
                uid = "c-%d-%d" % (n, i)
                st, body = http(port, "POST", "/mutate", review(uid, pod(
                    {"limits": {"gslice.io/gpu": "1", "gslice.io/gpu-memory": "1Gi"}})))
                r = json.loads(body)["response"]
                if st != 200 or r["uid"] != uid or "patch" not in r:
                    errors.append((st, r))
        except Exception as e:  # noqa: BLE001 (any failure is a test failure)
            errors.append(repr(e))
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, "concurrent reviews: %s" % errors[:3])
    passed("80 reviews on 8 connections at a time: each answered for its own uid")


def test_per_ip():
    """--max-connections-per-ip 4 (an instance of its own, so no other test's connection still
    counts): a fifth connection from the same address is refused."""
    p, port = start("--max-connections-per-ip", "4")
    held = [tls_socket(port) for _ in range(4)]
    refused = False
    try:
        extra = tls_socket(port, timeout=5)
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        st, _ = read_response(extra)
        refused = st is None
        extra.close()
    except (ssl.SSLError, ConnectionError, OSError):
        refused = True
    check(refused, "a fifth connection from one address was served")
    for h in held:
        h.close()
    wait_for("the held connections to close", lambda: http_ok(port), timeout=10)
    passed("a fifth connection from one address: refused; served again once they close")
    p.kill()
    p.wait()


def served_cert(port):
    s = tls_socket(port)
    try:
        return s.getpeercert(binary_form=True)
    finally:
        s.close()


def put(name, data):
    """Replaces a file in one rename, as the kubelet swaps a Secret volume's files."""
    tmp = os.path.join(D, "." + name + ".new")
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, os.path.join(D, name))


def test_renewal(port):
    old = served_cert(port)
    good_cert = open(os.path.join(D, "tls.crt"), "rb").read()
    put("tls.crt", b"-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n")
    wait_for("the webhook to see the broken certificate",
             lambda: "still serving the certificate read before" in logtext(), timeout=20)
    check(served_cert(port) == old, "a broken certificate replaced the served one")
    alive(port, "a broken certificate file")
    put("tls.crt", good_cert)
    # A renewal: a new key and certificate from the same CA, the key first.
    sh("openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "new.key", "-subj",
       "/CN=" + SVC, "-out", "new.csr")
    sh("openssl", "x509", "-req", "-in", "new.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
       "-CAcreateserial", "-days", "2", "-extfile", "tls.ext", "-out", "new.crt")
    new = ssl.PEM_cert_to_DER_cert(open(os.path.join(D, "new.crt")).read())
    put("tls.key", open(os.path.join(D, "new.key"), "rb").read())
    put("tls.crt", open(os.path.join(D, "new.crt"), "rb").read())
    wait_for("the renewed certificate to be served", lambda: served_cert(port) == new, timeout=30)
    r = mutate(port, "after-renewal", pod({"limits": {"gslice.io/gpu": "1",
                                                      "gslice.io/gpu-memory": "1Gi"}}))
    check("patch" in r, r)
    alive(port, "a renewal")
    passed("a broken certificate file: the old one kept; a renewed pair: served within seconds, "
           "no restart")


def http_ok(port):
    try:
        return http(port, "GET", "/healthz")[0] == 200
    except (ssl.SSLError, ConnectionError, OSError):
        return False


def main():
    global CTX
    try:
        make_certs()
        CTX = ssl.create_default_context(cafile=os.path.join(D, "ca.crt"))
        test_flags()
        p, port = start("--request-timeout", "2")
        test_reviews(port)
        test_bad_peers(port)
        test_bounds(port)
        test_renewal(port)
        test_per_ip()
        check(p.poll() is None, "gslice-webhook died: %s" % logtext())
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=10) == 0, "SIGTERM: exit %s" % p.returncode)
        passed("SIGTERM: exit 0")
    except SystemExit:
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
