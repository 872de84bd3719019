/* SPDX-License-Identifier: Apache-2.0 */
/* dra_publish (src/k8s/node/dra_api.c) driven as gslice-node's DRA loop drives it, for
 * tests/k8s/dra_publish.sh, without a kubelet or gsliced:
 *   k8s_dra_publish KUBECONFIG NODE GPUS_FILE PERIOD_MS SECONDS
 * Every period it reads GPUS_FILE (one GPU a line: "INDEX UUID MEMORY [PRODUCT]"; no file:
 * gsliced does not answer) into the node's GPUs, calls dra_publish and prints
 * "publish RC GENERATION ERR" (the generation of the slice it holds). When GPUS_FILE.stop
 * appears, or SECONDS pass, it calls dra_unpublish, prints "unpublish RC ERR" and exits.
 *   k8s_dra_publish claim KUBECONFIG NODE NAMESPACE NAME UID
 * reads the claim (dra_claim_read) and prints "claim RC ERR", then one line a share:
 * "share REQUEST DEVICE GPU MEMORY COMPUTE LIMIT PRIORITY WEIGHT SHAREID". */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dra_api.h"
#include "fileio.h"
#include "kube.h"
#include "node.h"
#include "words.h"

static void read_gpus(struct node *n, const char *file) {
  char *text = NULL, *save = NULL;
  size_t len;

  pthread_mutex_lock(&n->lock);
  n->ngpus = 0;
  n->daemon_up = gs_file_read(AT_FDCWD, file, 0, 1 << 16, &text, &len) == 0;
  for (char *l = text ? strtok_r(text, "\n", &save) : NULL; l && n->ngpus < GS_MAX_GPUS;
       l = strtok_r(NULL, "\n", &save)) {
    struct node_gpu *g = &n->gpus[n->ngpus];
    unsigned idx;
    uint64_t mem;
    char uuid[NODE_UUID_MAX];
    if (sscanf(l, "%u %95s %" SCNu64, &idx, uuid, &mem) == 3) {
      memset(g, 0, sizeof(*g));
      g->index = idx, g->memory = mem;
      snprintf(g->uuid, sizeof(g->uuid), "%s", uuid);
      n->ngpus++;
    }
  }
  pthread_mutex_unlock(&n->lock);
  free(text);
}

static long long gen_of(const json_t *s) {
  return json_integer_value(
      json_object_get(json_object_get(json_object_get(s, "spec"), "pool"), "generation"));
}

static int claim(char **argv) {
  static struct node n;
  static struct dra_claim c;
  char err[KUBE_ERR_MAX] = "";

  snprintf(n.cfg.node_name, sizeof(n.cfg.node_name), "%s", argv[3]);
  if (kube_open(argv[2], &n.kube, err, sizeof(err)) < 0) {
    fprintf(stderr, "kube_open: %s\n", err);
    return 1;
  }
  int r = dra_claim_read(&n, argv[4], argv[5], argv[6], &c, err, sizeof(err));
  printf("claim %d %s\n", r, r < 0 ? err : "");
  for (size_t i = 0; r == 0 && i < c.nshares; i++) {
    const struct dra_share *s = &c.shares[i];
    printf("share %s %s %u %" PRIu64 " %u %u %s %u %s\n", s->request, s->device, s->gpu_index,
           s->memory, s->compute, s->cfg.compute_limit, gs_priority_name(s->cfg.priority),
           s->cfg.weight, s->share_id[0] ? s->share_id : "-");
  }
  kube_close(n.kube);
  return 0;
}

int main(int argc, char **argv) {
  static struct node n;
  char err[KUBE_ERR_MAX], stop[4096];
  json_t *cache = NULL;

  if (argc == 7 && !strcmp(argv[1], "claim"))
    return claim(argv);
  if (argc != 6) {
    fprintf(stderr, "usage: %s KUBECONFIG NODE GPUS_FILE PERIOD_MS SECONDS\n", argv[0]);
    return 2;
  }
  snprintf(n.cfg.node_name, sizeof(n.cfg.node_name), "%s", argv[2]);
  n.cfg.slots_per_gpu = 16;
  pthread_mutex_init(&n.lock, NULL);
  if (kube_open(argv[1], &n.kube, err, sizeof(err)) < 0) {
    fprintf(stderr, "kube_open: %s\n", err);
    return 1;
  }
  snprintf(stop, sizeof(stop), "%s.stop", argv[3]);
  long period = atol(argv[4]);
  time_t end = time(NULL) + atol(argv[5]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  while (time(NULL) < end && access(stop, F_OK) != 0) {
    read_gpus(&n, argv[3]);
    err[0] = 0;
    int r = dra_publish(&n, &cache, err, sizeof(err));
    printf("publish %d %lld %s\n", r, gen_of(cache), err);
    struct timespec ts = {period / 1000, (period % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  err[0] = 0;
  int r = dra_unpublish(&n, err, sizeof(err));
  printf("unpublish %d %s\n", r, err);
  json_decref(cache);
  kube_close(n.kube);
  return r < 0 ? 1 : 0;
}
