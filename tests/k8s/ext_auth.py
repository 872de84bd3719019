#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gslice-extender answers only kube-scheduler. Over HTTPS with
--client-ca: a peer without a client certificate, or with one another CA signed, is refused
in the handshake (no verb runs); plain HTTP to the TLS port gets nothing; the scheduler
stand-in with kube-scheduler's certificate schedules and binds. /bind, even from that
peer, takes only what kube-scheduler can have asked for: no PodUID, another UID, another
schedulerName, a node /filter did not pass for that pod, a node its nodeSelector excludes
are refused, and the pod stays unbound in the API server. The verbs listener serves no
/metrics; /healthz (503 until the first sync) and /metrics are on --metrics-listen."""
import socket
import ssl
import urllib.error
import urllib.request

from k8stest import GiB, check, passed, run, wait_for
import scheduler


def refused(c, client):
    """A filter call with this client certificate (None: none) gets no answer."""
    ctx = scheduler.tls_context(*c.client_tls(client))
    pod = {"metadata": {"name": "x", "namespace": "a", "uid": "u"}, "spec": {"containers": []}}
    try:
        st, body = scheduler.http("POST", c.ext_url + "/filter", {"Pod": pod, "NodeNames": ["n1"]},
                                  timeout=10, context=ctx)
    except (urllib.error.URLError, ssl.SSLError, ConnectionError, OSError) as e:
        return str(getattr(e, "reason", e))
    fail_msg = "a peer with client certificate %s got an answer: %s %s" % (client, st, body)
    check(False, fail_msg)


def tls(c):
    c.add_node("n1", [16 * GiB])
    c.add_node("n2", [16 * GiB])
    # The first list of pods answers only after 2 s: until then /healthz is 503 (not ready),
    # /livez ok.
    c.req("POST", "/_test/fault", {"method": "GET", "path": r"^/api/v1/pods\?", "status": 0,
                                   "delay_s": 2, "count": 1})
    c.start_extender("--node-timeout", "10", tls=True, wait_ready=False)
    try:
        urllib.request.urlopen(c.metrics_url + "/healthz", timeout=5)
        check(False, "/healthz said ok before the first sync")
    except urllib.error.HTTPError as e:
        check(e.code == 503 and b"not ready" in e.read(), "healthz before sync: %s" % e.code)
    with urllib.request.urlopen(c.metrics_url + "/livez", timeout=5) as h:
        check(h.status == 200, "livez")
    wait_for("first sync", lambda: c.metric("gslice_extender_ready") == 1)
    with urllib.request.urlopen(c.metrics_url + "/healthz", timeout=5) as h:
        check(h.status == 200 and h.read() == b"ok\n", "healthz after sync")
    passed("/healthz 503 until the first sync, then ok; /livez ok throughout")
    before = c.metric("gslice_extender_requests_total", '{verb="filter"}')

    why = refused(c, None)
    passed("no client certificate: refused (%s)" % why)
    why = refused(c, "other-client")
    passed("a client certificate of another CA: refused (%s)" % why)
    # Plain HTTP to the TLS port: no HTTP answer.
    port = int(c.ext_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        try:
            got = s.recv(4096)
        except OSError:
            got = b""
    check(not got.startswith(b"HTTP/"), "plain HTTP to the TLS port answered: %r" % got[:80])
    check(c.metric("gslice_extender_requests_total", '{verb="filter"}') == before,
          "a refused peer's filter ran: %s" % c.metrics())
    passed("plain HTTP to the TLS port: no answer; no verb ran for refused peers")

    c.add_pod("a", "p", [("main", 1, "1Gi", 10)])
    res = c.schedule("a", "p")
    check(res["result"] == "bound", res)
    check(c.assigned("a", "p") is not None, "no assignment")
    passed("the scheduler stand-in with kube-scheduler's certificate: %s bound to %s"
           % (res["pod"], res["node"]))

    # The verbs listener serves only the verbs.
    ctx = scheduler.tls_context(*c.client_tls())
    st, _ = scheduler.http("GET", c.ext_url + "/metrics", timeout=10, context=ctx)
    check(st == 404, "/metrics on the verbs listener: %s" % st)
    with urllib.request.urlopen(c.metrics_url + "/healthz", timeout=5) as h:
        check(h.status == 200, "healthz")
    passed("/metrics is not on the verbs listener; /healthz is on --metrics-listen")


def unbound(c, ns, name):
    p = c.pod(ns, name)
    return not p["spec"].get("nodeName") and c.assigned(ns, name) is None


def bind(c, s, pod, node, uid=True):
    meta = pod["metadata"]
    args = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "Node": node}
    if uid is True:
        args["PodUID"] = meta["uid"]
    elif uid:
        args["PodUID"] = uid
    return scheduler.http("POST", c.ext_url + "/bind", args, timeout=15, context=s.ctx)


def binds(c):
    """The reproduced attack, and each rule /bind keeps, as a peer that holds the
    scheduler's certificate (or a process beside a sidecar) could try them."""
    c.add_node("n1", [16 * GiB])
    c.add_node("n2", [16 * GiB])
    c.req("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"zone": "z1"}}})
    c.start_extender("--node-timeout", "10", "--scheduler-name", "default-scheduler,gpu-sched",
                     tls=True)
    s = c.scheduler()
    nodes = s.nodes()

    # Another team's pending pod, for another scheduler, kept off n2 by its nodeSelector.
    victim = c.add_pod("b", "victim", [("main", 1, "1Gi", 10)])
    c.req("PATCH", "/api/v1/namespaces/b/pods/victim",
          {"spec": {"schedulerName": "other-scheduler", "nodeSelector": {"zone": "z1"}}})
    victim = c.pod("b", "victim")
    # The extender's /filter looks at GPUs only: it passes n2 for a Pod as a caller sends it.
    check(s.filter(victim, nodes)[0] == ["n1", "n2"], "filter")
    for uid, node, status, words in ((None, "n2", 400, "PodUID"),
                                     ("0000-forged", "n2", 403, "it was replaced"),
                                     (True, "n2", 403, "is for scheduler other-scheduler")):
        st, r = bind(c, s, victim, node, uid)
        check(st == status and words in r["Error"], "bind %s: %s %s" % (uid, st, r))
        check(unbound(c, "b", "victim"), "the victim was bound: %s" % c.pod("b", "victim"))
    st, r = scheduler.http("POST", c.ext_url + "/bind",
                           {"PodName": "victim/../../../nodes/n1", "PodNamespace": "b",
                            "PodUID": victim["metadata"]["uid"], "Node": "n2"},
                           timeout=15, context=s.ctx)
    check(st == 400 and "Kubernetes names" in r["Error"], "a path in PodName: %s %s" % (st, r))
    passed("no PodUID, a path for a name (400), a wrong UID, another schedulerName (403): the "
           "pod stays unbound")

    # Ours, but n2 was never passed by /filter for it.
    mine = c.add_pod("b", "mine", [("main", 1, "1Gi", 10)])
    check(s.filter(mine, [n for n in nodes if n["metadata"]["name"] == "n1"])[0] == ["n1"], "f")
    st, r = bind(c, s, mine, "n2")
    check(st == 403 and "did not pass gslice-extender's /filter" in r["Error"], "%s %s" % (st, r))
    check(unbound(c, "b", "mine"), "bound to a node never filtered")
    # A pod /filter never saw at all.
    never = c.add_pod("b", "never", [("main", 1, "1Gi", 10)])
    st, r = bind(c, s, never, "n1")
    check(st == 403 and "did not pass" in r["Error"], "%s %s" % (st, r))
    check(unbound(c, "b", "never"), "bound without a filter")
    passed("a node /filter did not pass for that pod, a pod never filtered: refused (%s)"
           % r["Error"])

    # Filtered for n2 (a caller's Pod without its nodeSelector), but the pod as the API
    # server has it asks for zone=z1, which n2 lacks.
    sel = c.add_pod("b", "sel", [("main", 1, "1Gi", 10)])
    c.req("PATCH", "/api/v1/namespaces/b/pods/sel", {"spec": {"nodeSelector": {"zone": "z1"}}})
    check(s.filter(sel, nodes)[0] == ["n1", "n2"], "filter")
    st, r = bind(c, s, c.pod("b", "sel"), "n2")
    check(st == 403 and "zone=z1" in r["Error"], "%s %s" % (st, r))
    check(unbound(c, "b", "sel"), "bound against its nodeSelector")
    st, r = bind(c, s, c.pod("b", "sel"), "n1")
    check(st == 200 and not r["Error"], "%s %s" % (st, r))
    check(c.pod("b", "sel")["spec"].get("nodeName") == "n1", "sel not on n1")
    passed("nodeSelector as the API server has it: n2 refused, n1 bound")

    # A second --scheduler-name is served.
    other = c.add_pod("b", "other", [("main", 1, "1Gi", 10)])
    c.req("PATCH", "/api/v1/namespaces/b/pods/other", {"spec": {"schedulerName": "gpu-sched"}})
    other = c.pod("b", "other")
    check("n1" in s.filter(other, nodes)[0], "filter")
    st, r = bind(c, s, other, "n1")
    check(st == 200 and not r["Error"], "%s %s" % (st, r))
    refusals = c.metric("gslice_extender_bind_refused_total")
    check(refusals == 5, "bind_refused_total %s, want 5" % refusals)
    passed("--scheduler-name default-scheduler,gpu-sched: a gpu-sched pod binds; %d refusals "
           "counted" % refusals)


run(tls)
run(binds)
