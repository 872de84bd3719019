#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A node whose gslice-node heartbeat stops leaves placement after --node-timeout (and
comes back when it beats again); nodes without, or with a newer or broken, gslice.io/gpus
are out, each for a reason in words."""
import json
import time

from k8stest import GiB, check, passed, run, wait_for


def test(c):
    c.add_node("n1", [16 * GiB])
    c.add_node("n2", [16 * GiB])
    c.add_node("plain", [16 * GiB], annotation=None, heartbeat=False)
    c.req("PATCH", "/api/v1/nodes/plain", {"metadata": {"annotations": {"gslice.io/gpus": None}}})
    c.add_node("future", [16 * GiB], annotation=json.dumps(
        {"version": 2, "heartbeat": "2026-01-01T00:00:00Z", "slotsPerGpu": 1, "gpus": []}))
    c.add_node("broken", [16 * GiB], annotation="{not json")
    c.start_extender("--node-timeout", "3", "--policy", "spread")
    s = c.scheduler()
    pod = c.add_pod("h", "probe", [("main", 1, "1Gi", 10)])
    nodes = s.nodes()
    ok, failed = s.filter(pod, nodes)
    check(sorted(ok) == ["n1", "n2"], "feasible %s, failed %s" % (ok, failed))
    check("no gslice.io/gpus annotation" in failed["plain"], failed["plain"])
    check("version 2 is newer" in failed["future"], failed["future"])
    check("not JSON" in failed["broken"], failed["broken"])
    passed("out of placement, with reasons: %s" % failed)

    # A change the running extender has seen by its own clock, then silence.
    seen = time.monotonic()
    wait_for("a heartbeat change", lambda: c.hb_changed.get("n2", 0) > seen, 5)
    c.stop_heartbeat("n2")
    time.sleep(0.6)  # a patch under way when it stopped has landed
    t0 = c.hb_changed["n2"]  # the extender judges by when the value last changed

    def n2_out():
        ok, failed = s.filter(pod, nodes)
        return "n2" in failed and failed["n2"]
    why = wait_for("n2 to go stale", n2_out, timeout=10)
    took = time.monotonic() - t0
    check("heartbeat is" in why and "--node-timeout 3 s" in why, why)
    # Not before 3 s after the last change; the upper bound leaves room for a loaded machine.
    check(2.9 <= took <= 10.0, "n2 went stale %.1f s after its last heartbeat with "
          "--node-timeout 3" % took)
    for i in range(3):
        c.add_pod("h", "p%d" % i, [("main", 1, "1Gi", 10)])
        r = c.schedule("h", "p%d" % i)
        check(r["result"] == "bound" and r["node"] == "n1", "p%d: %s" % (i, r))
    check(c.metric("gslice_extender_nodes", '{state="stale"}') == 1, c.metrics())
    passed("stale heartbeat: n2 out %.1f s after its last change (%s); pods went to n1"
           % (took, why))

    st = c.req("GET", "/api/v1/nodes/n2")
    inv = json.loads(st["metadata"]["annotations"]["gslice.io/gpus"])
    with c.hb_lock:
        c.hb_nodes["n2"] = inv
    wait_for("n2 back", lambda: "n2" in s.filter(pod, nodes)[0], timeout=10)
    passed("n2 back in placement once it beats again")


run(test)
