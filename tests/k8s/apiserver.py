#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A Kubernetes API server stand-in for gslice's tests: the Python standard library only.

It holds nodes, pods, events and leases in memory and answers the parts of the
core/v1 and coordination.k8s.io/v1 API that gslice-node and gslice-extender use, as
the API documents them:

  GET    /api/v1/nodes, /api/v1/pods, /api/v1/namespaces/NS/pods  (lists)
         ?limit=N&continue=T   pages; metadata.resourceVersion is the list's
         ?labelSelector=a=b,c!=d  ?fieldSelector=spec.nodeName=x,metadata.name!=y
         ?watch=1|true&resourceVersion=RV&timeoutSeconds=S&allowWatchBookmarks=true
             a chunked stream of {"type":..,"object":..} lines, one per change
             after RV (ADDED/MODIFIED/DELETED, BOOKMARK every bookmark_s when
             allowed); no RV or "0": ADDED for every object first. An RV older
             than the kept history: HTTP 200 and one ERROR event with a Status
             of code 410 (Gone, "too old resource version"), as the real server
             does; fault "watch410http" answers HTTP 410 instead.
             A selector change makes MODIFIED into ADDED/DELETED for that watch.
  GET    /api/v1/nodes/NAME, /api/v1/namespaces/NS/pods/NAME
  GET    /api/v1/events, /api/v1/namespaces/NS/events[/NAME]  core/v1 Events
  *      /api/v1/namespaces/NS/secrets[/NAME]  Secrets: GET, POST (409 AlreadyExists), PUT
         (409 Conflict at a stale resourceVersion), as any object here (not validated)
  GET    /apis/coordination.k8s.io/v1/leases, .../namespaces/NS/leases[/NAME]  (lists,
         watches and gets as above)
  *      /apis/resource.k8s.io/v1/...  ResourceSlices, ResourceClaims (and their /status),
         DeviceClasses: apiserver_resource.py says what is modelled
  POST   the collections (create; 409 AlreadyExists; metadata.generateName: a name made
         from it). An Event's involvedObject.namespace must be the Event's namespace and
         its type Normal or Warning (422 otherwise, as the API's validation says); a
         Lease's spec.leaseDurationSeconds is positive and its acquireTime/renewTime
         MicroTimes (RFC 3339; 422 otherwise)
  PUT    an object (replace; 409 Conflict if metadata.resourceVersion is stale)
  PATCH  an object, Content-Type application/merge-patch+json (RFC 7386);
         415 for other patch types; 409 if the patch carries a stale
         metadata.resourceVersion
  DELETE an object
  POST   /api/v1/namespaces/NS/pods/NAME/binding   a Binding
         {"metadata":{"name":NAME,"uid":?,"annotations":{..}},
          "target":{"kind":"Node","name":NODE}}: sets spec.nodeName, copies the
         Binding's metadata.annotations onto the pod (as the registry's
         BindingREST does) and adds condition PodScheduled=True, all in one
         write; 409 Conflict "pod NS/NAME is already assigned to node N" if
         already bound; 409 if metadata.uid is given and differs; 400 if the
         name differs from the URL's or the target is not a Node; 201 + Status.
Every error is a v1 Status object (kind, status Failure, message, reason, code).

Options: --port N (0: any free port; default 0), --port-file FILE (the port is
written there once listening: how tests find it), --token T (then every request
needs "Authorization: Bearer T", else 401), --history N (events kept for watch
resume, default 10000), --bookmark-s S (default 1), --tls-cert FILE --tls-key FILE
(HTTPS), --client-ca FILE (with TLS: a client certificate signed by it is required,
as the API server's --client-ca-file authenticates users).

Test control interface (no auth), under /_test/:
  GET  /_test/state            {"resourceVersion": rv, "nodes": [..], "pods": [..]}
  GET  /_test/requests         [{"method","path","status"}, ...] every request so far
  GET  /_test/events           the Event objects created
  GET  /_test/writes           {"METHOD PATH": count} of the writes (not GET) answered 2xx,
                               PATH without its query: how many API writes a program made
  POST /_test/compact          forget the watch history: resuming any older RV gets 410
  POST /_test/close-watches    end every open watch stream now (as a server restart)
  POST /_test/fault            {"method":"POST","path":"regex","status":500,
                                "count":1,"delay_s":0,"message":"..."} answers the next
                               `count` matching requests with that status (status 0:
                               only the delay); special "status":"watch410http" applies to
                               watches; "status":"hang" holds the request delay_s then
                               closes the connection without an answer.
  GET  /_test/faults           the faults not consumed yet (one is consumed when a matching
                               request arrives, before its delay: that request is being held)
  POST /_test/clear-faults
  POST /_test/webhooks         a MutatingWebhookConfiguration (admissionregistration.k8s.io/v1)
                               replaces the one held (none at start: no admission at all);
                               {"webhooks": []} removes it. See "Admission" below.
  GET  /_test/webhooks         the one held, and "calls": [{"webhook","uid","outcome"}, ..]

Admission (only once a test has POSTed /_test/webhooks): each create (POST of a collection)
is sent, before it is stored, to every webhook of the configuration in order whose rules
match (operations CREATE or *, apiGroups ""/*, apiVersions v1/*, resources the plural or *)
and whose namespaceSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist)
matches the namespace's labels, which here are only kubernetes.io/metadata.name=NS, the label
the API server sets on every namespace. The call is an AdmissionReview admission.k8s.io/v1
POSTed to clientConfig.url?timeout=Ns over HTTPS, the server's certificate verified against
clientConfig.caBundle (base64 PEM) and the URL's host (clientConfig.service is not modelled:
nothing resolves Service names here; nor are matchConditions, which are refused). request:
uid, kind, resource, requestKind, requestResource, operation CREATE, namespace, name (empty
for a generateName), object, oldObject null, userInfo, dryRun false, options. The response:
admissionReviewVersions must hold v1; response.uid must equal request.uid; allowed true with patchType JSONPatch and patch (base64
of an RFC 6902 array: add, remove, replace, move, copy, test) applied to the object the next
webhook sees and that is stored; allowed false refuses the create with the webhook's
status (code under 400 made 400) and message 'admission webhook "NAME" denied the request:
MESSAGE' (or its reason, or "without explanation"). A webhook that cannot be called, answers
after timeoutSeconds (default 10), answers other than 200 or with no AdmissionReview (or a
wrong uid or patchType) applies its failurePolicy (default Fail): Fail refuses with 500
InternalError 'Internal error occurred: failed calling webhook "NAME": ...', Ignore goes
on as if it were not configured. A patch that cannot be applied is 500 whatever the policy.
"""

import argparse
import base64
import copy
import http.client
import json
import re
import ssl
import sys
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import apiserver_resource
import ctlhttp


API_VERSION = {"Lease": "coordination.k8s.io/v1"}  # every other kind: "v1"
API_VERSION.update(apiserver_resource.API_VERSION)  # resource.k8s.io/v1: apiserver_resource.py
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)")


def validate(kind, ns, obj):
    """The API's validation of the fields gslice writes (ValidateEvent, ValidateLease)."""
    if kind == "Event":
        inv = obj.get("involvedObject") or {}
        if inv.get("namespace", ns) != ns:
            raise ApiError(422, "Invalid", 'Event "%s" is invalid: involvedObject.namespace: '
                           "Invalid value: %r: does not match event.namespace"
                           % (obj["metadata"].get("name"), inv.get("namespace")))
        if obj.get("type") not in (None, "", "Normal", "Warning"):
            raise ApiError(422, "Invalid", "type: Unsupported value: %r: supported values: "
                           '"Normal", "Warning"' % obj.get("type"))
    if kind == "Lease":
        spec = obj.get("spec") or {}
        d = spec.get("leaseDurationSeconds")
        if d is not None and (not isinstance(d, int) or d <= 0):
            raise ApiError(422, "Invalid", "spec.leaseDurationSeconds: Invalid value: %r: must "
                           "be greater than 0" % d)
        for f in ("acquireTime", "renewTime"):
            if spec.get(f) is not None and not (isinstance(spec[f], str) and
                                                MICRO_TIME.fullmatch(spec[f])):
                raise ApiError(400, "BadRequest", "spec.%s: %r is not a MicroTime" % (f, spec[f]))


class Gone(Exception):
    pass


class ApiError(Exception):
    def __init__(self, code, reason, message):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def status_obj(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def get_path(obj, dotted):
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def parse_selector(text, kind):
    """[(key, op, value)] from "a=b,c!=d,e==f"; kind is 'label' or 'field'."""
    terms = []
    for term in filter(None, (text or "").split(",")):
        m = re.fullmatch(r"\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_./-]*)\s*", term)
        if not m:
            raise ApiError(400, "BadRequest", "unable to parse %s selector %r" % (kind, text))
        terms.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
    return terms


def selector_matches(obj, labels, fields):
    lab = (obj.get("metadata") or {}).get("labels") or {}
    for k, op, v in labels:
        if (lab.get(k) == v) != (op == "="):
            return False
    for k, op, v in fields:
        got = get_path(obj, k)
        got = "" if got is None else str(got)
        if (got == v) != (op == "="):
            return False
    return True


class Store:
    def __init__(self, history):
        self.lock = threading.Condition()
        self.rv = 1
        self.objs = {}  # (kind, ns, name) -> obj
        self.history = []  # (rv, type, kind, ns, old, new)
        self.history_max = history
        self.oldest = 1  # resuming from rv < oldest - 1... is Gone
        self.requests = []
        self.events = []
        self.writes = {}
        self.faults = []
        self.watch_gen = 0

    def _record(self, typ, kind, ns, old, new):
        self.history.append((self.rv, typ, kind, ns, copy.deepcopy(old), copy.deepcopy(new)))
        if len(self.history) > self.history_max:
            drop = len(self.history) - self.history_max
            self.oldest = self.history[drop][0]
            del self.history[:drop]
        self.lock.notify_all()

    def _bump(self, obj):
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)

    def create(self, kind, ns, obj):
        meta = obj.get("metadata")
        if isinstance(meta, dict) and not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise ApiError(422, "Invalid", "%s: metadata.name: Required value" % kind)
        validate(kind, ns, obj)
        if ns is not None:
            if meta.get("namespace", ns) != ns:
                raise ApiError(400, "BadRequest",
                               "the namespace of the provided object does not match the "
                               "namespace sent on the request")
            meta["namespace"] = ns
        key = (kind, ns, meta["name"])
        with self.lock:
            if key in self.objs:
                raise ApiError(409, "AlreadyExists",
                               '%ss "%s" already exists' % (kind.lower(), meta["name"]))
            obj = copy.deepcopy(obj)
            obj["kind"], obj["apiVersion"] = kind, API_VERSION.get(kind, "v1")
            obj["metadata"]["uid"] = str(uuid.uuid4())
            obj["metadata"]["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                 time.gmtime())
            self._bump(obj)
            self.objs[key] = obj
            self._record("ADDED", kind, ns, None, obj)
            return copy.deepcopy(obj)

    def get(self, kind, ns, name):
        with self.lock:
            obj = self.objs.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", '%ss "%s" not found' % (kind.lower(), name))
            return copy.deepcopy(obj)

    def _replace(self, key, old, new):
        self._bump(new)
        self.objs[key] = new
        self._record("MODIFIED", key[0], key[1], old, new)
        return copy.deepcopy(new)

    def _check_rv(self, old, given, name):
        if given is not None and given != old["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict",
                           'Operation cannot be fulfilled on %ss "%s": the object has been '
                           'modified; please apply your changes to the latest version and '
                           'try again' % (old["kind"].lower(), name))

    def update(self, kind, ns, name, obj):
        key = (kind, ns, name)
        with self.lock:
            old = self.objs.get(key)
            if old is None:
                raise ApiError(404, "NotFound", '%ss "%s" not found' % (kind.lower(), name))
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            if not isinstance(meta, dict) or meta.get("name") != name:
                raise ApiError(400, "BadRequest", "the name of the object (%s) does not match "
                               "the name on the URL (%s)" % (meta and meta.get("name"), name))
            self._check_rv(old, meta.get("resourceVersion"), name)
            validate(kind, ns, obj)
            new = copy.deepcopy(obj)
            for k in ("uid", "creationTimestamp", "namespace"):
                if k in old["metadata"]:
                    new["metadata"][k] = old["metadata"][k]
            new["kind"], new["apiVersion"] = kind, API_VERSION.get(kind, "v1")
            return self._replace(key, old, new)

    def patch(self, kind, ns, name, patch):
        key = (kind, ns, name)
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
        with self.lock:
            old = self.objs.get(key)
            if old is None:
                raise ApiError(404, "NotFound", '%ss "%s" not found' % (kind.lower(), name))
            self._check_rv(old, get_path(patch, "metadata.resourceVersion"), name)
            new = merge_patch(old, patch)
            if get_path(new, "metadata.name") != name:
                raise ApiError(422, "Invalid", "metadata.name: the name cannot change")
            for k in ("uid", "creationTimestamp", "namespace"):
                if k in old["metadata"]:
                    new["metadata"][k] = old["metadata"][k]
            return self._replace(key, old, new)

    def delete(self, kind, ns, name):
        key = (kind, ns, name)
        with self.lock:
            old = self.objs.pop(key, None)
            if old is None:
                raise ApiError(404, "NotFound", '%ss "%s" not found' % (kind.lower(), name))
            gone = copy.deepcopy(old)
            self._bump(gone)
            self._record("DELETED", kind, ns, old, gone)
            return gone

    def bind(self, ns, name, binding):
        if not isinstance(binding, dict):
            raise ApiError(400, "BadRequest", "a Binding must be a JSON object")
        meta = binding.get("metadata") or {}
        target = binding.get("target") or {}
        if meta.get("name") != name:
            raise ApiError(400, "BadRequest",
                           "name in URL does not match name in Binding object")
        if target.get("kind") not in (None, "", "Node"):
            raise ApiError(400, "BadRequest", "must bind to a node, not %r" % target.get("kind"))
        node = target.get("name")
        if not isinstance(node, str) or not node:
            raise ApiError(422, "Invalid", "target.name: Required value")
        annotations = meta.get("annotations") or {}
        if not isinstance(annotations, dict) or not all(
                isinstance(v, str) for v in annotations.values()):
            raise ApiError(400, "BadRequest", "metadata.annotations must map strings to strings")
        key = ("Pod", ns, name)
        with self.lock:
            old = self.objs.get(key)
            if old is None:
                raise ApiError(404, "NotFound", 'pods "%s" not found' % name)
            if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
                raise ApiError(409, "Conflict",
                               "Precondition failed: UID in precondition: %s, UID in object "
                               "meta: %s" % (meta["uid"], old["metadata"]["uid"]))
            bound = get_path(old, "spec.nodeName")
            if bound:
                raise ApiError(409, "Conflict", 'pod %s/%s is already assigned to node "%s"'
                               % (ns, name, bound))
            new = copy.deepcopy(old)
            new.setdefault("spec", {})["nodeName"] = node
            new["metadata"].setdefault("annotations", {}).update(annotations)
            conds = new.setdefault("status", {}).setdefault("conditions", [])
            conds[:] = [c for c in conds if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True"})
            self._replace(key, old, new)
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "code": 201}

    def list(self, kind, ns, labels, fields, limit, cont):
        with self.lock:
            keys = sorted(k for k in self.objs if k[0] == kind and (ns is None or k[1] == ns))
            items = [copy.deepcopy(self.objs[k]) for k in keys
                     if selector_matches(self.objs[k], labels, fields)]
            rv = self.rv
        start = 0
        if cont:
            try:
                start = int(base64.b64decode(cont).decode())
            except Exception:
                raise ApiError(400, "BadRequest", "invalid continue token %r" % cont)
        meta = {"resourceVersion": str(rv)}
        if limit and start + limit < len(items):
            meta["continue"] = base64.b64encode(str(start + limit).encode()).decode()
            meta["remainingItemCount"] = len(items) - start - limit
            items = items[start:start + limit]
        else:
            items = items[start:]
        return {"kind": kind + "List", "apiVersion": API_VERSION.get(kind, "v1"), "metadata": meta,
                "items": items}


# ---- admission (off until a test configures a MutatingWebhookConfiguration) ---------------
PLURAL = {"Pod": "pods", "Node": "nodes", "Event": "events", "Lease": "leases"}
WEBHOOKS = {"config": None, "calls": []}
WEBHOOKS_LOCK = threading.Lock()


class CallError(Exception):
    """A webhook that could not be called or answered no usable AdmissionReview: its
    failurePolicy applies (the API server's ErrCallingWebhook)."""


def check_webhooks(cfg):
    if not isinstance(cfg, dict) or not isinstance(cfg.get("webhooks", []), list):
        raise ApiError(400, "BadRequest", "a MutatingWebhookConfiguration with webhooks: [..]")
    for w in cfg.get("webhooks", []):
        if not isinstance(w, dict) or not w.get("name"):
            raise ApiError(422, "Invalid", "webhooks[].name: Required value")
        cc = w.get("clientConfig") or {}
        if not isinstance(cc.get("url"), str) or not cc["url"].startswith("https://"):
            raise ApiError(422, "Invalid", "webhooks[].clientConfig.url: an https:// URL (service "
                           "is not modelled by the stand-in)")
        if w.get("matchConditions"):
            raise ApiError(422, "Invalid", "webhooks[].matchConditions: not modelled (no CEL)")
        if w.get("failurePolicy", "Fail") not in ("Fail", "Ignore"):
            raise ApiError(422, "Invalid", "failurePolicy: Unsupported value: %r"
                           % w.get("failurePolicy"))
        t = w.get("timeoutSeconds", 10)
        if not isinstance(t, int) or not 1 <= t <= 30:
            raise ApiError(422, "Invalid", "timeoutSeconds: Invalid value: %r: the timeout value "
                           "must be between 1 and 30 seconds" % t)


def rule_matches(w, kind):
    def has(lst, v):
        return isinstance(lst, list) and ("*" in lst or v in lst)
    return any(has(r.get("operations"), "CREATE") and has(r.get("apiGroups"), API_VERSION.get(
        kind, "v1").rpartition("/")[0]) and has(r.get("apiVersions"), "v1") and
        has(r.get("resources"), PLURAL.get(kind, "")) for r in w.get("rules") or [])


def namespace_matches(w, ns):
    """The namespaceSelector on the labels every namespace has; a cluster-scoped object
    always matches, as the API server documents."""
    sel = w.get("namespaceSelector") or {}
    if ns is None:
        return True
    labels = {"kubernetes.io/metadata.name": ns}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        ok = {"In": k in labels and labels[k] in vals,
              "NotIn": k not in labels or labels[k] not in vals,
              "Exists": k in labels, "DoesNotExist": k not in labels}.get(op)
        if not ok:
            return False
    return True


def pointer(doc, path):
    """(parent, key) of an RFC 6901 pointer; key an int for an array (or "-")."""
    if not path.startswith("/"):
        raise ValueError("path %r does not start with /" % path)
    parts = [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]
    parent = doc
    for p in parts[:-1]:
        parent = parent[int(p)] if isinstance(parent, list) else parent[p]
    last = parts[-1]
    if isinstance(parent, list) and last != "-":
        last = int(last)
    elif not isinstance(parent, (list, dict)):
        raise ValueError("%s: the parent is not an object or array" % path)
    return parent, last


def json_patch(doc, ops):
    """RFC 6902 on a copy of doc."""
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise ValueError("a JSONPatch is an array")

    def add(path, value):
        parent, key = pointer(doc, path)
        if isinstance(parent, list):
            if key != "-" and not 0 <= key <= len(parent):
                raise ValueError("%s: index out of range" % path)
            parent.insert(len(parent) if key == "-" else key, value)
        else:
            parent[key] = value

    def remove(path):
        parent, key = pointer(doc, path)
        return parent.pop(key)

    def get(path):
        parent, key = pointer(doc, path)
        return parent[key]
    for op in ops:
        o, path = op.get("op"), op.get("path", "")
        if path == "" and o in ("add", "replace"):
            doc = copy.deepcopy(op["value"])
        elif o == "add":
            add(path, copy.deepcopy(op["value"]))
        elif o == "remove":
            remove(path)
        elif o == "replace":
            get(path)  # must exist
            remove(path)
            add(path, copy.deepcopy(op["value"]))
        elif o == "move":
            add(path, remove(op["from"]))
        elif o == "copy":
            add(path, copy.deepcopy(get(op["from"])))
        elif o == "test":
            if get(path) != op.get("value"):
                raise ValueError("test of %s failed" % path)
        else:
            raise ValueError("unknown op %r" % o)
    return doc


def call_webhook(w, review):
    """The webhook's AdmissionReview response, or CallError."""
    cc = w["clientConfig"]
    timeout = w.get("timeoutSeconds", 10)
    u = urlsplit(cc["url"])
    try:
        ctx = ssl.create_default_context(cadata=base64.b64decode(cc.get("caBundle", "")).decode()
                                         if cc.get("caBundle") else None)
    except (ValueError, ssl.SSLError) as e:
        raise CallError("bad caBundle: %s" % e)
    path = (u.path or "/") + "?" + ((u.query + "&") if u.query else "") + "timeout=%ds" % timeout
    url = cc["url"].split("?")[0] + "?timeout=%ds" % timeout
    body = json.dumps(review).encode()
    conn = http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=timeout, context=ctx)
    deadline = time.monotonic() + timeout
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json",
                                          "Accept": "application/json"})
        r = conn.getresponse()
        data = r.read()
    except (TimeoutError, OSError, http.client.HTTPException) as e:
        if isinstance(e, TimeoutError) or "timed out" in str(e):
            data, r = None, None
        else:
            raise CallError('failed to call webhook: Post "%s": %s' % (url, e))
    finally:
        conn.close()
    if r is None or time.monotonic() > deadline:
        raise CallError('failed to call webhook: Post "%s": context deadline exceeded' % url)
    if r.status != 200:
        raise CallError("received invalid webhook response: HTTP %d: %s" % (r.status, data[:200]))
    try:
        ans = json.loads(data)
        resp = ans["response"]
        if ans.get("apiVersion") != "admission.k8s.io/v1" or ans.get("kind") != "AdmissionReview":
            raise ValueError("apiVersion/kind %s/%s" % (ans.get("apiVersion"), ans.get("kind")))
    except (ValueError, KeyError, TypeError) as e:
        raise CallError("received invalid webhook response: %s" % e)
    if resp.get("uid") != review["request"]["uid"]:
        raise CallError("expected response.uid=%r, got %r" % (review["request"]["uid"],
                                                            resp.get("uid")))
    return resp


def admission_review(kind, ns, obj, user):
    group, _, ver = API_VERSION.get(kind, "v1").rpartition("/")
    gvk = {"group": group, "version": ver, "kind": kind}
    gvr = {"group": group, "version": ver, "resource": PLURAL.get(kind, "")}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": gvk, "resource": gvr, "requestKind": gvk,
        "requestResource": gvr, "operation": "CREATE", "namespace": ns or "",
        "name": (obj.get("metadata") or {}).get("name", ""), "object": obj, "oldObject": None,
        "userInfo": user, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}


def admit(kind, ns, obj, user):
    """The object after the configured webhooks, or ApiError as the API server refuses it."""
    with WEBHOOKS_LOCK:
        cfg = WEBHOOKS["config"]
    for w in (cfg or {}).get("webhooks", []):
        if not rule_matches(w, kind) or not namespace_matches(w, ns):
            continue
        review = admission_review(kind, ns, obj, user)
        uid = review["request"]["uid"]
        try:
            if "v1" not in w.get("admissionReviewVersions", ["v1"]):
                raise CallError("webhook does not accept v1 AdmissionReview")
            resp = call_webhook(w, review)
            if resp.get("allowed") is True and resp.get("patch") is not None and \
                    resp.get("patchType") != "JSONPatch":
                raise CallError("unsupported patch type %r" % resp.get("patchType"))
        except CallError as e:
            policy = w.get("failurePolicy", "Fail")
            log_call(w, uid, "error (%s): %s" % (policy, e))
            if policy == "Ignore":
                continue
            raise ApiError(500, "InternalError", 'Internal error occurred: failed calling '
                           'webhook "%s": %s' % (w["name"], e))
        if resp.get("allowed") is not True:
            log_call(w, uid, "denied")
            st = dict(resp.get("status") or {})
            code = st.get("code") if isinstance(st.get("code"), int) else 0
            denied = 'admission webhook "%s" denied the request' % w["name"]
            msg = ("%s: %s" % (denied, st["message"]) if st.get("message") else
                   "%s: %s" % (denied, st["reason"]) if st.get("reason") else
                   denied + " without explanation")
            raise ApiError(max(code, 400), st.get("reason", ""), msg)
        if resp.get("patch") is not None:
            try:
                obj = json_patch(obj, json.loads(base64.b64decode(resp["patch"])))
            except (ValueError, KeyError, IndexError, TypeError) as e:
                log_call(w, uid, "bad patch: %s" % e)
                raise ApiError(500, "InternalError", "Internal error occurred: JSON patch of "
                               'webhook "%s": %s' % (w["name"], e))
            log_call(w, uid, "patched")
        else:
            log_call(w, uid, "allowed")
    return obj


def log_call(w, uid, outcome):
    with WEBHOOKS_LOCK:
        WEBHOOKS["calls"].append({"webhook": w["name"], "uid": uid, "outcome": outcome})


STORE = None
ARGS = None


class Handler(ctlhttp.JSONHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as kube-apiserver (Go's net/http) sets it: an answer's headers and body go in
    # two writes, and on a kept connection the body otherwise waits for the client's delayed
    # ACK, ~40 ms a request (gslice's API clients keep their connections since 5c5924d).
    disable_nagle_algorithm = True

    def setup(self):
        if hasattr(self.request, "do_handshake"):  # TLS: the handshake here, per connection
            self.request.settimeout(10)
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()

    # ---- plumbing ---------------------------------------------------------------------
    def send_json(self, code, obj):
        """The reply (ctlhttp's), then recorded: every request, and each write that took."""
        self.reply(code, obj)
        with STORE.lock:
            STORE.requests.append({"method": self.command, "path": self.path, "status": code})
            if self.command != "GET" and code // 100 == 2 and not self.path.startswith("/_test/"):
                key = "%s %s" % (self.command, urlsplit(self.path).path)
                STORE.writes[key] = STORE.writes.get(key, 0) + 1

    def send_error_status(self, e):
        self.send_json(e.code, status_obj(e.code, e.reason, e.message))

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(400, "BadRequest", "the body is not JSON: %s" % e)

    def fault(self):
        """The first matching fault, consumed; None when none applies."""
        with STORE.lock:
            for f in STORE.faults:
                if f.get("method") not in (None, self.command):
                    continue
                if not re.search(f.get("path", ""), self.path):
                    continue
                f["count"] = f.get("count", 1) - 1
                if f["count"] <= 0:
                    STORE.faults.remove(f)
                return dict(f)
        return None

    def route(self):
        """(kind, ns, name, sub, query) from the URL."""
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        parts = [p for p in u.path.split("/") if p]
        if parts[:3] == ["apis", "coordination.k8s.io", "v1"]:
            p = parts[3:]
            if p == ["leases"]:
                return "Lease", None, None, None, q
            if len(p) in (3, 4) and p[0] == "namespaces" and p[2] == "leases":
                return "Lease", p[1], p[3] if len(p) == 4 else None, None, q
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if parts[:2] != ["api", "v1"]:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        p = parts[2:]
        if p == ["events"]:
            return "Event", None, None, None, q
        if p[:1] == ["nodes"] and len(p) <= 2:
            return "Node", None, p[1] if len(p) == 2 else None, None, q
        if p[:1] == ["pods"] and len(p) == 1:
            return "Pod", None, None, None, q
        if len(p) >= 3 and p[0] == "namespaces" and p[2] in ("pods", "events", "secrets"):
            kind = {"pods": "Pod", "events": "Event", "secrets": "Secret"}[p[2]]
            if len(p) <= 5:
                return kind, p[1], p[3] if len(p) >= 4 else None, p[4] if len(p) == 5 else None, q
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def user_info(self):
        """The AdmissionReview's userInfo: the stand-in knows one user per token."""
        if ARGS.token:
            return {"username": "gslice-test", "groups": ["system:authenticated"]}
        return {"username": "system:anonymous", "groups": ["system:unauthenticated"]}

    def authorized(self):
        if not ARGS.token:
            return True
        return self.headers.get("Authorization") == "Bearer " + ARGS.token

    def handle_any(self):
        try:
            if self.path.startswith("/_test/"):
                return self.control()
            if not self.authorized():
                raise ApiError(401, "Unauthorized", "Unauthorized")
            f = self.fault()
            if f:
                if f.get("delay_s"):
                    time.sleep(f["delay_s"])
                if f.get("status") == "hang":
                    self.close_connection = True
                    return
                if isinstance(f.get("status"), int) and f["status"]:
                    raise ApiError(f["status"], f.get("reason", "InternalError"),
                                   f.get("message", "injected fault"))
                if f.get("status") == "watch410http":
                    raise ApiError(410, "Expired", "too old resource version (injected)")
            self.serve_api()
        except ApiError as e:
            self.send_error_status(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    # ---- the API ----------------------------------------------------------------------
    def serve_api(self):
        if self.path.startswith("/apis/resource.k8s.io/"):
            return apiserver_resource.serve(self, sys.modules[__name__])
        kind, ns, name, sub, q = self.route()
        m = self.command
        if m == "GET" and name is None:
            labels = parse_selector(q.get("labelSelector"), "label")
            fields = parse_selector(q.get("fieldSelector"), "field")
            if q.get("watch") in ("1", "true"):
                return self.watch(kind, ns, q, labels, fields)
            limit = int(q["limit"]) if q.get("limit", "").isdigit() else 0
            return self.send_json(200, STORE.list(kind, ns, labels, fields, limit,
                                                  q.get("continue")))
        if m == "GET" and sub is None:
            return self.send_json(200, STORE.get(kind, ns, name))
        if m == "POST" and name is None:
            body = self.read_body()
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body must be a JSON object")
            if ns is None and kind in ("Event", "Lease"):
                raise ApiError(405, "MethodNotAllowed", "create %ss in a namespace" % kind.lower())
            if WEBHOOKS["config"] is not None:
                body = admit(kind, ns, body, self.user_info())
            made = STORE.create(kind, ns, body)
            if kind == "Event":
                with STORE.lock:
                    STORE.events.append(copy.deepcopy(made))
            return self.send_json(201, made)
        if m == "POST" and kind == "Pod" and sub == "binding":
            return self.send_json(201, STORE.bind(ns, name, self.read_body()))
        if sub is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if m == "PUT":
            return self.send_json(200, STORE.update(kind, ns, name, self.read_body()))
        if m == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype != "application/merge-patch+json":
                raise ApiError(415, "UnsupportedMediaType",
                               "the body of the request was in an unknown format - accepted "
                               "media types include: application/merge-patch+json")
            return self.send_json(200, STORE.patch(kind, ns, name, self.read_body()))
        if m == "DELETE":
            return self.send_json(200, STORE.delete(kind, ns, name))
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")

    def chunk(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, kind, ns, q, labels, fields):
        rv = q.get("resourceVersion", "")
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else 1800.0
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
        deadline = time.monotonic() + timeout
        with STORE.lock:
            gen = STORE.watch_gen
            initial = []
            if rv in ("", "0"):
                keys = sorted(k for k in STORE.objs if k[0] == kind and (ns is None or k[1] == ns))
                initial = [copy.deepcopy(STORE.objs[k]) for k in keys
                           if selector_matches(STORE.objs[k], labels, fields)]
                last = STORE.rv
            else:
                try:
                    last = int(rv)
                except ValueError:
                    raise ApiError(400, "BadRequest", "invalid resourceVersion %r" % rv)
                gone = last + 1 < STORE.oldest
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with STORE.lock:
            STORE.requests.append({"method": "GET", "path": self.path, "status": 200})
        try:
            if rv not in ("", "0") and gone:
                self.chunk({"type": "ERROR", "object": status_obj(
                    410, "Expired", "too old resource version: %s (%d)" % (rv, STORE.oldest - 1))})
                return self.end_stream()
            for obj in initial:
                self.chunk({"type": "ADDED", "object": obj})
            next_bookmark = time.monotonic() + ARGS.bookmark_s
            while True:
                out = []
                with STORE.lock:
                    while True:
                        if STORE.watch_gen != gen:
                            return self.end_stream(abrupt=True)
                        now = time.monotonic()
                        if now >= deadline:
                            return self.end_stream()
                        if last + 1 < STORE.oldest:
                            out = [{"type": "ERROR", "object": status_obj(
                                410, "Expired", "too old resource version")}]
                            break
                        pending = [h for h in STORE.history if h[0] > last]
                        if pending or (bookmarks and now >= next_bookmark):
                            break
                        wake = min(deadline, next_bookmark if bookmarks else deadline)
                        STORE.lock.wait(max(0.01, wake - now))
                    for (hrv, typ, hkind, hns, old, new) in pending if not out else []:
                        last = hrv
                        if hkind != kind or (ns is not None and hns != ns):
                            continue
                        was = old is not None and selector_matches(old, labels, fields)
                        now_in = selector_matches(new, labels, fields)
                        if typ == "MODIFIED":
                            if was and not now_in:
                                typ = "DELETED"
                            elif now_in and not was:
                                typ = "ADDED"
                            elif not now_in:
                                continue
                        elif not now_in and typ != "DELETED" or (typ == "DELETED" and not was):
                            continue
                        out.append({"type": typ, "object": new})
                    if not out and bookmarks and time.monotonic() >= next_bookmark:
                        out.append({"type": "BOOKMARK", "object": {
                            "kind": kind, "apiVersion": API_VERSION.get(kind, "v1"),
                            "metadata": {"resourceVersion": str(max(last, 1))}}})
                        next_bookmark = time.monotonic() + ARGS.bookmark_s
                for ev in out:
                    self.chunk(ev)
                    if ev["type"] == "ERROR":
                        return self.end_stream()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def end_stream(self, abrupt=False):
        if not abrupt:
            self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

    # ---- test control -----------------------------------------------------------------
    def control(self):
        p = urlsplit(self.path).path
        if self.command == "GET" and p == "/_test/state":
            with STORE.lock:
                nodes = [v for k, v in sorted(STORE.objs.items()) if k[0] == "Node"]
                pods = [v for k, v in sorted(STORE.objs.items()) if k[0] == "Pod"]
                leases = [v for k, v in sorted(STORE.objs.items()) if k[0] == "Lease"]
                return self.send_json(200, {"resourceVersion": str(STORE.rv), "nodes": nodes,
                                            "pods": pods, "leases": leases})
        if self.command == "GET" and p == "/_test/requests":
            with STORE.lock:
                return self.send_json(200, list(STORE.requests))
        if self.command == "GET" and p == "/_test/events":
            with STORE.lock:
                return self.send_json(200, list(STORE.events))
        if self.command == "GET" and p == "/_test/writes":
            with STORE.lock:
                return self.send_json(200, dict(STORE.writes))
        if self.command == "POST" and p == "/_test/compact":
            self.read_body()
            with STORE.lock:
                STORE.history.clear()
                STORE.oldest = STORE.rv + 1
                STORE.lock.notify_all()
            return self.send_json(200, {"oldest": STORE.oldest})
        if self.command == "POST" and p == "/_test/close-watches":
            self.read_body()
            with STORE.lock:
                STORE.watch_gen += 1
                STORE.lock.notify_all()
            return self.send_json(200, {})
        if self.command == "POST" and p == "/_test/fault":
            f = self.read_body()
            if not isinstance(f, dict):
                raise ApiError(400, "BadRequest", "a fault is a JSON object")
            with STORE.lock:
                STORE.faults.append(f)
            return self.send_json(200, f)
        if self.command == "GET" and p == "/_test/faults":
            with STORE.lock:
                return self.send_json(200, list(STORE.faults))
        if self.command == "POST" and p == "/_test/webhooks":
            cfg = self.read_body()
            check_webhooks(cfg)
            with WEBHOOKS_LOCK:
                WEBHOOKS["config"] = cfg if cfg.get("webhooks") else None
            return self.send_json(200, cfg)
        if self.command == "GET" and p == "/_test/webhooks":
            with WEBHOOKS_LOCK:
                return self.send_json(200, {"config": WEBHOOKS["config"],
                                            "calls": list(WEBHOOKS["calls"])})
        if self.command == "POST" and p == "/_test/clear-faults":
            self.read_body()
            with STORE.lock:
                STORE.faults.clear()
            return self.send_json(200, {})
        raise ApiError(404, "NotFound", "no such test control %s %s" % (self.command, p))


def main():
    global STORE, ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port-file")
    ap.add_argument("--token")
    ap.add_argument("--history", type=int, default=10000)
    ap.add_argument("--bookmark-s", type=float, default=1.0)
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca")
    ARGS = ap.parse_args()
    STORE = Store(ARGS.history)
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.allow_reuse_address = True
    srv = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    if ARGS.tls_cert:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.tls_cert, ARGS.tls_key)
        if ARGS.client_ca:
            ctx.load_verify_locations(ARGS.client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
        # The handshake in the handler's thread, so one bad client holds up no other.
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    port = srv.server_address[1]
    if ARGS.port_file:
        tmp = ARGS.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        import os
        os.rename(tmp, ARGS.port_file)
    print("apiserver stand-in on %s:%d" % (ARGS.host, port), file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
