#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The DRA Prepare bench's driver (bench/dra_prepare.sh sets up gsliced, gslice-node --mode
dra and the stand-ins): NodePrepareResources latency for a batch of 1 claim and of 32 claims, and
the wall time of 8 calls of 4 claims sent at once (each claim one share: memory 768Mi, the
least a claim is given: one CUDA context; compute 2),
Unprepare after each, as the kubelet stand-in times the gRPC call; and the time from the
kubelet's first Prepare call of a pod to the slice enforced: a container started with the
claim's CDI edits (a claim of 768Mi) sees its memory cap in cuMemGetInfo (hook_client "info"),
stamped by the container itself."""

import argparse
import json
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "k8s"))
import dra_alloc as A  # noqa: E402

CAP = 768 * 2**20  # a claim of the enforced runs: the floor, one CUDA context (DRA_CONTEXT_FLOOR)


def kl(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return json.load(e)


def claims(api, prefix, n, pod, memory="768Mi"):
    out = []
    for i in range(n):
        name = "%s-%d" % (prefix, i)
        code, c = api.call("POST", A.R + "/namespaces/default/resourceclaims", {
            "metadata": {"name": name}, "spec": {"devices": {"requests": [{
                "name": "gpu", "exactly": {"deviceClassName": "gslice.io", "capacity": {
                    "requests": {"memory": memory, "compute": "2"}}}}]}}})
        assert code == 201, c
        c = A.allocate_claim(api, "default", name, "node-a", [(pod or name, (pod or name) + "-uid")])
        out.append({"namespace": "default", "name": name, "uid": c["metadata"]["uid"]})
    return out


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * len(xs) + 0.5)) - 1))]


def batches(base, batch, runs):
    took = []
    for _ in range(runs):
        r = kl(base, "POST", "/prepare", {"driver": "gslice.io", "claims": batch})
        bad = [u for u, v in r.get("claims", {}).items() if v["error"]] or r.get("error")
        if bad or len(r.get("claims", {})) != len(batch):
            sys.exit("Prepare failed: %s" % json.dumps(r)[:500])
        took.append(r["seconds"])
        u = kl(base, "POST", "/unprepare", {"driver": "gslice.io", "claims": batch})
        if any(v["error"] for v in u.get("claims", {}).values()) or "error" in u:
            sys.exit("Unprepare failed: %s" % json.dumps(u)[:500])
    return took


def concurrent(base, batch, calls, runs):
    """Wall time of `calls` NodePrepareResources at once, each of len(batch) / calls claims (the
    kubelet calls per pod, and pods start together), from the first sent to the last answered."""
    per = len(batch) // calls
    parts = [batch[i * per:(i + 1) * per] for i in range(calls)]
    took = []
    for _ in range(runs):
        out = [None] * calls

        def one(i):
            out[i] = kl(base, "POST", "/prepare", {"driver": "gslice.io", "claims": parts[i]})
        th = [threading.Thread(target=one, args=(i,)) for i in range(calls)]
        t0 = time.monotonic()
        for t in th:
            t.start()
        for t in th:
            t.join()
        took.append(time.monotonic() - t0)
        for r, part in zip(out, parts):
            bad = [u for u, v in r.get("claims", {}).items() if v["error"]] or r.get("error")
            if bad or len(r.get("claims", {})) != len(part):
                sys.exit("Prepare failed: %s" % json.dumps(r)[:500])
        u = kl(base, "POST", "/unprepare", {"driver": "gslice.io", "claims": batch})
        if any(v["error"] for v in u.get("claims", {}).values()) or "error" in u:
            sys.exit("Unprepare failed: %s" % json.dumps(u)[:500])
    return took


def enforced(api, base, tbin, log_dir, runs):
    took = []
    for i in range(runs):
        name = "enf-%d" % i
        c = claims(api, name, 1, name, "768Mi")[0]
        cmd = ["sh", "-c", '"$0" --lookup link --path alloc --script info; date +%s.%N',
               os.path.join(tbin, "hook_client_linked")]
        t0 = time.time()
        r = kl(base, "POST", "/pods", {
            "namespace": "default", "name": name, "uid": name + "-uid",
            "claims": [{"name": "c", "resourceClaimName": c["name"]}],
            "containers": [{"name": "main", "claims": [{"name": "c"}], "command": cmd}]})
        if "error" in r:
            sys.exit("pod %s: %s" % (name, r["error"]))
        log = os.path.join(log_dir, "default_%s_main.log" % name)
        for _ in range(600):
            lines = open(log).read().splitlines() if os.path.exists(log) else []
            if len(lines) >= 2:
                break
            time.sleep(0.01)
        info = [x for x in lines if x.startswith("info ")]
        total = int(info[0].split("total=")[1].split()[0]) if info else -1
        if not info or "err=0" not in info[0] or abs(total - CAP) > 2**20:
            sys.exit("%s: the container did not see its 768Mi cap: %s" % (name, lines))
        took.append(float(lines[-1]) - t0)
        kl(base, "DELETE", "/pods/default/" + name)
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--kubelet", required=True)
    ap.add_argument("--tbin", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--runs1", type=int, default=100)
    ap.add_argument("--runs32", type=int, default=20)
    ap.add_argument("--runs-enforced", type=int, default=10)
    a = ap.parse_args()
    api = A.Api(a.api)
    one = claims(api, "one", 1, "bench")
    many = claims(api, "many", 32, "bench")
    rows = []
    for label, batch, runs in (("batch of 1", one, a.runs1), ("batch of 32", many, a.runs32)):
        t = batches(a.kubelet, batch, runs)
        rows.append((label, runs, pct(t, 50) * 1e3, pct(t, 99) * 1e3,
                     pct(t, 50) * 1e3 / len(batch)))
    t = concurrent(a.kubelet, many, 8, a.runs32)
    rows.append(("8 calls of 4 at once (wall)", a.runs32, pct(t, 50) * 1e3, pct(t, 99) * 1e3,
                 pct(t, 50) * 1e3 / len(many)))
    e = enforced(api, a.kubelet, a.tbin, a.log_dir, a.runs_enforced)
    print("| NodePrepareResources | runs | p50 ms | p99 ms | p50 ms per claim |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %.1f | %.1f | %.2f |" % r)
    print()
    print("| Prepare to enforced (container sees its cap) | runs | p50 ms | p99 ms |")
    print("|---|---|---|---|")
    print("| pod of 1 new claim | %d | %.0f | %.0f |" % (len(e), pct(e, 50) * 1e3,
                                                         pct(e, 99) * 1e3))


if __name__ == "__main__":
    main()
