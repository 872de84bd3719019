#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gslice-extender takes a node's liveness from its Lease gslice-node-<node> in gslice-system:
a node whose Lease is renewed is in placement while its annotation's heartbeat is old; it
goes stale once the Lease stops being renewed (after --node-timeout) and comes back when it
is renewed again; a Lease whose holderIdentity is not the node is not believed, nor is a
Lease that is deleted (the node is then judged by its annotation, as is a node with no
Lease: a gslice-node older than Leases); a Lease for a node that does not exist adds no
node."""
import time

from k8stest import GiB, LEASES, check, passed, run, wait_for


def test(c):
    for name in ("leased", "lapsed", "liar"):
        c.add_node(name, [16 * GiB], heartbeat=False)  # the annotation written once, now
    c.add_node("old", [16 * GiB])  # no Lease, the annotation's heartbeat refreshed
    c.keep_lease("leased")
    c.keep_lease("lapsed")
    c.keep_lease("liar", holder="someone-else")
    c.keep_lease("ghost")
    c.start_extender("--node-timeout", "3", "--policy", "spread")
    s = c.scheduler()
    pod = c.add_pod("h", "probe", [("main", 1, "1Gi", 10)])
    nodes = s.nodes()
    time.sleep(4.5)  # every annotation but old's is older than --node-timeout now
    ok, failed = s.filter(pod, nodes)
    check(sorted(ok) == ["lapsed", "leased", "old"], "feasible %s, failed %s" % (ok, failed))
    check("heartbeat is" in failed["liar"], failed["liar"])
    check(c.metric("gslice_extender_nodes", '{state="all"}') == 4, c.metrics())
    check(c.metric("gslice_extender_nodes", '{state="stale"}') == 1, c.metrics())
    passed("Leases renewed: leased and lapsed fresh with a 4.5 s old annotation; old fresh by "
           "its annotation; liar's Lease (holder someone-else) not believed: %s; the ghost's "
           "Lease adds no node" % failed["liar"])

    c.stop_lease("lapsed")
    time.sleep(0.6)  # a renewal under way when it stopped has landed
    t0 = c.lease_changed["lapsed"]

    def lapsed_out():
        ok, failed = s.filter(pod, nodes)
        return "lapsed" in failed and failed["lapsed"]
    why = wait_for("lapsed to go stale", lapsed_out, timeout=10)
    took = time.monotonic() - t0
    check("heartbeat is" in why and "--node-timeout 3 s" in why, why)
    check(2.9 <= took <= 10.0, "lapsed went stale %.1f s after its last renewal" % took)
    check(c.metric("gslice_extender_nodes", '{state="stale"}') == 2, c.metrics())
    passed("Lease no longer renewed: lapsed out %.1f s after its last renewTime (%s)"
           % (took, why))

    c.keep_lease("lapsed")
    wait_for("lapsed back", lambda: "lapsed" in s.filter(pod, nodes)[0], timeout=10)
    passed("lapsed back in placement once its Lease is renewed again")

    c.stop_lease("leased")
    c.req("DELETE", LEASES % "gslice-system" + "/gslice-node-leased")
    wait_for("leased judged by its old annotation",
             lambda: "leased" in s.filter(pod, nodes)[1], timeout=10)
    passed("Lease deleted: leased judged by its annotation's old heartbeat, out")


run(test)
