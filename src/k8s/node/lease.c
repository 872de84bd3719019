/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node's liveness: the Lease coordination.k8s.io/v1 gslice-node-<node> in
 * --lease-namespace, renewed every heartbeat as the kubelet renews its node Lease (client-go's
 * lease controller): an update of the Lease last read, with its resourceVersion; created when
 * missing; read again after a conflict (409) or a 404. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube.h"
#include "node.h"

/* The API's MicroTime: RFC 3339 with microseconds, UTC. */
void node_micro_time(char *out, size_t len) {
  struct timespec ts;
  struct tm tm;

  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  /* The fields' ranges stated (gmtime_r's, a 4-digit year), so that the 28 bytes are seen. */
  snprintf(out, len, "%04u-%02u-%02uT%02u:%02u:%02u.%06uZ", (unsigned)(tm.tm_year + 1900) % 10000,
           (unsigned)(tm.tm_mon + 1) % 100, (unsigned)tm.tm_mday % 100, (unsigned)tm.tm_hour % 100,
           (unsigned)tm.tm_min % 100, (unsigned)tm.tm_sec % 100,
           (unsigned)(ts.tv_nsec / 1000) % 1000000u);
}

int node_lease_name(const struct node *n, char *out, size_t len) {
  int l = snprintf(out, len, "%s%s", NODE_LEASE_PREFIX, n->cfg.node_name);
  return l < 0 || (size_t)l >= len || l > 253 ? -ENAMETOOLONG : 0;
}

/* spec of the Lease we hold: holderIdentity the node, renewTime now (acquireTime too when the
 * Lease was not ours). */
static int lease_spec(const struct node *n, json_t *lease, const char *now) {
  json_t *spec = json_object_get(lease, "spec");
  if (!json_is_object(spec)) {
    spec = json_object();
    if (!spec || json_object_set_new(lease, "spec", spec))
      return -ENOMEM;
  }
  const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
  if (!holder || strcmp(holder, n->cfg.node_name) || !json_object_get(spec, "acquireTime"))
    json_object_set_new(spec, "acquireTime", json_string(now));
  if (json_object_set_new(spec, "holderIdentity", json_string(n->cfg.node_name)) ||
      json_object_set_new(spec, "leaseDurationSeconds", json_integer(NODE_LEASE_DURATION_S)) ||
      json_object_set_new(spec, "renewTime", json_string(now)))
    return -ENOMEM;
  return 0;
}

static int lease_create(struct node *n, const char *coll, const char *name, json_t **cache,
                        char *err, size_t err_len) {
  char now[40];
  node_micro_time(now, sizeof now);
  json_t *lease =
      json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
                "metadata", "name", name, "namespace", n->cfg.lease_namespace);
  if (!lease || lease_spec(n, lease, now)) {
    json_decref(lease);
    return -ENOMEM;
  }
  json_t *got = NULL;
  int r = kube_post(n->kube, coll, lease, &got, err, err_len);
  json_decref(lease);
  if (r == 0) {
    json_decref(*cache);
    *cache = got;
  }
  return r;
}

int node_lease_renew(struct node *n, json_t **cache, char *err, size_t err_len) {
  char name[NODE_NAME_MAX + 16], coll[NODE_NAME_MAX + 64], path[3 * NODE_NAME_MAX];
  int r = -EIO;

  const char *ns = n->cfg.lease_namespace;
  if (!*ns || strlen(ns) > 63 ||
      strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(ns)) {
    snprintf(err, err_len, "--lease-namespace \"%s\" is not a namespace name", ns);
    return -EINVAL;
  }
  if (node_lease_name(n, name, sizeof name) < 0) {
    snprintf(err, err_len, "the Lease name %s%s is over 253 characters", NODE_LEASE_PREFIX,
             n->cfg.node_name);
    return -ENAMETOOLONG;
  }
  snprintf(coll, sizeof coll, "/apis/coordination.k8s.io/v1/namespaces/%s/leases",
           n->cfg.lease_namespace);
  snprintf(path, sizeof path, "%s/%s", coll, name);
  /* Three tries: read (or create), update; a conflict means another write came between. */
  for (int attempt = 0; attempt < 3; attempt++) {
    if (!*cache) {
      r = kube_get(n->kube, path, cache, err, err_len);
      if (r == -ENOENT) {
        r = lease_create(n, coll, name, cache, err, err_len);
        if (r == -EEXIST)
          continue; /* made meanwhile: read it */
        return r;
      }
      if (r < 0)
        return r;
    }
    char now[40];
    node_micro_time(now, sizeof now);
    json_t *lease = json_deep_copy(*cache), *got = NULL;
    if (!lease || lease_spec(n, lease, now)) {
      json_decref(lease);
      return -ENOMEM;
    }
    r = kube_put(n->kube, path, lease, &got, err, err_len);
    json_decref(lease);
    if (r == 0) {
      json_decref(*cache);
      *cache = got;
      return 0;
    }
    if (r != -EEXIST && r != -ENOENT)
      return r;
    json_decref(*cache); /* changed or gone since: read it again */
    *cache = NULL;
  }
  return r;
}
