#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Spread: the emptiest node first, then the emptiest GPU of it; a pod's
gslice.io/policy: binpack overrides the flag for that pod alone."""
from k8stest import GiB, check, passed, run


def test(c):
    for n in ("n1", "n2"):
        c.add_node(n, [16 * GiB, 16 * GiB])
    c.start_extender("--policy", "spread", "--node-timeout", "5")
    placed = []
    for i in range(4):
        c.add_pod("s", "p%d" % i, [("main", 1, "4Gi", 20)])
        r = c.schedule("s", "p%d" % i)
        check(r["result"] == "bound", "p%d: %s" % (i, r))
        g = c.assigned("s", "p%d" % i)["containers"][0]["gpus"][0]
        placed.append((r["node"], g["index"]))
    check(len(set(placed)) == 4, "spread put two of four pods on one GPU: %s" % placed)
    check(placed[0][0] != placed[1][0], "spread put the first two pods on one node: %s" % placed)
    passed("spread: four pods on four GPUs, alternating nodes: %s" % placed)

    # A binpack pod joins the fullest GPU although the flag says spread.
    c.add_pod("s", "pack", [("main", 1, "1Gi", 10)], annotations={"gslice.io/policy": "binpack"})
    r = c.schedule("s", "pack")
    check(r["result"] == "bound", "pack: %s" % r)
    c.add_pod("s", "more", [("main", 1, "1Gi", 10)], annotations={"gslice.io/policy": "binpack"})
    r2 = c.schedule("s", "more")
    g1 = c.assigned("s", "pack")["containers"][0]["gpus"][0]["uuid"]
    g2 = c.assigned("s", "more")["containers"][0]["gpus"][0]["uuid"]
    check(g1 == g2, "two binpack pods on different GPUs: %s %s (%s)" % (g1, g2, r2))
    passed("per-pod binpack overrides --policy spread (both on %s)" % g1)


run(test)
