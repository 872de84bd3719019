/* SPDX-License-Identifier: Apache-2.0 */
/* The API server client's settings (kube.h): a kubeconfig (YAML: its current context's cluster
 * and user) or the pod's service account, and the files they name (tokens, certificates, inline
 * base64). It opens no connection and makes no request; kube.c does. */
#include "kubeconfig.h"
#include "errtext.h"
#include "fileio.h"
#include "kube.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

/* ---- files and base64 ----------------------------------------------------------------- */

int kube_read_file(const char *what, const char *path, char **ret, size_t *ret_len, char *err,
                   size_t errlen) {
  int rc = gs_file_read(AT_FDCWD, path, GS_FILE_REGULAR, KUBE_FILE_MAX, ret, ret_len);

  if (rc == -EFBIG)
    return k8s_err(err, errlen, rc, "%s %s: larger than %s", what, path, KUBE_FILE_MAX_TEXT);
  if (rc == -EINVAL)
    return k8s_err(err, errlen, rc, "%s %s: not a regular file", what, path);
  if (rc < 0)
    return k8s_err(err, errlen, rc, "%s %s: %s", what, path, strerror(-rc));
  return 0;
}

static int b64val(int c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

/* Standard base64, padding optional, whitespace skipped (YAML folds long lines). */
static int b64_decode(const char *in, char **ret, size_t *ret_len) {
  size_t n = strlen(in), o = 0;
  char *out = malloc(n / 4 * 3 + 4);
  uint32_t acc = 0;
  int bits = 0, pad = 0;

  if (!out)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    int c = (unsigned char)in[i], v;
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    if (c == '=') {
      pad++;
      continue;
    }
    v = b64val(c);
    if (v < 0 || pad) {
      free(out);
      return -EINVAL;
    }
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (char)((acc >> bits) & 0xff);
    }
  }
  out[o] = 0;
  *ret = out;
  *ret_len = o;
  return 0;
}

/* ---- kubeconfig (YAML) ------------------------------------------------------------------ */

static yaml_node_t *ymap_get(yaml_document_t *doc, yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE)
    return NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    if (k && k->type == YAML_SCALAR_NODE && strcmp((char *)k->data.scalar.value, key) == 0)
      return yaml_document_get_node(doc, p->value);
  }
  return NULL;
}

static const char *ystr(yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The entry of a named list ("clusters", "users", "contexts") called name: its inner map. */
static yaml_node_t *ynamed(yaml_document_t *doc, yaml_node_t *root, const char *list,
                           const char *inner, const char *name) {
  yaml_node_t *seq = ymap_get(doc, root, list);
  if (!seq || seq->type != YAML_SEQUENCE_NODE)
    return NULL;
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
       it++) {
    yaml_node_t *e = yaml_document_get_node(doc, *it);
    const char *n = ystr(ymap_get(doc, e, "name"));
    if (n && strcmp(n, name) == 0)
      return ymap_get(doc, e, inner);
  }
  return NULL;
}

/* Reads field "<base>-data" (base64) or "<base>" (a path, relative to dir). */
static int pem_field(yaml_document_t *doc, yaml_node_t *map, const char *base, const char *dir,
                     char **ret, size_t *ret_len, char *err, size_t errlen) {
  char key[64], path[PATH_MAX + 64];
  const char *v;
  int rc;

  snprintf(key, sizeof key, "%s-data", base);
  if ((v = ystr(ymap_get(doc, map, key)))) {
    rc = b64_decode(v, ret, ret_len);
    if (rc == -EINVAL)
      return k8s_err(err, errlen, rc, "kubeconfig: %s is not base64", key);
    return rc;
  }
  if (!(v = ystr(ymap_get(doc, map, base))))
    return 0;
  if (v[0] == '/')
    snprintf(path, sizeof path, "%s", v);
  else
    snprintf(path, sizeof path, "%s/%s", dir, v);
  snprintf(key, sizeof key, "kubeconfig: %s", base);
  return kube_read_file(key, path, ret, ret_len, err, errlen);
}

void kube_config_free(struct kube_config *c) {
  if (!c)
    return;
  free(c->server);
  free(c->token);
  free(c->token_file);
  free(c->ca);
  free(c->cert);
  free(c->key);
  free(c);
}

static int check_server(struct kube_config *c, char *err, size_t errlen) {
  size_t n;
  if (!c->server || (strncmp(c->server, "https://", 8) != 0 && strncmp(c->server, "http://", 7)))
    return k8s_err(err, errlen, -EINVAL,
                   "server \"%s\" must start with https:// (or http:// for a test server)",
                   c->server ? c->server : "");
  n = strlen(c->server);
  while (n > 0 && c->server[n - 1] == '/')
    c->server[--n] = 0; /* paths start with "/" */
  if ((c->cert == NULL) != (c->key == NULL))
    return k8s_err(err, errlen, -EINVAL,
                   "a client certificate needs its key and the other way round");
  return 0;
}

/* The current context's cluster and user (NULL when the context names none) in root. */
static int current_context(yaml_document_t *doc, yaml_node_t *root, const char *path,
                           yaml_node_t **ret_cluster, yaml_node_t **ret_user, char *err,
                           size_t errlen) {
  const char *name = ystr(ymap_get(doc, root, "current-context")), *v;
  yaml_node_t *ctx, *user;

  if (!name || !*name)
    return k8s_err(err, errlen, -EINVAL,
                   "kubeconfig %s: no current-context (kubectl config use-context NAME)", path);
  ctx = ynamed(doc, root, "contexts", "context", name);
  if (!ctx)
    return k8s_err(err, errlen, -EINVAL, "kubeconfig %s: current-context \"%s\" is not in contexts",
                   path, name);
  v = ystr(ymap_get(doc, ctx, "cluster"));
  *ret_cluster = v ? ynamed(doc, root, "clusters", "cluster", v) : NULL;
  if (!*ret_cluster)
    return k8s_err(err, errlen, -EINVAL,
                   "kubeconfig %s: context \"%s\" names cluster \"%s\", which is not in clusters",
                   path, name, v ? v : "");
  v = ystr(ymap_get(doc, ctx, "user"));
  user = v ? ynamed(doc, root, "users", "user", v) : NULL;
  if (v && !user)
    return k8s_err(err, errlen, -EINVAL,
                   "kubeconfig %s: context \"%s\" names user \"%s\", which is not in users", path,
                   name, v);
  *ret_user = user;
  return 0;
}

/* server, insecure-skip-tls-verify and the CA of a cluster entry, into c. */
static int cluster_settings(yaml_document_t *doc, yaml_node_t *cluster, const char *path,
                            const char *dir, struct kube_config *c, char *err, size_t errlen) {
  const char *v = ystr(ymap_get(doc, cluster, "server"));

  if (!v)
    return k8s_err(err, errlen, -EINVAL, "kubeconfig %s: cluster has no server", path);
  if (!(c->server = strdup(v)))
    return -ENOMEM;
  v = ystr(ymap_get(doc, cluster, "insecure-skip-tls-verify"));
  c->insecure = v && strcmp(v, "true") == 0;
  return pem_field(doc, cluster, "certificate-authority", dir, &c->ca, &c->ca_len, err, errlen);
}

/* The credentials of a user entry, into c: a token, a token file, a client certificate. */
static int user_settings(yaml_document_t *doc, yaml_node_t *user, const char *path, const char *dir,
                         struct kube_config *c, char *err, size_t errlen) {
  const char *v;
  int rc;

  if (ymap_get(doc, user, "exec") || ymap_get(doc, user, "auth-provider"))
    return k8s_err(err, errlen, -EINVAL,
                   "kubeconfig %s: user uses exec/auth-provider credentials, which gslice does "
                   "not run; give it a token or a client certificate",
                   path);
  if ((v = ystr(ymap_get(doc, user, "token"))) && !(c->token = strdup(v)))
    return -ENOMEM;
  if ((v = ystr(ymap_get(doc, user, "tokenFile"))) && !c->token &&
      asprintf(&c->token_file, "%s%s%s", v[0] == '/' ? "" : dir, v[0] == '/' ? "" : "/", v) < 0) {
    c->token_file = NULL;
    return -ENOMEM;
  }
  if ((rc = pem_field(doc, user, "client-certificate", dir, &c->cert, &c->cert_len, err, errlen)))
    return rc;
  return pem_field(doc, user, "client-key", dir, &c->key, &c->key_len, err, errlen);
}

/* The settings of a parsed kubeconfig whose directory is dir. */
static int config_of(yaml_document_t *doc, const char *path, const char *dir,
                     struct kube_config **ret, char *err, size_t errlen) {
  yaml_node_t *root = yaml_document_get_root_node(doc), *cluster = NULL, *user = NULL;
  struct kube_config *c;
  int rc;

  if (!root || root->type != YAML_MAPPING_NODE)
    return k8s_err(err, errlen, -EINVAL,
                   "kubeconfig %s: expected a mapping with clusters, users and contexts", path);
  if ((rc = current_context(doc, root, path, &cluster, &user, err, errlen)))
    return rc;
  if (!(c = calloc(1, sizeof(*c))))
    return -ENOMEM;
  if ((rc = cluster_settings(doc, cluster, path, dir, c, err, errlen)) ||
      (user && (rc = user_settings(doc, user, path, dir, c, err, errlen))) ||
      (rc = check_server(c, err, errlen))) {
    kube_config_free(c);
    return rc;
  }
  *ret = c;
  return 0;
}

int kube_config_from_file(const char *path, struct kube_config **ret, char *err, size_t errlen) {
  yaml_parser_t parser;
  yaml_document_t doc;
  char *text = NULL, dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  size_t len;
  int rc;

  rc = kube_read_file("kubeconfig", path, &text, &len, err, errlen);
  if (rc < 0)
    return rc;
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
  if (!yaml_parser_initialize(&parser)) {
    free(text);
    return -ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (yaml_parser_load(&parser, &doc)) {
    rc = config_of(&doc, path, dir, ret, err, errlen);
    yaml_document_delete(&doc);
  } else {
    rc = k8s_err(err, errlen, -EINVAL, "kubeconfig %s: not YAML: %s at line %zu", path,
                 parser.problem ? parser.problem : "error", parser.problem_mark.line + 1);
  }
  yaml_parser_delete(&parser);
  free(text);
  return rc;
}

int kube_config_in_cluster(const char *sa_dir, struct kube_config **ret, char *err, size_t errlen) {
  const char *host = secure_getenv("KUBERNETES_SERVICE_HOST");
  const char *port = secure_getenv("KUBERNETES_SERVICE_PORT");
  struct kube_config *c;
  char path[PATH_MAX];
  int rc;

  if (!sa_dir)
    sa_dir = KUBE_SA_DIR;
  if (!host || !*host || !port || !*port)
    return k8s_err(err, errlen, -ENOENT,
                   "not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset): "
                   "give --kubeconfig FILE");
  c = calloc(1, sizeof(*c));
  if (!c)
    return -ENOMEM;
  /* An IPv6 service address needs brackets in a URL. */
  if (asprintf(&c->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port) <
      0) {
    c->server = NULL;
    rc = -ENOMEM;
    goto out;
  }
  snprintf(path, sizeof path, "%s/token", sa_dir);
  if (access(path, R_OK) < 0) {
    rc = k8s_err(err, errlen, -errno, "in-cluster: %s: %s (is a service account mounted?)", path,
                 strerror(errno));
    goto out;
  }
  if (!(c->token_file = strdup(path))) {
    rc = -ENOMEM;
    goto out;
  }
  snprintf(path, sizeof path, "%s/ca.crt", sa_dir);
  rc = kube_read_file("in-cluster: CA", path, &c->ca, &c->ca_len, err, errlen);
  if (rc < 0)
    goto out;
  *ret = c;
  return 0;
out:
  kube_config_free(c);
  return rc;
}
