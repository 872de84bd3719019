#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Quota exactness: what the extender assigns over a container's GPUs adds up to the
declared totals to the byte and the percent, and /metrics shows per namespace exactly
what ResourceQuota counts (requests.gslice.io/gpu-memory, requests.gslice.io/gpu-compute);
pods that finish or go away stop counting."""
import random

from k8stest import GiB, check, passed, run


def test(c):
    for n in ("n1", "n2"):
        c.add_node(n, [80 * GiB] * 8)
    c.start_extender("--node-timeout", "5")
    rnd = random.Random(7)
    want = {}
    pods = []
    for i in range(24):
        ns = "team-%d" % (i % 3)
        ngpus = rnd.choice([1, 1, 2, 3, 4])
        mem = rnd.randrange(ngpus, 20 * GiB)  # odd byte counts on purpose
        cpu = rnd.randrange(0, 40 * ngpus + 1)
        c.add_pod(ns, "p%d" % i, [("main", ngpus, mem, cpu)])
        r = c.schedule(ns, "p%d" % i)
        check(r["result"] == "bound", "p%d: %s" % (i, r))
        a = c.assigned(ns, "p%d" % i)["containers"][0]
        got_mem = sum(g["memory"] for g in a["gpus"])
        got_cpu = sum(g["compute"] for g in a["gpus"])
        check((got_mem, got_cpu) == (mem, cpu) and len(a["gpus"]) == ngpus,
              "p%d: assigned %d B / %d%% over %d GPUs, declared %d B / %d%% over %d" % (
                  i, got_mem, got_cpu, len(a["gpus"]), mem, cpu, ngpus))
        check(max(g["memory"] for g in a["gpus"]) - min(g["memory"] for g in a["gpus"]) <= 1,
              "p%d: uneven split %s" % (i, a["gpus"]))
        w = want.setdefault(ns, [0, 0])
        w[0] += mem
        w[1] += cpu
        pods.append((ns, "p%d" % i, mem, cpu))
    for ns, (mem, cpu) in want.items():
        lab = '{namespace="%s"}' % ns
        c.wait_metric("gslice_namespace_memory_bytes", lab, mem)
        c.wait_metric("gslice_namespace_compute_percent", lab, cpu)
    passed("24 pods over 3 namespaces: assigned == declared to the byte and percent")

    # A finished pod and a deleted one stop counting.
    ns, name, mem, cpu = pods[0]
    c.finish_pod(ns, name)
    want[ns][0] -= mem
    want[ns][1] -= cpu
    ns2, name2, mem2, cpu2 = pods[1]
    c.delete_pod(ns2, name2)
    want[ns2][0] -= mem2
    want[ns2][1] -= cpu2
    for ns, (mem, cpu) in want.items():
        c.wait_metric("gslice_namespace_memory_bytes", '{namespace="%s"}' % ns, mem)
        c.wait_metric("gslice_namespace_compute_percent", '{namespace="%s"}' % ns, cpu)
    passed("finished and deleted pods leave the namespace totals")


run(test)
