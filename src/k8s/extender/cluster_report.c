/* SPDX-License-Identifier: Apache-2.0 */
/* What the cluster view reports (cluster.h): totals, per-GPU statistics, per-namespace figures
 * and the extender's /metrics. Read-only: it takes the view's lock for reading and changes no
 * record. */
#include "cluster_records.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"
#include "prom.h"
#include "proto.h"

struct ns_sum {
  char ns[K8S_NAME_MAX];
  uint64_t mem;
  uint64_t compute;
  uint32_t pods;
};

static int ns_cmp(const void *a, const void *b) {
  return strcmp(((const struct ns_sum *)a)->ns, ((const struct ns_sum *)b)->ns);
}

void cluster_totals(struct cluster *c, uint64_t now_ms, struct cluster_totals *ret) {
  struct cluster_totals t = {0};
  pthread_rwlock_rdlock(&c->lock);
  SMAP_EACH(&c->nodes, e) {
    struct xnode *n = e->value;
    t.node_records++;
    if (!n->present)
      continue;
    t.nodes++;
    if (!n->unusable[0] && now_ms > n->pn.heartbeat_ms &&
        now_ms - n->pn.heartbeat_ms > c->cfg.node_timeout_ms)
      t.stale_nodes++;
    for (uint32_t i = 0; i < n->pn.ngpus; i++) {
      t.gpus++;
      t.memory = place_sat_add(t.memory, n->gpus[i].memory);
      t.mem_used = place_sat_add(t.mem_used, n->gpus[i].mem_used);
      t.compute_used = place_sat_add(t.compute_used, n->gpus[i].compute_used);
    }
  }
  SMAP_EACH(&c->pods, e) {
    struct xpod *p = e->value;
    if (p->held) {
      t.pods++;
      t.assumed += p->assumed;
    } else if (p->forged) {
      t.forged_pods++;
    }
  }
  t.forged_total = c->forged_total;
  pthread_rwlock_unlock(&c->lock);
  *ret = t;
}

void cluster_gpu_stats(struct cluster *c, uint64_t fit_mem, uint32_t fit_compute,
                       struct cluster_gpu_stats *ret) {
  struct cluster_gpu_stats t = {0};
  pthread_rwlock_rdlock(&c->lock);
  SMAP_EACH(&c->nodes, e) {
    struct xnode *n = e->value;
    if (!n->present || n->unusable[0])
      continue;
    for (uint32_t i = 0; i < n->pn.ngpus; i++) {
      const struct place_gpu *g = &n->gpus[i];
      uint64_t free_mem = g->memory > g->mem_used ? g->memory - g->mem_used : 0;
      t.gpus++;
      t.memory = place_sat_add(t.memory, g->memory);
      t.mem_used = place_sat_add(t.mem_used, g->mem_used);
      t.compute_used = place_sat_add(t.compute_used, g->compute_used);
      if (g->slices == 0)
        t.whole_free++;
      if ((uint64_t)g->compute_used + fit_compute > GS_PERCENT_MAX) {
        t.stranded = place_sat_add(t.stranded, free_mem);
        t.stranded_compute_full = place_sat_add(t.stranded_compute_full, free_mem);
      } else if (free_mem < fit_mem || g->slices >= g->slots || !g->healthy) {
        t.stranded = place_sat_add(t.stranded, free_mem);
        t.stranded_fragment = place_sat_add(t.stranded_fragment, free_mem);
      }
    }
  }
  pthread_rwlock_unlock(&c->lock);
  *ret = t;
}

/* The cluster-wide figures of /metrics. */
static void totals_metrics(const struct cluster_totals *t, struct gs_buf *out) {
  static const char *const all[] = {"state", "all", NULL}, *const stale[] = {"state", "stale",
                                                                             NULL};
  static const char *const total[] = {"state", "total", NULL};
  static const char *const assigned[] = {"state", "assigned", NULL};
  gs_prom_family(out, "gslice_extender_nodes", "gauge",
                 "Nodes known, and those whose heartbeat is stale.");
  gs_prom_sample_u64(out, "gslice_extender_nodes", NULL, all, t->nodes);
  gs_prom_sample_u64(out, "gslice_extender_nodes", NULL, stale, t->stale_nodes);
  gs_prom_family(out, "gslice_extender_gpus", "gauge", "GPUs on known nodes.");
  gs_prom_sample_u64(out, "gslice_extender_gpus", NULL, NULL, t->gpus);
  gs_prom_family(out, "gslice_extender_memory_bytes", "gauge",
                 "GPU memory on known nodes, and assigned.");
  gs_prom_sample_u64(out, "gslice_extender_memory_bytes", NULL, total, t->memory);
  gs_prom_sample_u64(out, "gslice_extender_memory_bytes", NULL, assigned, t->mem_used);
  gs_prom_family(out, "gslice_extender_assumed_pods", "gauge",
                 "Pods bound by this extender whose binding the watch has not echoed yet.");
  gs_prom_sample_u64(out, "gslice_extender_assumed_pods", NULL, NULL, t->assumed);
  gs_prom_family(out, "gslice_extender_forged_assignments_total", "counter",
                 "Assignments not counted since start: unsigned, signed for another pod or node, "
                 "or not what the pod declares.");
  gs_prom_sample_u64(out, "gslice_extender_forged_assignments_total", NULL, NULL, t->forged_total);
  gs_prom_family(out, "gslice_extender_forged_pods", "gauge",
                 "Bound pods whose assignment is not counted now.");
  gs_prom_sample_u64(out, "gslice_extender_forged_pods", NULL, NULL, t->forged_pods);
}

void cluster_metrics(struct cluster *c, struct gs_buf *out, uint64_t now_ms) {
  struct ns_sum *sums = NULL;
  size_t n = 0, cap = 0;
  struct cluster_totals t;

  cluster_totals(c, now_ms, &t);
  pthread_rwlock_rdlock(&c->lock);
  SMAP_EACH(&c->pods, e) {
    struct xpod *p = e->value;
    size_t i;
    if (!p->held)
      continue;
    for (i = 0; i < n && strcmp(sums[i].ns, p->id.ns) != 0; i++)
      ;
    if (i == n) {
      if (n == cap) {
        struct ns_sum *s = realloc(sums, (cap = cap ? cap * 2 : 16) * sizeof(*s));
        if (!s)
          break;
        sums = s;
      }
      memset(&sums[n], 0, sizeof sums[n]);
      memcpy(sums[n].ns, p->id.ns, sizeof sums[n].ns);
      n++;
    }
    sums[i].mem = place_sat_add(sums[i].mem, p->mem_total);
    sums[i].compute = place_sat_add(sums[i].compute, p->compute_total);
    sums[i].pods++;
  }
  pthread_rwlock_unlock(&c->lock);
  if (n)
    qsort(sums, n, sizeof(*sums), ns_cmp);
  gs_prom_family(out, "gslice_namespace_memory_bytes", "gauge",
                 "GPU memory assigned to the namespace's pods (bound or being bound), bytes: what "
                 "requests.gslice.io/gpu-memory quota counts.");
  for (size_t i = 0; i < n; i++)
    gs_prom_sample_u64(out, "gslice_namespace_memory_bytes", NULL,
                       (const char *const[]){"namespace", sums[i].ns, NULL}, sums[i].mem);
  gs_prom_family(out, "gslice_namespace_compute_percent", "gauge",
                 "GPU compute assigned to the namespace's pods, % of one GPU: what "
                 "requests.gslice.io/gpu-compute quota counts.");
  for (size_t i = 0; i < n; i++)
    gs_prom_sample_u64(out, "gslice_namespace_compute_percent", NULL,
                       (const char *const[]){"namespace", sums[i].ns, NULL}, sums[i].compute);
  gs_prom_family(out, "gslice_namespace_pods", "gauge",
                 "Pods of the namespace holding gslice GPU slices.");
  for (size_t i = 0; i < n; i++)
    gs_prom_sample_u64(out, "gslice_namespace_pods", NULL,
                       (const char *const[]){"namespace", sums[i].ns, NULL}, sums[i].pods);
  totals_metrics(&t, out);
  free(sums);
}
