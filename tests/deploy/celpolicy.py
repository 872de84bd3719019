# SPDX-License-Identifier: Apache-2.0
"""The one CEL harness of the admission-policy tests (deploy.node_guard, deploy.lease_guard,
deploy.resourceslice_guard, k8s.ext_forge_policy, k8s.webhook_manifests): a
ValidatingAdmissionPolicy, loaded from a YAML file or a rendered manifest (`kubectl
kustomize`), decides a list of requests the way the API server does, and each test says which
of them it must allow and which deny, and why; match_conditions() runs a webhook
configuration's matchConditions the same way.

The CEL runs in node with the npm package @marcbachmann/cel-js, found through GSLICE_CEL_JS
(the directory holding its node_modules: CMakeLists.txt sets it where scripts/celjs.sh
fetched it); evaluator() is None without it, and the test then skips its CEL part.

What the API server does and this does too, per request:
- matchConstraints: the request's operation (and its resource, where the case names one)
  must be in a resourceRule and in no excludeResourceRule, else the policy is not matched;
- matchConditions, in order, without `variables`: one false -- not matched; else one error --
  failurePolicy (Fail: denied, Ignore: allowed);
- variables, lazily: each evaluated once, where an expression first names it, seeing only
  the variables declared before it; its error is the error of what uses it;
- every validation: false -- a refusal with its messageExpression's string (unless that fails,
  is blank or has a line break), else its message, else "failed expression: ..."; an error --
  failurePolicy; the binding denies only with validationActions Deny;
- `request` with operation, name, namespace, userInfo (username, groups, extra: a map of
  lists, absent for a token without extras), `oldObject` null on CREATE, `object` null on
  DELETE, `namespaceObject` for a namespaced request.
Not done: namespaceSelector, objectSelector, paramKind/params, authorizer, the OpenAPI types
(objects are plain JSON maps, so has() on a null object is false, where the API server
would say more)."""
import json
import os
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("SKIP: no python3-yaml for " + sys.executable)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP_CEL = ("CEL evaluation (set GSLICE_CEL_JS to a directory with "
            "node_modules/@marcbachmann/cel-js)")
ALLOWED, DENIED, UNMATCHED = "allowed", "denied", "not matched"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def deploy_dir():
    """deploy/ of the tree under test: GSLICE_DEPLOY_DIR, else GSLICE_SRC's (ctest sets it)."""
    src = os.environ.get("GSLICE_SRC") or sys.exit("run through ctest (make test)")
    return os.environ.get("GSLICE_DEPLOY_DIR") or os.path.join(src, "deploy")


def objects(path):
    """The objects of a YAML file (empty documents left out)."""
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def writes(role, resource):
    """The operations (CREATE, UPDATE, DELETE; * for every verb) a Role's or ClusterRole's
    rules grant on resource: what a guard of it must match."""
    verb_op = {"create": "CREATE", "update": "UPDATE", "patch": "UPDATE", "delete": "DELETE",
               "deletecollection": "DELETE", "*": "*"}
    return {verb_op[v] for r in role["rules"] if resource in r["resources"] or
            "*" in r["resources"] for v in r["verbs"] if v in verb_op}


def evaluator():
    """(node, GSLICE_CEL_JS) where both are at hand, else None."""
    cel_dir = os.environ.get("GSLICE_CEL_JS")
    nodejs = shutil.which("node")
    if cel_dir and nodejs and os.path.isdir(os.path.join(cel_dir, "node_modules", "@marcbachmann",
                                                         "cel-js")):
        return nodejs, cel_dir
    return None


def render(kustomization):
    """The objects `kubectl kustomize DIR` renders; None without kubectl. Raises RuntimeError
    (with kubectl's words) when it refuses."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None
    p = subprocess.run([kubectl, "kustomize", kustomization], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    if p.returncode:
        raise RuntimeError("kubectl kustomize %s: %s" % (kustomization, p.stderr.decode()))
    return [d for d in yaml.safe_load_all(p.stdout) if d]


class Policy:
    """A ValidatingAdmissionPolicy and the binding that names it (None where there is none)."""

    def __init__(self, source, name=None):
        """source: a YAML file's path, or the objects of a rendered manifest; name: the
        policy's, where there is more than one."""
        source = objects(source) if isinstance(source, str) else [d for d in source if d]
        pols = [d for d in source if d.get("kind") == "ValidatingAdmissionPolicy" and
                (name is None or d["metadata"]["name"] == name)]
        if len(pols) != 1:
            raise ValueError("%d ValidatingAdmissionPolicies%s in %s" % (
                len(pols), " named " + name if name else "", [d.get("kind") for d in source]))
        self.policy = pols[0]
        self.name = self.policy["metadata"]["name"]
        self.spec = self.policy["spec"]
        self.binding = next((d for d in source
                             if d.get("kind") == "ValidatingAdmissionPolicyBinding" and
                             d["spec"].get("policyName") == self.name), None)

    def problems(self, account=None):
        """What is wrong with it as a guard: GA v1, failurePolicy Fail, a binding (v1) that
        names it with validationActions [Deny], and (account given) a matchCondition naming
        the account. One line each; none when all is well."""
        b = self.binding
        bad = ["apiVersion %s" % d["apiVersion"] for d in (self.policy, b)
               if d and d["apiVersion"] != "admissionregistration.k8s.io/v1"]
        if self.spec.get("failurePolicy") != "Fail":
            bad.append("failurePolicy %s" % self.spec.get("failurePolicy"))
        if not b or b["spec"].get("validationActions") != ["Deny"]:
            bad.append("binding %s" % (b and b["spec"]))
        if account and not any(account in c["expression"]
                               for c in self.spec.get("matchConditions", [])):
            bad.append("matchConditions do not name %s" % account)
        return bad

    def matches(self, req):
        """matchConstraints on the request's operation and (where given) resource."""
        mc = self.spec.get("matchConstraints", {})
        return (any(_rule_covers(r, req) for r in mc.get("resourceRules", [])) and
                not any(_rule_covers(r, req) for r in mc.get("excludeResourceRules", [])))

    def evaluate(self, cases):
        """A Result for each case (from request()), in order. Raises RuntimeError when node
        fails, ValueError without an evaluator."""
        ev = evaluator()
        if not ev:
            raise ValueError(SKIP_CEL)
        nodejs, cel_dir = ev
        todo = [c for c in cases if self.matches(c["request"])]
        p = subprocess.run([nodejs, os.path.join(HERE, "celpolicy.mjs"), cel_dir],
                           input=json.dumps({"spec": self.spec, "cases": todo}).encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        if p.returncode:
            raise RuntimeError("CEL evaluation: %s" % p.stdout.decode())
        raw = iter(json.loads(p.stdout))
        return [Result(self, next(raw)) if self.matches(c["request"]) else
                Result(self, {"match": False, "validations": []}) for c in cases]

    def check(self, cases):
        """cases: (what, request(), want, word): want ALLOWED/True, DENIED/False or UNMATCHED;
        word: None, or what a refusal's message must say. Returns the failures, one line each
        (an evaluation error is one, whatever was wanted: a refusal must come from a rule)."""
        bad = []
        for (what, _, want, word), r in zip(cases, self.evaluate([c[1] for c in cases])):
            want = {True: ALLOWED, False: DENIED}.get(want, want)
            if r.errors:
                bad.append("%s: %s" % (what, "; ".join(r.errors)))
            elif r.verdict != want:
                bad.append("%s: %s, want %s (%s)" % (what, r.verdict, want, r.message or
                                                      "every validation true"))
            elif word and word not in (r.message or ""):
                bad.append("%s: refused with %r, which does not say %r" % (what, r.message, word))
        return bad


def verify(policy, cases):
    """A guard test's end: its cases checked and reported (report()), or, without an
    evaluator, said so and skipped (77)."""
    if not evaluator():
        print("SKIP (part): " + SKIP_CEL)
        sys.exit(77)
    report(policy.check(cases), len(cases))


def report(bad, n):
    """Prints the failures check() found and exits 1 if there are any; else says n passed."""
    for b in bad:
        print("FAIL: " + b, file=sys.stderr)
    if bad:
        sys.exit(1)
    print("PASS: CEL: %d cases, each allowed, denied or not matched as it should be, with its "
          "reason" % n)


def match_conditions(conditions, cases):
    """Each of conditions (a webhook configuration's matchConditions, which the API server
    evaluates as a policy's) on each case (from request()), each condition alone, so that a
    false one does not hide another's error: for each case, a list with, for each condition,
    True, False or "error: ...". Raises as Policy.evaluate does."""
    every = {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}
    out = [[] for _ in cases]
    for cond in conditions:
        alone = Policy([{"kind": "ValidatingAdmissionPolicy", "metadata": {"name": cond["name"]},
                         "spec": {"matchConstraints": {"resourceRules": [every]},
                                  "matchConditions": [cond]}}])
        for got, r in zip(out, alone.evaluate(cases)):
            got.append("error: " + "; ".join(r.errors) if r.errors else r.matched)
    return out


def _rule_covers(rule, req):
    def has(key, value):
        return value is None or any(v in ("*", "*/*", value) for v in rule.get(key, []))

    res = req.get("resource") or {}
    return (has("operations", req["operation"]) and has("apiGroups", res.get("group")) and
            has("apiVersions", res.get("version")) and has("resources", res.get("resource")))


class Result:
    """matched, verdict (ALLOWED, DENIED, UNMATCHED), message and reason of the refusal (the
    first failed validation's), failed (every refusal's message), errors (evaluation errors)."""

    def __init__(self, policy, raw):
        ignore = policy.spec.get("failurePolicy", "Fail") == "Ignore"
        deny = policy.binding is None or "Deny" in policy.binding["spec"].get("validationActions",
                                                                               [])
        self.matched = raw["match"] is not False
        self.errors, self.failed, self.reason = [], [], None
        if isinstance(raw["match"], dict):
            self.errors.append(raw["match"]["error"])
            if not ignore:
                self.failed.append("failed to evaluate the matchConditions: " +
                                   raw["match"]["error"])
        for i, v in enumerate(raw["validations"]):
            if "error" in v:
                self.errors.append("validation %d: %s" % (i, v["error"]))
                if not ignore:
                    self.failed.append("validation %d resulted in error: %s" % (i, v["error"]))
            elif not v["ok"]:
                self.failed.append(v["message"])
                self.reason = self.reason or v["reason"]
        self.message = self.failed[0] if self.failed else None
        self.verdict = (UNMATCHED if not self.matched else
                        DENIED if self.failed and deny else ALLOWED)


def user(name, nodes=("node-a",), pod="gslice-x", groups=("system:serviceaccounts",)):
    """A request's userInfo: a service account token bound to pod on the nodes (its
    authentication.kubernetes.io/node-name extra: one name for a pod's projected token; () --
    extras without it; None -- no extras at all, as for a legacy token or a user)."""
    u = {"username": name, "groups": list(groups)}
    if nodes is not None:
        extra = {"authentication.kubernetes.io/pod-name": [pod]}
        if nodes:
            extra["authentication.kubernetes.io/node-name"] = list(nodes)
        u["extra"] = extra
    return u


def request(op, obj=None, old=None, userinfo=None, resource=None):
    """One case: operation op on obj (the object written; None for DELETE) over old (the
    object before; None for CREATE), by userinfo (default: a plain user), on resource
    (group, version, resource) where matchConstraints is to be checked on it too."""
    if (obj is None) != (op == "DELETE") or (old is None) != (op == "CREATE"):
        raise ValueError("%s wants %s" % (op, {"CREATE": "an object and no oldObject",
                                               "UPDATE": "an object and an oldObject",
                                               "DELETE": "an oldObject and no object"}.get(
                                                   op, "CREATE, UPDATE or DELETE")))
    meta = (obj or old).get("metadata", {})
    ns = meta.get("namespace", "")
    r = {"operation": op, "name": meta.get("name", ""), "namespace": ns,
         "userInfo": userinfo or {"username": "jane", "groups": ["system:authenticated"]}}
    if resource:
        r["resource"] = dict(zip(("group", "version", "resource"), resource))
    return {"request": r, "object": obj, "oldObject": old,
            "namespaceObject": {"metadata": {"name": ns}} if ns else None}


def _selftest():
    """deploy.celpolicy: the harness itself, on a made-up policy, does what the docstring says."""
    def pol(failure="Fail", actions=("Deny",)):
        return Policy([{"kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"}, "spec": {
            "failurePolicy": failure,
            "matchConstraints": {"resourceRules": [{"apiGroups": ["g"], "apiVersions": ["*"],
                                                    "operations": ["CREATE", "DELETE"],
                                                    "resources": ["things"]}]},
            "matchConditions": [{"name": "m", "expression": "request.userInfo.username != 'x'"},
                                {"name": "e", "expression": "request.userInfo.username != 'e' "
                                 "|| object.nope"}],
            "variables": [{"name": "early", "expression": "variables.second"},
                          {"name": "broken", "expression": "object.nope"},
                          {"name": "first", "expression": "request.name"},
                          {"name": "second", "expression": "variables.first + '!'"}],
            "validations": [
                {"expression": "object == null || object.v != 0", "message": "v must not be 0"},
                {"expression": "oldObject == null || variables.second == 'a!'",
                 "messageExpression": "'not ' + variables.second", "message": "unused"},
                {"expression": "object == null || object.v != 2",
                 "messageExpression": "'two\\nlines'", "message": "no 2"},
                {"expression": "object == null || object.v != 3"},
                {"expression": "object == null || object.v != 4 || variables.broken"},
                {"expression": "object == null || object.v != 5 || variables.early == 'a!'"}]}},
            {"kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"},
             "spec": {"policyName": "p", "validationActions": list(actions)}}])

    def thing(name="a", v=1):
        return {"metadata": {"name": name}, "v": v}

    jane = user("jane", None)
    res = ("g", "v1", "things")
    cases = [  # (what, request, verdict, message)
        ("a good thing (the broken variable unused)", request("CREATE", thing(), None, jane, res),
         ALLOWED, None),
        ("v 0", request("CREATE", thing(v=0), None, jane, res), DENIED, "v must not be 0"),
        ("a messageExpression", request("DELETE", None, thing("b"), jane, res), DENIED, "not b!"),
        ("a two-line messageExpression", request("CREATE", thing(v=2), None, jane, res), DENIED,
         "no 2"),
        ("no message", request("CREATE", thing(v=3), None, jane, res), DENIED,
         "failed expression: object == null || object.v != 3"),
        ("an operation not matched", request("UPDATE", thing(), thing(), jane, res), UNMATCHED,
         None),
        ("a resource not matched", request("CREATE", thing(v=0), None, jane, ("g", "v1", "x")),
         UNMATCHED, None),
        ("a matchCondition false", request("CREATE", thing(v=0), None, user("x", None), res),
         UNMATCHED, None),
    ]
    bad = pol().check(cases)
    for what, case, want in [
            ("a variable's error", request("CREATE", thing(v=4), None, jane, res), DENIED),
            ("a variable naming a later one", request("CREATE", thing(v=5), None, jane, res),
             DENIED),
            ("a matchCondition's error", request("CREATE", thing(), None, user("e", None), res),
             DENIED)]:
        r = pol().evaluate([case])[0]
        if r.verdict != want or not r.errors:
            bad.append("%s: %s, errors %s" % (what, r.verdict, r.errors))
        r = pol("Ignore").evaluate([case])[0]
        if r.verdict != ALLOWED:
            bad.append("%s, failurePolicy Ignore: %s" % (what, r.verdict))
    r = pol(actions=("Warn",)).evaluate([cases[1][1]])[0]
    if r.verdict != ALLOWED or r.message != "v must not be 0":
        bad.append("a Warn binding: %s (%s)" % (r.verdict, r.message))
    report(bad, len(cases) + 7)


if __name__ == "__main__":
    if not evaluator():
        print("SKIP: " + SKIP_CEL)
        sys.exit(77)
    _selftest()
