#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The signing key and the admin's priority classes on gslice-extender's
command line: no key, a short, world-readable or missing one, or a bad --priority-class is
refused before it starts, with what to do; two keys rotate (the first signs, both verify);
the assignment's priority, weight and compute ceiling come from the pod's PriorityClass
mapping, and the pod's annotations only lower them."""
import json
import os
import subprocess

from k8stest import EXTENDER, GiB, check, make_key, passed, run, sign_assigned, wait_for

MEM = '{state="assigned"}'


def refused(c, args, words, status=None):
    p = subprocess.run([EXTENDER, "--listen", "127.0.0.1:0", "--kubeconfig", c.kubeconfig] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
    out = p.stdout.decode()
    check(p.returncode != 0, "started with %s: %s" % (args, out))
    check(status is None or p.returncode == status, "%s: exit %d, want %s" % (
        args, p.returncode, status))
    check(words in out, "%s: no '%s' in: %s" % (args, words, out))


def test(c):
    c.add_node("n1", [16 * GiB, 16 * GiB])
    d = c.dir
    short = os.path.join(d, "short.key")
    with open(short, "w") as f:
        f.write("tooshort\n")
    os.chmod(short, 0o600)
    world = make_key(os.path.join(d, "world.key"))
    os.chmod(world, 0o644)
    if not os.path.exists("/etc/gslice/signing/key"):
        refused(c, [], "signing key /etc/gslice/signing/key: No such file or directory", 1)
        refused(c, [], "give --signing-key FILE", 1)
    refused(c, ["--signing-key", os.path.join(d, "none")], "No such file or directory", 1)
    refused(c, ["--signing-key", short], "fewer than 32", 1)
    refused(c, ["--signing-key", world], "readable or writable by every user", 1)
    refused(c, ["--signing-key", d], "not a regular file", 1)
    k = c.signing_key
    refused(c, ["--signing-key", k, "--signing-key", k, "--signing-key", k], "at most two", 2)
    refused(c, ["--signing-key", k, "--priority-class", "gold=urgent"], "high, normal or low", 2)
    refused(c, ["--signing-key", k, "--priority-class", "gold=high:weight=5000"],
            "weight must be 1..1000", 2)
    passed("missing, short, world-readable keys and bad priority classes refused with reasons")

    # Rotation: a pod bound under the old key still counts while both are given.
    old = make_key(os.path.join(d, "old.key"))
    new = c.signing_key
    text = json.dumps({"version": 1, "node": "n1", "containers": [{
        "name": "main", "gpus": [{"uuid": "GPU-n1-0", "index": 0, "memory": 2 * GiB,
                                  "compute": 10}]}]}, separators=(",", ":"))
    p = c.add_pod("r", "old", [("main", 1, "2Gi", 10)], node="n1",
                  annotations={"gslice.io/assigned": text})
    c.annotate("r", "old", {"gslice.io/assigned-signature": sign_assigned(
        old, p["metadata"]["uid"], "n1", text)})
    c.start_extender("--signing-key", new, "--signing-key", old, "--priority-class",
                     "gold=high:weight=4:limit=80", "--priority-class", "batch=low")
    c.wait_metric("gslice_extender_memory_bytes", MEM, 2 * GiB)
    c.add_pod("r", "fresh", [("main", 1, "1Gi", 10)])
    r = c.schedule("r", "fresh")
    check(r["result"] == "bound", "fresh: %s" % r)
    fp = c.pod("r", "fresh")
    check(c.signature("r", "fresh") == sign_assigned(
        new, fp["metadata"]["uid"], "n1", fp["metadata"]["annotations"]["gslice.io/assigned"]),
        "not signed with the first key: %s" % c.signature("r", "fresh"))
    passed("two keys: the old one's assignment counts, new ones are signed with the first")

    # Priority, weight, ceiling: the class's, lowered (never raised) by annotations.
    greedy = {"gslice.io/priority": "high", "gslice.io/weight": "1000",
              "gslice.io/compute-limit": "100"}
    cases = [("gold-greedy", "gold", greedy, ("high", 4, 80)),
             ("gold-modest", "gold", {"gslice.io/priority": "low", "gslice.io/weight": "2",
                                      "gslice.io/compute-limit": "50"}, ("low", 2, 50)),
             ("none-greedy", None, greedy, ("normal", 1, 100)),
             ("batch-greedy", "batch", greedy, ("low", 1, 100))]
    for name, pclass, ann, want in cases:
        c.add_pod("r", name, [("main", 1, "1Gi", 10)], annotations=ann, priority_class=pclass)
        r = c.schedule("r", name)
        check(r["result"] == "bound", "%s: %s" % (name, r))
        a = c.assigned("r", name)["containers"][0]
        got = (a["priority"], a["weight"], a["computeLimit"])
        check(got == want, "%s: assigned %s, want %s" % (name, got, want))
    passed("priority, weight and compute ceiling from the PriorityClass; annotations only lower")

    # Without the old key its assignment no longer counts.
    c.stop_extender()
    c.start_extender("--signing-key", new)
    wait_for("the old key's pod refused", lambda: c.metric("gslice_extender_forged_pods") == 1)
    passed("once the old key is dropped, what it signed no longer counts")


run(test)
