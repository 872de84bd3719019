#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A bind race for the last room on one GPU: two pods both pass /filter, both binds go
at once; the per-node lock and re-check let exactly one through, the other gets an Error
saying why, and nothing is over-committed. A repeated bind of a bound pod (409 with the
same assignment) is success; one bound elsewhere is an error."""
import threading

from k8stest import GiB, check, passed, run


def test(c):
    c.add_node("n1", [16 * GiB])
    c.start_extender("--node-timeout", "5")
    c.add_pod("r", "base", [("main", 1, "10Gi", 10)])
    check(c.schedule("r", "base")["result"] == "bound", "base")
    c.add_pod("r", "x", [("main", 1, "4Gi", 10)])
    c.add_pod("r", "y", [("main", 1, "4Gi", 10)])
    s1, s2 = c.scheduler(), c.scheduler()
    nodes = s1.nodes()
    px, py = c.pod("r", "x"), c.pod("r", "y")
    check(s1.filter(px, nodes)[0] == ["n1"] and s2.filter(py, nodes)[0] == ["n1"],
          "both should pass filter")
    results = {}
    go = threading.Barrier(2)

    def bind(s, pod, key):
        go.wait()
        try:
            s.bind(pod, "n1")
            results[key] = "ok"
        except Exception as e:  # the stand-in raises CycleError with the extender's Error
            results[key] = str(e)
    ts = [threading.Thread(target=bind, args=(s1, px, "x")),
          threading.Thread(target=bind, args=(s2, py, "y"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    oks = [k for k, v in results.items() if v == "ok"]
    check(len(oks) == 1, "binds: %s" % results)
    loser = "y" if oks == ["x"] else "x"
    check("no longer" in results[loser] or "of 16GiB free" in results[loser],
          "loser's error: %s" % results[loser])
    bound = [p for p in ("x", "y") if c.pod("r", p)["spec"].get("nodeName")]
    check(bound == oks, "API server has %s bound, extender said %s" % (bound, oks))
    check(c.assigned("r", loser) is None, "the loser has an annotation")
    passed("bind race: %s won, %s refused (%s)" % (oks[0], loser, results[loser]))

    # The winner's bind repeated (kube-scheduler retrying after a timeout): success.
    win = c.pod("r", oks[0])
    s1.bind(win, "n1")
    check(c.metric("gslice_extender_bind_repeated_total") == 1, c.metrics())
    passed("a repeated bind with the same assignment is success")

    # Bound elsewhere (e.g. by hand) meanwhile: an error, and nothing held for it.
    c.add_node("n2", [16 * GiB])
    c.add_pod("r", "z", [("main", 1, "1Gi", 10)])
    c.req("POST", "/api/v1/namespaces/r/pods/z/binding",
          {"metadata": {"name": "z"}, "target": {"kind": "Node", "name": "n2"}})
    try:
        s1.bind(c.pod("r", "z"), "n1")
        check(False, "bind of a pod bound elsewhere succeeded")
    except Exception as e:
        check("already" in str(e), str(e))
        passed("bound elsewhere: %s" % e)
    used = c.metric("gslice_extender_memory_bytes", '{state="assigned"}')
    check(used == 14 * GiB, "assigned %s, want 14GiB" % used)


run(test)
