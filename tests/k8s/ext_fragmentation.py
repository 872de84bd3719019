#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Fragmentation: a node whose two GPUs are each half full refuses a job that fits
neither (kube-scheduler's per-node count alone would admit it), saying why per GPU;
the same arrivals under binpack keep a whole GPU free for that job."""
from k8stest import GiB, check, passed, run


def test(c):
    c.add_node("n1", [16 * GiB, 16 * GiB])
    c.start_extender("--policy", "spread", "--node-timeout", "5")
    # Spread puts the two 8GiB pods on different GPUs.
    for p in ("a", "b"):
        c.add_pod("t", p, [("main", 1, "8Gi", 20)])
        r = c.schedule("t", p)
        check(r["result"] == "bound", "pod %s: %s" % (p, r))
    gpus = sorted(c.assigned("t", p)["containers"][0]["gpus"][0]["index"] for p in ("a", "b"))
    check(gpus == [0, 1], "spread used GPUs %s" % gpus)
    c.add_pod("t", "big", [("main", 1, "10Gi", 10)])
    r = c.schedule("t", "big")
    check(r["result"] == "unschedulable", "10GiB on two half-full GPUs: %s" % r)
    why = r["failed"]["n1"]
    check("gpu 0: 8GiB of 16GiB free, 10GiB asked" in why and
          "gpu 1: 8GiB of 16GiB free, 10GiB asked" in why, "reason: %s" % why)
    check(r["message"].startswith("0/1 nodes are available: 1 gslice: container main asks 10GiB"),
          "scheduler message: %s" % r["message"])
    passed("two half-full GPUs refuse 10GiB: %s" % why)

    # The same arrivals on the same node, emptied, under binpack: both 8GiB pods share a
    # GPU, and 10GiB fits on the other.
    for p in ("a", "b", "big"):
        c.delete_pod("t", p)
    c.wait_metric("gslice_extender_memory_bytes", '{state="assigned"}', 0)
    for p in ("c", "d"):
        c.add_pod("u", p, [("main", 1, "8Gi", 20)], annotations={"gslice.io/policy": "binpack"})
        r = c.schedule("u", p)
        check(r["result"] == "bound" and r["node"] == "n1", "pod %s: %s" % (p, r))
    gpus = [c.assigned("u", p)["containers"][0]["gpus"][0]["index"] for p in ("c", "d")]
    check(gpus[0] == gpus[1], "binpack split the pods over GPUs %s" % gpus)
    c.add_pod("u", "big", [("main", 1, "10Gi", 10)])
    r = c.schedule("u", "big")
    check(r["result"] == "bound" and r["node"] == "n1", "10GiB after binpack: %s" % r)
    got = c.assigned("u", "big")["containers"][0]["gpus"][0]
    check(got["index"] != gpus[0] and got["memory"] == 10 * GiB, "big went to %s" % got)
    passed("binpack kept GPU %d whole; 10GiB placed there" % got["index"])


run(test)
