#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A strict CDI reader: reads Container Device Interface specs as the CDI library
(tags.cncf.io/container-device-interface, which containerd and CRI-O use) reads them, and
resolves fully qualified device names into the edits a runtime applies.

What it checks, as the library does (specs-go/config.go, specs-go/version.go, pkg/parser,
the producer's default validator), and what it refuses:
  - a field the library does not know, at any level (its parse is strict), or of the wrong
    type; a key given twice (its YAML parse refuses that too);
  - cdiVersion not one of the released versions, or below what the fields used need:
    0.3.0 the earliest taken; a mount's type 0.4.0; a device node's hostPath or a device name
    starting with a digit 0.5.0; annotations or a '.' in the class 0.6.0; intelRdt or
    additionalGids 0.7.0; netDevices or intelRdt schemata/enableMonitoring 1.1.0 (and
    intelRdt enableCMT/enableMBM refused from 1.1.0 on);
  - kind not vendor/class (each: a letter first, a letter or digit last, letters, digits,
    '_', '-', '.' between, at least 2 characters); a device name not [A-Za-z0-9] first and last
    with [A-Za-z0-9_.:-] between; no devices; a device named twice; a device with no edits;
  - env not KEY=VALUE; a device node without path, of an unknown type or with permissions
    other than r, w, m; a mount without hostPath or containerPath; a hook of an unknown name or
    without path.
Stricter than the library: keys must match case exactly (Go's JSON decoding matches them
case-insensitively); JSON only (.json files; the library also reads .yaml). null counts as
absent for an optional field, as in Go.

Resolution, as the library's cache does: every *.json in each --dir (later dirs win, as
/var/run/cdi wins over /etc/cdi), a spec that fails validation skipped (and said), the same
qualified name in two specs of one dir a conflict (neither used); for the names asked: each
spec's own containerEdits once, then each device's; env by key (the last wins), mounts and
device nodes by container path (the last wins), mounts in the order a runtime makes them (by
depth of containerPath, then by name).

Usage:
  cdi_read.py --check FILE...              validate; "FILE: ok KIND cdiVersion N device(s)"
                                           per file, or the reason; exit 1 when one fails
  cdi_read.py [--dir DIR]... --list        every qualified name the dirs resolve
  cdi_read.py [--dir DIR]... NAME...       the merged edits for NAME... as JSON: {"env": [..],
                                           "mounts": [{hostPath, containerPath, options[,
                                           type]}], "deviceNodes": [..], "hooks": [..],
                                           "additionalGids": [..], "specs": [paths]}; exit 1
                                           (and why on stderr) when a name does not resolve
  --kubelet   with NAME...: env as {KEY: VALUE} and mounts as the kubelet stand-in's
              {container_path, host_path, read_only} (read_only: "ro" in options)
As a module: check_spec(obj) -> None or raises CDIError; load_file(path) -> spec;
cache(dirs) -> (devices, errors); resolve(dirs, names) -> edits; kubelet_view(edits).
"""

import argparse
import json
import os
import re
import sys

VERSIONS = ["0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0",
            "1.1.0"]
EARLIEST = "0.3.0"
HOOK_NAMES = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart",
              "poststop"}
DEFAULT_DIRS = ["/etc/cdi", "/var/run/cdi"]


class CDIError(Exception):
    pass


def vkey(v):
    return tuple(int(x) for x in v.split("."))


# Field tables: name -> (type, required). "strs": a list of strings; "uint32"/"int": integers;
# ("objs", table): a list of objects; ("obj", table): an object; "map": string -> string.
DEVICE_NODE = {"path": ("str", True), "hostPath": ("str", False), "type": ("str", False),
               "major": ("int", False), "minor": ("int", False), "fileMode": ("int", False),
               "permissions": ("str", False), "uid": ("uint32", False),
               "gid": ("uint32", False)}
MOUNT = {"hostPath": ("str", True), "containerPath": ("str", True),
         "options": ("strs", False), "type": ("str", False)}
HOOK = {"hookName": ("str", True), "path": ("str", True), "args": ("strs", False),
        "env": ("strs", False), "timeout": ("int", False)}
INTEL_RDT = {"closID": ("str", False), "l3CacheSchema": ("str", False),
             "memBwSchema": ("str", False), "schemata": ("strs", False),
             "enableMonitoring": ("bool", False), "enableCMT": ("bool", False),
             "enableMBM": ("bool", False)}
NET_DEVICE = {"hostInterfaceName": ("str", False), "name": ("str", False)}
EDITS = {"env": ("strs", False), "deviceNodes": (("objs", DEVICE_NODE), False),
         "hooks": (("objs", HOOK), False), "mounts": (("objs", MOUNT), False),
         "intelRdt": (("obj", INTEL_RDT), False), "additionalGids": ("uint32s", False),
         "netDevices": (("objs", NET_DEVICE), False)}
DEVICE = {"name": ("str", True), "annotations": ("map", False),
          "containerEdits": (("obj", EDITS), True)}
SPEC = {"cdiVersion": ("str", True), "kind": ("str", True), "annotations": ("map", False),
        "devices": (("objs", DEVICE), True), "containerEdits": (("obj", EDITS), False)}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_fields(obj, table, where):
    """The shape: only known keys, each of its type; required ones present (not null)."""
    if not isinstance(obj, dict):
        raise CDIError("%s: not an object" % where)
    for k in obj:
        if k not in table:
            raise CDIError("%s: unknown field %r (the library's strict parse refuses it)"
                           % (where, k))
    for k, (typ, required) in table.items():
        v = obj.get(k)
        if v is None:
            if required:
                raise CDIError("%s: %s is missing" % (where, k))
            continue
        w = "%s.%s" % (where, k)
        if typ == "str":
            ok = isinstance(v, str)
        elif typ == "bool":
            ok = isinstance(v, bool)
        elif typ == "int":
            ok = is_int(v)
        elif typ == "uint32":
            ok = is_int(v) and 0 <= v <= 0xFFFFFFFF
        elif typ == "strs":
            ok = isinstance(v, list) and all(isinstance(x, str) for x in v)
        elif typ == "uint32s":
            ok = isinstance(v, list) and all(is_int(x) and 0 <= x <= 0xFFFFFFFF for x in v)
        elif typ == "map":
            ok = isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
        elif typ[0] == "obj":
            check_fields(v, typ[1], w)
            ok = True
        else:  # objs
            ok = isinstance(v, list)
            for i, x in enumerate(v if ok else []):
                check_fields(x, typ[1], "%s[%d]" % (w, i))
        if not ok:
            raise CDIError("%s: wrong type (%s wanted)" % (w, typ if isinstance(typ, str)
                                                           else typ[0]))


VENDOR_CLASS = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])$")
DEVICE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")


def check_kind(kind):
    parts = kind.split("/", 1)
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise CDIError("kind %r is not vendor/class" % kind)
    for what, s in (("vendor", parts[0]), ("class", parts[1])):
        if not VENDOR_CLASS.match(s):
            raise CDIError("kind %r: invalid %s %r (a letter first, a letter or digit last, "
                           "letters, digits, '_', '-', '.' between)" % (kind, what, s))
    return parts[0], parts[1]


def check_name(name):
    if not DEVICE_NAME.match(name):
        raise CDIError("invalid device name %r" % name)


def all_edits(spec):
    out = [spec.get("containerEdits") or {}]
    out += [d.get("containerEdits") or {} for d in spec["devices"]]
    return out


def required_version(spec):
    """The lowest cdiVersion the fields of spec need (specs-go/version.go)."""
    need = EARLIEST
    edits = all_edits(spec)

    def at_least(v):
        nonlocal need
        if vkey(v) > vkey(need):
            need = v
    if any(m.get("type") for e in edits for m in e.get("mounts") or []):
        at_least("0.4.0")
    if any(dn.get("hostPath") for e in edits for dn in e.get("deviceNodes") or []) or \
            any(d["name"][:1].isdigit() for d in spec["devices"]):
        at_least("0.5.0")
    if spec.get("annotations") or any(d.get("annotations") for d in spec["devices"]) or \
            "." in spec["kind"].split("/", 1)[-1]:
        at_least("0.6.0")
    if any(e.get("intelRdt") is not None or e.get("additionalGids") for e in edits):
        at_least("0.7.0")
    if any(e.get("netDevices") or (e.get("intelRdt") or {}).get("schemata") is not None or
           (e.get("intelRdt") or {}).get("enableMonitoring") for e in edits):
        at_least("1.1.0")
    return need


def check_edits(e, where):
    for v in e.get("env") or []:
        if v.find("=") <= 0:
            raise CDIError("%s: invalid environment variable %r" % (where, v))
    for dn in e.get("deviceNodes") or []:
        if not dn["path"]:
            raise CDIError("%s: invalid (empty) device path" % where)
        if dn.get("type") not in (None, "", "b", "c", "u", "p"):
            raise CDIError("%s: device %r: invalid type %r" % (where, dn["path"], dn["type"]))
        if any(c not in "rwm" for c in dn.get("permissions") or ""):
            raise CDIError("%s: device %r: invalid permissions %r"
                           % (where, dn["path"], dn["permissions"]))
    for h in e.get("hooks") or []:
        if h["hookName"] not in HOOK_NAMES:
            raise CDIError("%s: invalid hook name %r" % (where, h["hookName"]))
        if not h["path"]:
            raise CDIError("%s: invalid hook %r with empty path" % (where, h["hookName"]))
        for v in h.get("env") or []:
            if v.find("=") <= 0:
                raise CDIError("%s: hook %r: invalid environment variable %r"
                               % (where, h["hookName"], v))
    for m in e.get("mounts") or []:
        if not m["hostPath"]:
            raise CDIError("%s: invalid mount, empty host path" % where)
        if not m["containerPath"]:
            raise CDIError("%s: invalid mount, empty container path" % where)


def check_spec(spec):
    """Raises CDIError saying what the library would refuse in spec (parsed JSON)."""
    check_fields(spec, SPEC, "spec")
    v = spec["cdiVersion"]
    if v not in VERSIONS:
        raise CDIError("invalid version %r" % v)
    check_kind(spec["kind"])
    if not spec["devices"]:
        raise CDIError("invalid spec, no devices")
    need = required_version(spec)
    if vkey(need) > vkey(v):
        raise CDIError("the spec version must be at least v%s (it says %s)" % (need, v))
    if vkey(v) >= vkey("1.1.0"):
        for e in all_edits(spec):
            for f in ("enableCMT", "enableMBM"):
                if f in (e.get("intelRdt") or {}):
                    raise CDIError("intelRdt.%s is not valid for CDI spec version %s" % (f, v))
    check_edits(spec.get("containerEdits") or {}, "containerEdits")
    seen = set()
    for d in spec["devices"]:
        name = d["name"]
        if name in seen:
            raise CDIError("invalid spec, multiple device %r" % name)
        seen.add(name)
        check_name(name)
        e = d["containerEdits"]
        if not any(e.get(k) for k in ("env", "deviceNodes", "hooks", "mounts",
                                      "additionalGids", "netDevices")) and \
                e.get("intelRdt") is None:
            raise CDIError("invalid device %r: empty container edits" % name)
        check_edits(e, "device %r" % name)


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise CDIError("key %r given twice" % k)
        d[k] = v
    return d


def load_file(path):
    """A spec file, parsed and checked; raises CDIError (or OSError)."""
    with open(path, "rb") as f:
        text = f.read()
    try:
        spec = json.loads(text.decode("utf-8"), object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError) as e:
        raise CDIError("not JSON: %s" % e)
    check_spec(spec)
    return spec


def cache(dirs):
    """({qualified name: (spec, device, path)}, {path: error}) for the specs in dirs."""
    devices, prio, errors, conflicts = {}, {}, {}, set()
    for p, d in enumerate(dirs):
        try:
            names = sorted(os.listdir(d))
        except FileNotFoundError:
            continue
        for fn in names:
            path = os.path.join(d, fn)
            if not fn.endswith(".json") or not os.path.isfile(path):
                continue
            try:
                spec = load_file(path)
            except (CDIError, OSError) as e:
                errors[path] = str(e)
                continue
            for dev in spec["devices"]:
                q = "%s=%s" % (spec["kind"], dev["name"])
                # A later dir wins; two in one dir conflict, and the name goes (as the
                # library drops it, whatever a later dir has).
                if q in devices and prio[q] == p:
                    conflicts.add(q)
                    errors[path] = "conflicting device %r (also in %s)" % (q, devices[q][2])
                    continue
                devices[q] = (spec, dev, path)
                prio[q] = p
    for q in conflicts:
        devices.pop(q, None)
    return devices, errors


def depth(m):
    return len([x for x in os.path.normpath(m["containerPath"]).split("/") if x])


def resolve(dirs, names):
    """The edits a runtime applies for names (fully qualified); raises CDIError."""
    devices, errors = cache(dirs)
    env, mounts, nodes, hooks, gids, specs = {}, {}, {}, [], [], []
    edits = []
    for q in names:
        if "=" not in q:
            raise CDIError("%r is not a fully qualified CDI device name" % q)
        kind, name = q.split("=", 1)
        check_kind(kind)
        check_name(name)
        if q not in devices:
            why = "; ".join("%s: %s" % kv for kv in sorted(errors.items()))
            raise CDIError("unresolvable CDI devices %s%s" % (q, (" (" + why + ")") if why
                                                            else ""))
        spec, dev, path = devices[q]
        if path not in specs:
            specs.append(path)
            edits.append(spec.get("containerEdits") or {})
        edits.append(dev["containerEdits"])
    for e in edits:
        for v in e.get("env") or []:
            k = v.split("=", 1)[0]
            env.pop(k, None)
            env[k] = v
        for m in e.get("mounts") or []:
            mounts.pop(m["containerPath"], None)
            mounts[m["containerPath"]] = m
        for dn in e.get("deviceNodes") or []:
            nodes.pop(dn["path"], None)
            nodes[dn["path"]] = dn
        hooks += e.get("hooks") or []
        gids += e.get("additionalGids") or []
    return {"env": list(env.values()),
            "mounts": sorted(mounts.values(), key=lambda m: (depth(m), m["containerPath"])),
            "deviceNodes": list(nodes.values()), "hooks": hooks, "additionalGids": gids,
            "specs": specs}


def kubelet_view(edits):
    """env as a dict and mounts as the kubelet stand-in's (read_only: "ro" in options)."""
    return {"env": dict(v.split("=", 1) for v in edits["env"]),
            "mounts": [{"container_path": m["containerPath"], "host_path": m["hostPath"],
                        "read_only": "ro" in (m.get("options") or [])}
                       for m in edits["mounts"]],
            "device_nodes": [dn.get("hostPath") or dn["path"] for dn in edits["deviceNodes"]]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", action="append", help="spec directory (repeatable)")
    ap.add_argument("--check", action="store_true", help="validate the files given")
    ap.add_argument("--list", action="store_true", help="list the qualified names")
    ap.add_argument("--kubelet", action="store_true", help="the kubelet stand-in's view")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    if a.check:
        bad = 0
        for path in a.args:
            try:
                s = load_file(path)
                print("%s: ok %s cdiVersion %s %d device(s)" % (path, s["kind"],
                                                                s["cdiVersion"],
                                                                len(s["devices"])))
            except (CDIError, OSError) as e:
                print("%s: %s" % (path, e))
                bad = 1
        return bad
    dirs = a.dir or DEFAULT_DIRS
    if a.list:
        devices, errors = cache(dirs)
        for q in sorted(devices):
            print(q)
        for path, e in sorted(errors.items()):
            print("%s: %s" % (path, e), file=sys.stderr)
        return 0
    try:
        edits = resolve(dirs, a.args)
    except CDIError as e:
        print("cdi_read: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(kubelet_view(edits) if a.kubelet else edits, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
