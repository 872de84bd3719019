#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Each pod gslice-extender binds gets one core/v1 Event as `kubectl describe pod` lists it:
reason GSliceAssigned, type Normal, involvedObject the pod (kind, namespace, name, uid),
source gslice-extender, the message naming the node, each container's GPUs (index and
UUID), memory and compute share; counted as posted in /metrics. One namespace's flood of
binds (70, more than the 60 a minute of the global bound) is held to its own bucket (20 at
once), the rest counted as dropped, and a pod bound in another namespace right after still gets
its Event. A bind repeated (kube-scheduler retrying) is counted into its Event, and once a write
of it was refused the repeats after it are deferred (counted, no write). Five namespaces
binding 20 pods each in turn outrun the global bound: what each asks past its fair share is
dropped while the bound's reserve is kept, and the namespace that asks little, a second later,
still gets its Event. Each Event statistic is a series of /metrics (src/k8s/common/event.c
kube_events_prom), there at 0 from the start, and moves as this happens."""
import time

from k8stest import GiB, check, passed, run, wait_for

EVENT_SERIES = [("gslice_extender_events_total", '{outcome="%s"}' % o) for o in (
    "posted", "failed", "repeated", "patched", "dropped_full", "dropped_rate")] + [
    ("gslice_extender_events_%s_total" % f, "") for f in (
        "queued", "deferred", "dropped_namespace", "dropped_share")]


def event_stats(c):
    """Each Event series' value (None where it is missing)."""
    return {n + l: c.metric(n, l) for n, l in EVENT_SERIES}


def test(c):
    c.add_node("n1", [16 * GiB, 16 * GiB])
    c.start_extender()
    st = event_stats(c)
    check(all(v == 0 for v in st.values()), "the Event series at the start: %s" % st)
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
    wait_for("%d Events queued and posted" % (flood + 2),
             lambda: c.metric("gslice_extender_events_queued_total") == flood + 2 and
             c.metric("gslice_extender_events_total", '{outcome="posted"}') == flood + 2)

    # flood/f0's bind repeated: counted into its Event; flood's bucket is empty, so the write
    # of the count is refused, and the repeats after it are deferred to one write 30 s later.
    f0 = c.pod("flood", "f0")
    s = c.scheduler()
    before = event_stats(c)
    for i in range(20):
        s.bind(f0, f0["spec"]["nodeName"])
        if c.metric("gslice_extender_events_deferred_total") > 0:
            break
    st = event_stats(c)
    rep = '{outcome="repeated"}'
    check(st["gslice_extender_events_total" + rep] ==
          before["gslice_extender_events_total" + rep] + i + 1, "%d repeated binds: %s" %
          (i + 1, st))
    check(st["gslice_extender_events_deferred_total"] >= 1 and
          st["gslice_extender_events_dropped_namespace_total"] >
          before["gslice_extender_events_dropped_namespace_total"],
          "a repeat refused its write, then deferred: %s" % st)
    passed("flood/f0 bound again %d times: %d deferred after its write was refused" %
           (i + 1, st["gslice_extender_events_deferred_total"]))

    # Five namespaces in turn past their share of the global bound (60 a minute, about 35
    # left): each namespace's 20 are within its own burst, the drops are the share's.
    c.add_node("n3", [16 * GiB] * 8)
    before = event_stats(c)
    for i in range(20):
        for n in range(5):
            c.add_pod("wide%d" % n, "w%d" % i, [("main", 1, "128Mi", 1)])
            r = c.schedule("wide%d" % n, "w%d" % i)
            check(r["result"] == "bound", r)
    # They leave the global bucket a reserve that grows with what they ask past their share,
    # from under one token (just past it) to 6 (20 asked): a second's refill gives the one a
    # namespace within its share takes.
    time.sleep(1.2)
    c.add_pod("quiet", "q2", [("main", 1, "128Mi", 1)])
    check(c.schedule("quiet", "q2")["result"] == "bound", "quiet/q2")
    wait_for("quiet/q2's GSliceAssigned Event", lambda: len(events_of("quiet")) == 2)
    st = event_stats(c)
    d = {k: st[k] - before[k] for k in st}
    share = d["gslice_extender_events_dropped_share_total"]
    rate = d['gslice_extender_events_total{outcome="dropped_rate"}']
    # A drop with less than one global token left is over the bound itself, not the share's.
    check(0 < share <= rate and d["gslice_extender_events_dropped_namespace_total"] == 0 and
          d['gslice_extender_events_total{outcome="dropped_full"}'] == 0,
          "100 binds over 5 namespaces: the drops are not the share's: %s" % d)
    wide = sum(len(events_of("wide%d" % n)) for n in range(5))
    check(wide + rate == 100, "%d Events in the five namespaces, %d dropped" % (wide, rate))
    passed("100 binds over 5 namespaces: %d Events, %d dropped (%d over their share); quiet/q2 "
           "still has its Event" % (wide, rate, share))


run(test)
