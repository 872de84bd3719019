/* SPDX-License-Identifier: Apache-2.0 */
/* A command-line client of src/k8s/common/kube.c for tests/k8s/kube_client.sh:
 *   k8s_kube_client KUBECONFIG get|list|patch|post|watch PATH [ARG...]
 * prints what it got, exits 0 or the errno of the failure (and prints the error); and for
 * tests/k8s/kube_keepalive.sh, requests one after the other on one client:
 *   k8s_kube_client KUBECONFIG seq METHOD:PATH|sleep:MS|count:out-of-step...
 * printing "METHOD PATH STATUS" or "METHOD PATH error ERRNO: WHY" for each (count: the
 * connections kube.c found out of step so far, "out-of-step N"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube.h"

struct seen {
  int left;
};

static int on_event(const char *type, json_t *obj, void *user) {
  struct seen *s = user;
  const char *name = kube_meta_str(obj, "name");
  printf("%s %s %s\n", type, name ? name : "-", kube_meta_str(obj, "resourceVersion"));
  fflush(stdout);
  return --s->left <= 0 ? 1 : 0;
}

static int done(int rc, const char *err) {
  if (rc < 0)
    fprintf(stderr, "error %d: %s\n", rc, err);
  return rc < 0 ? -rc : rc;
}

/* The seq steps, each on the same client k (its kept connections). */
static int seq(struct kube *k, char **steps, int n) {
  char err[KUBE_ERR_MAX];
  json_t *empty = json_object();
  for (int i = 0; i < n; i++) {
    char method[16], *path = strchr(steps[i], ':');
    if (!path || path - steps[i] >= (long)sizeof(method))
      return 2;
    snprintf(method, sizeof method, "%.*s", (int)(path - steps[i]), steps[i]);
    path++;
    if (!strcmp(method, "count")) { /* count:out-of-step */
      printf("out-of-step %llu\n", (unsigned long long)kube_out_of_step(k));
      fflush(stdout);
      continue;
    }
    if (!strcmp(method, "sleep")) {
      long ms = atol(path);
      nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
      continue;
    }
    long status = 0;
    json_t *ans = NULL;
    bool body = !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH");
    int rc =
        kube_request(k, method, path, NULL, body ? empty : NULL, &status, &ans, err, sizeof err);
    if (rc)
      printf("%s %s error %d: %s\n", method, path, -rc, err);
    else
      printf("%s %s %ld\n", method, path, status);
    fflush(stdout);
    json_decref(ans);
  }
  json_decref(empty);
  return 0;
}

int main(int argc, char **argv) {
  char err[KUBE_ERR_MAX] = "";
  struct kube *k;
  json_t *out = NULL, *in = NULL;
  int rc;

  if (argc < 4) {
    fprintf(stderr, "usage: %s KUBECONFIG get|list|patch|post|watch PATH [ARG...]\n", argv[0]);
    return 2;
  }
  rc = kube_open(argv[1], &k, err, sizeof err);
  if (rc)
    return done(rc, err);
  kube_set_timeout(k, 3000);
  const char *op = argv[2], *path = argv[3];
  if (!strcmp(op, "seq")) {
    rc = seq(k, argv + 3, argc - 3);
    kube_close(k);
    return rc;
  }
  if ((strcmp(op, "patch") == 0 || strcmp(op, "post") == 0) && argc > 4) {
    in = json_loads(argv[4], 0, NULL);
    if (!in)
      return 2;
  }
  if (strcmp(op, "get") == 0) {
    rc = kube_get(k, path, &out, err, sizeof err);
  } else if (strcmp(op, "patch") == 0) {
    rc = kube_merge_patch(k, path, in, &out, err, sizeof err);
  } else if (strcmp(op, "post") == 0) {
    rc = kube_post(k, path, in, &out, err, sizeof err);
  } else if (strcmp(op, "list") == 0) {
    char *rv = NULL;
    rc = kube_list(k, path, &out, &rv, err, sizeof err);
    if (!rc)
      printf("items %zu rv %s\n", json_array_size(out), rv);
    free(rv);
    json_decref(out);
    out = NULL;
  } else if (strcmp(op, "watch") == 0 && argc >= 7) {
    struct seen s = {atoi(argv[6])};
    char *rv = NULL;
    rc = kube_watch(k, path, argv[4], atoi(argv[5]), on_event, &s, &rv, err, sizeof err);
    printf("end %d rv %s\n", rc, rv ? rv : "-");
    free(rv);
  } else {
    return 2;
  }
  if (out) {
    char *t = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    printf("%s\n", t);
    free(t);
  }
  json_decref(out);
  json_decref(in);
  kube_close(k);
  return done(rc, err);
}
