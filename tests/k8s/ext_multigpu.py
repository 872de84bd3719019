#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Multi-GPU containers: N distinct GPUs of one node, totals split exactly (remainder to
the first GPUs), a full GPU passed over; several containers and an init container in one
pod; more GPUs than a node has is unresolvable, in words."""
from k8stest import GiB, check, passed, run


def test(c):
    c.add_node("n1", [16 * GiB] * 4)
    c.start_extender("--node-timeout", "5")
    # GPU 2 nearly full.
    c.add_pod("m", "filler", [("main", 1, "15.5Gi", 10)], annotations={"gslice.io/policy": "spread"})
    r = c.schedule("m", "filler")
    check(r["result"] == "bound", "filler: %s" % r)
    full = c.assigned("m", "filler")["containers"][0]["gpus"][0]["uuid"]

    c.add_pod("m", "wide", [("main", 3, 3 * GiB + 2, 31)],
              annotations={"gslice.io/compute-limit": "50", "gslice.io/priority": "low"})
    r = c.schedule("m", "wide")
    check(r["result"] == "bound", "wide: %s" % r)
    ctr = c.assigned("m", "wide")["containers"][0]
    uuids = [g["uuid"] for g in ctr["gpus"]]
    check(len(set(uuids)) == 3 and full not in uuids, "GPUs %s (full one: %s)" % (uuids, full))
    mems = [g["memory"] for g in ctr["gpus"]]
    cpus = [g["compute"] for g in ctr["gpus"]]
    check(mems == [GiB + 1, GiB + 1, GiB] and cpus == [11, 10, 10], "split %s %s" % (mems, cpus))
    check(ctr["computeLimit"] == 50 and ctr["priority"] == "low" and ctr["weight"] == 1,
          "limits %s" % ctr)
    passed("3 distinct GPUs, split %s bytes / %s%%" % (mems, cpus))

    c.add_pod("m", "multi", [("a", 1, "2Gi", 20), ("b", 2, "2Gi", 20)],
              init=[("setup", 1, "1Gi", 50)])
    r = c.schedule("m", "multi")
    check(r["result"] == "bound", "multi: %s" % r)
    a = c.assigned("m", "multi")
    names = [(x["name"], x["init"], len(x["gpus"])) for x in a["containers"]]
    check(sorted(names) == [("a", False, 1), ("b", False, 2), ("setup", True, 1)],
          "containers %s" % names)
    passed("a pod of two containers and an init container: %s" % names)

    c.add_pod("m", "huge", [("main", 5, "5Gi", 0)])
    r = c.schedule("m", "huge")
    check(r["result"] == "unschedulable", "5 GPUs on a 4-GPU node: %s" % r)
    check("on each of 5 GPUs, 4 have room" in r["failed"]["n1"] or
          "have room" in r["failed"]["n1"], "reason %s" % r["failed"])
    passed("more GPUs than the node has: %s" % r["message"])


run(test)
