/* SPDX-License-Identifier: Apache-2.0 */
/* Signed assignments (src/k8s/common/sign.h) and the check of an assignment against its pod
 * (podcheck.h): key files refused for what is wrong with them, a known answer, every way a
 * signature must fail (another key, uid, node or text; a rotated-out key), and each rule of
 * k8s_assigned_check_pod. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "annot.h"
#include "podcheck.h"
#include "sign.h"
#include "test.h"

static char dir[] = "/tmp/gslice-sign.XXXXXX";

static const char *put_file(const char *name, const char *content, mode_t mode) {
  static char paths[8][256];
  static int n;
  char *p = paths[n++ % 8];
  snprintf(p, 256, "%s/%s", dir, name);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content))
    abort();
  close(fd);
  chmod(p, mode);
  return p;
}

static void key_bad(const char *path, int want, const char *word) {
  struct k8s_key k;
  char err[K8S_ERR_MAX] = "";
  CHECK_EQ_INT(k8s_key_load(path, &k, err, sizeof err), want);
  if (!strstr(err, word))
    fprintf(stderr, "error \"%s\" does not say \"%s\"\n", err, word);
  CHECK(strstr(err, word) != NULL);
}

static void verify_bad(const struct k8s_keys *ks, const char *uid, const char *node,
                       const char *text, const char *sig, const char *word) {
  char err[K8S_ERR_MAX] = "";
  CHECK_EQ_INT(k8s_assigned_verify(ks, uid, node, text, sig, err, sizeof err), -EPERM);
  if (!strstr(err, word))
    fprintf(stderr, "error \"%s\" does not say \"%s\"\n", err, word);
  CHECK(strstr(err, word) != NULL);
}

static void test_keys_and_signatures(void) {
  const char *k1 = put_file("k1", "0123456789abcdef0123456789abcdef\n", 0600);
  const char *k2 = put_file("k2", "another key, at least 32 bytes long!", 0400);
  struct k8s_keys ks, ks2, rot, only_new;
  char err[K8S_ERR_MAX], sig[K8S_SIG_MAX], sig_old[K8S_SIG_MAX];
  const char *text = "{\"version\":1}";

  /* Key files: what is wrong, in words. */
  key_bad(put_file("short", "0123456789abcdef0123456789abcde\n\n", 0600), -EINVAL, "fewer than 32");
  key_bad(put_file("world", "0123456789abcdef0123456789abcdef", 0644), -EPERM,
          "readable or writable by every user");
  key_bad(put_file("wworld", "0123456789abcdef0123456789abcdef", 0602), -EPERM, "every user");
  key_bad(dir, -EINVAL, "not a regular file");
  char missing[300];
  snprintf(missing, sizeof missing, "%s/none", dir);
  key_bad(missing, -ENOENT, "No such file");
  char big[K8S_SIGN_KEY_MAX + 2];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  key_bad(put_file("big", big, 0600), -EFBIG, "longer than");
  /* A Secret volume's file is a symlink: followed. */
  char link[300];
  snprintf(link, sizeof link, "%s/link", dir);
  CHECK_EQ_INT(symlink(k1, link), 0);
  const char *one[1] = {link};
  CHECK_EQ_INT(k8s_keys_load(one, 1, &ks, err, sizeof err), 0);
  CHECK_EQ_INT(ks.n, 1);
  /* The id is the first 16 hex digits of SHA-256 of the key without its newline. */
  CHECK_STR(ks.key[0].id, "3eb1bd439947eb76");

  /* Known answer (tests/k8s/signing.py computes the same). */
  CHECK_EQ_INT(k8s_assigned_sign(&ks, "uid-1", "node-a", text, sig, sizeof sig), 0);
  CHECK_STR(sig, "v1:3eb1bd439947eb76:02cd76b2443e3ed649b13e2b37742d7dd6c615da402254eedbc708aeea"
                 "fdd66a");
  CHECK_EQ_INT(k8s_assigned_verify(&ks, "uid-1", "node-a", text, sig, err, sizeof err), 0);

  /* Every way it must fail. */
  verify_bad(&ks, "uid-2", "node-a", text, sig, "does not match");              /* another pod */
  verify_bad(&ks, "uid-1", "node-b", text, sig, "does not match");              /* another node */
  verify_bad(&ks, "uid-1", "node-a", "{\"version\":2}", sig, "does not match"); /* edited */
  verify_bad(&ks, "uid-1", "node-a", text, NULL, "no gslice.io/assigned-signature");
  verify_bad(&ks, "", "node-a", text, sig, "no uid");
  verify_bad(&ks, "uid-1", "node-a", text, "v1:3eb1bd439947eb76:00", "malformed");
  char upper[K8S_SIG_MAX];
  strcpy(upper, sig);
  upper[sizeof upper - 2] = 'A';
  verify_bad(&ks, "uid-1", "node-a", text, upper, "malformed");
  char flipped[K8S_SIG_MAX];
  strcpy(flipped, sig);
  flipped[sizeof flipped - 2] = flipped[sizeof flipped - 2] == '0' ? '1' : '0';
  verify_bad(&ks, "uid-1", "node-a", text, flipped, "does not match");
  const char *two[1] = {k2};
  CHECK_EQ_INT(k8s_keys_load(two, 1, &ks2, err, sizeof err), 0);
  verify_bad(&ks2, "uid-1", "node-a", text, sig, "not one of this gslice's signing keys");
  /* Unsignable: a newline would make two messages one. */
  CHECK_EQ_INT(k8s_assigned_sign(&ks, "uid\n1", "node-a", text, sig_old, sizeof sig_old), -EINVAL);
  CHECK_EQ_INT(k8s_assigned_sign(&ks, "uid-1", "", text, sig_old, sizeof sig_old), -EINVAL);
  CHECK_EQ_INT(k8s_assigned_sign(&ks, "uid-1", "node-a", text, sig_old, 10), -EINVAL);

  /* Rotation: new key first signs, the old one still verifies; once dropped, it does not. */
  const char *both[2] = {k2, k1};
  CHECK_EQ_INT(k8s_keys_load(both, 2, &rot, err, sizeof err), 0);
  CHECK_EQ_INT(rot.n, 2);
  CHECK_EQ_INT(k8s_assigned_verify(&rot, "uid-1", "node-a", text, sig, err, sizeof err), 0);
  CHECK_EQ_INT(k8s_assigned_sign(&rot, "uid-1", "node-a", text, sig_old, sizeof sig_old), 0);
  CHECK(strncmp(sig_old + 3, ks2.key[0].id, 16) == 0); /* signed with the first */
  only_new = ks2;
  CHECK_EQ_INT(k8s_assigned_verify(&only_new, "uid-1", "node-a", text, sig_old, err, sizeof err),
               0);
  verify_bad(&only_new, "uid-1", "node-a", text, sig, "not one of");
  /* The same key twice is one key; three are refused. */
  const char *same[2] = {k1, link};
  CHECK_EQ_INT(k8s_keys_load(same, 2, &rot, err, sizeof err), 0);
  CHECK_EQ_INT(rot.n, 1);
  const char *three[3] = {k1, k2, k1};
  CHECK_EQ_INT(k8s_keys_load(three, 3, &rot, err, sizeof err), -EINVAL);
  k8s_keys_clear(&ks);
  CHECK_EQ_INT(ks.n, 0);
}

/* A pod: main asks 2 GPUs, 2GiB+1 byte and 31%; init asks 1 GPU, 1 byte, 0%; side asks none. */
static const char *pod_text =
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"t\",\"uid\":\"u\"},\"spec\":{\"nodeName\":"
    "\"node-a\",\"initContainers\":[{\"name\":\"init\",\"resources\":{\"limits\":{"
    "\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"1\"}}}],\"containers\":[{\"name\":"
    "\"main\",\"resources\":{\"limits\":{\"gslice.io/gpu\":2,\"gslice.io/gpu-memory\":"
    "\"2147483649\",\"gslice.io/gpu-compute\":\"31\"}}},{\"name\":\"side\"}]}}";

static const char *good =
    "{\"version\":1,\"node\":\"node-a\",\"containers\":["
    "{\"name\":\"main\",\"gpus\":[{\"uuid\":\"G0\",\"index\":0,\"memory\":1073741825,"
    "\"compute\":16},{\"uuid\":\"G1\",\"index\":1,\"memory\":1073741824,\"compute\":15}],"
    "\"computeLimit\":80,\"priority\":\"high\",\"weight\":4},"
    "{\"name\":\"init\",\"init\":true,\"gpus\":[{\"uuid\":\"G0\",\"index\":0,\"memory\":1,"
    "\"compute\":0}]}]}";

/* check_pod of text (good with from replaced by to) against pod (or pod_text). */
static int check_with(const char *from, const char *to, const char *pod, const char *word) {
  char text[2048], err[K8S_ERR_MAX] = "";
  struct k8s_assigned a;
  json_t *o = json_loads(pod ? pod : pod_text, 0, NULL);
  const char *at = from ? strstr(good, from) : NULL;
  int rc;
  if (from && !at)
    abort();
  if (from)
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
  else
    snprintf(text, sizeof text, "%s", good);
  if (!o || k8s_assigned_decode(text, &a, err, sizeof err))
    abort();
  rc = k8s_assigned_check_pod(&a, o, err, sizeof err);
  if (word && !strstr(err, word))
    fprintf(stderr, "check_pod error \"%s\" does not say \"%s\"\n", err, word);
  CHECK(!word || strstr(err, word));
  k8s_assigned_free(&a);
  json_decref(o);
  return rc;
}

/* check_pod of good made a sidecar assignment (version 2, the init entry "sidecar": true) when
 * sidecar, against pod. */
static int check_sidecar(bool sidecar, const char *pod, const char *word) {
  char text[2048], err[K8S_ERR_MAX] = "";
  const char *at = strstr(good, "\"init\":true");
  struct k8s_assigned a;
  json_t *o = json_loads(pod, 0, NULL);
  int rc;
  if (!at || !o)
    abort();
  if (sidecar)
    snprintf(text, sizeof text, "{\"version\":2%.*s\"init\":true,\"sidecar\":true%s",
             (int)(at - good - strlen("{\"version\":1")), good + strlen("{\"version\":1"),
             at + strlen("\"init\":true"));
  else
    snprintf(text, sizeof text, "%s", good);
  if (k8s_assigned_decode(text, &a, err, sizeof err))
    abort();
  CHECK(a.containers[1].sidecar == sidecar);
  rc = k8s_assigned_check_pod(&a, o, err, sizeof err);
  if (word && !strstr(err, word))
    fprintf(stderr, "check_pod error \"%s\" does not say \"%s\"\n", err, word);
  CHECK(!word || strstr(err, word));
  k8s_assigned_free(&a);
  json_decref(o);
  return rc;
}

static char *pod_with(const char *from, const char *to) {
  static char buf[2048];
  const char *at = strstr(pod_text, from);
  if (!at)
    abort();
  snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - pod_text), pod_text, to, at + strlen(from));
  return buf;
}

static void test_check_pod(void) {
  CHECK_EQ_INT(check_with(NULL, NULL, NULL, NULL), 0);
  CHECK_EQ_INT(k8s_split(2147483649ULL, 2, 0), 1073741825ULL);
  CHECK_EQ_INT(k8s_split(31, 2, 1), 15);
  /* The node is spec.nodeName. */
  CHECK_EQ_INT(check_with("\"node\":\"node-a\"", "\"node\":\"node-b\"", NULL, "spec.nodeName"),
               -EINVAL);
  CHECK_EQ_INT(check_with(NULL, NULL, pod_with("\"nodeName\":\"node-a\",", ""), "unset"), -EINVAL);
  /* Per GPU the split, in order: the remainder on the first GPU. */
  CHECK_EQ_INT(check_with("\"memory\":1073741825,", "\"memory\":1073741824,", NULL, "declares"),
               -EINVAL);
  CHECK_EQ_INT(check_with("\"compute\":16},{", "\"compute\":15},{", NULL, "declares"), -EINVAL);
  /* The same sum split the other way is refused too: one rule. */
  CHECK_EQ_INT(check_with("\"memory\":1073741825,\"compute\":16},{\"uuid\":\"G1\",\"index\":1,"
                          "\"memory\":1073741824,",
                          "\"memory\":1073741824,\"compute\":16},{\"uuid\":\"G1\",\"index\":1,"
                          "\"memory\":1073741825,",
                          NULL, "declares"),
               -EINVAL);
  /* More than declared (what quota counts). */
  CHECK_EQ_INT(check_with("\"memory\":1073741825,", "\"memory\":12884901888,", NULL, "declares"),
               -EINVAL);
  /* GPU count equals gslice.io/gpu. */
  CHECK_EQ_INT(check_with(",{\"uuid\":\"G1\",\"index\":1,\"memory\":1073741824,\"compute\":15}", "",
                          NULL, "assigned 1 GPU(s)"),
               -EINVAL);
  /* Memory 0 is no cap: refused, even when the pod declares 0. */
  CHECK_EQ_INT(
      check_with("\"memory\":1,", "\"memory\":0,",
                 pod_with("\"gslice.io/gpu-memory\":\"1\"", "\"gslice.io/gpu-memory\":\"0\""),
                 "memory 0"),
      -EINVAL);
  /* Containers: every one named exists, with the same kind; every asking one is there. */
  CHECK_EQ_INT(
      check_with("\"name\":\"init\",\"init\":true", "\"name\":\"ghost\",\"init\":true", NULL, NULL),
      -EINVAL);
  CHECK_EQ_INT(
      check_with("\"name\":\"init\",\"init\":true", "\"name\":\"init\",\"init\":false", NULL, NULL),
      -EINVAL);
  CHECK_EQ_INT(check_with("{\"name\":\"init\",\"init\":true,",
                          "{\"name\":\"side\",\"gpus\":[{\"uuid\":\"G1\",\"index\":1,\"memory\":1,"
                          "\"compute\":0}]},{\"name\":\"init\",\"init\":true,",
                          NULL, "asks for no"),
               -EINVAL);
  CHECK_EQ_INT(
      check_with(NULL, NULL,
                 pod_with("{\"name\":\"side\"}", "{\"name\":\"side\",\"resources\":{\"limits\":{"
                                                 "\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":"
                                                 "\"5\"}}}"),
                 "side asks for gslice.io/gpu but is not assigned"),
      -EINVAL);
  /* A sidecar entry exactly for an init container with restartPolicy Always: a sidecar runs to
   * the pod's end beside the app containers, and is counted so; a pod made a sidecar, or an
   * entry made one, would be counted or handed out as the other. */
  {
    char side[2048];
    snprintf(side, sizeof side, "%s",
             pod_with("{\"name\":\"init\",", "{\"name\":\"init\",\"restartPolicy\":\"Always\","));
    CHECK_EQ_INT(check_sidecar(true, side, NULL), 0);
    CHECK_EQ_INT(check_sidecar(false, side, "restartPolicy Always"), -EINVAL);
    CHECK_EQ_INT(check_sidecar(true, pod_text, "restartPolicy Always"), -EINVAL);
    CHECK_EQ_INT(check_sidecar(false, pod_text, NULL), 0);
    CHECK_EQ_INT(check_sidecar(true,
                               pod_with("{\"name\":\"init\",",
                                        "{\"name\":\"init\",\"restartPolicy\":\"Never\","),
                               "lacks"),
                 -EINVAL);
    /* restartPolicy on an app container makes no sidecar. */
    CHECK_EQ_INT(check_with(NULL, NULL,
                            pod_with("{\"name\":\"main\",",
                                     "{\"name\":\"main\",\"restartPolicy\":\"Always\","),
                            NULL),
                 0);
  }
  /* Bounds of what the admin's classes give (the values themselves are signed). */
  struct k8s_assigned a;
  char err[K8S_ERR_MAX];
  json_t *o = json_loads(pod_text, 0, NULL);
  CHECK_EQ_INT(k8s_assigned_decode(good, &a, err, sizeof err), 0);
  a.containers[0].weight = 1001;
  CHECK_EQ_INT(k8s_assigned_check_pod(&a, o, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "weight 1001 (1..1000)") != NULL);
  a.containers[0].weight = 4;
  a.containers[0].compute_limit = 10; /* below the 16% on its first GPU */
  CHECK_EQ_INT(k8s_assigned_check_pod(&a, o, err, sizeof err), -EINVAL);
  a.containers[0].compute_limit = 80;
  a.containers[0].priority = (enum k8s_priority)7;
  CHECK_EQ_INT(k8s_assigned_check_pod(&a, o, err, sizeof err), -EINVAL);
  CHECK(strstr(err, "priority unknown (high, normal or low)") != NULL);
  a.containers[0].priority = K8S_PRIO_HIGH;
  CHECK_EQ_INT(k8s_assigned_check_pod(&a, o, err, sizeof err), 0);
  k8s_assigned_free(&a);
  json_decref(o);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 77;
  }
  test_keys_and_signatures();
  test_check_pod();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return test_done();
}
