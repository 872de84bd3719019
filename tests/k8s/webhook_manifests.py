#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gslice-webhook as deploy/ installs it (`kubectl kustomize deploy/overlays/managed`): the
MutatingWebhookConfiguration can block nothing but gslice pods (failurePolicy Fail only with
kube-system and gslice-system left out by its namespaceSelector and a matchCondition on
gslice.io/ resource names; sideEffects None, admissionReviewVersions [v1], a small timeout,
CREATE of pods only); it calls the Service on /mutate, whose port reaches the container's;
the container serves HTTPS with the certificate and key of the Secret cert-manager's
Certificate writes, for the Service's DNS name, with probes on /healthz over HTTPS; the
caBundle is cert-manager's (inject-ca-from names that Certificate). The kubeadm overlay has no
webhook. Where a CEL evaluator is at hand (GSLICE_CEL_JS, as for deploy.node_guard) the
matchCondition is run on pods (tests/deploy/celpolicy.py, each condition alone): true exactly
for those naming a gslice.io/ resource in a container's or init container's requests or
limits. Skipped (77) without kubectl or python3-yaml; the CEL part skipped (77 when all else
passed) without the evaluator."""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import celpolicy  # noqa: E402 (it skips, 77, without python3-yaml)

SRC = os.environ.get("GSLICE_SRC") or sys.exit("run through ctest (make test)")
if not shutil.which("kubectl"):
    print("SKIP: no kubectl (kubectl kustomize renders the overlays)")
    sys.exit(77)
NS = "gslice-system"
SVC_DNS = "gslice-webhook.gslice-system.svc"
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
    return cond


def render(rel):
    try:
        docs = celpolicy.render(os.path.join(SRC, "deploy", rel))
    except RuntimeError as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def arg_after(c, flag):
    words = c.get("command", []) + c.get("args", [])
    return next((words[i + 1] for i, w in enumerate(words[:-1]) if w == flag), None)


def check_config(mwc):
    hooks = mwc.get("webhooks", [])
    if not check(len(hooks) == 1, "%d webhooks" % len(hooks)):
        return None
    h = hooks[0]
    check(h.get("admissionReviewVersions") == ["v1"], "admissionReviewVersions %s" %
          h.get("admissionReviewVersions"))
    check(h.get("sideEffects") == "None", "sideEffects %s" % h.get("sideEffects"))
    check(0 < h.get("timeoutSeconds", 10) <= 10, "timeoutSeconds %s" % h.get("timeoutSeconds"))
    rules = h.get("rules", [])
    check(rules == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                     "resources": ["pods"], "scope": "Namespaced"}], "rules %s" % rules)
    if h.get("failurePolicy", "Fail") == "Fail":
        out = set()
        for e in h.get("namespaceSelector", {}).get("matchExpressions", []):
            if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn":
                out |= set(e["values"])
        check({"kube-system", NS} <= out, "failurePolicy Fail, and the namespaceSelector leaves "
              "out only %s (kube-system and %s must be)" % (sorted(out), NS))
        check(h.get("matchConditions"), "failurePolicy Fail with no matchConditions: every pod "
              "created would wait on the webhook")
    svc = h.get("clientConfig", {}).get("service", {})
    check(svc.get("name") == "gslice-webhook" and svc.get("namespace") == NS and
          svc.get("path") == "/mutate", "clientConfig.service %s" % svc)
    check("url" not in h.get("clientConfig", {}), "clientConfig.url given")
    return h


def check_serving(objs, hook):
    svc = objs.get(("Service", "gslice-webhook"))
    dep = objs.get(("Deployment", "gslice-webhook"))
    if not (check(svc, "no Service gslice-webhook") and check(dep, "no Deployment gslice-webhook")):
        return
    spec = dep["spec"]["template"]["spec"]
    c = spec["containers"][0]
    check(c["command"][0].endswith("/gslice-webhook"), "container runs %s" % c["command"])
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    want_port = hook["clientConfig"]["service"].get("port", 443)
    sp = next((p for p in svc["spec"]["ports"] if p["port"] == want_port), None)
    if check(sp, "the Service has no port %s" % want_port):
        tp = sp.get("targetPort", sp["port"])
        check(tp in ports or tp in ports.values(), "Service targetPort %s, container ports %s"
              % (tp, ports))
        listen = arg_after(c, "--listen") or "8443"
        check(int(listen.rsplit(":", 1)[-1]) == ports.get(tp, tp),
              "--listen %s is not the Service's target %s" % (listen, tp))
    check(all(svc["spec"]["selector"].get(k) == v for k, v in svc["spec"]["selector"].items()) and
          all(dep["spec"]["template"]["metadata"]["labels"].get(k) == v
              for k, v in svc["spec"]["selector"].items()), "the Service selects no webhook pod")
    for probe in ("readinessProbe", "livenessProbe"):
        g = c.get(probe, {}).get("httpGet", {})
        check(g.get("path") == "/healthz" and g.get("scheme") == "HTTPS",
              "%s %s: GET /healthz over HTTPS" % (probe, g))
    check(dep["spec"].get("replicas", 1) >= 2, "one webhook replica: a restart blocks gslice pods")
    # The certificate: the Secret the Certificate writes is what --tls-cert/--tls-key read.
    cert = objs.get(("Certificate", "gslice-webhook"))
    inject = objs[("MutatingWebhookConfiguration", "gslice-webhook")]["metadata"].get(
        "annotations", {}).get("cert-manager.io/inject-ca-from")
    check(inject == "%s/gslice-webhook" % NS, "cert-manager.io/inject-ca-from %s" % inject)
    if not check(cert, "no Certificate gslice-webhook"):
        return
    check(SVC_DNS in cert["spec"].get("dnsNames", []), "the certificate's names %s lack %s" %
          (cert["spec"].get("dnsNames"), SVC_DNS))
    issuer = cert["spec"]["issuerRef"]
    check((issuer.get("kind", "Issuer"), issuer["name"]) in objs, "issuer %s not made" % issuer)
    vol = next((v for v in spec.get("volumes", []) if v.get("secret", {}).get("secretName") ==
                cert["spec"]["secretName"]), None)
    if check(vol, "no volume of Secret %s" % cert["spec"]["secretName"]):
        mount = next(m for m in c["volumeMounts"] if m["name"] == vol["name"])["mountPath"]
        for flag, key in (("--tls-cert", "tls.crt"), ("--tls-key", "tls.key")):
            check(arg_after(c, flag) == mount.rstrip("/") + "/" + key,
                  "%s %s, the Secret is at %s" % (flag, arg_after(c, flag), mount))


def pod(ctrs, init=None):
    spec = {"containers": [{"name": "c%d" % i, "image": "x", **({"resources": r} if r is not None
                                                                  else {})}
                           for i, r in enumerate(ctrs)]}
    if init is not None:
        spec["initContainers"] = [{"name": "i%d" % i, "image": "x", "resources": r}
                                  for i, r in enumerate(init)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "team"}, "spec": spec}


GPU = {"gslice.io/gpu": "1", "gslice.io/gpu-memory": "1Gi"}
CASES = [
    ("gslice limits", pod([{"limits": GPU}]), True),
    ("gslice requests in the second container", pod([{}, {"requests": GPU}]), True),
    ("gslice in an init container only", pod([None], init=[{"requests": GPU}]), True),
    ("an unknown gslice.io/ name (the webhook denies it)",
     pod([{"limits": {"gslice.io/gpus": "1"}}]), True),
    ("no resources at all", pod([None]), False),
    ("cpu and nvidia.com/gpu", pod([{"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}]), False),
    ("empty requests and limits, an init container without gslice",
     pod([{"requests": {}, "limits": {}}], init=[{"limits": {"memory": "1Gi"}}]), False),
    ("a name merely containing gslice.io", pod([{"limits": {"example.com/gslice.io": "1"}}]),
     False),
]

def check_cel(hook):
    if not celpolicy.evaluator():
        print("SKIP (part): the matchCondition's " + celpolicy.SKIP_CEL)
        return False
    try:
        results = celpolicy.match_conditions(hook["matchConditions"], [
            celpolicy.request("CREATE", c[1]) for c in CASES])
    except RuntimeError as e:
        check(False, str(e))
        return True
    for (what, _, want), got in zip(CASES, results):
        check(all(g in (True, False) for g in got), "%s: %s" % (what, got))
        check(all(got) == want, "%s: the matchConditions give %s, want %s" % (what, got, want))
    print("PASS: the matchCondition on %d pods: true exactly for the gslice ones" % len(CASES))
    return True


managed = render("overlays/managed")
mwc = managed.get(("MutatingWebhookConfiguration", "gslice-webhook"))
ran_cel = False
if check(mwc, "overlays/managed: no MutatingWebhookConfiguration gslice-webhook"):
    hook = check_config(mwc)
    if hook:
        check_serving(managed, hook)
        ran_cel = check_cel(hook)
kubeadm = render("overlays/kubeadm")
check(not any(k == "MutatingWebhookConfiguration" for k, _ in kubeadm),
      "overlays/kubeadm has a webhook, but no gslice-scheduler to send pods to")

if failures:
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    sys.exit(1)
print("PASS: the webhook's configuration, Service, Deployment and certificate agree")
sys.exit(0 if ran_cel else 77)
