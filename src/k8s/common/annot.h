/* SPDX-License-Identifier: Apache-2.0 */
/* The two annotations gslice-node and gslice-extender share (docs/kubernetes.md):
 * the node's GPU inventory gslice.io/gpus and the pod's placement gslice.io/assigned. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define K8S_ANNOT_GPUS "gslice.io/gpus"
#define K8S_ANNOT_ASSIGNED "gslice.io/assigned"
#define K8S_ANNOT_COMPUTE_LIMIT "gslice.io/compute-limit"
#define K8S_ANNOT_PRIORITY "gslice.io/priority"
#define K8S_ANNOT_WEIGHT "gslice.io/weight"
#define K8S_ANNOT_POLICY "gslice.io/policy"
#define K8S_RES_GPU "gslice.io/gpu"
#define K8S_RES_MEMORY "gslice.io/gpu-memory"
#define K8S_RES_COMPUTE "gslice.io/gpu-compute"

/* The version this code writes; it reads every version up to it. */
#define K8S_ANNOT_VERSION 1
/* gslice.io/assigned only: the version of an assignment with a sidecar entry (and the newest
 * one read). A reader that ignored "sidecar" would count the sidecar as ending before the app
 * containers and hand its slots' entry to them: such a reader must refuse it, not misread it.
 * An assignment without sidecars stays version 1, for every reader. */
#define K8S_ANNOT_ASSIGNED_SIDECAR_VERSION 2
/* Bounds that keep a hostile or corrupt annotation from costing much. */
#define K8S_MAX_GPUS 64        /* per node */
#define K8S_MAX_CONTAINERS 128 /* per pod (containers + init containers) */
#define K8S_UUID_MAX 96
#define K8S_NAME_MAX 254 /* a DNS subdomain (node names) is at most 253 */
#define K8S_MAX_SLOTS 1024
#define K8S_ERR_MAX 256

/* gslice.io/priority values, in gsliced's order (k8s_priority_gs gives gsliced's value). */
enum k8s_priority { K8S_PRIO_LOW = 0, K8S_PRIO_NORMAL = 1, K8S_PRIO_HIGH = 2 };

struct k8s_gpu {
  uint32_t index;
  char uuid[K8S_UUID_MAX];
  uint64_t memory; /* bytes a slice may be given on it */
  bool healthy;
  uint32_t slots;
};

/* gslice.io/gpus */
struct k8s_node_gpus {
  int version;
  time_t heartbeat; /* seconds since the epoch, UTC */
  uint32_t slots_per_gpu;
  uint32_t ngpus;
  struct k8s_gpu gpus[K8S_MAX_GPUS];
};

struct k8s_assigned_gpu {
  char uuid[K8S_UUID_MAX];
  uint32_t index;
  uint64_t memory;  /* bytes */
  uint32_t compute; /* % of this GPU guaranteed */
};

struct k8s_assigned_container {
  char name[K8S_NAME_MAX];
  bool init;
  bool sidecar; /* an init container with restartPolicy Always: runs to the pod's end; init too */
  uint32_t ngpus;
  struct k8s_assigned_gpu *gpus; /* ngpus of them */
  uint32_t compute_limit;        /* % of each GPU, >= each gpus[i].compute */
  enum k8s_priority priority;
  uint32_t weight;
};

/* gslice.io/assigned; containers are owned (k8s_assigned_free). */
struct k8s_assigned {
  int version;
  char node[K8S_NAME_MAX];
  uint32_t ncontainers;
  struct k8s_assigned_container *containers;
};

/* Decoders: text is the annotation's value. They return 0, -EINVAL (malformed:
 * err names the field and what was wrong), -EPROTONOSUPPORT (a newer version
 * than K8S_ANNOT_VERSION) or -ENOMEM. Unknown fields are ignored, so older
 * readers keep working when a field is added. *ret is untouched on failure. */
int k8s_node_gpus_decode(const char *text, struct k8s_node_gpus *ret, char *err, size_t errlen);
int k8s_assigned_decode(const char *text, struct k8s_assigned *ret, char *err, size_t errlen);
void k8s_assigned_free(struct k8s_assigned *a);

/* Encoders: a malloc'd compact JSON string in *ret_text. Return 0, -EINVAL
 * (the struct breaks a rule the decoder checks) or -ENOMEM. */
int k8s_node_gpus_encode(const struct k8s_node_gpus *g, char **ret_text);
int k8s_assigned_encode(const struct k8s_assigned *a, char **ret_text);

/* Whether two assignments place the same containers on the same GPUs with the
 * same amounts (what a 409 on a repeated bind must show to count as success). */
bool k8s_assigned_equal(const struct k8s_assigned *a, const struct k8s_assigned *b);

/* RFC 3339 times ("2026-11-30T18:00:00Z", "...18:00:00.5+01:00"): to and from
 * seconds since the epoch. Format writes UTC with "Z"; buf >= 21 bytes. */
int k8s_time_parse(const char *text, time_t *ret);
/* The same, saying in err what was wrong: the form, or a field out of range (month 1..12, a
 * day the month has, leap years counted, hour 0..23, minute 0..59, second 0..59 or a leap
 * second's 60 at 23:59 UTC, an offset within 23:59). -EINVAL; *ret untouched on failure. */
int k8s_time_parse_err(const char *text, time_t *ret, char *err, size_t errlen);
void k8s_time_format(time_t t, char *buf, size_t len);

/* gslice.io/priority text <-> enum, with words.h's words (GS_PRIORITY_WORDS); parse returns 0
 * or -EINVAL. A value outside the enum is named "unknown", never as a valid priority. */
int k8s_priority_parse(const char *text, enum k8s_priority *ret);
const char *k8s_priority_name(enum k8s_priority p);
/* The same priority as gsliced's enum gs_priority; INT32_MIN (no gs_priority) outside the enum. */
int32_t k8s_priority_gs(enum k8s_priority p);
