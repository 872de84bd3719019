/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node --mode dra and the API server (resource.k8s.io/v1): the node's ResourceSlice
 * (one device per GPU, published again when missing or different) and the ResourceClaims the
 * kubelet asks us to prepare, turned into the numbers of gsliced slices. The builders and the
 * parser are pure (jansson only) so that unit tests hold every rule; the rest goes through
 * src/k8s/common/kube.h. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define DRA_MAX_SHARES 32
/* A request name is a DNS label, or "<request>/<subrequest>" (firstAvailable). */
#define DRA_REQUEST_MAX 128
#define DRA_POOL_MAX 256
#define DRA_DEVICE_MAX 64
#define DRA_SHARE_ID_MAX 64
#define DRA_UID_MAX 64
/* Memory is handed out in multiples of this (the hook reserves in 2 MiB granules). */
#define DRA_MEMORY_STEP (2ull << 20)
/* The least memory a claim's slice may have on a GPU: what one CUDA context takes there (the
 * hook counts each context's measured cost against the slice's cap: docs/memory.md, 518 MiB by
 * NVML and 527 MiB of the device's free memory on an H200 with driver 580), with room for what
 * the driver adds once it runs (modules, the first launch's local memory). Below it cuInit and
 * cuCtxCreate fail inside the slice and its containers crash-loop saying nothing clear. The
 * ResourceSlice's memory validRange starts here (the allocator rounds a smaller request up to
 * it), and a claim allocated less anyway (a slice published without it, a status written by
 * hand) is refused at Prepare. A multiple of DRA_MEMORY_STEP. */
#define DRA_CONTEXT_FLOOR (768ull << 20)
_Static_assert(DRA_CONTEXT_FLOOR % DRA_MEMORY_STEP == 0, "the floor is a step of the range");

/* The SliceConfig of one share, opaque config of driver gslice.io: the class's first, then the
 * claim's, which may only lower what the class sets. */
struct dra_slice_cfg {
  uint32_t compute_limit; /* percent; 0: none given (the caller's default) */
  int32_t priority;       /* enum gs_priority; GS_PRIORITY_NORMAL when none given */
  uint32_t weight;        /* GS_WEIGHT_MIN..GS_WEIGHT_MAX; 1 when none given */
};

/* One allocated result of driver gslice.io on this node's pool. */
struct dra_share {
  char request[DRA_REQUEST_MAX], pool[DRA_POOL_MAX], device[DRA_DEVICE_MAX];
  char share_id[DRA_SHARE_ID_MAX]; /* "" when the allocator gave none */
  uint32_t gpu_index;              /* from the device name gpu-<index> */
  uint64_t memory;                 /* consumedCapacity.memory, bytes, > 0 */
  uint32_t compute;                /* consumedCapacity.compute, 1..100: the request */
  struct dra_slice_cfg cfg;        /* the configs whose requests[] name this share's request */
};

struct dra_claim {
  char ns[64], name[256], uid[DRA_UID_MAX];
  size_t nshares;
  struct dra_share shares[DRA_MAX_SHARES];
};

/* Pure: a ResourceClaim object into c. metadata.uid must be uid (else -ESTALE: the claim was
 * replaced, err names both uids); status.allocation must be there (-EAGAIN: not allocated);
 * results of other drivers or pools are skipped; the opaque configs of driver gslice.io must be
 * SliceConfigs (an unknown field, kind or apiVersion: -EINVAL naming it); a device is named
 * gpu-<index> as dra_slice_build names it (no leading zeros). What the shares consume is checked
 * against the node's GPUs by dra_rec_from_claim (dra.h). pool is this node's (its name). 0 or
 * -errno with err. */
int dra_claim_parse(const json_t *claim, const char *uid, const char *pool, struct dra_claim *c,
                    char *err, size_t err_len);

struct node;
/* GET /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>, then dra_claim_parse with
 * the node's pool. Call without n->lock. 0 or -errno with err. */
int dra_claim_read(struct node *n, const char *ns, const char *name, const char *uid,
                   struct dra_claim *c, char *err, size_t err_len);

/* One GPU as the ResourceSlice shows it. */
struct dra_gpu {
  uint32_t index;
  char uuid[GS_UUID_MAX * 2];
  char product[GS_NAME_MAX]; /* "" : attribute productName left out */
  uint64_t memory;           /* bytes */
};

/* Pure: the ResourceSlice of node `node` (name "<node>-gslice.io", pool "<node>") with these
 * GPUs (none: no devices) at pool generation `generation`; `shares` is the value of each
 * device's capacity "shares" (every share consumes one: the most slices one GPU takes).
 * NULL on ENOMEM. The request policies and why: dra_api.c. */
json_t *dra_slice_build(const char *node, const struct dra_gpu *gpus, size_t ngpus,
                        int64_t generation, uint32_t shares);
/* "<node>-gslice.io" into out: 0, or -EINVAL (err says why) when node is not a DNS subdomain
 * or the name would be over 253. */
int dra_slice_name(const char *node, char *out, size_t len, char *err, size_t err_len);
/* Pure: whether the slice `have` (as the API server returned it) already says what `want` says
 * (spec only, ignoring pool.generation). */
bool dra_slice_same(const json_t *have, const json_t *want);
/* In the slice dra_publish keeps (*cache), never sent: the slice it last wrote. */
#define DRA_SENT_KEY "gslice.io/sent"
/* Pure: whether dra_publish must write: have (read now) does not say what want says, and is not
 * what the API server answered to the same want the last time (cache: dra_publish's, which
 * keeps what it sent) — an API server may keep less than it was sent (fields of a feature it
 * has off), and writing again would only bump the generation every period. */
bool dra_slice_needs_write(const json_t *have, const json_t *want, const json_t *cache);
/* Pure: 0, or -EOPNOTSUPP (err says what to turn on) when the API server kept a device of the
 * slice without allowMultipleAllocations (DRAConsumableCapacity off: whole GPUs only). */
int dra_slice_kept(const json_t *slice, char *err, size_t err_len);

/* The node's ResourceSlice from n->gpus, shares = n->cfg.slots_per_gpu (none while gsliced is down:
 * a GPU whose gsliced is gone is not offered): created when missing (the kubelet wipes its node's
 * slices when it starts), updated with the resourceVersion read when it differs, pool.generation
 * one more than the one read or last written. *cache holds the slice last read or written
 * (json_decref it at the end; NULL at first). Call every 10 s and at once after registration,
 * without n->lock. 0 or -errno with err. */
int dra_publish(struct node *n, json_t **cache, char *err, size_t err_len);
/* Deletes this node's ResourceSlices of driver gslice.io (at a clean stop); none is success. */
int dra_unpublish(struct node *n, char *err, size_t err_len);
