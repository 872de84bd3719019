/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-webhook --ca-bundle-from FILE --webhook-config NAME: the caBundle of every webhook of
 * the MutatingWebhookConfiguration NAME kept equal to FILE, the PEM CA that signed --tls-cert,
 * for installs whose certificate is not cert-manager's (its CA injector does this otherwise). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct wh_ca_sync;

/* kubeconfig NULL: in-cluster. 0, or a negative errno with err saying why. */
int wh_ca_sync_new(const char *kubeconfig, const char *ca_file, const char *config_name,
                   struct wh_ca_sync **ret, char *err, size_t errlen);
/* Reads FILE and, when it differs from what was last written (or nothing was yet), writes it
 * into each webhook's clientConfig.caBundle that differs (GET, then PUT at that
 * resourceVersion: a concurrent change is a 409, tried again at the next call). 0 with
 * *ret_wrote telling whether it wrote, or a negative errno with err saying why. */
int wh_ca_sync_run(struct wh_ca_sync *s, bool *ret_wrote, char *err, size_t errlen);
void wh_ca_sync_free(struct wh_ca_sync *s);
