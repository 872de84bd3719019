/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-webhook --self-signed-secret NAME: the serving certificate made at start, for clusters
 * without cert-manager. One kubernetes.io/tls Secret holds a CA (EC P-256, 10 years, CN
 * gslice-webhook-ca: ca.crt, ca.key) and a serving certificate for the Service's name that it
 * signed (1 year: tls.crt, tls.key), so every replica serves the same CA; the first replica
 * makes it (a 409 on create: another won, its Secret is read). A serving certificate within 30
 * days of its end, or not for the Service's name, is replaced by a new one from the same CA (PUT
 * at the Secret's resourceVersion; a 409: read again). The pair is written, 0600, into a
 * directory of its own for the server (httpd.h serves files, re-read when they change). Keys are
 * never logged. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Before its end a serving certificate is replaced. */
#define WH_RENEW_BEFORE_S (30L * 24 * 3600)

struct wh_selfsign;

struct wh_selfsign_cfg {
  const char *kubeconfig; /* NULL: in-cluster */
  const char *ns;         /* the Secret's namespace */
  const char *secret;     /* its name */
  const char *service;    /* the name served: "gslice-webhook.gslice-system.svc" */
  const char *dir;        /* where tls.crt, tls.key and ca.crt are written (a private one) */
};

/* 0, or a negative errno with err saying why. */
int wh_selfsign_new(const struct wh_selfsign_cfg *cfg, struct wh_selfsign **ret, char *err,
                    size_t errlen);
/* Reads (or makes) the Secret, renews its serving certificate if due, and writes the files.
 * *ret_renewed: whether this call made a serving certificate (or the whole Secret). 0; -EAGAIN
 * when a renewal could not be written but the Secret's pair may still be served (it is written
 * to the files; err says why; call again later); or a negative errno with err saying why (the
 * files are then left as they were). */
int wh_selfsign_run(struct wh_selfsign *s, bool *ret_renewed, char *err, size_t errlen);
/* Whether the certificate written last is within WH_RENEW_BEFORE_S of its end at now (true
 * before any was written). No API call. */
bool wh_selfsign_due(const struct wh_selfsign *s, long now);
/* The files' paths: dir/tls.crt, dir/tls.key, dir/ca.crt (strings s owns). */
struct wh_selfsign_files {
  const char *cert, *key, *ca;
};
struct wh_selfsign_files wh_selfsign_files(const struct wh_selfsign *s);
void wh_selfsign_free(struct wh_selfsign *s);
