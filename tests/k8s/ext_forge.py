#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Forged assignments: a pod whose namespace user sets spec.nodeName
and writes its own gslice.io/assigned -- unsigned, signed with another key, with a valid
signature copied from another pod, or signed but not what the pod declares -- holds nothing
in gslice-extender's view: placement and /metrics count only what the extender signed for
that pod's uid and node, and each refusal is counted in
gslice_extender_forged_assignments_total. A bound pod's annotation edited afterwards changes
nothing. The same after a restart of the extender."""
import json

from k8stest import GiB, check, make_key, passed, run, sign_assigned, wait_for
import os

MEM = '{state="assigned"}'


def assignment(node, uuid, mem, compute, limit=100, prio="high", weight=1000, name="main"):
    return json.dumps({"version": 1, "node": node, "containers": [{
        "name": name, "init": False, "gpus": [{"uuid": uuid, "index": 0, "memory": mem,
                                               "compute": compute}],
        "computeLimit": limit, "priority": prio, "weight": weight}]}, separators=(",", ":"))


def test(c):
    c.add_node("n1", [16 * GiB])
    c.start_extender("--node-timeout", "30")
    uuid = "GPU-n1-0"

    # A pod placed the normal way: its assignment comes signed, in the Binding.
    c.add_pod("t", "victim", [("main", 1, "4Gi", 30)])
    r = c.schedule("t", "victim")
    check(r["result"] == "bound", "victim: %s" % r)
    vp = c.pod("t", "victim")
    vtext = vp["metadata"]["annotations"]["gslice.io/assigned"]
    vsig = c.signature("t", "victim")
    check(vsig == sign_assigned(c.signing_key, vp["metadata"]["uid"], "n1", vtext),
          "the extender's signature %s is not HMAC-SHA256(key, uid, node, text)" % vsig)
    c.wait_metric("gslice_extender_memory_bytes", MEM, 4 * GiB)
    passed("a scheduled pod's assignment is signed for its uid and node: %s" % vsig)

    # Forgeries: each pod declares 512Mi / 1% (what quota sees) and claims 12GiB / 70%.
    forged = assignment("n1", uuid, 12 * GiB, 70)
    other_key = make_key(os.path.join(c.dir, "other.key"))

    c.add_pod("t", "unsigned", [("main", 1, "512Mi", 1)], node="n1",
              annotations={"gslice.io/assigned": forged})
    p = c.add_pod("t", "wrongkey", [("main", 1, "512Mi", 1)], node="n1",
                  annotations={"gslice.io/assigned": forged})
    c.annotate("t", "wrongkey", {"gslice.io/assigned-signature": sign_assigned(
        other_key, p["metadata"]["uid"], "n1", forged)})
    # The victim's exact text and valid signature, on a pod with another uid.
    c.add_pod("t", "copied", [("main", 1, "4Gi", 30)], node="n1",
              annotations={"gslice.io/assigned": vtext, "gslice.io/assigned-signature": vsig})
    # Signed with the cluster's own key (as if it had leaked) but not what the pod declares.
    p = c.add_pod("t", "mismatch", [("main", 1, "512Mi", 1)], node="n1",
                  annotations={"gslice.io/assigned": forged})
    c.annotate("t", "mismatch", {"gslice.io/assigned-signature": sign_assigned(
        c.signing_key, p["metadata"]["uid"], "n1", forged)})
    # memory 0 is not "no cap": refused even when signed and otherwise right.
    zero = assignment("n1", uuid, 0, 1)
    p = c.add_pod("t", "uncapped", [("main", 1, "512Mi", 1)], node="n1",
                  annotations={"gslice.io/assigned": zero})
    c.annotate("t", "uncapped", {"gslice.io/assigned-signature": sign_assigned(
        c.signing_key, p["metadata"]["uid"], "n1", zero)})
    def logged(name, word):
        return any(("pod t/%s " % name) in line and word in line for line in open(
            os.path.join(c.dir, "extender.log")))
    for name, word in (("unsigned", "no gslice.io/assigned-signature"),
                       ("wrongkey", "not one of this gslice's signing keys"),
                       ("copied", "does not match"), ("mismatch", "the pod declares"),
                       ("uncapped", "memory 0")):
        wait_for("%s refused for '%s'" % (name, word), lambda: logged(name, word))
    c.wait_metric("gslice_extender_forged_pods", "", 5)
    check(c.metric("gslice_extender_forged_assignments_total") >= 5,
          "forged total %s" % c.metric("gslice_extender_forged_assignments_total"))
    check(c.metric("gslice_extender_memory_bytes", MEM) == 4 * GiB,
          "forged pods counted: assigned %s" % c.metric("gslice_extender_memory_bytes", MEM))
    passed("unsigned, other-key, copied and undeclared assignments are not counted (5 refused)")

    # Placement ignores them: the 12GiB the victim leaves free are still free.
    c.add_pod("t", "big", [("main", 1, "12Gi", 60)])
    r = c.schedule("t", "big")
    check(r["result"] == "bound", "a 12Gi pod beside the victim: %s" % r)
    c.wait_metric("gslice_extender_memory_bytes", MEM, 16 * GiB)
    c.delete_pod("t", "big")
    c.wait_metric("gslice_extender_memory_bytes", MEM, 4 * GiB)
    passed("placement sees the GPU's real holdings: a 12Gi pod fits beside the 4Gi victim")

    # A hand-written assignment signed with the right key for its own uid that agrees with
    # the pod counts (the tests' signer and the extender's agree).
    good = assignment("n1", uuid, 1 * GiB, 10, limit=100, prio="normal", weight=1)
    p = c.add_pod("t", "hand", [("main", 1, "1Gi", 10)], node="n1",
                  annotations={"gslice.io/assigned": good})
    c.annotate("t", "hand", {"gslice.io/assigned-signature": sign_assigned(
        c.signing_key, p["metadata"]["uid"], "n1", good)})
    c.wait_metric("gslice_extender_memory_bytes", MEM, 5 * GiB)
    passed("a correctly signed assignment that matches its pod counts")

    # The victim edits its own annotation after binding: nothing changes.
    c.annotate("t", "victim", {"gslice.io/assigned": assignment("n1", uuid, 16 * GiB, 100)})
    c.add_pod("t", "probe", [("main", 1, "10Gi", 10)])
    r = c.schedule("t", "probe")
    check(r["result"] == "bound", "after the edit the victim's room changed: %s" % r)
    c.wait_metric("gslice_extender_memory_bytes", MEM, 15 * GiB)
    c.delete_pod("t", "probe")
    c.wait_metric("gslice_extender_memory_bytes", MEM, 5 * GiB)
    passed("an assignment edited after binding changes nothing in the view")

    # After a restart the view is rebuilt from signed assignments only.
    c.stop_extender()
    c.start_extender("--node-timeout", "30")
    c.wait_metric("gslice_extender_forged_pods", "", 6)  # the edited victim too, now
    check(c.metric("gslice_extender_memory_bytes", MEM) == 1 * GiB,
          "after restart: %s" % c.metric("gslice_extender_memory_bytes", MEM))
    passed("after a restart only verified assignments count (the edited one no longer)")


run(test)
