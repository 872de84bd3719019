/* SPDX-License-Identifier: Apache-2.0 */
/* A small Kubernetes API server client (libcurl + jansson): the connection settings
 * (kubeconfig or in-cluster), GET, list, chunked watch, merge patch and POST. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBE_ERR_MAX 512

/* How to reach the API server. Certificates and keys are kept as PEM bytes
 * (from a file or a kubeconfig's *-data field) and handed to libcurl as blobs. */
struct kube_config {
  char *server;     /* "https://10.0.0.1:6443" or "http://127.0.0.1:8080" (tests) */
  char *token;      /* bearer token, or NULL */
  char *token_file; /* re-read on every request (projected tokens rotate), or NULL */
  char *ca;         /* PEM, or NULL: the system's CAs */
  size_t ca_len;
  char *cert; /* client certificate PEM, or NULL */
  size_t cert_len;
  char *key; /* its key PEM */
  size_t key_len;
  bool insecure; /* insecure-skip-tls-verify */
};

/* From a kubeconfig file (YAML, read with libyaml): the current context's
 * cluster and user; relative paths are taken from the file's directory.
 * Supports server, certificate-authority[-data], insecure-skip-tls-verify,
 * token, tokenFile, client-certificate[-data], client-key[-data]; refuses
 * exec and auth-provider users with a clear error. Every file it names (and the kubeconfig
 * itself) is a regular file of at most 1 MiB, read whole. Returns 0, -ENOENT, -EINVAL (err says
 * which field), -EFBIG (a file over 1 MiB) or -ENOMEM. */
int kube_config_from_file(const char *path, struct kube_config **ret, char *err, size_t errlen);
/* In-cluster: KUBERNETES_SERVICE_HOST/PORT and sa_dir's token and ca.crt
 * (sa_dir NULL: KUBE_SA_DIR). */
int kube_config_in_cluster(const char *sa_dir, struct kube_config **ret, char *err, size_t errlen);
void kube_config_free(struct kube_config *c);

struct kube;

/* kubeconfig NULL: in-cluster. Takes nothing from the environment but the
 * in-cluster variables. */
int kube_open(const char *kubeconfig, struct kube **ret, char *err, size_t errlen);
/* Takes ownership of c. */
int kube_open_config(struct kube_config *c, struct kube **ret);
void kube_close(struct kube *k);
/* Limit of one request (not a watch), ms; default 10000. */
void kube_set_timeout(struct kube *k, long ms);
/* Makes a running kube_watch return -ECANCELED soon (any thread). */
void kube_cancel(struct kube *k);
/* Kept connections closed before a request because the server had sent bytes on them unasked
 * (out of step: the next answer read there would be another's); the first one is logged, and
 * from then on no connection is kept past its answer. */
uint64_t kube_out_of_step(struct kube *k);
const char *kube_server(const struct kube *k);

/* One request. path starts with "/" ("/api/v1/nodes?limit=500"); body is
 * sent as JSON with content_type (NULL: application/json). Returns 0 when the
 * server answered (any status: *ret_status, and *ret_body if the answer was
 * JSON, else NULL), or a negative errno when it could not be reached
 * (-ETIMEDOUT, -ECONNREFUSED, -EIO; err says why). Connections are kept between
 * requests (up to 8 per client, none idle past 30 s); on a kept connection the
 * server closed without answering, any method but POST is sent again once on a
 * fresh one, a POST never (-EIO: it may have been taken); a kept connection with
 * bytes waiting before the request (kube_out_of_step) is not used, nor, from then
 * on, kept. */
int kube_request(struct kube *k, const char *method, const char *path, const char *content_type,
                 const json_t *body, long *ret_status, json_t **ret_body, char *err, size_t errlen);

/* The same, mapping the status: 2xx -> 0 with *ret_body (may be NULL when not
 * wanted); 404 -ENOENT, 409 -EEXIST, 410 -ESTALE, 401/403 -EACCES, 400/422
 * -EINVAL, 429 -EAGAIN, others -EIO; err carries the server's Status message. */
int kube_get(struct kube *k, const char *path, json_t **ret_body, char *err, size_t errlen);
int kube_post(struct kube *k, const char *path, const json_t *body, json_t **ret_body, char *err,
              size_t errlen);
/* PUT: replaces the object (its metadata.resourceVersion given: 409 -EEXIST when the object
 * changed since). */
int kube_put(struct kube *k, const char *path, const json_t *body, json_t **ret_body, char *err,
             size_t errlen);
/* application/merge-patch+json (RFC 7386). */
int kube_merge_patch(struct kube *k, const char *path, const json_t *patch, json_t **ret_body,
                     char *err, size_t errlen);

/* A whole list (following "continue" pages of limit items): *ret_items is a
 * new array of the objects, *ret_rv (malloc'd) the list's resourceVersion to
 * watch from. */
int kube_list(struct kube *k, const char *path, json_t **ret_items, char **ret_rv, char *err,
              size_t errlen);

/* The same, one page in memory at a time: cb gets each object (borrowed) and
 * returns 0 to go on, anything else to stop the list with it. For lists of many
 * thousands of pods, whose whole JSON tree would take gigabytes. */
typedef int (*kube_item_cb)(json_t *item, void *user);
int kube_list_each(struct kube *k, const char *path, kube_item_cb cb, void *user, char **ret_rv,
                   char *err, size_t errlen);

/* Event callback: type is ADDED, MODIFIED, DELETED or BOOKMARK; object is
 * borrowed. Return 0 to go on, anything else to stop the watch with it. */
typedef int (*kube_watch_cb)(const char *type, json_t *object, void *user);

/* Watches path (a collection, e.g. "/api/v1/pods") from resource version rv
 * with ?watch=1&allowWatchBookmarks=true; events arrive one JSON object per
 * line of the chunked answer. *ret_rv (if given, malloc'd, may be NULL-in)
 * follows each event's metadata.resourceVersion so the caller resumes where
 * it stopped. Returns 0 when the server closed the stream (timeout_s, a
 * normal end: watch again from *ret_rv), -ESTALE when rv is too old (410 or
 * an ERROR event with code 410: list again), -ECANCELED (kube_cancel), the
 * callback's value, or a transport error. A stream silent for longer than
 * timeout_s + 30 s is treated as dead (-ETIMEDOUT). */
int kube_watch(struct kube *k, const char *path, const char *rv, int timeout_s, kube_watch_cb cb,
               void *user, char **ret_rv, char *err, size_t errlen);

/* A field of an object received from Go code: the exact key first, then one
 * that matches without regard to case, as Go's encoding/json decodes. */
json_t *kube_json_get(const json_t *obj, const char *key);
/* obj.metadata.<field> as a string, or NULL. */
const char *kube_meta_str(const json_t *obj, const char *field);
/* obj.metadata.annotations[key], or NULL. */
const char *kube_annotation(const json_t *obj, const char *key);
