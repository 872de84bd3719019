#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gslice-extender restarted mid-stream: /filter answers 503 until the first sync; the
new process rebuilds what is held from the pods' gslice.io/assigned annotations, so a
stream of pods scheduled across the restart never over-commits a GPU; a watch that
loses its history (410) lists again and misses nothing."""
import json
import subprocess
import sys
import time

from k8stest import GiB, check, passed, run, wait_for, SRC
import os
import scheduler


def over_committed(c):
    """GPUs whose assigned memory or compute is over what they have, from the API's pods."""
    st = c.req("GET", "/_test/state")
    cap = {}
    for n in st["nodes"]:
        inv = json.loads(n["metadata"]["annotations"]["gslice.io/gpus"])
        for g in inv["gpus"]:
            cap[g["uuid"]] = [g["memory"], 100]
    use = {}
    for p in st["pods"]:
        a = (p["metadata"].get("annotations") or {}).get("gslice.io/assigned")
        if not a:
            continue
        for ctr in json.loads(a)["containers"]:
            for g in ctr["gpus"]:
                u = use.setdefault(g["uuid"], [0, 0])
                u[0] += g["memory"]
                u[1] += g["compute"]
    return {k: (u, cap[k]) for k, u in use.items() if u[0] > cap[k][0] or u[1] > cap[k][1]}


def test(c):
    for n in ("n1", "n2"):
        c.add_node(n, [16 * GiB, 16 * GiB])
    # The first list of pods answers only after 2 s: until then /filter is 503.
    c.req("POST", "/_test/fault", {"method": "GET", "path": r"^/api/v1/pods\?", "status": 0,
                                   "delay_s": 2, "count": 1})
    c.start_extender("--node-timeout", "5", wait_ready=False)
    s = c.scheduler()
    pod = c.add_pod("x", "probe", [("main", 1, "1Gi", 10)])
    st, body = scheduler.http("POST", c.ext_url + "/filter", {"Pod": pod, "NodeNames": ["n1"]})
    check(st == 503 and "not read" in body["Error"], "before sync: %s %s" % (st, body))
    wait_for("first sync", lambda: c.metric("gslice_extender_ready") == 1)
    c.delete_pod("x", "probe")
    passed("503 until the first sync")

    # A scheduler loop over a stream of pods; the extender is killed and restarted mid-way.
    log = os.path.join(c.dir, "scheduler.log")
    sched = subprocess.Popen(["/usr/bin/python3", os.path.join(SRC, "tests/k8s/scheduler.py"),
                              "--api", c.api, "--extender", c.ext_url, "--timeout", "2",
                              "--log", log], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    c.procs.append(sched)
    # Pods of 4GiB: 4 fit per 16GiB GPU, 16 in all on 4 GPUs.
    for i in range(8):
        c.add_pod("x", "p%02d" % i, [("main", 1, "4Gi", 20)])
    wait_for("the first 8 bound", lambda: sum(
        1 for i in range(8) if c.pod("x", "p%02d" % i)["spec"].get("nodeName")) == 8, 20)
    c.stop_extender()
    port = c.ext_url.rsplit(":", 1)[1]
    for i in range(8, 20):
        c.add_pod("x", "p%02d" % i, [("main", 1, "4Gi", 20)])
    # Same port, so the running scheduler finds it again (it retries refused calls); if
    # another test took the port meanwhile, a new one and a scheduler pointed at it.
    if not c.start_extender("--node-timeout", "5", "--listen", "127.0.0.1:" + port, may_fail=True):
        c.start_extender("--node-timeout", "5")
        sched.kill()
        sched.wait()
        sched = subprocess.Popen(["/usr/bin/python3", os.path.join(SRC, "tests/k8s/scheduler.py"),
                                  "--api", c.api, "--extender", c.ext_url, "--timeout", "2",
                                  "--log", log], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.STDOUT)
        c.procs.append(sched)
    def settled():
        pods = [c.pod("x", "p%02d" % i) for i in range(20)]
        return sum(1 for p in pods if p["spec"].get("nodeName")) == 16
    wait_for("16 of 20 pods bound", settled, 30)
    time.sleep(1.5)  # the other 4 keep being retried, and must stay unbound
    bound = sum(1 for i in range(20) if c.pod("x", "p%02d" % i)["spec"].get("nodeName"))
    check(bound == 16, "%d pods bound on room for 16" % bound)
    over = over_committed(c)
    check(not over, "over-committed GPUs: %s" % over)
    check(c.metric("gslice_extender_memory_bytes", '{state="assigned"}') == 64 * GiB,
          "after restart the extender holds %s" % c.metric("gslice_extender_memory_bytes",
                                                         '{state="assigned"}'))
    passed("restart mid-stream: 16 of 20 bound on room for 16, nothing over-committed")

    # History lost while the watch is away: the watches reconnect slowly (1 s), a pod is
    # deleted and the history compacted meanwhile, so resuming is 410 -> list again.
    c.req("POST", "/_test/fault", {"path": "watch=1", "status": 0, "delay_s": 1.0, "count": 2})
    c.req("POST", "/_test/close-watches", {})
    victim = next(i for i in range(20) if c.pod("x", "p%02d" % i)["spec"].get("nodeName"))
    c.delete_pod("x", "p%02d" % victim)
    c.req("POST", "/_test/compact", {})
    wait_for("a relist after 410", lambda: "listing again" in open(
        os.path.join(c.dir, "extender.log")).read(), 10)
    wait_for("a pending pod to take the freed room", lambda: sum(
        1 for i in range(20) if i != victim and c.pod("x", "p%02d" % i)["spec"].get("nodeName")) == 16, 20)
    c.wait_metric("gslice_extender_memory_bytes", '{state="assigned"}', 64 * GiB)
    check(not over_committed(c), "over-committed after relist")
    passed("410 while the watch was away: listed again, the freed room reused")


run(test)
