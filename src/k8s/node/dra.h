/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node --mode dra: the kubelet plugin of DRA driver gslice.io. Two gRPC servers — the
 * registration socket the kubelet's plugin watcher finds (pluginregistration) and the service
 * socket (v1 and v1beta1 DRAPlugin, DRAResourceHealth) — and the prepared claims: one held
 * gsliced slice per claim, whose start directory and CDI spec the claim's containers share, and
 * a record of it in state_dir/claims/<uid> that outlives gslice-node, gsliced and the kubelet. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dra_api.h"
#include "proto.h"

struct node;
struct node_gpu;

/* The services, by their full method paths (src/k8s/proto/dra.proto, pluginregistration.proto). */
#define DRA_M_PREPARE_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
#define DRA_M_UNPREPARE_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
#define DRA_M_PREPARE_V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources"
#define DRA_M_UNPREPARE_V1BETA1                                                                    \
  "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources"
#define DRA_M_WATCH_V1 "/v1.DRAResourceHealth/NodeWatchResources"
#define DRA_M_WATCH_V1BETA1 "/v1beta1.DRAResourceHealth/NodeWatchResources"
#define DRA_M_WATCH_V1ALPHA1 "/v1alpha1.DRAResourceHealth/NodeWatchResources"
#define DRA_M_GET_INFO "/pluginregistration.Registration/GetInfo"
#define DRA_M_NOTIFY "/pluginregistration.Registration/NotifyRegistrationStatus"
#define DRA_PLUGIN_TYPE "DRAPlugin"

/* The most claims prepared at once on a node, and claims in one call. */
#define DRA_MAX_CLAIMS 1024
#define DRA_MAX_BATCH 256
/* The claims of one batch prepared (unprepared) at the same time, each on a thread of its own:
 * their reads of the API server, record and spec writes and gsliced's answers overlap
 * (bench/dra_prepare.sh and docs/benchmarks.md, "DRA Prepare"). */
#define DRA_PREPARE_PARALLEL 8
/* How long a Prepare or Unprepare waits for another call that has its claim in flight. */
#define DRA_SETTLE_S 20
/* A prepared claim's key: the start directory, alloc/ links, CDI device name and GSLICE_K8S_SLOTS
 * are "claim-<uid>" (never a device plugin's "gpu<i>-<k>"). */
#define DRA_KEY_PREFIX "claim-"
#define DRA_KEY_MAX (DRA_UID_MAX + 8)
/* Slices of prepared claims in gsliced: "dra.<seq>.<namespace>.<claim>", cut to 63. */
#define DRA_SLICE_PREFIX "dra."
#define DRA_REC_MAX 32768
#define DRA_RESULTS_MAX (DRA_MAX_SHARES * (DRA_REQUEST_MAX + DRA_POOL_MAX + DRA_DEVICE_MAX + 3))

/* One prepared claim, as recorded. */
struct dra_rec {
  char uid[DRA_UID_MAX], ns[64], name[256];
  uint32_t slice_id;
  uint64_t nonce;
  /* Written before REGISTER, so that a slice made just before a crash is found by its name at
   * the next start and removed (dra_reconcile_daemon). */
  bool pending;
  /* Not recorded: being prepared by one thread of a batch, outside n->lock. Until it is cleared
   * (under n->lock) the rest of the record, its file, slice, start directory and spec are that
   * thread's: others read only uid, ns, name and slice_name, which stay as they are, keep its
   * slice in gsliced and touch nothing else of it. */
  bool inflight;
  char slice_name[GS_NAME_MAX];
  char start[128], slice_dir[256];
  char memory[512], devices[1024]; /* slice.env's GSLICE_MEMORY_LIMIT, CUDA_VISIBLE_DEVICES */
  uint32_t compute_limit;
  /* What REGISTER asked, to make the slice again when gsliced lost it:
   * "<gpu index>:<request %>:<memory cap bytes>" comma separated, priority's name, weight. */
  char gpus[512];
  char priority[16];
  uint32_t weight;
  /* The allocated results the answer names, "<request> <pool> <device>" comma separated. */
  char results[DRA_RESULTS_MAX];
};

/* Pure. The record's text (malloc'd) and back: 0 or -errno (-EBADMSG: corrupt). */
int dra_rec_format(const struct dra_rec *r, char **ret, size_t *ret_len);
int dra_rec_parse(char *text, struct dra_rec *r);
/* Pure. What the kubelet names a claim by, checked before anything is made of it: a namespace
 * (DNS label), a name (DNS subdomain), a UID (letters, digits, '-'). 0 or -EINVAL with err. */
int dra_claim_ids_check(const char *ns, const char *name, const char *uid, char *err,
                        size_t err_len);
/* Pure. The slice of claim c on GPUs gpus (gsliced's): per GPU, the memory cap and compute
 * request its shares consume (summed when several land on one GPU: at most the GPU's memory and
 * 100; a GPU not in gpus is -ENODEV), the limit, priority and weight its SliceConfigs give (100,
 * normal, 1 when none), which must agree across its shares (one claim, one slice, held to one
 * limit on all its GPUs: a class's computeLimit is never lifted by a share of another class).
 * The limit is raised to what shares stacked on one GPU request together, refused where that
 * would lift another GPU of the slice past what its own shares' limits add up to. Fills r (uid,
 * ns, name, gpus, memory, devices, compute_limit, priority, weight, results). 0 or -errno with
 * err. */
int dra_rec_from_claim(const struct dra_claim *c, const struct node_gpu *gpus, uint32_t ngpus,
                       struct dra_rec *r, char *err, size_t err_len);
/* Pure. The REGISTER spec of r (its name included). 0 or -EBADMSG. */
int dra_rec_spec(const struct dra_rec *r, struct gs_slice_spec *spec);
/* The claim's key and CDI names. */
void dra_key(const char *uid, char *out, size_t len);
void dra_cdi_file(const char *uid, char *out, size_t len);

/* A batch of the kubelet's: each claim prepared or unprepared on its own (one failing never
 * fails another), answered in one reply by claim UID. ops is what is done per claim. */
struct dra_ops {
  /* 0 with the prepared claim's record copied into *out, or -errno with err. */
  int (*prepare)(void *ctx, const char *ns, const char *name, const char *uid, struct dra_rec *out,
                 char *err, size_t err_len);
  /* 0 (an unknown claim too), or -errno with err. */
  int (*unprepare)(void *ctx, const char *ns, const char *name, const char *uid, char *err,
                   size_t err_len);
  /* Claims of one batch given to prepare (unprepare) at the same time, from as many threads
   * (0 or 1: one after the other, on the caller's). The batch returns once all are done; a UID
   * is never in flight twice in one batch (a batch naming one twice is refused). */
  unsigned parallel;
};
/* The NodePrepareResources / NodeUnprepareResources reply for request req: 0 and a malloc'd
 * reply, or a gRPC status (> 0) with err for a request that is not one. */
int dra_prepare_batch(const struct dra_ops *ops, void *ctx, const uint8_t *req, size_t len,
                      uint8_t **ret, size_t *ret_len, char *err, size_t err_len);
int dra_unprepare_batch(const struct dra_ops *ops, void *ctx, const uint8_t *req, size_t len,
                        uint8_t **ret, size_t *ret_len, char *err, size_t err_len);

/* ---- the running plugin (main.c's) ---- */
/* Loads the records and starts both servers. 0 or -errno with err. */
int dra_start(struct node *n, char *err, size_t err_len);
/* The main loop's turn: the sockets there (served again when removed), slices reconciled with
 * gsliced once it answers (and again after it restarts: gone slices made anew), the health
 * stream. daemon_back: gsliced just came back. */
void dra_tick(struct node *n, bool daemon_back);
/* The health stream's message again (GPUs and gsliced's state): after every inventory change
 * and every 10 s (the kubelet counts a device unreported for long as unknown). */
void dra_health_publish(struct node *n);
/* Claims whose ResourceClaim is gone from the API server (404) or was replaced (another UID)
 * are unprepared here: what a kubelet that lost its state (or never says Unprepare) leaves.
 * Without n->lock (it reads the API server); at the start and every minute, each time right
 * after the ResourceSlice was published (the API server serves resource.k8s.io/v1). */
void dra_gc(struct node *n);
/* Whether the kubelet said it registered us since the last call (publish the slice at once). */
bool dra_registered_event(struct node *n);
/* Stops both servers and removes their sockets; the records and slices stay. */
void dra_stop(struct node *n);
