/* SPDX-License-Identifier: Apache-2.0 */
/* Placement bench of gslice-extender (docs/benchmarks.md, "Kubernetes placement"):
 *  1. a seeded trace of arrivals and departures (1-20 GiB, 10-50% compute, one GPU
 *     each) on M nodes x 8 GPUs x 80 GiB, run through the extender's own cluster view,
 *     placing each pod as kube-scheduler would (every node evaluated, the best score,
 *     ties at random; first-fit: the first node that fits) for binpack, spread and
 *     first-fit: whole GPUs free at 60% load against the lower bound, pods placed and
 *     stranded memory at saturation;
 *  2. that cluster's states (60% and saturation, binpack) copied out to N nodes
 *     (node j holds what trace node j % M held); then /filter + /prioritize for sample
 *     pods over all N nodes: in process (the verbs on request bodies) and over HTTP
 *     (the real server, one kept-alive connection, as kube-scheduler keeps one).
 * usage: k8s_place [--nodes N] [--trace-nodes M] [--samples K] [--seed S] */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "server.h"
#include "verbs.h"

#define GiB (1ULL << 30)
#define MiB (1ULL << 20)
#define GPUS 8
#define GPU_MEM (80 * GiB)
#define PENDING_STOP 200 /* saturated: this many arrivals wait for room */

static uint64_t rng_state;
/* The trace's compute range, % (the issue's: 10-50; --compute LO-HI for another mix). */
static uint32_t compute_lo = 10, compute_hi = 50;
static uint64_t rnd(void) {
  /* xorshift64*: seeded, the same trace on every machine */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ULL;
}
static uint64_t rnd_range(uint64_t lo, uint64_t hi) { /* inclusive */
  return lo + rnd() % (hi - lo + 1);
}

/* The server judges heartbeats by CLOCK_MONOTONIC in ms: the bench's clock is the same. */
static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct pod {
  uint32_t id;
  uint64_t mem;
  uint32_t compute;
  int node;     /* trace node index, -1 pending */
  uint32_t gpu; /* position on it */
};

struct state { /* a snapshot of running pods, to copy out */
  struct pod *pods;
  size_t n;
};

static char *node_json(const char *name) {
  char inv[4096], *p = inv;
  p += sprintf(p, "{\"version\":1,\"heartbeat\":\"2030-01-01T00:00:00Z\",\"slotsPerGpu\":16,"
                  "\"gpus\":[");
  for (int i = 0; i < GPUS; i++)
    p += sprintf(p, "%s{\"index\":%d,\"uuid\":\"GPU-%s-%d\",\"memory\":%llu,\"healthy\":true}",
                 i ? "," : "", i, name, i, (unsigned long long)GPU_MEM);
  sprintf(p, "]}");
  json_t *o =
      json_pack("{s:{s:s,s:{s:s}}}", "metadata", "name", name, "annotations", K8S_ANNOT_GPUS, inv);
  char *t = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return t;
}

static void add_nodes(struct cluster *c, char **names, int n) {
  for (int i = 0; i < n; i++) {
    char *t = node_json(names[i]);
    json_t *o = json_loads(t, 0, NULL);
    /* Heartbeats are judged against a wall clock in 2030: always fresh. */
    cluster_node_event(c, "ADDED", o, mono_ms(), 1893456000, NULL);
    json_decref(o);
    free(t);
  }
}

static struct place_pod one_gpu_pod(struct place_container *ctr, uint64_t mem, uint32_t compute,
                                    enum place_policy policy) {
  memset(ctr, 0, sizeof(*ctr));
  strcpy(ctr->name, "main");
  ctr->ngpus = 1;
  ctr->memory = mem;
  ctr->compute = compute;
  ctr->compute_limit = 100;
  ctr->priority = K8S_PRIO_NORMAL;
  ctr->weight = 1;
  return (struct place_pod){.ncontainers = 1, .containers = ctr, .policy = policy};
}

/* A bound pod holding (mem, compute) on GPU gpu of node name, as the watch delivers it. */
static void add_bound_pod(struct cluster *c, const char *ns, const char *name, const char *node,
                          uint32_t gpu, uint64_t mem, uint32_t compute) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"version\":1,\"node\":\"%s\",\"containers\":[{\"name\":\"main\",\"gpus\":[{"
           "\"uuid\":\"GPU-%s-%u\",\"index\":%u,\"memory\":%llu,\"compute\":%u}]}]}",
           node, node, gpu, gpu, (unsigned long long)mem, compute);
  json_t *o = json_pack("{s:{s:s,s:s,s:{s:s}},s:{s:s}}", "metadata", "name", name, "namespace", ns,
                        "annotations", K8S_ANNOT_ASSIGNED, text, "spec", "nodeName", node);
  cluster_pod_event(c, "ADDED", o, NULL);
  json_decref(o);
}

/* Where kube-scheduler would put it: -1 if nowhere. */
static int choose(struct cluster *c, char **names, int n, const struct place_pod *req,
                  struct place_verdict *v) {
  int best = -1, ties = 0;
  cluster_eval(c, req, (const char *const *)names, (size_t)n, mono_ms(), v, NULL);
  for (int i = 0; i < n; i++) {
    if (!v[i].fits)
      continue;
    if (req->policy == PLACE_FIRSTFIT)
      return i;
    if (best < 0 || v[i].score > v[best].score) {
      best = i;
      ties = 1;
    } else if (v[i].score == v[best].score && rnd() % (uint64_t)++ties == 0) {
      best = i; /* reservoir sampling among the top scores, as selectHost does */
    }
  }
  return best;
}

static int place(struct cluster *c, char **names, int n, struct pod *p, enum place_policy pol,
                 struct place_verdict *v) {
  struct place_container ctr;
  struct place_pod req = one_gpu_pod(&ctr, p->mem, p->compute, pol);
  struct pod_id id = {0};
  struct k8s_assigned a;
  char err[512];
  int i = choose(c, names, n, &req, v);
  if (i < 0)
    return -ENOSPC;
  snprintf(id.ns, sizeof id.ns, "trace");
  snprintf(id.name, sizeof id.name, "p%u", p->id);
  if (cluster_reserve(c, &id, &req, names[i], mono_ms(), &a, err, sizeof err))
    return -EIO;
  p->node = i;
  p->gpu = a.containers[0].gpus[0].index;
  k8s_assigned_free(&a);
  return 0;
}

static void unplace(struct cluster *c, struct pod *p) {
  char name[32];
  snprintf(name, sizeof name, "p%u", p->id);
  json_t *o = json_pack("{s:{s:s,s:s}}", "metadata", "name", name, "namespace", "trace");
  cluster_pod_event(c, "DELETED", o, NULL);
  json_decref(o);
}

struct trace_result {
  uint32_t placed, arrivals, departures;
  struct cluster_gpu_stats at60, sat;
  uint64_t sum_mem60, sum_cpu60;
  uint64_t min_pending_mem;
  uint32_t min_pending_cpu;
  struct state snap60, snapsat;
};

static void snapshot(struct state *s, struct pod *run, size_t n) {
  s->pods = malloc(n * sizeof(*run));
  memcpy(s->pods, run, n * sizeof(*run));
  s->n = n;
}

static void trace(enum place_policy pol, int m, uint64_t seed, struct trace_result *r) {
  struct cluster_cfg cfg = {.policy = pol, .node_timeout_ms = 60000};
  struct cluster *c;
  char **names = calloc((size_t)m, sizeof(*names));
  struct place_verdict *v = malloc((size_t)m * sizeof(*v));
  size_t cap = 1 << 16, nrun = 0, npend = 0;
  struct pod *run = malloc(cap * sizeof(*run)), *pend = malloc(cap * sizeof(*pend));
  uint32_t next_id = 0;
  uint64_t cpu_cap = (uint64_t)m * GPUS * 100, cpu_run = 0;
  uint64_t mem_cap = (uint64_t)m * GPUS * GPU_MEM, mem_run = 0;
  bool took60 = false;

  memset(r, 0, sizeof(*r));
  cluster_new(&cfg, &c);
  cluster_set_synced(c, true, true);
  for (int i = 0; i < m; i++) {
    names[i] = malloc(16);
    snprintf(names[i], 16, "node-%05d", i);
  }
  add_nodes(c, names, m);
  rng_state = seed;
  while (npend < PENDING_STOP) {
    if (nrun > 0 && rnd() % 100 < 30) {
      /* A departure, then the oldest waiting pods get another try. */
      size_t k = rnd() % nrun;
      unplace(c, &run[k]);
      cpu_run -= run[k].compute;
      mem_run -= run[k].mem;
      run[k] = run[--nrun];
      r->departures++;
      for (size_t j = 0, tries = 0; j < npend && tries < 8; tries++) {
        if (place(c, names, m, &pend[j], pol, v) == 0) {
          cpu_run += pend[j].compute;
          mem_run += pend[j].mem;
          run[nrun++] = pend[j];
          memmove(&pend[j], &pend[j + 1], (npend - j - 1) * sizeof(*pend));
          npend--;
        } else {
          j++;
        }
      }
      continue;
    }
    struct pod p = {.id = next_id++,
                    .mem = rnd_range(1024, 20480) * MiB,
                    .compute = (uint32_t)rnd_range(compute_lo, compute_hi),
                    .node = -1};
    r->arrivals++;
    if (npend == 0 && place(c, names, m, &p, pol, v) == 0) {
      cpu_run += p.compute;
      mem_run += p.mem;
      run[nrun++] = p;
    } else {
      pend[npend++] = p; /* first come, first served: nobody overtakes a waiting pod */
    }
    /* 60% load: of whichever resource the trace runs out of first. */
    if (!took60 && (cpu_run * 100 >= cpu_cap * 60 || (double)mem_run >= 0.6 * (double)mem_cap)) {
      took60 = true;
      cluster_gpu_stats(c, 1024 * MiB, 10, &r->at60);
      for (size_t j = 0; j < nrun; j++) {
        r->sum_mem60 += run[j].mem;
        r->sum_cpu60 += run[j].compute;
      }
      snapshot(&r->snap60, run, nrun);
    }
    if (nrun + npend >= cap)
      break;
  }
  r->placed = (uint32_t)nrun;
  r->min_pending_mem = UINT64_MAX;
  r->min_pending_cpu = 100;
  for (size_t j = 0; j < npend; j++) {
    /* "The smallest pending pod": by memory, then compute. */
    if (pend[j].mem < r->min_pending_mem ||
        (pend[j].mem == r->min_pending_mem && pend[j].compute < r->min_pending_cpu)) {
      r->min_pending_mem = pend[j].mem;
      r->min_pending_cpu = pend[j].compute;
    }
  }
  cluster_gpu_stats(c, r->min_pending_mem, r->min_pending_cpu, &r->sat);
  snapshot(&r->snapsat, run, nrun);
  cluster_free(c);
  for (int i = 0; i < m; i++)
    free(names[i]);
  free(names);
  free(v);
  free(run);
  free(pend);
}

/* ---- latency over N nodes -------------------------------------------------------------------- */

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p) {
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i];
}

struct lat {
  double *f, *p, *fp, *cpu; /* wall ms per verb and both; CPU ms of both */
  size_t n;
};

static double cpu_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t sink(char *d, size_t s, size_t n, void *u) {
  struct {
    char *p;
    size_t len, cap;
  } *b = u;
  size_t add = s * n;
  if (b->len + add + 1 > b->cap) {
    b->cap = (b->len + add + 1) * 2;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->len, d, add);
  b->len += add;
  b->p[b->len] = 0;
  return add;
}

struct inproc {
  struct cluster *c;
  char **fargs, **pargs;
  size_t samples;
  struct lat *in;
  struct verbs *v;
};

static void *inproc_run(void *arg) {
  struct inproc *x = arg;
  for (size_t i = 0; i < x->samples; i++) {
    char *out;
    size_t len;
    double ca = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    double a = now_s();
    verb_filter(x->v, x->fargs[i], strlen(x->fargs[i]), mono_ms(), &out, &len);
    double b = now_s();
    free(out);
    verb_prioritize(x->v, x->pargs[i], strlen(x->pargs[i]), mono_ms(), &out, &len);
    double d = now_s();
    free(out);
    x->in->f[i] = (b - a) * 1e3;
    x->in->p[i] = (d - b) * 1e3;
    x->in->fp[i] = x->in->f[i] + x->in->p[i];
    x->in->cpu[i] = (cpu_s(CLOCK_THREAD_CPUTIME_ID) - ca) * 1e3;
  }
  return NULL;
}

/* ExtenderArgs for a sample pod over the given node names (a JSON text). */
static char *args_text(uint32_t i, uint64_t mem, uint32_t compute, const char *names_json) {
  char *t = NULL;
  if (asprintf(&t,
               "{\"Pod\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
               "\"sample-%u\",\"namespace\":\"bench\",\"uid\":\"00000000-0000-0000-0000-%012u\","
               "\"labels\":{\"app\":\"bench\"},\"annotations\":{}},\"spec\":{\"schedulerName\":"
               "\"default-scheduler\",\"containers\":[{\"name\":\"main\",\"image\":"
               "\"registry.example/train:1\",\"resources\":{\"limits\":{\"gslice.io/gpu\":\"1\","
               "\"gslice.io/gpu-memory\":\"%lluMi\",\"gslice.io/gpu-compute\":\"%u\"},"
               "\"requests\":{\"gslice.io/gpu\":\"1\",\"gslice.io/gpu-memory\":\"%lluMi\","
               "\"gslice.io/gpu-compute\":\"%u\"}}}]},\"status\":{\"phase\":\"Pending\"}},"
               "\"NodeNames\":%s}",
               i, i, (unsigned long long)(mem / MiB), compute, (unsigned long long)(mem / MiB),
               compute, names_json) < 0)
    return NULL;
  return t;
}

/* The feasible names of a filter answer, as a JSON array text. */
static char *feasible(const char *filter_answer) {
  json_t *o = json_loads(filter_answer, 0, NULL);
  char *t = json_dumps(json_object_get(o, "NodeNames"), JSON_COMPACT);
  json_decref(o);
  return t ? t : strdup("[]");
}

static void latency(const char *what, struct state *s, int n, int m, size_t samples,
                    uint64_t seed) {
  struct cluster_cfg cfg = {.policy = PLACE_BINPACK, .node_timeout_ms = 60000};
  struct cluster *c;
  struct verbs *vb = NULL;
  char **names = calloc((size_t)n, sizeof(*names));
  struct lat in = {calloc(samples, 8), calloc(samples, 8), calloc(samples, 8), calloc(samples, 8),
                   samples};
  struct lat http = {calloc(samples, 8), calloc(samples, 8), calloc(samples, 8), calloc(samples, 8),
                     samples};
  size_t fits_total = 0, resp_bytes = 0;
  double t0 = now_s();

  cluster_new(&cfg, &c);
  cluster_set_synced(c, true, true);
  if (verbs_new(&(struct verbs_cfg){.cluster = c}, &vb))
    exit(1);
  json_t *arr = json_array();
  for (int i = 0; i < n; i++) {
    names[i] = malloc(16);
    snprintf(names[i], 16, "node-%05d", i);
    json_array_append_new(arr, json_string(names[i]));
  }
  char *names_json = json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  add_nodes(c, names, n);
  size_t pods = 0;
  for (int copy = 0; copy * m < n; copy++)
    for (size_t j = 0; j < s->n; j++) {
      int node = s->pods[j].node + copy * m;
      char pname[32];
      if (node >= n)
        continue;
      snprintf(pname, sizeof pname, "p%u-%d", s->pods[j].id, copy);
      add_bound_pod(c, "trace", pname, names[node], s->pods[j].gpu, s->pods[j].mem,
                    s->pods[j].compute);
      pods++;
    }
  struct cluster_totals tot;
  cluster_totals(c, mono_ms(), &tot);
  fprintf(stderr, "  %s: %d nodes, %zu pods, %.0f%% of memory held (built in %.1f s)\n", what, n,
          pods, 100.0 * (double)tot.mem_used / (double)tot.memory, now_s() - t0);

  struct ext_server *srv;
  struct ext_server_cfg scfg = {.listen = "127.0.0.1:0", .metrics_listen = NULL, .verbs = vb};
  char err[256], url[64];
  if (ext_server_start(&scfg, &srv, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    exit(1);
  }
  CURL *h = curl_easy_init();
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
  /* Kube-scheduler sends "Expect"-free bodies; curl would wait for 100-continue. */
  hdr = curl_slist_append(hdr, "Expect:");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);

  /* The sample pods and their bodies first; then one pass in process and one over
   * HTTP, so neither pass warms the caches for the other sample by sample. */
  char **fargs = calloc(samples, sizeof(*fargs)), **pargs = calloc(samples, sizeof(*pargs));
  rng_state = seed ^ 0x5eed;
  for (size_t i = 0; i < samples; i++) {
    uint64_t mem = rnd_range(1024, 20480) * MiB;
    uint32_t cpu = (uint32_t)rnd_range(compute_lo, compute_hi);
    char *out, *ok;
    size_t len;
    fargs[i] = args_text((uint32_t)i, mem, cpu, names_json);
    verb_filter(vb, fargs[i], strlen(fargs[i]), mono_ms(), &out, &len);
    ok = feasible(out);
    json_t *fa = json_loads(ok, 0, NULL);
    fits_total += json_array_size(fa);
    json_decref(fa);
    resp_bytes += len;
    pargs[i] = args_text((uint32_t)i, mem, cpu, ok);
    free(out);
    free(ok);
  }
  for (size_t i = 0; i < samples; i++) {
    struct {
      char *p;
      size_t len, cap;
    } body = {0};
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/filter", ext_server_port(srv));
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, fargs[i]);
    /* CPU of the whole process: the client's and the server thread's work. */
    double ca = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
    double a = now_s();
    curl_easy_perform(h);
    double b = now_s();
    snprintf(url, sizeof url, "http://127.0.0.1:%u/prioritize", ext_server_port(srv));
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, pargs[i]);
    body.len = 0;
    double c2 = now_s();
    curl_easy_perform(h);
    double d = now_s();
    http.f[i] = (b - a) * 1e3;
    http.p[i] = (d - c2) * 1e3;
    http.fp[i] = http.f[i] + http.p[i];
    http.cpu[i] = (cpu_s(CLOCK_PROCESS_CPUTIME_ID) - ca) * 1e3;
    free(body.p);
  }
  /* In process on a thread of its own, as the server's verbs run: the main thread's
   * malloc arena holds the whole cluster view built above, and is slower to work in. */
  struct inproc ip = {c, fargs, pargs, samples, &in, vb};
  pthread_t th;
  pthread_create(&th, NULL, inproc_run, &ip);
  pthread_join(th, NULL);
  for (size_t i = 0; i < samples; i++) {
    free(fargs[i]);
    free(pargs[i]);
  }
  free(fargs);
  free(pargs);
  struct lat *ls[2] = {&in, &http};
  const char *how[2] = {"in process", "over HTTP"};
  for (int k = 0; k < 2; k++) {
    qsort(ls[k]->f, samples, 8, cmp_d);
    qsort(ls[k]->p, samples, 8, cmp_d);
    qsort(ls[k]->fp, samples, 8, cmp_d);
    qsort(ls[k]->cpu, samples, 8, cmp_d);
    printf("| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", what, how[k],
           pct(ls[k]->f, samples, 0.5), pct(ls[k]->f, samples, 0.99), pct(ls[k]->p, samples, 0.5),
           pct(ls[k]->p, samples, 0.99), pct(ls[k]->fp, samples, 0.5),
           pct(ls[k]->fp, samples, 0.99), pct(ls[k]->cpu, samples, 0.5),
           pct(ls[k]->cpu, samples, 0.99));
  }
  fprintf(stderr, "  %s: %.0f feasible nodes per sample on average, filter answer %.0f KiB\n", what,
          (double)fits_total / (double)samples, (double)resp_bytes / samples / 1024);
  curl_easy_cleanup(h);
  curl_slist_free_all(hdr);
  ext_server_stop(srv);
  verbs_free(vb);
  cluster_free(c);
  for (int i = 0; i < n; i++)
    free(names[i]);
  free(names);
  free(names_json);
}

int main(int argc, char **argv) {
  int n = 5000, m = 500;
  size_t samples = 500;
  uint64_t seed = 42;
  int latency_too = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--nodes") == 0)
      n = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--trace-nodes") == 0)
      m = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--samples") == 0)
      samples = (size_t)atol(argv[i + 1]);
    else if (strcmp(argv[i], "--seed") == 0)
      seed = strtoull(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--compute") == 0 &&
             sscanf(argv[i + 1], "%u-%u", &compute_lo, &compute_hi) == 2 && compute_lo >= 1 &&
             compute_lo <= compute_hi && compute_hi <= 100)
      ;
    else if (strcmp(argv[i], "--latency") == 0)
      latency_too = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: k8s_place [--nodes N] [--trace-nodes M] [--samples K] [--seed S] "
                      "[--compute LO-HI] [--latency 0|1]\n");
      return 2;
    }
  }
  if (n < 1 || m < 1 || m > n || samples < 1) {
    fprintf(stderr, "k8s_place: need 1 <= trace-nodes <= nodes and samples >= 1\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  enum place_policy pols[3] = {PLACE_BINPACK, PLACE_SPREAD, PLACE_FIRSTFIT};
  struct trace_result r[3];
  printf("Trace: seed %llu, %d nodes x %d GPUs x 80 GiB, arrivals 1-20 GiB and %u-%u%% "
         "compute (uniform), 30%% of events departures, stop at %d waiting.\n\n",
         (unsigned long long)seed, m, GPUS, compute_lo, compute_hi, PENDING_STOP);
  printf("| policy | whole GPUs free at 60%% load | upper bound | pods placed at saturation | "
         "memory held | compute held | stranded memory | lower bound | of it: compute full | "
         "of it: fragmented |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (int k = 0; k < 3; k++) {
    double t0 = now_s();
    trace(pols[k], m, seed, &r[k]);
    struct cluster_gpu_stats *a = &r[k].at60, *s = &r[k].sat;
    uint64_t need_mem = (r[k].sum_mem60 + GPU_MEM - 1) / GPU_MEM;
    uint64_t need_cpu = (r[k].sum_cpu60 + 99) / 100;
    uint64_t need = need_mem > need_cpu ? need_mem : need_cpu;
    /* Stranding no placement avoids: with the placed pods' mix of memory to compute,
     * GPUs full of compute leave 1 - memory/compute of their memory unusable. */
    double memf = (double)s->mem_used / (double)s->memory;
    double cpuf = (double)s->compute_used / (100.0 * s->gpus);
    double lb = cpuf > memf ? 100.0 * (1.0 - memf / cpuf) : 0.0;
    printf("| %s | %u (%.1f%%) | %llu (%.1f%%) | %u | %.1f%% | %.1f%% | %.2f%% | %.2f%% | %.2f%% | "
           "%.2f%% |\n",
           place_policy_name(pols[k]), a->whole_free, 100.0 * a->whole_free / a->gpus,
           (unsigned long long)(a->gpus - need), 100.0 * (double)(a->gpus - need) / a->gpus,
           r[k].placed, 100.0 * (double)s->mem_used / (double)s->memory,
           100.0 * (double)s->compute_used / (100.0 * s->gpus),
           100.0 * (double)s->stranded / (double)s->memory, lb,
           100.0 * (double)s->stranded_compute_full / (double)s->memory,
           100.0 * (double)s->stranded_fragment / (double)s->memory);
    fprintf(stderr,
            "  %s: %u arrivals, %u departures, smallest waiting pod %llu MiB / %u%% "
            "(%.1f s)\n",
            place_policy_name(pols[k]), r[k].arrivals, r[k].departures,
            (unsigned long long)(r[k].min_pending_mem / MiB), r[k].min_pending_cpu, now_s() - t0);
  }
  if (!latency_too)
    return 0;
  printf("\nfilter + prioritize over %d nodes x %d GPUs (ms; the trace's binpack states copied "
         "out to %d nodes; %zu sample pods; wall time, and the CPU time of the work: the "
         "thread's in process, the whole process's - client and server - over HTTP):\n\n",
         n, GPUS, n, samples);
  printf("| state | how | filter p50 | filter p99 | prioritize p50 | prioritize p99 | "
         "both p50 | both p99 | both, CPU p50 | both, CPU p99 |\n"
         "|---|---|---|---|---|---|---|---|---|---|\n");
  fflush(stdout);
  latency("60% load", &r[0].snap60, n, m, samples, seed);
  fflush(stdout);
  latency("saturation", &r[0].snapsat, n, m, samples, seed);
  for (int k = 0; k < 3; k++) {
    free(r[k].snap60.pods);
    free(r[k].snapsat.pods);
  }
  return 0;
}
