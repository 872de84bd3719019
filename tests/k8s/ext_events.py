#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Each pod gslice-extender binds gets one core/v1 Event as `kubectl describe pod` lists it:
reason GSliceAssigned, type Normal, involvedObject the pod (kind, namespace, name, uid),
source gslice-extender, the message naming the node, each container's GPUs (index and
UUID), memory and compute share; counted as posted in /metrics. One namespace's flood of
binds (70, more than the 60 a minute of the global bound) is held to its own bucket (20 at
once), the rest counted as dropped, and a pod bound in another namespace right after still gets
its Event."""
from k8stest import GiB, check, passed, run, wait_for


def test(c):
    c.add_node("n1", [16 * GiB, 16 * GiB])
    c.start_extender()
    c.add_pod("ev", "p", [("main", 1, "2Gi", 30), ("side", 1, "1Gi", 20)])
    r = c.schedule("ev", "p")
    check(r["result"] == "bound" and r["node"] == "n1", r)
    uid = c.pod("ev", "p")["metadata"]["uid"]

    def assigned():
        items = c.req("GET", "/api/v1/namespaces/ev/events")["items"]
        return [e for e in items if e.get("reason") == "GSliceAssigned"]
    evs = wait_for("a GSliceAssigned Event", assigned)
    check(len(evs) == 1, evs)
    e = evs[0]
    inv = e["involvedObject"]
    check((inv["kind"], inv["namespace"], inv["name"], inv.get("uid")) == ("Pod", "ev", "p", uid),
          inv)
    check(e["type"] == "Normal" and e["source"]["component"] == "gslice-extender" and
          e["count"] == 1 and e["metadata"]["namespace"] == "ev", e)
    a = c.assigned("ev", "p")
    msg = e["message"]
    check(msg.startswith("assigned to node n1:"), msg)
    for ctr in a["containers"]:
        check("container %s" % ctr["name"] in msg, msg)
        for g in ctr["gpus"]:
            check("GPU %d (%s)" % (g["index"], g["uuid"]) in msg, "%s: %s" % (g, msg))
    check("container main GPU" in msg and "2GiB 30%" in msg and "1GiB 20%" in msg, msg)
    wait_for("the Event counted as posted",
             lambda: c.metric("gslice_extender_events_total", '{outcome="posted"}') == 1)
    passed("GSliceAssigned on ev/p: %s" % msg)

    # A flood from one namespace does not use up another's Events.
    c.add_node("n2", [16 * GiB] * 8)
    for i in range(70):
        c.add_pod("flood", "f%d" % i, [("main", 1, "128Mi", 1)])
        r = c.schedule("flood", "f%d" % i)
        check(r["result"] == "bound", r)
    c.add_pod("quiet", "q", [("main", 1, "128Mi", 1)])
    r = c.schedule("quiet", "q")
    check(r["result"] == "bound", r)

    def events_of(ns):
        items = c.req("GET", "/api/v1/namespaces/%s/events" % ns)["items"]
        return [e for e in items if e.get("reason") == "GSliceAssigned"]
    wait_for("quiet/q's GSliceAssigned Event", lambda: len(events_of("quiet")) == 1)
    flood = len(events_of("flood"))
    # The bucket refills at 12 a minute while the 70 binds run: a few more than 20.
    check(20 <= flood < 40, "%d Events in namespace flood, want its burst of 20 (and a few)" %
          flood)
    wait_for("the flood's drops counted",
             lambda: c.metric("gslice_extender_events_total", '{outcome="dropped_rate"}') ==
             70 - flood)
    check(c.metric("gslice_extender_events_dropped_namespace_total", "") == 70 - flood,
          "the flood's drops are not counted as its namespace's own: %s" %
          c.metric("gslice_extender_events_dropped_namespace_total", ""))
    passed("70 binds in namespace flood: %d Events, %d dropped; quiet/q still has its Event" %
           (flood, 70 - flood))


run(test)
