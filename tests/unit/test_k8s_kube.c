/* SPDX-License-Identifier: Apache-2.0 */
/* The API client's settings: kubeconfig files (token, certificate data and paths,
 * refusals naming the field), in-cluster settings, and Go-style key matching. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "kube.h"
#include "test.h"

static char dir[] = "/tmp/gslice-kube-test.XXXXXX";

static void put(const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static int load(const char *name, struct kube_config **c, char *err, size_t errlen) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return kube_config_from_file(path, c, err, errlen);
}

int main(void) {
  struct kube_config *c = NULL;
  char err[KUBE_ERR_MAX] = "";

  if (!mkdtemp(dir))
    return 1;
  put("ca.pem", "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n");
  put("token.txt", "secret-from-file\n");
  /* Two clusters, contexts and users; the current one must be picked. */
  put("a.yaml", "apiVersion: v1\nkind: Config\ncurrent-context: two\n"
                "clusters:\n"
                "- name: c1\n  cluster:\n    server: https://one:6443\n"
                "- name: c2\n  cluster:\n    server: \"https://two.example:6443/\"\n"
                "    certificate-authority: ca.pem\n"
                "contexts:\n"
                "- name: one\n  context: {cluster: c1, user: u1}\n"
                "- name: two\n  context:\n    cluster: c2\n    user: u2\n    namespace: x\n"
                "users:\n"
                "- name: u1\n  user:\n    token: t1\n"
                "- name: u2\n  user:\n    client-certificate-data: aGVsbG8gY2VydA==\n"
                "    client-key-data: |\n      aGVsbG8g\n      a2V5\n");
  CHECK_EQ_INT(load("a.yaml", &c, err, sizeof err), 0);
  if (c) {
    CHECK_STR(c->server, "https://two.example:6443"); /* trailing slash dropped */
    CHECK(c->ca && strstr(c->ca, "BEGIN CERTIFICATE"));
    CHECK(c->cert && c->cert_len == 10 && memcmp(c->cert, "hello cert", 10) == 0);
    CHECK(c->key && c->key_len == 9 && memcmp(c->key, "hello key", 9) == 0);
    CHECK(c->token == NULL && !c->insecure);
    kube_config_free(c);
    c = NULL;
  }
  put("b.yaml", "current-context: t\nclusters:\n- name: c\n  cluster:\n"
                "    server: http://127.0.0.1:8080\n    insecure-skip-tls-verify: true\n"
                "contexts:\n- name: t\n  context:\n    cluster: c\n    user: u\n"
                "users:\n- name: u\n  user:\n    tokenFile: token.txt\n");
  CHECK_EQ_INT(load("b.yaml", &c, err, sizeof err), 0);
  if (c) {
    CHECK_STR(c->server, "http://127.0.0.1:8080");
    CHECK(c->insecure);
    CHECK(c->token_file && strstr(c->token_file, "/token.txt"));
    kube_config_free(c);
    c = NULL;
  }

  /* Refusals say what to fix. */
  err[0] = 0;
  CHECK_EQ_INT(load("missing.yaml", &c, err, sizeof err), -ENOENT);
  CHECK(strstr(err, "missing.yaml") != NULL);
  put("c.yaml", "clusters: [\n");
  CHECK_EQ_INT(load("c.yaml", &c, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "not YAML") != NULL);
  put("d.yaml", "clusters: []\n");
  CHECK_EQ_INT(load("d.yaml", &c, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "current-context") != NULL);
  put("e.yaml", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: nope}\n");
  CHECK_EQ_INT(load("e.yaml", &c, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "nope") != NULL);
  put("f.yaml", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                "clusters:\n- name: c\n  cluster: {server: https://h}\n"
                "users:\n- name: u\n  user:\n    exec: {command: aws}\n");
  CHECK_EQ_INT(load("f.yaml", &c, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "exec") != NULL);
  put("g.yaml", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                "clusters:\n- name: c\n  cluster: {server: ftp://h}\n");
  CHECK_EQ_INT(load("g.yaml", &c, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "https://") != NULL);
  put("h.yaml", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                "clusters:\n- name: c\n  cluster: {server: https://h}\n"
                "users:\n- name: u\n  user: {client-certificate-data: '%%%'}\n");
  CHECK_EQ_INT(load("h.yaml", &c, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "base64") != NULL);
  put("i.yaml", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                "clusters:\n- name: c\n  cluster: {server: https://h}\n"
                "users:\n- name: u\n  user: {client-certificate-data: aGk=}\n");
  CHECK_EQ_INT(load("i.yaml", &c, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "key") != NULL);
  put("j.yaml",
      "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
      "clusters:\n- name: c\n  cluster: {server: https://h, certificate-authority: /no/such}\n");
  CHECK_EQ_INT(load("j.yaml", &c, err, sizeof err), -ENOENT);
  CHECK(strstr(err, "/no/such") != NULL);

  /* Files are read whole or refused: a file larger than its size said (here /proc's, which
   * says 0) is read to its end, a file over 1 MiB or not a regular file is refused, saying so. */
  if (access("/proc/self/status", R_OK) == 0) {
    put("k.yaml", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                  "clusters:\n- name: c\n  cluster: {server: https://h, certificate-authority: "
                  "/proc/self/status}\n");
    CHECK_EQ_INT(load("k.yaml", &c, err, sizeof err), 0);
    CHECK(c && c->ca_len > 0 && c->ca && strstr(c->ca, "Name:") == c->ca);
    kube_config_free(c);
    c = NULL;
  }
  {
    char big[600];
    snprintf(big, sizeof big, "%s/big.yaml", dir);
    FILE *f = fopen(big, "w");
    fputs("current-context: x\n", f);
    for (int i = 0; i < (1 << 20) / 16 + 1; i++)
      fputs("# padding      \n", f);
    fclose(f);
    CHECK_EQ_INT(load("big.yaml", &c, err, sizeof err), -EFBIG);
    CHECK(strstr(err, "big.yaml") && strstr(err, "larger than 1 MiB"));
  }
  put("l.yaml", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                "clusters:\n- name: c\n  cluster: {server: https://h, certificate-authority: "
                "/tmp}\n");
  CHECK_EQ_INT(load("l.yaml", &c, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "certificate-authority /tmp: not a regular file") != NULL);

  /* In-cluster: the service address and the mounted token and CA. */
  put("ca.crt", "CA");
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  {
    char tok[600];
    snprintf(tok, sizeof tok, "%s/token", dir);
    char src[600];
    snprintf(src, sizeof src, "%s/token.txt", dir);
    CHECK_EQ_INT(link(src, tok), 0);
  }
  CHECK_EQ_INT(kube_config_in_cluster(dir, &c, err, sizeof err), 0);
  if (c) {
    CHECK_STR(c->server, "https://10.96.0.1:443");
    CHECK(c->token_file && c->ca_len == 2);
    kube_config_free(c);
    c = NULL;
  }
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  CHECK_EQ_INT(kube_config_in_cluster(dir, &c, err, sizeof err), 0);
  if (c) {
    CHECK_STR(c->server, "https://[fd00::1]:443");
    kube_config_free(c);
    c = NULL;
  }
  CHECK_EQ_INT(kube_config_in_cluster("/no/such/dir", &c, err, sizeof err), -ENOENT);
  CHECK(strstr(err, "service account") != NULL);
  unsetenv("KUBERNETES_SERVICE_HOST");
  CHECK_EQ_INT(kube_config_in_cluster(dir, &c, err, sizeof err), -ENOENT);
  CHECK(strstr(err, "--kubeconfig") != NULL);

  /* Go's decoder matches keys without regard to case; the exact key wins. */
  json_t *o = json_loads("{\"NodeNames\":[\"a\"],\"pod\":{\"metadata\":{\"name\":\"p\","
                         "\"annotations\":{\"gslice.io/policy\":\"spread\"}}},\"Pod\":1}",
                         0, NULL);
  CHECK(json_is_array(kube_json_get(o, "nodenames")));
  CHECK(json_is_array(kube_json_get(o, "nodeNames")));
  CHECK(json_is_object(kube_json_get(o, "pod")));
  CHECK(json_is_integer(kube_json_get(o, "Pod")));
  CHECK(kube_json_get(o, "nodes") == NULL);
  CHECK_STR(kube_meta_str(json_object_get(o, "pod"), "name"), "p");
  CHECK_STR(kube_annotation(json_object_get(o, "pod"), "gslice.io/policy"), "spread");
  CHECK(kube_annotation(json_object_get(o, "pod"), "gslice.io/none") == NULL);
  json_decref(o);

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_EQ_INT(system(cmd), 0);
  return test_done();
}
