#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Native sidecars (init containers with restartPolicy: Always, on by default since 1.29) run
beside the app containers for the pod's whole life, and the kubelet keeps their devices. The
extender counts a pod's effective request as Kubernetes (and its quota) does: the app
containers plus every sidecar, or a regular init container plus the sidecars before it,
whichever is more. Before, a sidecar counted as ending before the app containers: a sidecar
12Gi/50% + an app container 12Gi/50% were bound to one 16 GiB GPU, and a 4Gi/50% pod after
them (28 GiB, 150% on one GPU)."""
from k8stest import GiB, check, passed, run, wait_for


def pod(ns, name, init, containers):
    def ctr(c):
        cname, mem, cpu, sidecar = c
        d = {"name": cname, "image": "x", "resources": {"limits": {
            "gslice.io/gpu": "1", "gslice.io/gpu-memory": mem, "gslice.io/gpu-compute": str(cpu)}}}
        if sidecar:
            d["restartPolicy"] = "Always"
        return d
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"initContainers": [ctr(c) for c in init],
                     "containers": [ctr(c) for c in containers],
                     "schedulerName": "default-scheduler"},
            "status": {"phase": "Pending"}}


def test(c):
    c.add_node("n1", [16 * GiB])
    c.start_extender("--node-timeout", "30")

    # The red team's shape: sidecar 12Gi/50% + app 12Gi/50% on a 16 GiB GPU.
    c.req("POST", "/api/v1/namespaces/t/pods",
          pod("t", "sc", [("side", "12Gi", 50, True)], [("app", "12Gi", 50, False)]))
    r = c.schedule("t", "sc")
    check(r["result"] != "bound", "sidecar 12Gi + app 12Gi (24 GiB together) bound to one 16 GiB "
          "GPU: %s" % (r,))
    check(c.pod("t", "sc")["spec"].get("nodeName") is None, "the sidecar pod got a node")
    passed("a sidecar and an app container that run together do not fit one 16 GiB GPU: %s" %
           r.get("message", r["result"])[:160])

    # 8Gi sidecar + 4Gi app fit (12 GiB, 100%); the assignment marks the sidecar, signed.
    c.req("POST", "/api/v1/namespaces/t/pods",
          pod("t", "ok", [("side", "8Gi", 50, True)], [("app", "4Gi", 50, False)]))
    r = c.schedule("t", "ok")
    check(r["result"] == "bound", "sidecar 8Gi/50%% + app 4Gi/50%% not bound: %s" % (r,))
    a = c.assigned("t", "ok")
    ents = {e["name"]: e for e in a["containers"]}
    check(ents["side"].get("sidecar") is True and ents["side"]["init"] is True,
          "the sidecar's entry is not marked: %s" % (a,))
    check("sidecar" not in ents["app"], "the app container's entry says sidecar: %s" % (a,))
    check(a["version"] == 2, "an assignment with a sidecar is version %s, not 2" % a["version"])
    check(c.signature("t", "ok"), "the sidecar pod's assignment is not signed")
    passed("sidecar 8Gi/50% + app 4Gi/50% bound, the entry marked sidecar, version 2")

    # The view counts the sum: 12 GiB assigned, and nothing (1Gi/1%) fits after it.
    wait_for("/metrics to count 12 GiB", lambda: c.metric(
        "gslice_extender_memory_bytes", '{state="assigned"}') == 12 * GiB, timeout=15)
    c.add_pod("v", "victim", [("main", 1, "4Gi", 50)])
    r = c.schedule("v", "victim")
    check(r["result"] != "bound", "a 4Gi/50%% pod bound beside a sidecar pod holding 12 GiB and "
          "100%%: %s" % (r,))
    c.add_pod("v", "small", [("main", 1, "1Gi", 1)])
    r = c.schedule("v", "small")
    check(r["result"] != "bound", "1Gi/1%% bound on a GPU at 100%%: %s" % (r,))
    passed("the view holds sidecar + app (12 GiB, 100%): 4Gi/50% and 1Gi/1% refused")

    # A regular init container after a sidecar runs beside it: 4Gi side + 13Gi setup > 16 GiB.
    c.add_node("n2", [16 * GiB])
    c.req("POST", "/api/v1/namespaces/t/pods",
          pod("t", "late", [("side", "4Gi", 10, True), ("setup", "13Gi", 10, False)],
              [("app", "1Gi", 10, False)]))
    r = c.schedule("t", "late")
    check(r["result"] != "bound", "a 13Gi init container after a 4Gi sidecar bound to a 16 GiB "
          "GPU: %s" % (r,))
    # Before the sidecar it runs alone: that fits (the pod holds 13 GiB, then 5).
    c.req("POST", "/api/v1/namespaces/t/pods",
          pod("t", "early", [("setup", "13Gi", 10, False), ("side", "4Gi", 10, True)],
              [("app", "1Gi", 10, False)]))
    r = c.schedule("t", "early")
    check(r["result"] == "bound", "a 13Gi init container before a 4Gi sidecar not bound: %s" % (r,))
    passed("a regular init container counts beside the sidecars before it only")

    wait_for("/metrics after the bind", lambda: c.metric(
        "gslice_extender_memory_bytes", '{state="assigned"}') == 25 * GiB, timeout=15)

    # A restart rebuilds the view from the (signed, version 2) annotations: the same sums.
    c.stop_extender()
    c.start_extender("--node-timeout", "30")
    wait_for("/metrics after a restart", lambda: c.metric(
        "gslice_extender_memory_bytes", '{state="assigned"}') == 25 * GiB, timeout=15)
    r = c.schedule("v", "small")
    check(r["result"] == "bound", "1Gi/1%% not bound on n2 (13 GiB, 10%% held) after a restart: %s"
          % (r,))
    check(c.pod("v", "small")["spec"]["nodeName"] == "n2", "1Gi/1%% bound on the full n1")
    passed("after a restart: 12 GiB + 13 GiB assigned, n1 still full")


run(test)
