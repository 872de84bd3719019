/* SPDX-License-Identifier: Apache-2.0 */
/* Bench (b): token grant latency seen by N clients, each a slice of its own on GPU 0, asking
 * for the token, holding it for a short burst and handing it back, for D seconds. Latency is
 * from sending TOKEN_REQUEST to reading TOKEN_GRANT: the daemon's work plus the queue behind
 * the other clients' bursts.
 *
 * Service time, apart from that queue: from the moment the GPU was free for this request (the
 * later of sending the request and the previous token's holder sending its release; every
 * client is a thread of this process, so both are on one clock) to reading the grant. That is
 * the daemon's own work per grant, both socket trips and waking the client.
 *
 *   compute_grant N [SECONDS [BURST_NS [ACTIVE]]]
 *
 * ACTIVE (default N): that many clients loop; the others connect, take one token and then
 * stay connected and idle, so the GPU is free at every request of the active one. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"

static double duration = 3;
static uint64_t burst_ns = 50000;
static int idle_clients;
static _Atomic unsigned revokes;

struct worker {
  uint32_t slice;
  uint64_t nonce;
  bool idle; /* one token, then connected and idle */
  uint64_t *lat, *svc;
  size_t n, cap, nsvc;
};

/* When the holder of each token generation sent its release (by generation modulo the size). */
#define REL_SLOTS (1u << 16)
static _Atomic uint64_t rel_at[REL_SLOTS];
static _Atomic uint32_t rel_gen[REL_SLOTS];

static uint64_t ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *run(void *arg) {
  struct worker *w = arg;
  uint64_t buf[128];
  struct gs_msg m;
  int fd;

  if (gs_client_connect(gs_client_socket_path(), &fd) < 0 ||
      gs_client_hello_slice(fd, GS_ROLE_HOOK, w->slice, w->nonce, NULL, NULL, 0) < 0) {
    fprintf(stderr, "compute_grant: client of slice %u cannot connect\n", w->slice);
    return NULL;
  }
  uint64_t end = ns() + (uint64_t)(duration * 1e9);
  unsigned seed = w->slice;
  if (!w->idle && idle_clients) {
    /* Behind the idle clients' one token each. */
    struct timespec d = {0, 200000000};
    nanosleep(&d, NULL);
  }
  while (ns() < end) {
    struct gs_msg_token_request q = {0};
    uint64_t a = ns();
    int rc = gs_client_send(fd, GS_MSG_TOKEN_REQUEST, 0, &q, sizeof(q));
    /* A revoke of the previous token (this thread lost its CPU past the release deadline, and
     * the release crossed the revoke): counted, and the grant still comes. */
    while (rc == 0 && (rc = gs_client_recv(fd, buf, sizeof(buf), 5000, &m)) == 0 &&
           m.hdr.type == GS_MSG_TOKEN_REVOKE)
      atomic_fetch_add(&revokes, 1);
    if (rc < 0 || m.hdr.type != GS_MSG_TOKEN_GRANT) {
      fprintf(stderr, "compute_grant: slice %u stopped after %zu grants: %s (type %u)\n", w->slice,
              w->n, rc < 0 ? strerror(-rc) : "an answer other than a grant", m.hdr.type);
      break;
    }
    uint64_t got = ns(), lat = got - a, free_at = a;
    uint32_t gen = m.u.token_grant.generation, prev = (gen - 1) % REL_SLOTS;
    if (atomic_load(&rel_gen[prev]) == gen - 1 && atomic_load(&rel_at[prev]) > free_at)
      free_at = atomic_load(&rel_at[prev]);
    if (w->n == w->cap) {
      w->cap = w->cap ? 2 * w->cap : 4096;
      w->lat = realloc(w->lat, w->cap * sizeof(uint64_t));
      w->svc = realloc(w->svc, w->cap * sizeof(uint64_t));
    }
    w->lat[w->n++] = lat;
    /* A previous token whose release is not on record (a revoke, the first grant) tells
     * nothing about when the GPU was free: not a service sample unless the GPU was idle. */
    if (gen == 1 || atomic_load(&rel_gen[prev]) == gen - 1)
      w->svc[w->nsvc++] = got - free_at;
    /* The burst: as if kernels ran for burst_ns. */
    struct timespec b = {0, (long)burst_ns};
    nanosleep(&b, NULL);
    struct gs_msg_token_release r = {.generation = m.u.token_grant.generation,
                                     .used_ns = burst_ns,
                                     .launches = 1,
                                     .kernel_ns = burst_ns};
    /* On record before it is sent: the next grant cannot come before the daemon read it. */
    atomic_store(&rel_at[gen % REL_SLOTS], ns());
    atomic_store(&rel_gen[gen % REL_SLOTS], gen);
    if (gs_client_send(fd, GS_MSG_TOKEN_RELEASE, 0, &r, sizeof(r)) < 0)
      break;
    if (w->idle) {
      /* Connected, known to the scheduler, and idle from now on. */
      while (ns() < end)
        usleep(10000);
      break;
    }
    /* Think time before the next burst, 0..1 ms. */
    struct timespec t = {0, (long)(rand_r(&seed) % 1000000)};
    nanosleep(&t, NULL);
  }
  close(fd);
  return NULL;
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  if (argc > 2)
    duration = atof(argv[2]);
  if (argc > 3)
    burst_ns = strtoull(argv[3], NULL, 10);
  int active = argc > 4 ? atoi(argv[4]) : n;
  if (n < 1 || active < 1 || active > n) {
    fprintf(stderr, "usage: compute_grant N [SECONDS [BURST_NS [ACTIVE (1..N)]]]\n");
    return 2;
  }
  struct worker *w = calloc((size_t)n, sizeof(*w));
  pthread_t *t = calloc((size_t)n, sizeof(*t));
  int cfd;
  char err[256];

  if (gs_client_connect(gs_client_socket_path(), &cfd) < 0 ||
      gs_client_hello(cfd, GS_ROLE_RUNNER, 0, NULL) < 0) {
    fprintf(stderr, "compute_grant: no daemon on %s\n", gs_client_socket_path());
    return 1;
  }
  for (int i = 0; i < n; i++) {
    struct gs_slice_spec spec = {.compute_limit = 100, .weight = 1};
    struct gs_msg_registered reg;
    if (gs_client_register(cfd, &spec, &reg, err, sizeof(err)) < 0) {
      fprintf(stderr, "compute_grant: register: %s\n", err);
      return 1;
    }
    w[i].slice = reg.slice_id;
    w[i].nonce = reg.slice_nonce;
    w[i].idle = i >= active;
  }
  idle_clients = n - active;
  for (int i = 0; i < n; i++)
    pthread_create(&t[i], NULL, run, &w[i]);
  size_t total = 0, nsvc = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    if (!w[i].idle) {
      total += w[i].n;
      nsvc += w[i].nsvc;
    }
  }
  /* The idle clients' one token each is set-up, not a sample. */
  uint64_t *all = malloc((total ? total : 1) * sizeof(uint64_t));
  uint64_t *svc = malloc((nsvc ? nsvc : 1) * sizeof(uint64_t));
  size_t k = 0, ks = 0;
  for (int i = 0; i < n; i++) {
    if (!w[i].idle) {
      memcpy(all + k, w[i].lat, w[i].n * sizeof(uint64_t));
      k += w[i].n;
      memcpy(svc + ks, w[i].svc, w[i].nsvc * sizeof(uint64_t));
      ks += w[i].nsvc;
    }
    gs_client_unregister(cfd, w[i].slice, w[i].nonce, NULL, 0);
    free(w[i].lat);
    free(w[i].svc);
  }
  qsort(all, total, sizeof(uint64_t), cmp);
  qsort(svc, nsvc, sizeof(uint64_t), cmp);
  if (total && nsvc)
    printf("clients=%d active=%d grants=%zu p50_us=%.1f p99_us=%.1f svc_n=%zu svc_p50_us=%.1f "
           "svc_p99_us=%.1f revokes=%u\n",
           n, active, total, (double)all[total / 2] / 1e3, (double)all[total * 99 / 100] / 1e3,
           nsvc, (double)svc[nsvc / 2] / 1e3, (double)svc[nsvc * 99 / 100] / 1e3,
           atomic_load(&revokes));
  close(cfd);
  free(svc);
  free(all);
  free(w);
  free(t);
  return 0;
}
