# SPDX-License-Identifier: Apache-2.0
"""resource.k8s.io/v1 (Dynamic Resource Allocation) in the API server stand-in (apiserver.py).

Written from the API reference of resource.k8s.io/v1 (ResourceSlice, ResourceClaim,
DeviceClass and their field documentation: "must be a DNS label", "exactly one of", the
request policy rules of KEP-5075) and the API server's behaviour for them:

  /apis/resource.k8s.io/v1/resourceslices[/NAME]             cluster-scoped
      GET (list: ?fieldSelector= on spec.nodeName, spec.driver, spec.pool.name, metadata.name:
      any other field is 400 "field label not supported", as the registry answers), watch,
      POST, PUT (409 on a stale resourceVersion), merge PATCH, DELETE, and DELETE of the
      collection (deletecollection, with the same field selector: the kubelet's wipe of its
      node's slices at start); spec.driver, spec.nodeName and spec.pool.name are immutable
  /apis/resource.k8s.io/v1/deviceclasses[/NAME]              cluster-scoped, the same verbs
  /apis/resource.k8s.io/v1/resourceclaims                    every namespace's (list, watch)
  /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims[/NAME[/status]]
      the main resource never changes status (a status sent there is replaced by the stored
      one, as the registry's strategy does) and its spec is immutable after create; /status
      (GET, PUT, merge PATCH) changes status only (the spec sent is replaced by the stored one).
      status.allocation may be set once and cleared (deallocation) but not changed, and not
      cleared while status.reservedFor holds consumers; reservedFor needs an allocation.
      Server-side apply of /status (PATCH application/apply-patch+yaml, JSON being YAML,
      ?fieldManager= required, &force=true) for status.devices only, a list map keyed by
      driver, device, pool and shareID (its +listMapKey): each entry applied replaces the one
      of its key, an entry the manager applied before and leaves out now goes, other managers'
      entries stay; an entry another manager applied is a 409 conflict unless force.

Validation (422 Invalid, "<field>: <why>"), for the fields gslice uses:
  names: metadata.name a DNS subdomain (all three kinds); driver names DNS subdomains of at
  most 63; pool names one or more DNS subdomains separated by "/" (at most 253); device names
  DNS labels, unique in the slice; request names DNS labels, unique in the claim.
  ResourceSlice: spec.driver and spec.pool (name, generation >= 0, resourceSliceCount > 0)
  required; exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection; at most
  128 devices; attributes + capacities at most 32 per device, their names C identifiers of at
  most 32 with an optional "domain/" prefix; an attribute holds exactly one of int, bool,
  string (at most 64), version; a capacity's value a quantity; requestPolicy only on a device
  with allowMultipleAllocations; a policy sets at most one of validValues and validRange, and
  with either a default; validValues at most 10, ascending, unique, the default among them,
  none past the capacity; validRange: min <= default <= max <= value, min + step <= value,
  default and max multiples of step (the reference's words).
  ResourceClaim: spec.devices.requests[]: exactly one of exactly, firstAvailable;
  exactly.deviceClassName required; allocationMode ExactCount (default) or All; count > 0 and
  only with ExactCount; capacity.requests names and quantities; config[].requests name
  requests of the claim; config[].opaque.driver a driver name and opaque.parameters a JSON
  object of at most 10 KiB. status.allocation.devices.results[]: request names a request,
  driver, pool, device valid, shareID (when set) a UUID; at most 256 reservedFor, each with
  resource, name and uid, uids unique; status.devices[] name allocated devices only, each key
  once, at most 8 conditions (metav1.Condition: type, status True/False/Unknown, reason,
  lastTransitionTime) and data (RawExtension) of at most 10 KiB.
  DeviceClass: spec.selectors[].cel.expression required; spec.config[].opaque as above.
"""

import copy
import http.server
import json
import re
from fractions import Fraction
from urllib.parse import parse_qs, urlsplit

# A kube-apiserver listens with the system's backlog (Go's net.Listen takes net.core.somaxconn,
# 4096 on current kernels): a burst of connections, such as a DRA plugin reading the claims of
# one NodePrepareResources at once, is queued, never dropped. Python's socketserver listens with
# 5, and the sixth connection at once lost its SYN and waited the 1 s retransmit (1 per batch of
# 32 claims read 8 at a time: TcpExtListenOverflows). The stand-in (apiserver.py, which imports
# this module before it makes its server) takes the real server's behaviour.
http.server.ThreadingHTTPServer.request_queue_size = 4096

GROUP = "resource.k8s.io/v1"
API_VERSION = {"ResourceSlice": GROUP, "ResourceClaim": GROUP, "DeviceClass": GROUP}
PLURAL = {"ResourceSlice": "resourceslices", "ResourceClaim": "resourceclaims",
          "DeviceClass": "deviceclasses"}
KIND_OF = {v: k for k, v in PLURAL.items()}
FIELDS = {"ResourceSlice": ("metadata.name", "spec.nodeName", "spec.driver", "spec.pool.name"),
          "ResourceClaim": ("metadata.name", "metadata.namespace"),
          "DeviceClass": ("metadata.name",)}

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUB = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
QUANTITY = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
SUFFIX = {"": 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


class Invalid(Exception):
    """A field that the API server's validation refuses: (field path, why)."""


def quantity(text, where="quantity"):
    """A Kubernetes quantity ("1Gi", "500M", "60", "1.5", "2e3") as an exact Fraction; Invalid
    for anything else (as resource.ParseQuantity refuses it)."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise Invalid(where, "must be a quantity string, not %r" % (text,))
    m = QUANTITY.fullmatch(str(text).strip()) if isinstance(text, str) else None
    if isinstance(text, int):
        return Fraction(text)
    if not m:
        raise Invalid(where, "%r: quantities must match the regular expression "
                      "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'" % text)
    sign, num, suf = m.group(1), m.group(2), m.group(3) or ""
    mult = Fraction(10) ** int(suf[1:]) if suf[:1] in ("e", "E") else SUFFIX[suf]
    v = Fraction(num) * mult
    return -v if sign == "-" else v


def quantity_str(value, binary):
    """The canonical text of an integer quantity, as the API server writes it back: the
    largest binary (binary=True) or decimal suffix that keeps the number whole."""
    v = int(value)
    if v != value:
        return str(float(value))
    steps = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20),
             ("Ki", 2**10)) if binary else (("E", 10**18), ("P", 10**15), ("T", 10**12),
                                           ("G", 10**9), ("M", 10**6), ("k", 10**3))
    for suf, n in steps:
        if v and v % n == 0:
            return "%d%s" % (v // n, suf)
    return str(v)


def is_binary(text):
    return isinstance(text, str) and text.strip()[-2:] in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def check(cond, field, why):
    if not cond:
        raise Invalid(field, why)


def dns_subdomain(v, field, max_len=253):
    check(isinstance(v, str) and v, field, "Required value")
    check(len(v) <= max_len, field, "must be no more than %d characters" % max_len)
    check(DNS_SUB.fullmatch(v), field, "Invalid value: %r: a lowercase RFC 1123 subdomain must "
          "consist of lower case alphanumeric characters, '-' or '.', and must start and end "
          "with an alphanumeric character" % v)


def dns_label(v, field):
    check(isinstance(v, str) and v, field, "Required value")
    check(len(v) <= 63 and DNS_LABEL.fullmatch(v), field, "Invalid value: %r: a lowercase RFC "
          "1123 label must consist of lower case alphanumeric characters or '-', and must "
          "start and end with an alphanumeric character" % v)


def driver_name(v, field):
    dns_subdomain(v, field, 63)


def pool_name(v, field):
    check(isinstance(v, str) and v, field, "Required value")
    check(len(v) <= 253, field, "must be no more than 253 characters")
    for part in v.split("/"):
        dns_subdomain(part, field)


def qualified_name(k, field):
    """An attribute or capacity name: a C identifier of at most 32, optionally "domain/"."""
    domain, _, ident = k.rpartition("/")
    if domain:
        dns_subdomain(domain, field, 63)
    check(C_IDENT.fullmatch(ident) and len(ident) <= 32, field, "Invalid value: %r: a C "
          "identifier of at most 32 characters, optionally prefixed by a DNS domain and /" % k)


def opaque_config(cfgs, field, requests=None):
    check(isinstance(cfgs, list), field, "must be a list")
    for i, c in enumerate(cfgs):
        f = "%s[%d]" % (field, i)
        check(isinstance(c, dict), f, "must be an object")
        if requests is not None:
            for r in c.get("requests") or []:
                check(r.split("/")[0] in requests, f + ".requests",
                      "Invalid value: %r: must be the name of a request in the claim" % r)
        op = c.get("opaque")
        check(isinstance(op, dict), f + ".opaque", "Required value")
        driver_name(op.get("driver"), f + ".opaque.driver")
        params = op.get("parameters")
        check(isinstance(params, dict), f + ".opaque.parameters", "Required value: a JSON object")
        check(len(json.dumps(params)) <= 10 * 1024, f + ".opaque.parameters",
              "Too long: may not be more than 10240 bytes")


def request_policy(pol, value, f):
    check(isinstance(pol, dict), f, "must be an object")
    vv, vr = pol.get("validValues"), pol.get("validRange")
    check(vv is None or vr is None, f, "Forbidden: only one of validValues and validRange")
    dflt = quantity(pol["default"], f + ".default") if pol.get("default") is not None else None
    if vv is not None or vr is not None:
        check(dflt is not None, f + ".default", "Required value: with validValues or validRange")
    if dflt is not None:
        check(0 <= dflt <= value, f + ".default", "must be within the capacity's value")
    if vv is not None:
        check(isinstance(vv, list) and 0 < len(vv) <= 10, f + ".validValues",
              "must hold 1 to 10 values")
        vals = [quantity(x, f + ".validValues") for x in vv]
        check(all(a < b for a, b in zip(vals, vals[1:])), f + ".validValues",
              "Invalid value: must be sorted in ascending order and unique")
        check(vals[-1] <= value, f + ".validValues", "must not exceed the capacity's value")
        check(dflt in vals, f + ".default", "must be one of validValues")
    if vr is not None:
        check(isinstance(vr, dict) and vr.get("min") is not None, f + ".validRange.min",
              "Required value")
        lo = quantity(vr["min"], f + ".validRange.min")
        hi = quantity(vr["max"], f + ".validRange.max") if vr.get("max") is not None else None
        step = quantity(vr["step"], f + ".validRange.step") if vr.get("step") is not None else None
        check(0 <= lo <= value, f + ".validRange.min", "must be within 0 and the capacity's value")
        check(hi is None or lo <= hi <= value, f + ".validRange.max",
              "must be within min and the capacity's value")
        check(lo <= dflt and (hi is None or dflt <= hi), f + ".default",
              "must be within validRange")
        if step is not None:
            check(step > 0 and lo + step <= value, f + ".validRange.step",
                  "must be positive and min + step at most the capacity's value")
            check(dflt % step == 0, f + ".default", "must be a multiple of step")
            check(hi is None or hi % step == 0, f + ".validRange.max",
                  "must be a multiple of step")


def device(d, f, seen):
    check(isinstance(d, dict), f, "must be an object")
    dns_label(d.get("name"), f + ".name")
    check(d["name"] not in seen, f + ".name", "Duplicate value: %r" % d["name"])
    seen.add(d["name"])
    attrs, caps = d.get("attributes") or {}, d.get("capacity") or {}
    check(isinstance(attrs, dict) and isinstance(caps, dict), f, "attributes and capacity are "
          "maps")
    check(len(attrs) + len(caps) <= 32, f, "Too many: %d: attributes and capacities combined "
          "must be at most 32" % (len(attrs) + len(caps)))
    for k, a in attrs.items():
        fa = "%s.attributes[%s]" % (f, k)
        qualified_name(k, fa)
        kinds = [t for t in ("int", "bool", "string", "version") if t in (a or {})]
        check(len(kinds) == 1, fa, "exactly one value must be specified")
        if "string" in a:
            check(isinstance(a["string"], str) and len(a["string"]) <= 64, fa + ".string",
                  "must be a string of at most 64 characters")
        if "int" in a:
            check(isinstance(a["int"], int) and not isinstance(a["int"], bool), fa + ".int",
                  "must be an integer")
        if "bool" in a:
            check(isinstance(a["bool"], bool), fa + ".bool", "must be a boolean")
    multi = d.get("allowMultipleAllocations")
    check(multi in (None, True, False), f + ".allowMultipleAllocations", "must be a boolean")
    for k, c in caps.items():
        fc = "%s.capacity[%s]" % (f, k)
        qualified_name(k, fc)
        check(isinstance(c, dict) and c.get("value") is not None, fc + ".value", "Required value")
        value = quantity(c["value"], fc + ".value")
        if c.get("requestPolicy") is not None:
            check(multi is True, fc + ".requestPolicy", "Forbidden: only allowed when "
                  "allowMultipleAllocations is true")
            request_policy(c["requestPolicy"], value, fc + ".requestPolicy")


def validate_slice(obj, old):
    spec = obj.get("spec")
    check(isinstance(spec, dict), "spec", "Required value")
    driver_name(spec.get("driver"), "spec.driver")
    pool = spec.get("pool")
    check(isinstance(pool, dict), "spec.pool", "Required value")
    pool_name(pool.get("name"), "spec.pool.name")
    g, n = pool.get("generation"), pool.get("resourceSliceCount")
    check(isinstance(g, int) and g >= 0, "spec.pool.generation", "must be an integer >= 0")
    check(isinstance(n, int) and n > 0, "spec.pool.resourceSliceCount", "must be greater than 0")
    where = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
             if spec.get(k) not in (None, False, "")]
    check(len(where) == 1, "spec", "Invalid value: exactly one of `nodeName`, `nodeSelector`, "
          "`allNodes`, `perDeviceNodeSelection` is required (got %s)" % (where or "none"))
    if spec.get("nodeName"):
        dns_subdomain(spec["nodeName"], "spec.nodeName")
    devs = spec.get("devices") or []
    check(isinstance(devs, list) and len(devs) <= 128, "spec.devices", "Too many: at most 128")
    seen = set()
    for i, d in enumerate(devs):
        device(d, "spec.devices[%d]" % i, seen)
    if old is not None:
        for f in ("driver", "nodeName"):
            check(spec.get(f) == old["spec"].get(f), "spec." + f, "field is immutable")
        check(pool.get("name") == old["spec"]["pool"].get("name"), "spec.pool.name",
              "field is immutable")


def validate_claim_spec(spec):
    check(isinstance(spec, dict), "spec", "Required value")
    devs = spec.get("devices") or {}
    check(isinstance(devs, dict), "spec.devices", "must be an object")
    reqs = devs.get("requests") or []
    check(isinstance(reqs, list) and len(reqs) <= 32, "spec.devices.requests", "at most 32")
    names = set()
    for i, r in enumerate(reqs):
        f = "spec.devices.requests[%d]" % i
        check(isinstance(r, dict), f, "must be an object")
        dns_label(r.get("name"), f + ".name")
        check(r["name"] not in names, f + ".name", "Duplicate value: %r" % r["name"])
        names.add(r["name"])
        check((r.get("exactly") is None) != (r.get("firstAvailable") is None), f,
              "Required value: exactly one of `exactly` or `firstAvailable` is required")
        for j, e in enumerate([r["exactly"]] if r.get("exactly") is not None else
                              r.get("firstAvailable")):
            fe = f + (".exactly" if r.get("exactly") is not None else ".firstAvailable[%d]" % j)
            exact_request(e, fe)
    opaque_config(devs.get("config") or [], "spec.devices.config", names)
    return names


def exact_request(e, f):
    check(isinstance(e, dict), f, "must be an object")
    dns_subdomain(e.get("deviceClassName"), f + ".deviceClassName")
    mode = e.get("allocationMode", "ExactCount")
    check(mode in ("ExactCount", "All"), f + ".allocationMode",
          'Unsupported value: %r: supported values: "All", "ExactCount"' % mode)
    if e.get("count") is not None:
        check(mode == "ExactCount", f + ".count", "Invalid value: must not be specified when "
              "allocationMode is 'All'")
        check(isinstance(e["count"], int) and e["count"] > 0, f + ".count",
              "Invalid value: %r: must be greater than zero" % e["count"])
    for i, s in enumerate(e.get("selectors") or []):
        check(isinstance((s or {}).get("cel"), dict) and s["cel"].get("expression"),
              "%s.selectors[%d].cel.expression" % (f, i), "Required value")
    cap = (e.get("capacity") or {}).get("requests") or {}
    check(isinstance(cap, dict), f + ".capacity.requests", "must be a map")
    for k, v in cap.items():
        qualified_name(k, "%s.capacity.requests[%s]" % (f, k))
        check(quantity(v, "%s.capacity.requests[%s]" % (f, k)) >= 0,
              "%s.capacity.requests[%s]" % (f, k), "must be >= 0")


def validate_claim_status(obj, old_status):
    st = obj.get("status") or {}
    check(isinstance(st, dict), "status", "must be an object")
    names = {r["name"] for r in (obj["spec"].get("devices") or {}).get("requests") or []}
    alloc, reserved = st.get("allocation"), st.get("reservedFor") or []
    old_alloc = (old_status or {}).get("allocation")
    if old_alloc is not None and alloc is not None:
        check(alloc == old_alloc, "status.allocation", "field is immutable")
    if old_alloc is not None and alloc is None:
        check(not reserved, "status.allocation", "Forbidden: may not be cleared while "
              "status.reservedFor is set")
    check(isinstance(reserved, list) and len(reserved) <= 256, "status.reservedFor",
          "Too many: at most 256")
    check(not reserved or alloc is not None, "status.reservedFor",
          "Forbidden: may not be set without status.allocation")
    uids = set()
    for i, c in enumerate(reserved):
        f = "status.reservedFor[%d]" % i
        for k in ("resource", "name", "uid"):
            check(isinstance(c, dict) and isinstance(c.get(k), str) and c[k], f + "." + k,
                  "Required value")
        check(c["uid"] not in uids, f + ".uid", "Duplicate value: %r" % c["uid"])
        uids.add(c["uid"])
    allocated = set()
    if alloc is not None:
        results = (alloc.get("devices") or {}).get("results") or []
        for i, r in enumerate(results):
            f = "status.allocation.devices.results[%d]" % i
            check(isinstance(r, dict) and isinstance(r.get("request"), str) and
                  r["request"].split("/")[0] in names, f + ".request",
                  "Invalid value: must be the name of a request in the claim")
            driver_name(r.get("driver"), f + ".driver")
            pool_name(r.get("pool"), f + ".pool")
            dns_label(r.get("device"), f + ".device")
            if r.get("shareID") is not None:
                check(isinstance(r["shareID"], str) and UUID.fullmatch(r["shareID"]),
                      f + ".shareID", "Invalid value: %r: must be a lowercase UUID" % r["shareID"])
            for k, v in (r.get("consumedCapacity") or {}).items():
                qualified_name(k, "%s.consumedCapacity[%s]" % (f, k))
                quantity(v, "%s.consumedCapacity[%s]" % (f, k))
            allocated.add((r["driver"], r["pool"], r["device"], r.get("shareID")))
        opaque_config([{k: v for k, v in c.items() if k != "source"} for c in
                       (alloc.get("devices") or {}).get("config") or []],
                      "status.allocation.devices.config", names)
        for i, c in enumerate((alloc.get("devices") or {}).get("config") or []):
            check(c.get("source") in ("FromClass", "FromClaim"),
                  "status.allocation.devices.config[%d].source" % i,
                  'Unsupported value: %r: supported values: "FromClaim", "FromClass"'
                  % c.get("source"))
    seen = set()
    for i, d in enumerate(st.get("devices") or []):
        f = "status.devices[%d]" % i
        check(isinstance(d, dict), f, "must be an object")
        key = (d.get("driver"), d.get("pool"), d.get("device"), d.get("shareID"))
        check(key in allocated, f, "Invalid value: %r: must be an "
              "allocated device in the claim" % ("/".join(str(x) for x in key if x),))
        check(key not in seen, f, "Duplicate value: %r" % ("/".join(str(x) for x in key if x),))
        seen.add(key)
        device_status(d, f)


CONDITION_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")


def device_status(d, f):
    """AllocatedDeviceStatus: conditions (at most 8, metav1.Condition each) and data
    (RawExtension, at most 10 KiB)."""
    conds = d.get("conditions") or []
    check(isinstance(conds, list) and len(conds) <= 8, f + ".conditions",
          "Too many: %d: must have at most 8 items" % len(conds))
    types = set()
    for j, c in enumerate(conds):
        fc = "%s.conditions[%d]" % (f, j)
        check(isinstance(c, dict), fc, "must be an object")
        check(isinstance(c.get("type"), str) and c["type"], fc + ".type", "Required value")
        qualified_name(c["type"], fc + ".type")
        check(c["type"] not in types, fc + ".type", "Duplicate value: %r" % c["type"])
        types.add(c["type"])
        check(c.get("status") in ("True", "False", "Unknown"), fc + ".status",
              'Unsupported value: %r: supported values: "False", "True", "Unknown"'
              % c.get("status"))
        check(isinstance(c.get("lastTransitionTime"), str) and c["lastTransitionTime"],
              fc + ".lastTransitionTime", "Required value")
        check(isinstance(c.get("reason"), str) and CONDITION_REASON.fullmatch(c["reason"]) and
              len(c["reason"]) <= 1024, fc + ".reason", "Invalid value: %r: a condition "
              "reason must start with a letter, then letters, digits, '_', ',' or ':'"
              % c.get("reason"))
        check(isinstance(c.get("message", ""), str) and len(c.get("message", "")) <= 32768,
              fc + ".message", "Too long: may not be more than 32768 bytes")
    if d.get("data") is not None:
        check(len(json.dumps(d["data"], separators=(",", ":"))) <= 10 * 1024, f + ".data",
              "Too long: may not be more than 10240 bytes")


def validate_class(obj):
    spec = obj.get("spec") or {}
    check(isinstance(spec, dict), "spec", "must be an object")
    for i, s in enumerate(spec.get("selectors") or []):
        check(isinstance((s or {}).get("cel"), dict) and s["cel"].get("expression"),
              "spec.selectors[%d].cel.expression" % i, "Required value")
    opaque_config(spec.get("config") or [], "spec.config")


def validate(kind, obj, old):
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName", "x") + "x"
    dns_subdomain(name, "metadata.name")
    if kind == "ResourceSlice":
        validate_slice(obj, old)
    elif kind == "DeviceClass":
        validate_class(obj)
    elif kind == "ResourceClaim":
        validate_claim_spec(obj.get("spec"))
        if old is not None:
            check(obj.get("spec") == old.get("spec"), "spec", "Invalid value: field is immutable")
        validate_claim_status(obj, (old or {}).get("status"))


def route(parts):
    """(kind, ns, name, sub) of a /apis/resource.k8s.io/v1/... path, or None."""
    p = parts[3:]
    if len(p) in (1, 2) and p[0] in ("resourceslices", "deviceclasses", "resourceclaims"):
        if p[0] == "resourceclaims" and len(p) == 2:
            return None  # claims are namespaced: only their list spans the namespaces
        return KIND_OF[p[0]], None, p[1] if len(p) == 2 else None, None
    if len(p) in (3, 4, 5) and p[0] == "namespaces" and p[2] == "resourceclaims":
        sub = p[4] if len(p) == 5 else None
        if sub not in (None, "status"):
            return None
        return "ResourceClaim", p[1], p[3] if len(p) >= 4 else None, sub
    return None


def serve(h, m):
    """Answers one request of handler h under /apis/resource.k8s.io/; m is the apiserver
    module (its STORE, ApiError, selectors, merge_patch)."""
    u = urlsplit(h.path)
    q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
    parts = [p for p in u.path.split("/") if p]
    r = route(parts) if parts[:3] == ["apis", "resource.k8s.io", "v1"] else None
    if r is None:
        raise m.ApiError(404, "NotFound", "the server could not find the requested resource")
    kind, ns, name, sub = r
    try:
        return serve_kind(h, m, kind, ns, name, sub, q)
    except Invalid as e:
        field, why = e.args[:2]
        raise m.ApiError(422, "Invalid", '%s.resource.k8s.io "%s" is invalid: %s: %s' % (
            kind, name or (e.args[2] if len(e.args) > 2 else ""), field, why))


def field_selector(m, kind, q):
    fields = m.parse_selector(q.get("fieldSelector"), "field")
    for k, _, _ in fields:
        if k not in FIELDS[kind]:
            raise m.ApiError(400, "BadRequest", '"%s" is not a known field selector: only "%s"'
                             % (k, '", "'.join(FIELDS[kind])))
    return fields


def serve_kind(h, m, kind, ns, name, sub, q):
    cmd, store = h.command, m.STORE
    if name is None:
        labels = m.parse_selector(q.get("labelSelector"), "label")
        fields = field_selector(m, kind, q)
        if cmd == "GET" and q.get("watch") in ("1", "true"):
            return h.watch(kind, ns, q, labels, fields)
        if cmd == "GET":
            limit = int(q["limit"]) if q.get("limit", "").isdigit() else 0
            return h.send_json(200, store.list(kind, ns, labels, fields, limit, q.get("continue")))
        if cmd == "DELETE":
            return h.send_json(200, delete_collection(m, kind, ns, labels, fields))
        if cmd == "POST" and (kind != "ResourceClaim" or ns is not None):
            return h.send_json(201, create(m, kind, ns, h.read_body()))
        raise m.ApiError(405, "MethodNotAllowed", "the server does not allow this method")
    if cmd == "GET":
        return h.send_json(200, store.get(kind, ns, name))
    if cmd == "DELETE":
        return h.send_json(200, store.delete(kind, ns, name))
    if cmd == "PUT":
        return h.send_json(200, update(m, kind, ns, name, sub, h.read_body(), False))
    if cmd == "PATCH":
        ctype = (h.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype == "application/apply-patch+yaml" and kind == "ResourceClaim" and sub == "status":
            return h.send_json(200, apply_status(m, ns, name, h.read_body(), q))
        if ctype != "application/merge-patch+json":
            raise m.ApiError(415, "UnsupportedMediaType", "the body of the request was in an "
                             "unknown format - accepted media types include: "
                             "application/merge-patch+json")
        return h.send_json(200, update(m, kind, ns, name, sub, h.read_body(), True))
    raise m.ApiError(405, "MethodNotAllowed", "the server does not allow this method")


def create(m, kind, ns, body):
    if not isinstance(body, dict):
        raise m.ApiError(400, "BadRequest", "the body must be a JSON object")
    body = copy.deepcopy(body)
    if kind == "ResourceClaim":
        body.pop("status", None)  # a create sets no status, as the strategy resets it
    try:
        validate(kind, body, None)
    except Invalid as e:
        raise Invalid(e.args[0], e.args[1], (body.get("metadata") or {}).get("name") or "")
    return m.STORE.create(kind, ns, body)


def update(m, kind, ns, name, sub, body, patch):
    """PUT (patch False) or merge PATCH of an object or of a claim's /status, validated
    against the stored one under the store's lock."""
    store = m.STORE
    if not isinstance(body, dict):
        raise m.ApiError(400, "BadRequest", "the body must be a JSON object")
    with store.lock:
        old = store.get(kind, ns, name)
        new = m.merge_patch(old, body) if patch else copy.deepcopy(body)
        meta = new.get("metadata")
        if not isinstance(meta, dict) or meta.get("name") != name:
            raise m.ApiError(400, "BadRequest", "the name of the object (%s) does not match the "
                             "name on the URL (%s)" % (meta and meta.get("name"), name))
        store._check_rv(old, (body.get("metadata") or {}).get("resourceVersion"), name)
        if kind == "ResourceClaim":
            if sub == "status":  # only status changes here
                new = dict(old, status=new.get("status") or {})
            else:  # the main resource keeps the stored status
                new["status"] = copy.deepcopy(old.get("status"))
                if new["status"] is None:
                    new.pop("status")
        validate(kind, new, old)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return store.update(kind, ns, name, new)


# Who applied which status.devices entry: {(ns, name, uid): {manager: {key, ...}}}.
DEVICE_OWNERS = {}


def device_key(d):
    return tuple((d or {}).get(k) for k in ("driver", "device", "pool", "shareID"))


def apply_status(m, ns, name, body, q):
    """Server-side apply of a claim's status.devices by q["fieldManager"] (see the module's
    docstring); the claim written."""
    store, mgr = m.STORE, q.get("fieldManager")
    if not mgr:
        raise m.ApiError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                         'Required value: is required for apply patch')
    if not isinstance(body, dict) or body.get("apiVersion") != GROUP or \
            body.get("kind") != "ResourceClaim" or (body.get("metadata") or {}).get("name") != name:
        raise m.ApiError(400, "BadRequest", "an apply patch is a ResourceClaim of %s named %s"
                         % (GROUP, name))
    st = body.get("status") or {}
    if set(st) - {"devices"}:
        raise m.ApiError(422, "Invalid", "the stand-in applies status.devices only, not %s"
                         % sorted(set(st) - {"devices"}))
    mine = st.get("devices") or []
    with store.lock:
        old = store.get("ResourceClaim", ns, name)
        owners = DEVICE_OWNERS.setdefault((ns, name, old["metadata"]["uid"]), {})
        keys = [device_key(d) for d in mine]
        taken = [k for k in keys for o, ks in owners.items() if o != mgr and k in ks]
        if taken and q.get("force") not in ("true", "1"):
            raise m.ApiError(409, "Conflict", 'Apply failed with %d conflict: conflict with "%s" '
                             "using resource.k8s.io/v1: .status.devices" % (len(taken), [
                                 o for o, ks in owners.items() if o != mgr and taken[0] in ks][0]))
        dropped = owners.get(mgr, set()) - set(keys)
        kept = [d for d in (old.get("status") or {}).get("devices") or []
                if device_key(d) not in set(keys) | dropped]
        new = copy.deepcopy(old)
        new.setdefault("status", {})["devices"] = kept + copy.deepcopy(mine)
        if not new["status"]["devices"]:
            del new["status"]["devices"]
        try:
            validate("ResourceClaim", new, old)
        except Invalid as e:
            raise Invalid(e.args[0], e.args[1], name)
        out = store.update("ResourceClaim", ns, name, new)
        for o in owners.values():
            o.difference_update(keys)
        owners[mgr] = set(keys)
        return out


def delete_collection(m, kind, ns, labels, fields):
    store = m.STORE
    with store.lock:
        items = store.list(kind, ns, labels, fields, 0, None)["items"]
        gone = [store.delete(kind, o["metadata"].get("namespace"), o["metadata"]["name"])
                for o in items]
    return {"kind": kind + "List", "apiVersion": GROUP,
            "metadata": {"resourceVersion": str(store.rv)}, "items": gone}
