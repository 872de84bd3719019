#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when the object files of one program call each other in a cycle.

usage: layers.py NAME OBJECT.o...   Reads each object's defined and undefined symbols with
nm, draws an edge a.o -> b.o for every symbol a uses and b defines, and prints each group of
files that reach one another (a strongly connected component of more than one file) with the
symbols that close it. Exit 0: layered; 1: cycles (listed); 77: nm missing."""
import os, shutil, subprocess, sys

def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            used.add(name)
        elif kind in "TDBRVWGSC":
            defined.add(name)
    return defined, used

def sccs(nodes, edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            out.append(comp)
    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out

def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr); return 2
    if not shutil.which("nm"):
        print("nm not found: skipped", file=sys.stderr); return 77
    name, objs = sys.argv[1], sys.argv[2:]
    label = {o: os.path.basename(o).replace(".c.o", ".c").replace(".o", "") for o in objs}
    syms = {o: symbols(o) for o in objs}
    owner = {s: o for o in objs for s in syms[o][0]}
    edges, why = {}, {}
    for a in objs:
        for s in syms[a][1]:
            b = owner.get(s)
            if b and b != a:
                edges.setdefault(a, set()).add(b)
                why.setdefault((a, b), []).append(s)
    bad = [c for c in sccs(objs, edges) if len(c) > 1]
    for c in bad:
        print(f"{name}: these files call each other in a cycle: "
              + ", ".join(sorted(label[o] for o in c)))
        for a in sorted(c):
            for b in sorted(edges.get(a, ())):
                if b in c:
                    print(f"  {label[a]} -> {label[b]}: {', '.join(sorted(why[(a, b)])[:6])}")
    if not bad:
        print(f"{name}: {len(objs)} files, {sum(len(v) for v in edges.values())} edges between them, no cycle")
    return 1 if bad else 0

sys.exit(main())
