/* SPDX-License-Identifier: Apache-2.0 */
/* The caBundle writer (cabundle.h). */
#include "cabundle.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "kube.h"

#define CA_MAX (1u << 20)
#define CONFIG_PATH "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"

struct wh_ca_sync {
  struct kube *k;
  char *ca_file;
  char *path;    /* the configuration's API path */
  char *written; /* the base64 last written, NULL before */
};

/* A DNS subdomain, as Kubernetes names the object. */
static bool object_name(const char *n) {
  size_t len = strlen(n);
  return len > 0 && len <= 253 && strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-.") == len &&
         n[0] != '-' && n[0] != '.' && n[len - 1] != '-' && n[len - 1] != '.';
}

int wh_ca_sync_new(const char *kubeconfig, const char *ca_file, const char *config_name,
                   struct wh_ca_sync **ret, char *err, size_t errlen) {
  struct wh_ca_sync *s;
  int rc;

  if (!object_name(config_name)) {
    snprintf(err, errlen, "--webhook-config \"%s\" is not an object name", config_name);
    return -EINVAL;
  }
  if (!(s = calloc(1, sizeof(*s))) || !(s->ca_file = strdup(ca_file)) ||
      asprintf(&s->path, "%s%s", CONFIG_PATH, config_name) < 0) {
    if (s)
      s->path = NULL;
    wh_ca_sync_free(s);
    return -ENOMEM;
  }
  if ((rc = kube_open(kubeconfig, &s->k, err, errlen))) {
    wh_ca_sync_free(s);
    return rc;
  }
  *ret = s;
  return 0;
}

/* FILE as base64, or NULL with err saying why. */
static char *read_b64(const char *path, char *err, size_t errlen) {
  char *pem = NULL, *b64 = NULL;
  size_t len = 0;
  int rc = gs_file_read(AT_FDCWD, path, GS_FILE_REGULAR, CA_MAX, &pem, &len);
  if (rc) {
    snprintf(err, errlen, "--ca-bundle-from %s: %s", path, strerror(-rc));
    return NULL;
  }
  if (!strstr(pem, "-----BEGIN CERTIFICATE-----"))
    snprintf(err, errlen, "--ca-bundle-from %s: no PEM certificate in it", path);
  else if ((b64 = malloc(4 * ((len + 2) / 3) + 1)))
    EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)pem, (int)len);
  else
    snprintf(err, errlen, "out of memory");
  free(pem);
  return b64;
}

/* Sets each webhook's caBundle to b64: the number changed, or -EINVAL when obj has none. */
static int set_bundles(json_t *obj, const char *b64) {
  json_t *hooks = json_object_get(obj, "webhooks"), *h;
  size_t i;
  int n = 0;
  if (!json_array_size(hooks))
    return -EINVAL;
  json_array_foreach(hooks, i, h) {
    json_t *cc = json_object_get(h, "clientConfig");
    const char *now = json_string_value(json_object_get(cc, "caBundle"));
    if (!json_is_object(cc))
      return -EINVAL;
    if (now && strcmp(now, b64) == 0)
      continue;
    if (json_object_set_new(cc, "caBundle", json_string(b64)))
      return -ENOMEM;
    n++;
  }
  return n;
}

int wh_ca_sync_run(struct wh_ca_sync *s, bool *ret_wrote, char *err, size_t errlen) {
  char *b64 = read_b64(s->ca_file, err, errlen);
  json_t *obj = NULL;
  int rc = 0;

  *ret_wrote = false;
  if (!b64)
    return -EINVAL;
  if (s->written && strcmp(s->written, b64) == 0)
    goto out;
  if ((rc = kube_get(s->k, s->path, &obj, err, errlen)))
    goto out;
  int changed = set_bundles(obj, b64);
  if (changed < 0) {
    snprintf(err, errlen, "%s: no webhooks with a clientConfig to give the caBundle", s->path);
    rc = changed == -ENOMEM ? -ENOMEM : -EINVAL;
    goto out;
  }
  if (changed > 0 && (rc = kube_put(s->k, s->path, obj, NULL, err, errlen)))
    goto out; /* a 409 (changed since the GET) included: the next call tries again */
  *ret_wrote = changed > 0;
  free(s->written);
  s->written = b64;
  b64 = NULL;
out:
  json_decref(obj);
  free(b64);
  return rc;
}

void wh_ca_sync_free(struct wh_ca_sync *s) {
  if (!s)
    return;
  kube_close(s->k);
  free(s->ca_file);
  free(s->path);
  free(s->written);
  free(s);
}
