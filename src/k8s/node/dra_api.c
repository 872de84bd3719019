/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node --mode dra and the API server: the node's ResourceSlice and the claims it
 * prepares (dra_api.h). First the interface, compiling; the bodies follow. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dra_api.h"
#include "node.h"

int dra_claim_parse(const json_t *claim, const char *uid, const char *pool, struct dra_claim *c,
                    char *err, size_t err_len) {
  (void)claim, (void)uid, (void)pool, (void)c;
  snprintf(err, err_len, "dra_claim_parse: not written yet");
  return -ENOSYS;
}

int dra_claim_read(struct node *n, const char *ns, const char *name, const char *uid,
                   struct dra_claim *c, char *err, size_t err_len) {
  (void)n, (void)ns, (void)name, (void)uid, (void)c;
  snprintf(err, err_len, "dra_claim_read: not written yet");
  return -ENOSYS;
}

json_t *dra_slice_build(const char *node, const struct dra_gpu *gpus, size_t ngpus,
                        int64_t generation) {
  (void)node, (void)gpus, (void)ngpus, (void)generation;
  return NULL;
}

bool dra_slice_same(const json_t *have, const json_t *want) {
  (void)have, (void)want;
  return false;
}

int dra_publish(struct node *n, json_t **cache, char *err, size_t err_len) {
  (void)n, (void)cache;
  snprintf(err, err_len, "dra_publish: not written yet");
  return -ENOSYS;
}

int dra_unpublish(struct node *n, char *err, size_t err_len) {
  (void)n;
  snprintf(err, err_len, "dra_unpublish: not written yet");
  return -ENOSYS;
}
