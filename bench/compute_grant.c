/* Bench (b): token grant latency seen by N clients, each a slice of its own on GPU 0, asking
 * for the token, holding it for a short burst and handing it back, for D seconds. Latency is
 * from sending TOKEN_REQUEST to reading TOKEN_GRANT: the daemon's work plus the queue behind
 * the other clients' bursts. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"

static double duration = 3;
static uint64_t burst_ns = 50000;

struct worker {
  uint32_t slice;
  uint64_t nonce;
  uint64_t *lat;
  size_t n, cap;
};

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
  while (ns() < end) {
    struct gs_msg_token_request q = {0};
    uint64_t a = ns();
    if (gs_client_send(fd, GS_MSG_TOKEN_REQUEST, 0, &q, sizeof(q)) < 0 ||
        gs_client_recv(fd, buf, sizeof(buf), 5000, &m) < 0 || m.hdr.type != GS_MSG_TOKEN_GRANT)
      break;
    uint64_t lat = ns() - a;
    if (w->n == w->cap) {
      w->cap = w->cap ? 2 * w->cap : 4096;
      w->lat = realloc(w->lat, w->cap * sizeof(uint64_t));
    }
    w->lat[w->n++] = lat;
    /* The burst: as if kernels ran for burst_ns. */
    struct timespec b = {0, (long)burst_ns};
    nanosleep(&b, NULL);
    struct gs_msg_token_release r = {
        .generation = m.u.token_grant.generation, .used_ns = burst_ns, .launches = 1};
    if (gs_client_send(fd, GS_MSG_TOKEN_RELEASE, 0, &r, sizeof(r)) < 0)
      break;
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
  }
  for (int i = 0; i < n; i++)
    pthread_create(&t[i], NULL, run, &w[i]);
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    total += w[i].n;
  }
  uint64_t *all = malloc((total ? total : 1) * sizeof(uint64_t));
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    memcpy(all + k, w[i].lat, w[i].n * sizeof(uint64_t));
    k += w[i].n;
    gs_client_unregister(cfd, w[i].slice, w[i].nonce, NULL, 0);
    free(w[i].lat);
  }
  qsort(all, total, sizeof(uint64_t), cmp);
  if (total)
    printf("clients=%d grants=%zu p50_us=%.1f p99_us=%.1f\n", n, total,
           (double)all[total / 2] / 1e3, (double)all[total * 99 / 100] / 1e3);
  close(cfd);
  free(all);
  free(w);
  free(t);
  return 0;
}
