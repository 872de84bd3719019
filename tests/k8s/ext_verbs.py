#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The verbs as kube-scheduler versions send them: capitalised and old lower-case keys,
NodeNames (nodeCacheCapable) and whole Nodes, scores 0..10 for every node asked about;
a pod with a malformed quantity fails everywhere with the field and value named; a pod
asking for no gslice GPU passes; malformed bodies get 400 with a reason; /healthz."""
import json
import re
import urllib.request

from k8stest import GiB, check, passed, run
import scheduler


def post(c, verb, body, raw=None):
    return scheduler.http("POST", c.ext_url + "/" + verb, body) if raw is None else \
        raw_post(c.ext_url + "/" + verb, raw)


def raw_post(url, data):
    req = urllib.request.Request(url, data=data, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def durations(c, verb):
    """gslice_extender_request_duration_seconds of verb: (count, sum, [(le, cumulative)])."""
    text, name = c.metrics(), "gslice_extender_request_duration_seconds"
    buckets = [(float(le), float(v)) for le, v in re.findall(
        r'^%s_bucket\{verb="%s",le="([^"]+)"\} (\S+)$' % (name, verb), text, re.M)]
    return (c.metric(name + "_count", '{verb="%s"}' % verb) or 0,
            c.metric(name + "_sum", '{verb="%s"}' % verb) or 0, buckets)


def check_durations(c, verb, count):
    n, total, buckets = durations(c, verb)
    check(n == count, "%s: %s durations counted, want %s" % (verb, n, count))
    check(len(buckets) == 17 and buckets[0][0] == 0.0001 and buckets[-2][0] == 10
          and buckets[-1] == (float("inf"), n), "%s buckets: %s" % (verb, buckets))
    check(all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), "not cumulative: %s" % buckets)
    check(count == 0 or 0 < total < 10 * count, "%s: sum %s over %s" % (verb, total, count))


def test(c):
    c.add_node("n1", [16 * GiB, 16 * GiB])
    c.add_node("n2", [8 * GiB])
    c.start_extender("--node-timeout", "5")
    pod = c.add_pod("v", "p", [("main", 1, "12Gi", 30)])

    for verb in ("filter", "prioritize", "bind"):
        check_durations(c, verb, 0)
    st, r = post(c, "filter", {"Pod": pod, "NodeNames": ["n1", "n2", "ghost"]})
    check(st == 200 and r["NodeNames"] == ["n1"], "filter: %s %s" % (st, r))
    check_durations(c, "filter", 1)
    check_durations(c, "prioritize", 0)
    passed("gslice_extender_request_duration_seconds: a filter counted, in cumulative buckets")
    check("12GiB asked" in r["FailedAndUnresolvableNodes"]["n2"], r)
    check("no such node" in r["FailedAndUnresolvableNodes"]["ghost"], r)
    check(r["Error"] == "" and r["FailedNodes"] == {}, r)
    # Old lower-case keys (scheduler/api/v1 json tags), as Go's decoder accepts them.
    st, r2 = post(c, "filter", {"pod": pod, "nodenames": ["n1", "n2"]})
    check(st == 200 and r2["NodeNames"] == ["n1"], "lower-case keys: %s" % r2)
    passed("filter: NodeNames in and out, capitalised and lower-case keys")

    # Not nodeCacheCapable: whole Node objects in, the fitting ones out.
    nodes = c.req("GET", "/api/v1/nodes")["items"]
    st, r = post(c, "filter", {"Pod": pod, "Nodes": {"items": nodes}})
    check(st == 200 and [n["metadata"]["name"] for n in r["Nodes"]["items"]] == ["n1"], r)
    passed("filter: Nodes in and out")

    st, r = post(c, "prioritize", {"Pod": pod, "NodeNames": ["n1", "n2"]})
    check(st == 200 and [h["Host"] for h in r] == ["n1", "n2"], r)
    check(all(0 <= h["Score"] <= 10 for h in r) and r[1]["Score"] == 0, r)
    st, r = post(c, "prioritize", {"pod": pod, "nodenames": ["n1"]})
    check(st == 200 and r[0]["Host"] == "n1", r)
    passed("prioritize: every node scored 0..10")

    bad = c.add_pod("v", "bad", [("main", 1, "3GB", 30)])
    st, r = post(c, "filter", {"Pod": bad, "NodeNames": ["n1", "n2"]})
    check(st == 200 and r["NodeNames"] == [], r)
    why = r["FailedAndUnresolvableNodes"]["n1"]
    check("v/bad" in why and "gslice.io/gpu-memory" in why and "3GB" in why, why)
    res = c.schedule("v", "bad")
    check(res["result"] == "unschedulable" and "3GB" in res["message"], res)
    events = [e for e in c.req("GET", "/_test/events")
              if e["involvedObject"]["name"] == "bad"]
    check(events and "3GB" in events[-1]["message"], "no event naming 3GB: %s" % events)
    passed("malformed quantity: %s" % why)

    plain = {"metadata": {"name": "cpu-only", "namespace": "v"},
             "spec": {"containers": [{"name": "c"}]}}
    st, r = post(c, "filter", {"Pod": plain, "NodeNames": ["n1", "n2"]})
    check(st == 200 and r["NodeNames"] == ["n1", "n2"], r)

    for body, word in ((b"{", "not a JSON object"), (b"[]", "not a JSON object"),
                       (b'{"NodeNames":["n1"]}', "no Pod"),
                       (b'{"Pod":{"metadata":{"name":"x"}}}', "neither NodeNames"),
                       (b'{"Pod":{},"NodeNames":[1]}', "NodeNames[0]")):
        st, r = raw_post(c.ext_url + "/filter", body)
        check(st == 400 and word in r["Error"], "%s: %s %s" % (body, st, r))
    st, r = raw_post(c.ext_url + "/bind", b'{"PodName":"x"}')
    check(st == 400 and "PodNamespace" in r["Error"], r)
    st, r = scheduler.http("POST", c.ext_url + "/preempt", {})
    check(st == 404, "unknown verb: %s" % st)
    with urllib.request.urlopen(c.metrics_url + "/healthz", timeout=5) as h:
        check(h.status == 200 and h.read() == b"ok\n", "healthz")
    check(c.metric("gslice_extender_bad_requests_total") == 5, c.metrics())
    for verb in ("filter", "prioritize", "bind"):
        n = c.metric("gslice_extender_requests_total", '{verb="%s"}' % verb)
        check_durations(c, verb, n)
    passed("malformed bodies: 400 with reasons; /healthz")


def brief(c):
    """Over many failing nodes the reasons drop per-GPU figures and read the same, so that
    kube-scheduler's message (which counts identical reasons) stays one line."""
    for i in range(70):
        c.add_node("m%02d" % i, [8 * GiB, 8 * GiB], heartbeat=False)
    c.start_extender("--node-timeout", "30")
    pod = c.add_pod("v", "p", [("main", 1, "12Gi", 30)])
    names = ["m%02d" % i for i in range(70)]
    st, r = post(c, "filter", {"Pod": pod, "NodeNames": names})
    whys = set(r["FailedAndUnresolvableNodes"].values())
    check(st == 200 and len(r["FailedAndUnresolvableNodes"]) == 70 and len(whys) == 1, r)
    why = whys.pop()
    check("gpu 0" not in why and "12GiB" in why and "no GPU of the node" in why, why)
    st, r = post(c, "filter", {"Pod": pod, "NodeNames": names[:3]})
    check("gpu 0: 8GiB of 8GiB free, 12GiB asked" in r["FailedAndUnresolvableNodes"]["m00"], r)
    passed("70 failing nodes: one reason, %r; 3: per GPU" % why)


run(test)
run(brief)
