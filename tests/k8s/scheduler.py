#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A kube-scheduler stand-in for gslice's tests: calls a scheduler extender the way
kube-scheduler does (pkg/scheduler/extender.go, schedule_one.go), on the API server
stand-in (apiserver.py). Python standard library only.

For each pending pod (spec.nodeName empty, schedulerName default-scheduler or unset),
in creation order, one scheduling cycle:
  1. candidate nodes: all nodes (percentageOfNodesToScore: 100); the scheduler's own
     fit check of extended resources the nodes advertise (status.allocatable, e.g.
     gslice.io/gpu slots) - resources listed in managedResources with
     ignoredByScheduler: true are skipped, as NodeResourcesFit does;
  2. if the extender is interested (the pod asks for one of its managedResources):
     POST <urlPrefix>/<filterVerb> ExtenderArgs {"Pod", "NodeNames"} (nodeCacheCapable)
     or {"Pod", "Nodes"}; a non-200 answer, an "Error", a timeout (httpTimeout) or a
     node name not among those sent fails the cycle (unless ignorable); NodeNames
     answered are the feasible ones; FailedNodes and FailedAndUnresolvableNodes are
     the reasons;
  3. no feasible node: the pod is unschedulable; an Event FailedScheduling
     "0/N nodes are available: <count> <reason>, ..." is posted, and the pod is
     retried later (backoff 1 s, doubling to 10 s, or at once after a change);
  4. one feasible node: taken without prioritize (as kube-scheduler does); else
     POST <prioritizeVerb> with the feasible NodeNames; each Score (0..10) counts
     score * weight * 10 (MaxNodeScore / MaxExtenderPriority); the highest total
     wins, ties broken at random (seeded: --seed);
  5. bind: POST <bindVerb> ExtenderBindingArgs {"PodName", "PodNamespace", "PodUID",
     "Node"}; an "Error" or a non-200 answer fails the binding and requeues the pod.
     Without bindVerb: the default binder's POST .../pods/NAME/binding.
An https:// extender is called as the extender's tlsConfig says: the server verified
against caFile (--ca-file), and a client certificate (--cert-file, --key-file) sent.

Usage:
  scheduler.py --api URL --extender URL [--weight N] [--timeout S] [--no-bind-verb]
               [--nodes-mode] [--ignorable] [--seed N] [--log FILE] [--once]
               [--ca-file F --cert-file F --key-file F]
--log writes one JSON line per cycle: {"pod","result":"bound|unschedulable|error",
"node","message","scores"}. --once schedules what is pending and exits; otherwise it
loops (polling the pods every 0.1 s) until killed.

As a module: Scheduler(api, extender, ...).schedule_one(pod) -> that dict, and the
verbs filter()/prioritize()/bind() one by one (the bind race test uses them).
"""

import argparse
import json
import random
import ssl
import sys
import time
import urllib.error
import urllib.request

MANAGED = ("gslice.io/gpu-memory", "gslice.io/gpu-compute", "gslice.io/gpu")
IGNORED_BY_SCHEDULER = ("gslice.io/gpu-memory", "gslice.io/gpu-compute")


class CycleError(Exception):
    pass


def tls_context(ca, cert=None, key=None):
    """The client side of an extender's tlsConfig: caFile, certFile, keyFile."""
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def http(method, url, body=None, timeout=30.0, ctype="application/json", context=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": ctype, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw) if raw else None
        except ValueError:
            return e.code, raw.decode(errors="replace")


def quantity_int(v):
    """Enough of resource.Quantity for counts of slots ("2", 2)."""
    if isinstance(v, int):
        return v
    return int(str(v))


def pod_requests(pod):
    """Effective requests of the pod: max(sum of containers, each init container)."""
    def of(c):
        res = c.get("resources") or {}
        out = dict(res.get("limits") or {})
        out.update(res.get("requests") or {})
        return out
    spec = pod.get("spec") or {}
    total = {}
    for c in spec.get("containers") or []:
        for k, v in of(c).items():
            if k.startswith("gslice.io/"):
                total[k] = total.get(k, 0) + (quantity_int(v) if k == "gslice.io/gpu" else 0)
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            if k == "gslice.io/gpu":
                total[k] = max(total.get(k, 0), quantity_int(v))
            elif k.startswith("gslice.io/"):
                total.setdefault(k, 0)
    return total


class Scheduler:
    def __init__(self, api, extender, weight=1, timeout=30.0, bind_verb=True,
                 node_cache_capable=True, ignorable=False, seed=1, log=None, tls=None):
        self.api = api.rstrip("/")
        self.ext = extender.rstrip("/")
        self.weight = weight
        self.timeout = timeout
        self.bind_verb = bind_verb
        self.cache_capable = node_cache_capable
        self.ignorable = ignorable
        self.rand = random.Random(seed)
        self.log = log
        # tls: (CA file, client certificate, key) for an https:// extender.
        self.ctx = tls_context(*tls) if tls else None

    # ---- the API server -------------------------------------------------------------
    def nodes(self):
        st, body = http("GET", self.api + "/api/v1/nodes")
        if st != 200:
            raise CycleError("listing nodes: HTTP %d" % st)
        return body["items"]

    def pods(self):
        st, body = http("GET", self.api + "/api/v1/pods")
        if st != 200:
            raise CycleError("listing pods: HTTP %d" % st)
        return body["items"]

    def event(self, pod, reason, message):
        meta = pod["metadata"]
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"generateName": meta["name"] + ".", "namespace": meta["namespace"],
                           "name": "%s.%x" % (meta["name"], self.rand.getrandbits(48))},
              "involvedObject": {"kind": "Pod", "name": meta["name"],
                                 "namespace": meta["namespace"], "uid": meta.get("uid")},
              "reason": reason, "message": message, "type": "Warning",
              "source": {"component": "default-scheduler"}}
        http("POST", self.api + "/api/v1/namespaces/%s/events" % meta["namespace"], ev)

    # ---- the extender's verbs, as HTTPExtender calls them -------------------------------
    def interested(self, pod):
        return any(k in MANAGED for k in pod_requests(pod))

    def call(self, verb, args):
        try:
            st, body = http("POST", "%s/%s" % (self.ext, verb), args, timeout=self.timeout,
                            context=self.ctx)
        except (urllib.error.URLError, OSError) as e:
            raise CycleError("extender %s: %s" % (verb, getattr(e, "reason", e)))
        if st != 200:
            raise CycleError("extender %s: HTTP %d: %s" % (verb, st, body))
        return body

    def filter(self, pod, nodes):
        """(feasible names, {name: reason})"""
        names = [n["metadata"]["name"] for n in nodes]
        if self.cache_capable:
            args = {"Pod": pod, "Nodes": None, "NodeNames": names}
        else:
            args = {"Pod": pod, "Nodes": {"items": nodes}, "NodeNames": None}
        res = self.call("filter", args)
        if not isinstance(res, dict):
            raise CycleError("extender filter: answer is not an ExtenderFilterResult")
        if res.get("Error"):
            raise CycleError("extender filter: %s" % res["Error"])
        failed = dict(res.get("FailedNodes") or {})
        failed.update(res.get("FailedAndUnresolvableNodes") or {})
        if self.cache_capable:
            got = res.get("NodeNames")
            got = [] if got is None else got
        else:
            got = [n["metadata"]["name"] for n in ((res.get("Nodes") or {}).get("items") or [])]
        for name in got:
            if name not in names:
                raise CycleError("extender filter claims a filtered node %r which is not "
                                 "found in the input node list" % name)
        return got, failed

    def prioritize(self, pod, names):
        args = {"Pod": pod, "Nodes": None, "NodeNames": names}
        res = self.call("prioritize", args)
        if not isinstance(res, list):
            raise CycleError("extender prioritize: answer is not a HostPriorityList")
        scores = {}
        for hp in res:
            host, score = hp.get("Host"), hp.get("Score")
            if not isinstance(score, int) or not 0 <= score <= 10:
                raise CycleError("extender prioritize: score %r for %r outside 0..10"
                                 % (score, host))
            scores[host] = score * self.weight * 10
        return scores

    def bind(self, pod, node):
        meta = pod["metadata"]
        if self.bind_verb:
            res = self.call("bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                     "PodUID": meta.get("uid", ""), "Node": node})
            if not isinstance(res, dict):
                raise CycleError("extender bind: answer is not an ExtenderBindingResult")
            if res.get("Error"):
                raise CycleError("extender bind: %s" % res["Error"])
            return
        st, body = http("POST", self.api + "/api/v1/namespaces/%s/pods/%s/binding"
                        % (meta["namespace"], meta["name"]),
                        {"apiVersion": "v1", "kind": "Binding",
                         "metadata": {"name": meta["name"], "uid": meta.get("uid")},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
        if st != 201:
            raise CycleError("binding: HTTP %d: %s" % (st, body))

    # ---- one cycle ----------------------------------------------------------------------
    def own_fit(self, pod, nodes, pods):
        """NodeResourcesFit for advertised extended resources not ignoredByScheduler."""
        want = {k: v for k, v in pod_requests(pod).items() if k not in IGNORED_BY_SCHEDULER}
        ok, failed = [], {}
        for n in nodes:
            name = n["metadata"]["name"]
            alloc = (n.get("status") or {}).get("allocatable") or {}
            used = {}
            for p in pods:
                if (p.get("spec") or {}).get("nodeName") == name and \
                        (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    for k, v in pod_requests(p).items():
                        used[k] = used.get(k, 0) + v
            why = None
            for k, v in want.items():
                if v and quantity_int(alloc.get(k, 0)) - used.get(k, 0) < v:
                    why = "Insufficient %s" % k
                    break
            if why:
                failed[name] = why
            else:
                ok.append(n)
        return ok, failed

    def schedule_one(self, pod, nodes=None, pods=None):
        name = "%s/%s" % (pod["metadata"]["namespace"], pod["metadata"]["name"])
        out = {"pod": name, "result": "error", "node": None, "message": "", "scores": {}}
        try:
            nodes = self.nodes() if nodes is None else nodes
            pods = self.pods() if pods is None else pods
            feasible, failed = self.own_fit(pod, nodes, pods)
            names = [n["metadata"]["name"] for n in feasible]
            if feasible and self.interested(pod):
                try:
                    names, ext_failed = self.filter(pod, feasible)
                    failed.update(ext_failed)
                except CycleError:
                    if not self.ignorable:
                        raise
            if not names:
                counts = {}
                for why in failed.values():
                    counts[why] = counts.get(why, 0) + 1
                msg = "0/%d nodes are available: %s." % (len(nodes), ", ".join(
                    "%d %s" % (c, w) for w, c in sorted(counts.items(), key=lambda x: (-x[1], x[0]))))
                out.update(result="unschedulable", message=msg, failed=failed)
                self.event(pod, "FailedScheduling", msg)
                return out
            if len(names) == 1:
                host = names[0]
            else:
                scores = {n: 0 for n in names}
                if self.interested(pod):
                    try:
                        for h, s in self.prioritize(pod, names).items():
                            if h in scores:
                                scores[h] += s
                    except CycleError:
                        if not self.ignorable:
                            raise
                out["scores"] = scores
                best = max(scores.values())
                top = [n for n in names if scores[n] == best]
                host = self.rand.choice(top)
            self.bind(pod, host)
            out.update(result="bound", node=host)
            return out
        except CycleError as e:
            out["message"] = str(e)
            self.event(pod, "FailedScheduling", str(e))
            return out
        finally:
            if self.log:
                self.log.write(json.dumps(out) + "\n")
                self.log.flush()

    def pending(self, pods):
        return [p for p in pods if not (p.get("spec") or {}).get("nodeName")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and (p.get("spec") or {}).get("schedulerName", "default-scheduler")
                == "default-scheduler"]

    def run(self, once=False):
        if once:
            # Each pending pod once, in order, listing again after each binding.
            tried = set()
            while True:
                pods, nodes = self.pods(), self.nodes()
                todo = [p for p in self.order(self.pending(pods)) if p["metadata"]["uid"] not in tried]
                if not todo:
                    return
                tried.add(todo[0]["metadata"]["uid"])
                self.schedule_one(todo[0], nodes=nodes, pods=pods)
        backoff = {}  # pod uid -> (not before, delay)
        last_rv = None
        while True:
            try:
                st, state = http("GET", self.api + "/api/v1/pods")
                pods = state["items"] if st == 200 else []
                rv = state["metadata"]["resourceVersion"] if st == 200 else None
                nodes = self.nodes()
            except (urllib.error.URLError, OSError, CycleError, KeyError):
                time.sleep(0.2)
                continue
            changed = rv != last_rv
            last_rv = rv
            now = time.monotonic()
            did = False
            for p in self.order(self.pending(pods)):
                uid = p["metadata"]["uid"]
                nb, delay = backoff.get(uid, (0, 0.5))
                if now < nb and not changed:
                    continue
                res = self.schedule_one(p, nodes=nodes, pods=pods)
                did = True
                if res["result"] == "bound":
                    backoff.pop(uid, None)
                    break  # the cluster changed: list again before the next pod
                delay = min(delay * 2, 10.0)
                backoff[uid] = (time.monotonic() + delay, delay)
            if not did:
                time.sleep(0.1)

    @staticmethod
    def order(pods):
        """Creation order (the timestamp has whole seconds; the name breaks ties)."""
        return sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp", ""),
                                           p["metadata"]["namespace"], p["metadata"]["name"]))


def main():
    ap = argparse.ArgumentParser(description="kube-scheduler stand-in")
    ap.add_argument("--api", required=True)
    ap.add_argument("--extender", required=True)
    ap.add_argument("--weight", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--no-bind-verb", action="store_true")
    ap.add_argument("--nodes-mode", action="store_true")
    ap.add_argument("--ignorable", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log")
    ap.add_argument("--once", action="store_true")
    ap.add_argument("--ca-file")
    ap.add_argument("--cert-file")
    ap.add_argument("--key-file")
    a = ap.parse_args()
    log = open(a.log, "a") if a.log else None
    s = Scheduler(a.api, a.extender, weight=a.weight, timeout=a.timeout,
                  bind_verb=not a.no_bind_verb, node_cache_capable=not a.nodes_mode,
                  ignorable=a.ignorable, seed=a.seed, log=log,
                  tls=(a.ca_file, a.cert_file, a.key_file) if a.ca_file else None)
    try:
        s.run(once=a.once)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
