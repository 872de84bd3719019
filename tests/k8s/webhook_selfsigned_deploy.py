#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/overlays/managed/webhook-selfsigned (a kustomize Component) as an operator without
cert-manager uses it, from a kustomization of their own beside deploy/ (`kubectl kustomize`):
cert-manager's Issuer, Certificate and CA-injection annotation are gone; gslice-webhook runs
with --self-signed-secret gslice-webhook-certs --webhook-config gslice-webhook, a service
account token and an emptyDir for its files (no Secret volume); its rights are Secrets get and
update on gslice-webhook-certs only, create (which RBAC cannot name) with a
ValidatingAdmissionPolicy allowing that name alone, and get and update of the
MutatingWebhookConfiguration gslice-webhook only. The rendered args are ones gslice-webhook
takes (it fails reaching the API, exit 1, not on its flags, exit 2). Skipped (77) without
kubectl."""
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

from k8stest import BUILD, SRC, check, passed

KUBECTL = shutil.which("kubectl")
if not KUBECTL:
    print("SKIP: no kubectl (kubectl kustomize renders the overlays)")
    sys.exit(77)


def render():
    d = tempfile.mkdtemp(prefix="gslice-ss-deploy.")
    try:
        os.symlink(os.path.abspath(SRC), os.path.join(d, "gslice"))
        os.mkdir(os.path.join(d, "site"))
        with open(os.path.join(d, "site", "kustomization.yaml"), "w") as f:
            f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                    "resources: [../gslice/deploy/overlays/managed]\n"
                    "components: [../gslice/deploy/overlays/managed/webhook-selfsigned]\n")
        p = subprocess.run([KUBECTL, "kustomize", os.path.join(d, "site")],
                           capture_output=True, timeout=120)
        check(p.returncode == 0, "kubectl kustomize: %s" % p.stderr.decode())
        return [o for o in yaml.safe_load_all(p.stdout) if o]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def one(objs, kind, name):
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    check(len(found) == 1, "%s %s: %d rendered" % (kind, name, len(found)))
    return found[0]


def main():
    objs = render()
    check(not [o for o in objs if o["kind"] in ("Issuer", "Certificate")],
          "cert-manager objects left in")
    mwc = one(objs, "MutatingWebhookConfiguration", "gslice-webhook")
    check("cert-manager.io/inject-ca-from" not in (mwc["metadata"].get("annotations") or {}),
          "the CA-injection annotation is left")
    spec = one(objs, "Deployment", "gslice-webhook")["spec"]["template"]["spec"]
    c = spec["containers"][0]
    args = c["args"]
    for flag, value in (("--self-signed-secret", "gslice-webhook-certs"),
                        ("--webhook-config", "gslice-webhook"),
                        ("--service-name", "gslice-webhook.gslice-system.svc")):
        check(flag in args and args[args.index(flag) + 1] == value, "args %s" % args)
    check("--tls-cert" not in args and "--tls-key" not in args, "args %s" % args)
    check(spec.get("automountServiceAccountToken") is True and
          one(objs, "ServiceAccount", "gslice-webhook").get("automountServiceAccountToken")
          is True, "no service account token")
    check(not [v for v in spec["volumes"] if "secret" in v] and
          any("emptyDir" in v for v in spec["volumes"]) and
          c["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}], "volumes %s" % spec)
    passed("the component: no cert-manager objects, the flags, a token, an emptyDir")

    role = one(objs, "Role", "gslice-webhook-certs")
    check(role["metadata"]["namespace"] == "gslice-system", "Role namespace")
    rules = sorted((tuple(r["verbs"]), tuple(r.get("resourceNames") or ())) for r in role["rules"])
    check(rules == [(("create",), ()), (("get", "update"), ("gslice-webhook-certs",))] and
          all(r["resources"] == ["secrets"] and r["apiGroups"] == [""] for r in role["rules"]),
          "Role rules %s" % role["rules"])
    cr = one(objs, "ClusterRole", "gslice-webhook-cabundle")
    check(cr["rules"] == [{"apiGroups": ["admissionregistration.k8s.io"],
                           "resources": ["mutatingwebhookconfigurations"],
                           "resourceNames": ["gslice-webhook"], "verbs": ["get", "update"]}],
          "ClusterRole rules %s" % cr["rules"])
    for kind, name in (("RoleBinding", "gslice-webhook-certs"),
                       ("ClusterRoleBinding", "gslice-webhook-cabundle")):
        check(one(objs, kind, name)["subjects"] == [
            {"kind": "ServiceAccount", "name": "gslice-webhook", "namespace": "gslice-system"}],
            "%s subjects" % kind)
    vap = one(objs, "ValidatingAdmissionPolicy", "gslice-webhook-secret-create")
    check("system:serviceaccount:gslice-system:gslice-webhook" in
          vap["spec"]["matchConditions"][0]["expression"] and
          "gslice-webhook-certs" in vap["spec"]["validations"][0]["expression"], "VAP %s" % vap)
    one(objs, "ValidatingAdmissionPolicyBinding", "gslice-webhook-secret-create")
    passed("RBAC: secrets get/update on gslice-webhook-certs, create guarded by a policy; the "
           "configuration get/update on gslice-webhook only")

    d = tempfile.mkdtemp(prefix="gslice-ss-args.")
    try:
        kc = os.path.join(d, "kubeconfig")
        with open(kc, "w") as f:  # port 9: nothing listens
            f.write("current-context: t\nclusters:\n- name: c\n  cluster:\n    server: "
                    "http://127.0.0.1:9\ncontexts:\n- name: t\n  context: {cluster: c}\n")
        p = subprocess.run([os.path.join(BUILD, "bin", "gslice-webhook")] + args[:] +
                           ["--kubeconfig", kc, "--namespace", "gslice-system"],
                           capture_output=True, timeout=60, env=dict(os.environ, TMPDIR=d))
        check(p.returncode == 1 and b"usage" not in p.stderr,
              "the rendered args: exit %s %r" % (p.returncode, p.stderr[-500:]))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    passed("gslice-webhook takes the rendered args")


if __name__ == "__main__":
    main()
