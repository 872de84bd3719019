#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/ as kubectl applies it (issue 18): `kubectl kustomize` renders deploy/ (the default),
deploy/overlays/managed, deploy/overlays/kubeadm and deploy/monitoring, and the rendered objects
are what an operator relies on: the kinds and names, everything in gslice-system, images from
a registry with a tag, requests and limits, probes on ports the containers declare, the node
agent's OnDelete update, PriorityClass, tolerations and node affinity, least-privilege RBAC
(the verbs the programs call, no wildcard; every API resource named in src/k8s/node and
src/k8s/extender has a rule in its ClusterRole and every rule a call), the node agent's host
paths, the second scheduler's profile gslice-scheduler, its lease and its extender on
loopback, the kubeadm path's kubeconfig and loopback URL, a PDB, and the monitoring objects. Skipped (77) without kubectl or python3-yaml."""
import json
import os
import shutil
import subprocess
import sys
from urllib.parse import urlparse

try:
    import yaml
except ImportError:
    print("SKIP: no python3-yaml for /usr/bin/python3 (apt-get install python3-yaml)")
    sys.exit(77)

SRC = os.environ.get("GSLICE_SRC") or sys.exit("run through ctest (make test)")
DEPLOY = os.environ.get("GSLICE_DEPLOY_DIR") or os.path.join(SRC, "deploy")
KUBECTL = shutil.which("kubectl")
if not KUBECTL:
    print("SKIP: no kubectl (kubectl kustomize renders the overlays)")
    sys.exit(77)

NS = "gslice-system"
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
    return cond


def render(rel):
    p = subprocess.run([KUBECTL, "kustomize", os.path.join(DEPLOY, rel)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        print("FAIL: kubectl kustomize deploy/%s: %s" % (rel, p.stderr.decode()), file=sys.stderr)
        sys.exit(1)
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def index(docs):
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def one(objs, kind, name_prefix):
    got = [o for (k, n), o in objs.items() if k == kind and n.startswith(name_prefix)]
    check(len(got) == 1, "%s %s*: %d found" % (kind, name_prefix, len(got)))
    return got[0] if got else None


def pod_spec(o):
    return o["spec"]["template"]["spec"]


def containers(spec):
    return spec.get("initContainers", []) + spec["containers"]


def arg_after(c, flag):
    words = c.get("command", []) + c.get("args", [])
    for i, w in enumerate(words):
        if w == flag and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(flag + "="):
            return w.split("=", 1)[1]
    return None


def port_of(listen):
    """The port of a --listen / --metrics-listen value: PORT, HOST:PORT, [v6]:PORT."""
    return int(listen.rsplit(":", 1)[-1])


def rules_of(role):
    out = {}
    for r in role.get("rules", []):
        for g in r.get("apiGroups", []):
            for res in r["resources"]:
                key = (g, res, tuple(r.get("resourceNames", [])))
                out.setdefault(key, set()).update(r["verbs"])
    return out


BASE = {("Namespace", NS), ("ResourceQuota", "gslice-critical-pods"),
        ("ServiceAccount", "gslice-node"), ("ClusterRole", "gslice-node"),
        ("ClusterRoleBinding", "gslice-node"), ("DaemonSet", "gslice-node"),
        ("ClusterRole", "gslice-extender"),
        ("Role", "gslice-node"), ("RoleBinding", "gslice-node"), ("Role", "gslice-extender"),
        ("ValidatingAdmissionPolicy", "gslice-assignment-guard"),
        ("ValidatingAdmissionPolicyBinding", "gslice-assignment-guard"),
        ("ValidatingAdmissionPolicy", "gslice-node-guard"),
        ("ValidatingAdmissionPolicyBinding", "gslice-node-guard"),
        ("ValidatingAdmissionPolicy", "gslice-lease-guard"),
        ("ValidatingAdmissionPolicyBinding", "gslice-lease-guard")}
MANAGED = BASE | {
    ("ServiceAccount", "gslice-scheduler"), ("Deployment", "gslice-scheduler"),
    ("ConfigMap", "gslice-scheduler-config"), ("PodDisruptionBudget", "gslice-scheduler"),
    ("Service", "gslice-extender-metrics"), ("Role", "gslice-scheduler-lease"),
    ("RoleBinding", "gslice-scheduler-lease"),
    ("RoleBinding", "gslice-scheduler-authentication-reader"),
    ("ClusterRoleBinding", "gslice-scheduler-as-kube-scheduler"),
    ("ClusterRoleBinding", "gslice-scheduler-as-volume-scheduler"),
    ("ClusterRoleBinding", "gslice-scheduler-as-extender"),
    ("RoleBinding", "gslice-scheduler-as-extender"),
    ("ServiceAccount", "gslice-webhook"), ("Deployment", "gslice-webhook"),
    ("Service", "gslice-webhook"), ("PodDisruptionBudget", "gslice-webhook"),
    ("MutatingWebhookConfiguration", "gslice-webhook"),
    ("Issuer", "gslice-webhook-selfsigned"), ("Certificate", "gslice-webhook")}
KUBEADM = BASE | {
    ("ServiceAccount", "gslice-extender"), ("ClusterRoleBinding", "gslice-extender"),
    ("RoleBinding", "gslice-extender"), ("DaemonSet", "gslice-extender"), ("PodDisruptionBudget", "gslice-extender")}


def check_names(objs, want, where):
    """The objects, by kind and name (a generated ConfigMap's hash suffix left out)."""
    got = set()
    for kind, name in objs:
        if kind == "ConfigMap" and name.startswith("gslice-scheduler-config-"):
            name = "gslice-scheduler-config"
        got.add((kind, name))
    check(got == want, "%s: objects missing %s, unexpected %s" %
          (where, sorted(want - got), sorted(got - want)))


def check_common(objs, where):
    """What every install has: namespace, node agent, RBAC, policies, images, resources, probes."""
    nsobj = objs.get(("Namespace", NS))
    if check(nsobj, "%s: no Namespace %s" % (where, NS)):
        labels = nsobj["metadata"].get("labels", {})
        check(labels.get("pod-security.kubernetes.io/enforce") == "privileged",
              "%s: the namespace's PodSecurity enforce level is %s; the node agent needs privileged"
              % (where, labels.get("pod-security.kubernetes.io/enforce")))
    check_objects(objs, where)
    check_node_agent(objs, where)


def check_objects(objs, where):
    """Every object: its namespace, the part-of label, bound service accounts made here, no
    wildcard rights, and each workload's containers, service account and volumes."""
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                      "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                      "MutatingWebhookConfiguration", "DeviceClass"}
    for (kind, name), o in objs.items():
        ns = o["metadata"].get("namespace")
        if kind in cluster_scoped:
            check(ns is None, "%s: %s %s is cluster-scoped but names namespace %s" %
                  (where, kind, name, ns))
        elif (kind, name) == ("RoleBinding", "gslice-scheduler-authentication-reader"):
            check(ns == "kube-system", "%s: %s %s in %s, not kube-system" % (where, kind, name, ns))
        else:
            check(ns == NS, "%s: %s %s in namespace %s, not %s" % (where, kind, name, ns, NS))
        check(o["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "gslice",
              "%s: %s %s lacks app.kubernetes.io/part-of=gslice" % (where, kind, name))
        for sub in o.get("subjects", []) or []:
            if sub.get("kind") == "ServiceAccount":
                check(("ServiceAccount", sub["name"]) in objs and sub.get("namespace") == NS,
                      "%s: %s %s binds service account %s/%s, which this install does not make"
                      % (where, kind, name, sub.get("namespace"), sub["name"]))
        for rule in o.get("rules", []) if kind in ("ClusterRole", "Role") else []:
            for field in ("apiGroups", "resources", "verbs"):
                check("*" not in rule.get(field, []), "%s: %s %s has a wildcard in %s" %
                      (where, kind, name, field))
        if kind in ("Deployment", "DaemonSet"):
            spec = pod_spec(o)
            check(("ServiceAccount", spec.get("serviceAccountName")) in objs,
                  "%s: %s %s runs as service account %s, not made here" %
                  (where, kind, name, spec.get("serviceAccountName")))
            for c in containers(spec):
                check_container(where, "%s %s/%s" % (kind, name, c["name"]), c,
                                init=c in spec.get("initContainers", []))
            for v in spec.get("volumes", []):
                if "secret" in v:
                    check(v["secret"]["secretName"] in ("gslice-signing", "gslice-webhook-tls"),
                          "%s: %s mounts Secret %s" % (where, name, v["secret"]["secretName"]))
                if "configMap" in v:
                    check(("ConfigMap", v["configMap"]["name"]) in objs,
                          "%s: %s mounts ConfigMap %s, not made here" %
                          (where, name, v["configMap"]["name"]))


def check_node_agent(objs, where):
    """The device-plugin node agent, its rights and the policies that narrow them."""
    ds = objs.get(("DaemonSet", "gslice-node"))
    if check(ds, "%s: no DaemonSet gslice-node" % where):
        spec = pod_spec(ds)
        check(ds["spec"].get("updateStrategy", {}).get("type") == "OnDelete",
              "%s: gslice-node's updateStrategy is %s: a rolling update restarts gsliced under "
              "running workloads" % (where, ds["spec"].get("updateStrategy")))
        check(spec.get("priorityClassName") == "system-node-critical",
              "%s: gslice-node's priorityClassName %s" % (where, spec.get("priorityClassName")))
        check(spec.get("hostPID") is True, "%s: gslice-node without hostPID" % where)
        tol = {(t.get("key"), t.get("value"), t.get("effect")) for t in spec.get("tolerations", [])}
        check(("nvidia.com/gpu", None, "NoSchedule") in tol, "%s: no nvidia.com/gpu toleration: %s"
              % (where, tol))
        check(("sku", "gpu", "NoSchedule") in tol, "%s: no toleration of AKS's sku=gpu: %s" %
              (where, tol))
        check("nodeSelector" not in spec, "%s: a nodeSelector on the node agent (%s) requires "
              "every label it names; the affinity's terms are alternatives" %
              (where, spec.get("nodeSelector")))
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        keys = {e["key"] for t in terms for e in t["matchExpressions"]}
        check({"nvidia.com/gpu.present", "gslice.io/gpu-node"} <= keys,
              "%s: the node affinity must take nodes with GPU feature discovery's label and, "
              "without the GPU operator, gslice.io/gpu-node: %s" % (where, keys))
        check(all(len([e for e in t["matchExpressions"] if e["operator"] in ("In", "Exists")])
                  == 1 for t in terms),
              "%s: each node affinity term must ask for one label (terms are ORed, expressions "
              "ANDed)" % where)
        check(all({"key": "gslice.io/mode", "operator": "NotIn", "values": ["dra"]} in
                  t["matchExpressions"] for t in terms),
              "%s: a node affinity term without gslice.io/mode NotIn [dra]: the device-plugin "
              "agent would run beside the DRA one (one mode per node)" % where)
        names = [c["name"] for c in spec["containers"]]
        check(names == ["gsliced", "gslice-node"], "%s: node containers %s" % (where, names))
        check_node_paths(where, spec)
        for c in spec["containers"]:
            if c["name"] == "gsliced":
                check("livenessProbe" in c and "readinessProbe" in c,
                      "%s: gsliced without liveness and readiness probes" % where)
                m = arg_after(c, "--metrics")
                check(m and any(p["containerPort"] == port_of(m) for p in c.get("ports", [])),
                      "%s: gsliced's --metrics %s is not a port it declares" % (where, m))
            if c["name"] == "gslice-node":
                check("livenessProbe" in c and "readinessProbe" in c,
                      "%s: gslice-node without liveness and readiness probes" % where)
                h = arg_after(c, "--health-listen")
                check(h and any(p["containerPort"] == port_of(h) for p in c.get("ports", [])),
                      "%s: gslice-node's --health-listen %s is not a port it declares" % (where, h))
                check(c.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/readyz",
                      "%s: gslice-node's readiness is not its /readyz" % where)
    role = objs.get(("ClusterRole", "gslice-node"))
    if check(role, "%s: no ClusterRole gslice-node" % where):
        want = {("", "nodes", ()): {"patch"}, ("", "pods", ()): {"list", "watch"},
                ("", "events", ()): {"create", "patch"}}
        check(rules_of(role) == want, "%s: gslice-node's rights %s, want %s (what src/k8s/node "
              "calls: PATCH its node, list+watch pods of its node, create Events and patch their count)"
              % (where, rules_of(role), want))
    role = objs.get(("Role", "gslice-node"))
    if check(role, "%s: no Role gslice-node" % where):
        want = {("coordination.k8s.io", "leases", ()): {"get", "create", "update"}}
        check(rules_of(role) == want and role["metadata"]["namespace"] == NS,
              "%s: gslice-node's Lease rights %s, want %s in %s (its liveness Lease)"
              % (where, rules_of(role), want, NS))
    role = objs.get(("Role", "gslice-extender"))
    if check(role, "%s: no Role gslice-extender" % where):
        want = {("coordination.k8s.io", "leases", ()): {"list", "watch"}}
        check(rules_of(role) == want and role["metadata"]["namespace"] == NS,
              "%s: gslice-extender's Lease rights %s, want %s in %s (the nodes' Leases)"
              % (where, rules_of(role), want, NS))
    role = objs.get(("ClusterRole", "gslice-extender"))
    if check(role, "%s: no ClusterRole gslice-extender" % where):
        want = {("", "nodes", ()): {"get", "list", "watch"},
                ("", "pods", ()): {"get", "list", "watch"},
                ("", "pods/binding", ()): {"create"}, ("", "events", ()): {"create", "patch"}}
        check(rules_of(role) == want, "%s: gslice-extender's rights %s, want %s" %
              (where, rules_of(role), want))
    crb = objs.get(("ClusterRoleBinding", "gslice-node"))
    check(crb and crb["roleRef"]["name"] == "gslice-node" and
          [(s["name"], s["namespace"]) for s in crb["subjects"]] == [("gslice-node", NS)],
          "%s: ClusterRoleBinding gslice-node %s" % (where, crb))
    for pol in ("gslice-assignment-guard", "gslice-node-guard", "gslice-lease-guard"):
        check(("ValidatingAdmissionPolicy", pol) in objs and
              objs.get(("ValidatingAdmissionPolicyBinding", pol), {}).get("spec", {}).get(
                  "policyName") == pol, "%s: policy %s or its binding missing" % (where, pol))
    guard = objs.get(("ValidatingAdmissionPolicy", "gslice-node-guard"))
    if guard:
        conds = " ".join(c["expression"] for c in guard["spec"].get("matchConditions", []))
        check("system:serviceaccount:%s:gslice-node" % NS in conds,
              "%s: gslice-node-guard matches %s, not gslice-node's service account" % (where, conds))
        text = " ".join(v["expression"] for v in guard["spec"]["validations"])
        check("authentication.kubernetes.io/node-name" in text and "gslice.io/gpus" in text,
              "%s: gslice-node-guard checks neither the token's node nor the annotation" % where)
    rq = objs.get(("ResourceQuota", "gslice-critical-pods"))
    check(rq and {"system-node-critical", "system-cluster-critical"} <=
          set(rq["spec"]["scopeSelector"]["matchExpressions"][0]["values"]),
          "%s: no quota admitting the critical priority classes in %s" % (where, NS))


def check_node_paths(where, spec):
    """gslice-node hands host paths to the kubelet: every hostPath is mounted at its own path,
    and the socket, state dirs and hook the two programs name are on those mounts."""
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    for c in containers(spec):
        for m in c.get("volumeMounts", []):
            if m["name"] in host:
                check(m["mountPath"] == host[m["name"]],
                      "%s: %s mounts host %s at %s: gslice-node's paths must be the host's" %
                      (where, c["name"], host[m["name"]], m["mountPath"]))
    cs = {c["name"]: c for c in spec["containers"]}
    d, n = cs.get("gsliced"), cs.get("gslice-node")
    if not (d and n):
        return

    def on_host_mount(c, path):
        return path and any(path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")
                            for m in c.get("volumeMounts", []) if m["name"] in host)
    sock = arg_after(d, "--socket")
    check(sock == arg_after(n, "--socket") and on_host_mount(d, sock) and on_host_mount(n, sock),
          "%s: gsliced's socket %s and gslice-node's --socket %s: the same host path" %
          (where, sock, arg_after(n, "--socket")))
    state = arg_after(d, "--state-dir")
    check(state == (arg_after(n, "--daemon-state-dir") or "/var/lib/gslice") and
          on_host_mount(n, state), "%s: gsliced's --state-dir %s is not gslice-node's "
          "--daemon-state-dir" % (where, state))
    for flag in ("--state-dir", "--hook"):
        check(on_host_mount(n, arg_after(n, flag)), "%s: gslice-node's %s %s is on no host path"
              % (where, flag, arg_after(n, flag)))
    init = " ".join(" ".join(c.get("command", [])) for c in spec.get("initContainers", []))
    check(arg_after(n, "--hook") and arg_after(n, "--hook") in init,
          "%s: no init container installs the hook gslice-node names (%s)" %
          (where, arg_after(n, "--hook")))


def check_container(where, what, c, init):
    img = c.get("image", "")
    name, _, tag = img.rpartition(":")
    check("/" in img and name and tag and "/" not in tag,
          "%s: %s's image %r has no registry path and tag (kustomize images: not applied?)" %
          (where, what, img))
    res = c.get("resources", {})
    check({"cpu", "memory"} <= set(res.get("requests", {})) and "memory" in res.get("limits", {}),
          "%s: %s needs cpu and memory requests and a memory limit: %s" % (where, what, res))
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(kind)
        if not probe:
            continue
        check(not init, "%s: init container %s has a %s" % (where, what, kind))
        for h in ("httpGet", "tcpSocket", "grpc"):
            if h in probe:
                port = probe[h]["port"]
                check(port in ports or port in ports.values(),
                      "%s: %s's %s is on port %r, which it does not declare (%s)" %
                      (where, what, kind, port, ports))
    if not init:
        check("readinessProbe" in c, "%s: %s has no readiness probe" % (where, what))


def check_extender(where, c, scheduler_name):
    listen = arg_after(c, "--listen")
    check(listen and urlparse("http://" + listen).hostname in ("127.0.0.1", "localhost", "::1"),
          "%s: the extender's verbs listen on %r, not loopback" % (where, listen))
    check("--insecure-listen" not in c.get("args", []) + c.get("command", []),
          "%s: the extender runs with --insecure-listen" % where)
    check(arg_after(c, "--scheduler-name") == scheduler_name,
          "%s: the extender binds for --scheduler-name %s, not %s" %
          (where, arg_after(c, "--scheduler-name"), scheduler_name))
    met = arg_after(c, "--metrics-listen")
    check(met and any(p["containerPort"] == port_of(met) for p in c.get("ports", [])),
          "%s: the extender's --metrics-listen %s is not a port it declares" % (where, met))
    return port_of(listen) if listen else None


def check_scheduler_config(where, cfg, profile, verbs_port, want_kubeconfig):
    check(cfg.get("apiVersion") == "kubescheduler.config.k8s.io/v1" and
          cfg.get("kind") == "KubeSchedulerConfiguration",
          "%s: %s/%s" % (where, cfg.get("apiVersion"), cfg.get("kind")))
    profiles = [p["schedulerName"] for p in cfg.get("profiles", [])]
    check(profiles == [profile], "%s: profiles %s, want [%s]" % (where, profiles, profile))
    check(cfg.get("percentageOfNodesToScore") == 100, "%s: percentageOfNodesToScore %s" %
          (where, cfg.get("percentageOfNodesToScore")))
    if want_kubeconfig:
        check(cfg.get("clientConnection", {}).get("kubeconfig"),
              "%s: no clientConnection.kubeconfig: kube-scheduler ignores --kubeconfig with "
              "--config, so the static pod would have no credentials" % where)
    ext = cfg.get("extenders", [])
    if not check(len(ext) == 1, "%s: %d extenders" % (where, len(ext))):
        return
    e = ext[0]
    u = urlparse(e["urlPrefix"])
    check(u.hostname in ("127.0.0.1", "localhost") and u.scheme == "http" and
          not e.get("enableHTTPS", False),
          "%s: extender URL %s (HTTPS %s): the verbs are reached on loopback" %
          (where, e["urlPrefix"], e.get("enableHTTPS")))
    check(u.port == verbs_port, "%s: the extender URL's port %s is not the one it listens on (%s)"
          % (where, u.port, verbs_port))
    check((e.get("filterVerb"), e.get("prioritizeVerb"), e.get("bindVerb")) ==
          ("filter", "prioritize", "bind"), "%s: verbs %s" % (where, e))
    check(e.get("nodeCacheCapable") is True and e.get("ignorable") is False,
          "%s: nodeCacheCapable %s, ignorable %s" % (where, e.get("nodeCacheCapable"),
                                                      e.get("ignorable")))
    managed = {m["name"]: m.get("ignoredByScheduler", False) for m in e.get("managedResources", [])}
    want = {"gslice.io/gpu": False, "gslice.io/gpu-memory": True, "gslice.io/gpu-compute": True}
    check(managed == want, "%s: managedResources %s, want %s (docs/K8S: memory and compute are "
          "not advertised by nodes)" % (where, managed, want))


def check_managed(objs, where):
    check_names(objs, MANAGED, where)
    check_common(objs, where)
    dep = objs.get(("Deployment", "gslice-scheduler"))
    if not check(dep, "%s: no Deployment gslice-scheduler" % where):
        return
    spec = pod_spec(dep)
    cs = {c["name"]: c for c in spec["containers"]}
    check(set(cs) == {"kube-scheduler", "gslice-extender"}, "%s: scheduler pod's containers %s" %
          (where, list(cs)))
    ks, ex = cs.get("kube-scheduler"), cs.get("gslice-extender")
    if not (ks and ex):
        return
    check(ks["image"].startswith("registry.k8s.io/kube-scheduler:"),
          "%s: kube-scheduler's image %s" % (where, ks["image"]))
    check(spec.get("priorityClassName") == "system-cluster-critical",
          "%s: scheduler priority %s" % (where, spec.get("priorityClassName")))
    check("hostNetwork" not in spec, "%s: the scheduler pod needs no host network" % where)
    psc = spec.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True and psc.get("seccompProfile", {}).get("type") ==
          "RuntimeDefault", "%s: scheduler pod securityContext %s" % (where, psc))
    for c in (ks, ex):
        sc = c.get("securityContext", {})
        check(sc.get("allowPrivilegeEscalation") is False and
              sc.get("capabilities", {}).get("drop") == ["ALL"],
              "%s: %s's securityContext %s (PodSecurity restricted's rules)" % (where, c["name"], sc))
        check("livenessProbe" in c, "%s: %s has no liveness probe" % (where, c["name"]))
    verbs_port = check_extender(where, ex, "gslice-scheduler")
    config = arg_after(ks, "--config")
    mount = next((m for m in ks.get("volumeMounts", []) if config and
                  config.startswith(m["mountPath"].rstrip("/") + "/")), None)
    if not check(mount, "%s: kube-scheduler's --config %s is in no volume it mounts" %
                 (where, config)):
        return
    vol = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    cm = objs.get(("ConfigMap", vol["configMap"]["name"]))
    key = config[len(mount["mountPath"].rstrip("/")) + 1:]
    if not check(cm and key in cm.get("data", {}), "%s: ConfigMap %s has no key %s" %
                 (where, vol["configMap"]["name"], key)):
        return
    cfg = yaml.safe_load(cm["data"][key])
    check_scheduler_config(where + " (gslice-scheduler-config)", cfg, "gslice-scheduler",
                           verbs_port, False)
    le = cfg.get("leaderElection", {})
    check(le.get("leaderElect") is True and le.get("resourceName") == "gslice-scheduler" and
          le.get("resourceNamespace") == NS,
          "%s: leader election %s: its own lease gslice-system/gslice-scheduler" % (where, le))
    # RBAC as a second kube-scheduler needs it.
    bound = {o["roleRef"]["name"] for (k, _), o in objs.items() if k == "ClusterRoleBinding" and
             any(s["name"] == "gslice-scheduler" for s in o["subjects"])}
    check({"system:kube-scheduler", "system:volume-scheduler", "gslice-extender"} <= bound,
          "%s: gslice-scheduler's ClusterRoles %s" % (where, bound))
    check(spec.get("serviceAccountName") == "gslice-scheduler", "%s: scheduler SA %s" %
          (where, spec.get("serviceAccountName")))
    lease = objs.get(("Role", "gslice-scheduler-lease"))
    if check(lease, "%s: no Role for the lease" % where):
        r = rules_of(lease)
        check(r.get(("coordination.k8s.io", "leases", ("gslice-scheduler",))) >= {"get", "update"}
              and r.get(("coordination.k8s.io", "leases", ())) == {"create"} and len(r) == 2,
              "%s: lease rights %s: create, and get/update of gslice-scheduler only" % (where, r))
    rb = objs.get(("RoleBinding", "gslice-scheduler-lease"))
    check(rb and rb["roleRef"]["name"] == "gslice-scheduler-lease", "%s: lease binding %s" %
          (where, rb))
    pdb = objs.get(("PodDisruptionBudget", "gslice-scheduler"))
    if check(pdb, "%s: no PodDisruptionBudget for gslice-scheduler" % where):
        sel = pdb["spec"]["selector"]["matchLabels"]
        labels = dep["spec"]["template"]["metadata"]["labels"]
        check(all(labels.get(k) == v for k, v in sel.items()),
              "%s: the PDB selects %s, the pods are %s" % (where, sel, labels))
        check(pdb["spec"].get("minAvailable", 0) < dep["spec"].get("replicas", 1),
              "%s: PDB minAvailable %s with %s replicas blocks every drain" %
              (where, pdb["spec"].get("minAvailable"), dep["spec"].get("replicas")))


def check_kubeadm(objs, where):
    check_names(objs, KUBEADM, where)
    check_common(objs, where)
    check(("Deployment", "gslice-scheduler") not in objs,
          "%s: the kubeadm overlay runs no second scheduler" % where)
    ds = objs.get(("DaemonSet", "gslice-extender"))
    if not check(ds, "%s: no DaemonSet gslice-extender" % where):
        return
    spec = pod_spec(ds)
    check(spec.get("hostNetwork") is True, "%s: the extender must be in the host's network, "
          "where the kube-scheduler static pod reaches its loopback" % where)
    check("node-role.kubernetes.io/control-plane" in spec.get("nodeSelector", {}),
          "%s: the extender is not on the control-plane nodes: %s" % (where, spec.get("nodeSelector")))
    check(any(t.get("key") == "node-role.kubernetes.io/control-plane"
              for t in spec.get("tolerations", [])),
          "%s: the extender does not tolerate the control-plane taint" % where)
    ex = spec["containers"][0]
    verbs_port = check_extender(where, ex, "default-scheduler")
    check(any(k == "PodDisruptionBudget" for k, _ in objs), "%s: no PodDisruptionBudget" % where)
    d = os.path.join(DEPLOY, "overlays", "kubeadm")
    cfg = yaml.safe_load(open(os.path.join(d, "scheduler-config.yaml")))
    check_scheduler_config(where + " (scheduler-config.yaml)", cfg, "default-scheduler",
                           verbs_port, True)
    le = cfg.get("leaderElection", {})
    check(le.get("resourceName", "kube-scheduler") == "kube-scheduler" and
          le.get("resourceNamespace", "kube-system") == "kube-system",
          "%s: the cluster's kube-scheduler keeps its lease kube-system/kube-scheduler (the only "
          "one system:kube-scheduler may update): %s" % (where, le))
    kc = yaml.safe_load(open(os.path.join(d, "kubeadm-config.yaml")))
    check(kc.get("kind") == "ClusterConfiguration", "%s: kubeadm-config.yaml is a %s" %
          (where, kc.get("kind")))
    sched = kc.get("scheduler", {})
    args = sched.get("extraArgs", [])
    args = {a["name"]: a["value"] for a in args} if isinstance(args, list) else args
    path = args.get("config")
    vols = sched.get("extraVolumes", [])
    check(path and path.endswith("/scheduler-config.yaml") and
          any(path.startswith(v["mountPath"].rstrip("/") + "/") and v["hostPath"] == v["mountPath"]
              for v in vols),
          "%s: kubeadm's scheduler extraArgs config=%s is in none of its extraVolumes %s" %
          (where, path, vols))


def check_monitoring(objs, where):
    rule = objs.get(("PrometheusRule", "gslice"))
    if check(rule, "%s: no PrometheusRule gslice" % where):
        check(rule["apiVersion"] == "monitoring.coreos.com/v1", rule["apiVersion"])
        alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
        want = {"GSliceUnaccountedGPUProcesses", "GSliceNodeStale", "GSliceBindErrors",
                "GSliceSliceBelowRequest", "GSlicedDown"}
        check(want <= alerts, "%s: alerts %s lack %s" % (where, alerts, want - alerts))
        below = [r for g in rule["spec"]["groups"] for r in g["rules"]
                 if r.get("alert") == "GSliceSliceBelowRequest"]
        check(below and below[0].get("for") == "5m", "%s: a slice below its request alerts "
              "after %s, not 5m" % (where, below and below[0].get("for")))
    cm = objs.get(("ConfigMap", "gslice-dashboard"))
    if check(cm, "%s: no ConfigMap gslice-dashboard" % where):
        check(cm["metadata"].get("labels", {}).get("grafana_dashboard") == "1",
              "%s: the dashboard's ConfigMap lacks grafana_dashboard=1" % where)
        dash = json.loads(cm["data"]["gslice-dashboard.json"])
        exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
        check(len(exprs) >= 10, "%s: the dashboard has %d queries" % (where, len(exprs)))
    for name in ("gsliced", "gslice-extender"):
        check(("PodMonitor", name) in objs, "%s: no PodMonitor %s" % (where, name))


def spell_macros(text):
    """C source with string macros spelt out and adjacent literals joined: #define P "/apis/g/v1"
    and #define S P "/things" make S's uses "/apis/g/v1/things"."""
    import re
    macros = {}
    for line in text.splitlines():
        m = re.match(r'#define\s+(\w+)\s+(.+)$', line)
        if not m:
            continue
        parts = re.findall(r'"[^"]*"|\S+', m.group(2))
        if parts and all(p.startswith('"') or p in macros for p in parts):
            macros[m.group(1)] = "".join(macros.get(p, p[1:-1]) for p in parts)
    text = "\n".join(l for l in text.splitlines() if not l.startswith("#define"))
    for name, val in macros.items():
        text = re.sub(r'\b%s\b' % name, lambda m, v=val: '"%s"' % v, text)
    return re.sub(r'"\s*"', "", text)


def api_resources(program, dra=None):
    """The (API group, resource) pairs a program's sources name in API paths: "/api/v1/...",
    "/apis/GROUP/VERSION/...", and a subresource appended to an object's path ("%s/binding").
    dra: only gslice-node's DRA sources (dra*.c, True) or only the others (False)."""
    import glob
    import re
    out = set()
    for f in glob.glob(os.path.join(SRC, "src", "k8s", program, "*.c")):
        if dra is not None and os.path.basename(f).startswith("dra") != dra:
            continue
        text = open(f).read()
        text = spell_macros(text)
        for path in re.findall(r'"(/apis?/[^"?]*)', text):
            parts = path.strip("/").split("/")
            group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
            if rest[:1] == ["namespaces"] and len(rest) > 2:
                rest = rest[2:]
            if rest:
                out.add((group, rest[0] + ("/" + rest[2] if len(rest) > 2 else "")))
        for sub in re.findall(r'"%s/(binding|status|eviction)"', text):
            out.add(("", "pods/" + sub))
        if "kube_events_add(" in text:  # src/k8s/common/event.c posts them
            out.add(("", "events"))
    return out


def check_rbac_against_sources(objs):
    """What each program calls has a rule (its ClusterRole's, or for the Leases its Role's in
    gslice-system), and each rule is for something it calls."""
    for program, role in (("node", "gslice-node"), ("extender", "gslice-extender")):
        called = api_resources(program, False if program == "node" else None)
        granted = {(g, r) for g, r, _ in rules_of(objs[("ClusterRole", role)])}
        ns_role = objs.get(("Role", role))
        if check(ns_role, "no Role %s (the Leases in gslice-system)" % role):
            check(ns_role["metadata"].get("namespace") == "gslice-system" and
                  {(g, r) for g, r, _ in rules_of(ns_role)} == {("coordination.k8s.io", "leases")},
                  "Role %s: only the Leases, in gslice-system: %s" % (role, ns_role))
            granted |= {(g, r) for g, r, _ in rules_of(ns_role)}
            check(any(k[0] == "RoleBinding" and o["roleRef"] == {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}
                for k, o in objs.items()), "no RoleBinding of Role %s" % role)
        check(called, "no API paths found in src/k8s/%s" % program)
        check(called <= granted, "src/k8s/%s calls %s, which ClusterRole %s does not grant" %
              (program, sorted(called - granted), role))
        check(granted <= called, "ClusterRole %s grants %s, which src/k8s/%s never calls" %
              (role, sorted(granted - called), program))


DRA = {("Namespace", NS), ("ResourceQuota", "gslice-critical-pods"),
       ("ServiceAccount", "gslice-node-dra"), ("ClusterRole", "gslice-node-dra"),
       ("ClusterRoleBinding", "gslice-node-dra"), ("DaemonSet", "gslice-node-dra"),
       ("ValidatingAdmissionPolicy", "gslice-resourceslice-guard"),
       ("ValidatingAdmissionPolicyBinding", "gslice-resourceslice-guard"),
       ("DeviceClass", "gslice.io"), ("DeviceClass", "gslice.io-high"),
       ("DeviceClass", "gslice.io-low")}
# Rights the DRA agent holds beyond the paths its sources name: none (it writes no claim
# status.devices, which would need resourceclaims/status and 1.36's resourceclaims/driver).
DRA_STATUS = set()


def check_dra(objs, where):
    """deploy/overlays/dra: the DRA agent only on nodes labelled gslice.io/mode=dra, gslice-node
    --mode dra with the kubelet's plugin directories mounted at their own paths, its rights
    what its DRA sources call, the ResourceSlice guard on its service account, the classes."""
    check_names(objs, DRA, where)
    check_objects(objs, where)
    ds = objs.get(("DaemonSet", "gslice-node-dra"))
    if not check(ds, "%s: no DaemonSet gslice-node-dra" % where):
        return
    spec = pod_spec(ds)
    check(spec.get("serviceAccountName") == "gslice-node-dra", "%s: runs as %s" %
          (where, spec.get("serviceAccountName")))
    check(ds["spec"].get("updateStrategy", {}).get("type") == "OnDelete",
          "%s: the DRA agent's update is not OnDelete" % where)
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    check(terms == [{"matchExpressions": [{"key": "gslice.io/mode", "operator": "In",
                                           "values": ["dra"]}]}],
          "%s: the DRA agent must run exactly on nodes labelled gslice.io/mode=dra: %s" %
          (where, terms))
    node = [c for c in spec["containers"] if c["name"] == "gslice-node"]
    if check(node, "%s: no gslice-node container" % where):
        c = node[0]
        check(arg_after(c, "--mode") == "dra", "%s: gslice-node without --mode dra" % where)
        mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
        host = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
        for flag, default in (("--plugins-registry", "/var/lib/kubelet/plugins_registry"),
                              ("--plugin-dir", "/var/lib/kubelet/plugins/gslice.io"),
                              ("--cdi-dir", "/var/run/cdi")):
            d = arg_after(c, flag) or default
            check(d in mounts and d in host, "%s: %s %s is not a host path mounted at its own "
                  "path" % (where, flag, d))
        for gone in ("/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources",
                     "/etc/gslice/signing"):
            check(gone not in mounts, "%s: the DRA agent still mounts %s" % (where, gone))
        check(arg_after(c, "--signing-key") is None, "%s: a signing key in the DRA mode" % where)
    role = objs.get(("ClusterRole", "gslice-node-dra"))
    if check(role, "%s: no ClusterRole gslice-node-dra" % where):
        granted = {(g, r) for g, r, _ in rules_of(role)}
        called = api_resources("node", True)
        check(called, "no API paths found in src/k8s/node/dra*.c")
        check(called <= granted, "%s: src/k8s/node/dra*.c calls %s, not granted" %
              (where, sorted(called - granted)))
        check(granted <= called | DRA_STATUS, "%s: gslice-node-dra is granted %s, which "
              "src/k8s/node/dra*.c never calls" % (where, sorted(granted - called - DRA_STATUS)))
        check(("", "nodes") not in granted or "patch" not in rules_of(role).get(
            ("", "nodes", ()), set()), "%s: the DRA agent may patch Nodes" % where)
    guard = objs.get(("ValidatingAdmissionPolicy", "gslice-resourceslice-guard"))
    if guard:
        conds = " ".join(c["expression"] for c in guard["spec"].get("matchConditions", []))
        check("system:serviceaccount:%s:gslice-node-dra" % NS in conds,
              "%s: the ResourceSlice guard matches %s" % (where, conds))
    for (kind, name), o in objs.items():
        if kind == "DeviceClass":
            check(o["apiVersion"] == "resource.k8s.io/v1", "%s: DeviceClass %s is %s" %
                  (where, name, o["apiVersion"]))
            sel = " ".join(x["cel"]["expression"] for x in o["spec"].get("selectors", []))
            check("device.driver == 'gslice.io'" in sel, "%s: DeviceClass %s selects %s" %
                  (where, name, sel))
            for cfg in o["spec"].get("config", []):
                par = cfg["opaque"]["parameters"]
                check(cfg["opaque"]["driver"] == "gslice.io" and
                      par.get("apiVersion") == "gslice.io/v1" and par.get("kind") == "SliceConfig"
                      and set(par) <= {"apiVersion", "kind", "computeLimit", "priority", "weight"},
                      "%s: DeviceClass %s's config %s" % (where, name, par))


managed = index(render("overlays/managed"))
check_rbac_against_sources(managed)
check_managed(managed, "overlays/managed")
default = index(render("."))
check(default == managed, "deploy/ (the default) does not render as overlays/managed")
kubeadm = index(render("overlays/kubeadm"))
check_kubeadm(kubeadm, "overlays/kubeadm")
for objs, where in ((managed, "managed"), (kubeadm, "kubeadm")):
    kinds = {k for k, _ in objs}
    check(not kinds & {"KubeSchedulerConfiguration", "ClusterConfiguration"},
          "%s: a file that is not a Kubernetes object is in the kustomization: %s" % (where, kinds))
check_monitoring(index(render("monitoring")), "monitoring")
dra = index(render("overlays/dra"))
check_dra(dra, "overlays/dra")

if failures:
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    sys.exit(1)
print("PASS: deploy/ (managed), overlays/managed, overlays/kubeadm, overlays/dra and monitoring "
      "render; %d + %d + %d objects checked" % (len(managed), len(kubeadm), len(dra)))
