/* SPDX-License-Identifier: Apache-2.0 */
/* The /metrics endpoint: renders the last published node snapshot in Prometheus text
 * format and serves it with libmicrohttpd from the library's own thread. */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Last: it expects the system headers it builds on to be in already. */
#include <microhttpd.h>

#include "buf.h"
#include "prom.h"
#include "words.h"

/* Bounds on what scrapers can make the daemon hold. */
#define METRICS_MAX_CONNECTIONS 16
#define METRICS_CONNECTION_TIMEOUT_S 10
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct gs_metrics {
  struct MHD_Daemon *mhd;
  uint16_t port;
  int loopback;
  pthread_mutex_t lock; /* guards snap: publish (daemon thread) vs scrape (MHD thread) */
  struct gs_status snap;
  struct gs_metrics_charge *charges; /* guarded by lock too */
  uint32_t ncharges;
};

/* ---- rendering ---------------------------------------------------------------------- */

/* A GPU's labels: gpu, uuid. */
struct gpu_labels {
  char index[12], uuid[GS_UUID_MAX + 1];
  const char *kv[5];
};

static const char *const *gpu_labels(struct gpu_labels *l, const struct gs_gpu_status *g) {
  snprintf(l->index, sizeof(l->index), "%" PRIu32, g->index);
  snprintf(l->uuid, sizeof(l->uuid), "%.*s", (int)GS_UUID_MAX, g->uuid);
  l->kv[0] = "gpu", l->kv[1] = l->index, l->kv[2] = "uuid", l->kv[3] = l->uuid, l->kv[4] = NULL;
  return l->kv;
}

/* A slice's labels, optionally of one of its GPUs, optionally with one more (an "le" bucket,
 * the priority). The name is a label for people; slice_id is what stays the same when it is
 * reused. */
struct slice_labels {
  char name[GS_NAME_MAX + 1], id[12], gpu[12];
  const char *kv[9];
};

static const char *const *slice_labels(struct slice_labels *l, const struct gs_slice_status *s,
                                       const struct gs_slice_gpu_status *g, const char *key,
                                       const char *value) {
  unsigned n = 0;

  snprintf(l->name, sizeof(l->name), "%.*s", (int)GS_NAME_MAX, s->name);
  snprintf(l->id, sizeof(l->id), "%" PRIu32, s->id);
  l->kv[n++] = "slice", l->kv[n++] = l->name, l->kv[n++] = "slice_id", l->kv[n++] = l->id;
  if (g) {
    snprintf(l->gpu, sizeof(l->gpu), "%" PRIu32, g->gpu);
    l->kv[n++] = "gpu", l->kv[n++] = l->gpu;
  }
  if (key)
    l->kv[n++] = key, l->kv[n++] = value;
  l->kv[n] = NULL;
  return l->kv;
}

static uint32_t clamp_gpus(uint32_t n) {
  return n < GS_MAX_GPUS ? n : GS_MAX_GPUS;
}

enum gpu_field {
  GPU_MEM_USED,
  GPU_MEM_TOTAL,
  GPU_BUSY,
  GPU_REQUESTED,
  GPU_DEVICE_BUSY,
  GPU_UNACCOUNTED_PROCS,
  GPU_UNACCOUNTED_MEM,
  GPU_UNACCOUNTED_BUSY,
  GPU_SWITCH_LOST,
  GPU_SWITCH_LOST_TOTAL,
};

/* What NVML cannot say is absent, not 0 (idle and unknown are different things). */
static bool gpu_known(const struct gs_gpu_status *g, enum gpu_field f) {
  switch (f) {
  case GPU_DEVICE_BUSY: return g->device_known & GS_DEVICE_BUSY;
  case GPU_UNACCOUNTED_PROCS:
  case GPU_UNACCOUNTED_MEM: return g->device_known & GS_DEVICE_PROCS;
  case GPU_UNACCOUNTED_BUSY: return g->device_known & GS_DEVICE_PROC_BUSY;
  default: return true;
  }
}

static void gpu_family(struct gs_buf *b, const struct gs_status *st, const char *name,
                       const char *help, enum gpu_field f) {
  gs_prom_family(b, name, f == GPU_SWITCH_LOST_TOTAL ? "counter" : "gauge", help);
  for (uint32_t i = 0; i < clamp_gpus(st->ngpus); i++) {
    const struct gs_gpu_status *g = &st->gpus[i];
    struct gpu_labels gl;
    if (!gpu_known(g, f))
      continue;
    const char *const *l = gpu_labels(&gl, g);
    switch (f) {
    case GPU_MEM_USED: gs_prom_sample_u64(b, name, NULL, l, g->memory_used_bytes); break;
    case GPU_MEM_TOTAL: gs_prom_sample_u64(b, name, NULL, l, g->memory_total_bytes); break;
    case GPU_BUSY: gs_prom_sample(b, name, NULL, l, g->busy_ratio); break;
    case GPU_REQUESTED:
      gs_prom_sample(b, name, NULL, l, g->compute_requested / (double)GS_PERCENT_MAX);
      break;
    case GPU_DEVICE_BUSY: gs_prom_sample(b, name, NULL, l, g->device_busy_ratio); break;
    case GPU_UNACCOUNTED_PROCS: gs_prom_sample_u64(b, name, NULL, l, g->unaccounted_count); break;
    case GPU_UNACCOUNTED_MEM:
      gs_prom_sample_u64(b, name, NULL, l, g->unaccounted_memory_bytes);
      break;
    case GPU_UNACCOUNTED_BUSY: gs_prom_sample(b, name, NULL, l, g->unaccounted_busy_ratio); break;
    case GPU_SWITCH_LOST: gs_prom_sample(b, name, NULL, l, g->switch_lost_ratio); break;
    case GPU_SWITCH_LOST_TOTAL:
      gs_prom_sample(b, name, NULL, l, g->switch_lost_seconds_total);
      break;
    }
  }
}

enum slice_field { SLICE_REQUEST, SLICE_LIMIT, SLICE_WEIGHT, SLICE_PROCS, SLICE_FORCE };

static void slice_family(struct gs_buf *b, const struct gs_status *st, const char *name,
                         const char *help, enum slice_field f) {
  gs_prom_family(b, name, "gauge", help);
  for (uint32_t k = 0; k < st->nslices; k++) {
    const struct gs_slice_status *s = &st->slices[k];
    struct slice_labels sl;
    const char *const *l = slice_labels(&sl, s, NULL, NULL, NULL);
    switch (f) {
    case SLICE_REQUEST:
      gs_prom_sample(b, name, NULL, l, s->compute_request / (double)GS_PERCENT_MAX);
      break;
    case SLICE_LIMIT:
      gs_prom_sample(b, name, NULL, l, s->compute_limit / (double)GS_PERCENT_MAX);
      break;
    case SLICE_WEIGHT: gs_prom_sample_u64(b, name, NULL, l, s->weight); break;
    case SLICE_PROCS: gs_prom_sample_u64(b, name, NULL, l, s->nprocs); break;
    case SLICE_FORCE: gs_prom_sample_u64(b, name, NULL, l, s->memory_force ? 1 : 0); break;
    }
  }
}

enum slice_gpu_field { SG_MEM_USED, SG_MEM_CAP, SG_SHARE, SG_BUSY, SG_LAUNCHES, SG_TOKENS };

static void slice_gpu_family(struct gs_buf *b, const struct gs_status *st, const char *name,
                             const char *type, const char *help, enum slice_gpu_field f) {
  gs_prom_family(b, name, type, help);
  for (uint32_t k = 0; k < st->nslices; k++) {
    const struct gs_slice_status *s = &st->slices[k];
    for (uint32_t i = 0; i < clamp_gpus(s->ngpus); i++) {
      const struct gs_slice_gpu_status *g = &s->gpus[i];
      struct slice_labels sl;
      /* No cap is no sample: a 0 would read as "capped at zero bytes". */
      if (f == SG_MEM_CAP && !g->memory_cap_bytes)
        continue;
      const char *const *l = slice_labels(&sl, s, g, NULL, NULL);
      switch (f) {
      case SG_MEM_USED: gs_prom_sample_u64(b, name, NULL, l, g->memory_used_bytes); break;
      case SG_MEM_CAP: gs_prom_sample_u64(b, name, NULL, l, g->memory_cap_bytes); break;
      case SG_SHARE: gs_prom_sample(b, name, NULL, l, g->share_ratio); break;
      case SG_BUSY: gs_prom_sample(b, name, NULL, l, g->busy_seconds_total); break;
      case SG_LAUNCHES: gs_prom_sample_u64(b, name, NULL, l, g->launches_total); break;
      case SG_TOKENS: gs_prom_sample_u64(b, name, NULL, l, g->tokens_total); break;
      }
    }
  }
}

static void wait_histogram(struct gs_buf *b, const struct gs_status *st) {
  static const double bounds[GS_WAIT_BUCKETS] = GS_WAIT_BUCKET_BOUNDS;
  const char *name = "gslice_slice_token_wait_seconds";

  gs_prom_family(b, name, "histogram",
                 "Time a slice's launches waited for a compute token, per GPU.");
  for (uint32_t k = 0; k < st->nslices; k++) {
    const struct gs_slice_status *s = &st->slices[k];
    for (uint32_t i = 0; i < clamp_gpus(s->ngpus); i++) {
      const struct gs_slice_gpu_status *g = &s->gpus[i];
      struct slice_labels sl;
      uint64_t prev = 0;
      for (int j = 0; j <= GS_WAIT_BUCKETS; j++) {
        char le[32];
        if (j < GS_WAIT_BUCKETS)
          snprintf(le, sizeof(le), "%g", bounds[j]);
        else
          snprintf(le, sizeof(le), "+Inf");
        /* Buckets are cumulative by contract; a torn snapshot must still not go down. */
        uint64_t c = g->wait_bucket[j] > prev ? g->wait_bucket[j] : prev;
        if (j == GS_WAIT_BUCKETS && g->wait_count > c)
          c = g->wait_count;
        prev = c;
        gs_prom_sample_u64(b, name, "_bucket", slice_labels(&sl, s, g, "le", le), c);
      }
      const char *const *l = slice_labels(&sl, s, g, NULL, NULL);
      gs_prom_sample(b, name, "_sum", l, g->wait_seconds_total);
      gs_prom_sample_u64(b, name, "_count", l, prev);
    }
  }
}

static void gpu_families(struct gs_buf *b, const struct gs_status *st) {
  gpu_family(b, st, "gslice_gpu_memory_used_bytes",
             "Device memory in use on the GPU, all processes.", GPU_MEM_USED);
  gpu_family(b, st, "gslice_gpu_memory_total_bytes", "Device memory of the GPU.", GPU_MEM_TOTAL);
  gpu_family(b, st, "gslice_gpu_busy_ratio", "Fraction of the last window the GPU ran kernels.",
             GPU_BUSY);
  gpu_family(b, st, "gslice_gpu_compute_requested_ratio",
             "Sum of the compute requests of the slices on the GPU (1 = the whole GPU).",
             GPU_REQUESTED);
  gpu_family(b, st, "gslice_gpu_device_busy_ratio",
             "The GPU's own utilization over the last second, as NVML reports it (absent without "
             "NVML); above gslice_gpu_busy_ratio, work no slice accounts for.",
             GPU_DEVICE_BUSY);
  gpu_family(b, st, "gslice_unaccounted_processes",
             "Processes on the GPU (NVML) outside every slice's accounting: run without the hook.",
             GPU_UNACCOUNTED_PROCS);
  gpu_family(b, st, "gslice_unaccounted_memory_bytes",
             "Device memory those processes hold on the GPU (NVML).", GPU_UNACCOUNTED_MEM);
  gpu_family(b, st, "gslice_unaccounted_busy_ratio",
             "Fraction of the GPU those processes used over the last second (NVML per-process "
             "samples; absent when NVML has none).",
             GPU_UNACCOUNTED_BUSY);
  gpu_family(b, st, "gslice_gpu_switch_lost_ratio",
             "Fraction of the last window the GPU stood idle between tokens while a slice waited "
             "(the cost of switching tokens).",
             GPU_SWITCH_LOST);
  gpu_family(b, st, "gslice_gpu_switch_lost_seconds_total",
             "Device time lost to token switches while a slice waited, since the daemon started.",
             GPU_SWITCH_LOST_TOTAL);
}

static void slice_families(struct gs_buf *b, const struct gs_status *st) {
  gs_prom_family(b, "gslice_slice_info", "gauge", "Always 1; carries the slice's priority class.");
  for (uint32_t k = 0; k < st->nslices; k++) {
    const struct gs_slice_status *s = &st->slices[k];
    struct slice_labels sl;
    gs_prom_sample_u64(b, "gslice_slice_info", NULL,
                       slice_labels(&sl, s, NULL, "priority", gs_priority_name(s->priority)), 1);
  }
  slice_family(b, st, "gslice_slice_compute_request_ratio",
               "Compute share the slice is guaranteed (1 = one whole GPU).", SLICE_REQUEST);
  slice_family(b, st, "gslice_slice_compute_limit_ratio",
               "Compute share the slice may not exceed (1 = one whole GPU).", SLICE_LIMIT);
  slice_family(b, st, "gslice_slice_weight",
               "Weight of the slice in the fair split of spare compute.", SLICE_WEIGHT);
  slice_family(b, st, "gslice_slice_processes", "Processes attached to the slice.", SLICE_PROCS);
  slice_family(b, st, "gslice_slice_memory_forced",
               "1 while the cap was lowered below usage with --force and allocations are stopped.",
               SLICE_FORCE);
  slice_gpu_family(b, st, "gslice_slice_memory_used_bytes", "gauge",
                   "Device memory the slice's processes hold on the GPU.", SG_MEM_USED);
  slice_gpu_family(b, st, "gslice_slice_memory_cap_bytes", "gauge",
                   "Device memory cap of the slice on the GPU (absent: no cap).", SG_MEM_CAP);
  slice_gpu_family(b, st, "gslice_slice_share_ratio", "gauge",
                   "Share of the GPU's time the slice achieved over the last window.", SG_SHARE);
  slice_gpu_family(b, st, "gslice_slice_busy_seconds_total", "counter",
                   "Device time charged to the slice on the GPU.", SG_BUSY);
  slice_gpu_family(b, st, "gslice_slice_launches_total", "counter",
                   "Kernel launches that went through the slice's compute gate.", SG_LAUNCHES);
  slice_gpu_family(b, st, "gslice_slice_tokens_total", "counter",
                   "Compute tokens granted to the slice on the GPU.", SG_TOKENS);
  wait_histogram(b, st);
}

static void charge_samples(struct gs_buf *b, const char *name, const struct gs_metrics_charge *c,
                           uint32_t n, bool idle) {
  for (uint32_t i = 0; i < n; i++) {
    char sname[GS_NAME_MAX + 1], id[12], gpu[12];
    snprintf(sname, sizeof(sname), "%.*s", (int)GS_NAME_MAX, c[i].name);
    snprintf(id, sizeof(id), "%" PRIu32, c[i].slice_id);
    snprintf(gpu, sizeof(gpu), "%" PRIu32, c[i].gpu);
    const char *l[] = {"slice", sname, "slice_id", id, "gpu", gpu, NULL};
    gs_prom_sample(b, name, NULL, l,
                   idle ? c[i].idle_held_seconds_total : c[i].unreported_seconds_total);
  }
}

static void charge_family(struct gs_buf *b, const struct gs_metrics_charge *c, uint32_t n) {
  gs_prom_family(
      b, "gslice_slice_uncharged_device_seconds_total", "counter",
      "Device time NVML saw the slice's processes run on the GPU beyond what their "
      "releases reported (over the tolerance), charged to the slice by the charge check.");
  charge_samples(b, "gslice_slice_uncharged_device_seconds_total", c, n, false);
  gs_prom_family(b, "gslice_slice_idle_held_seconds_total", "counter",
                 "Time the slice held the GPU's token beyond its device time while another slice "
                 "waited (past the allowance of 2 ms a token and 4% of the time held), charged "
                 "to the slice as device time.");
  charge_samples(b, "gslice_slice_idle_held_seconds_total", c, n, true);
}

/* The snapshot's families, and the charge check's with `charges`. */
static int render(const struct gs_status *st, bool charges, const struct gs_metrics_charge *c,
                  uint32_t n, char **ret_text, size_t *ret_len) {
  struct gs_buf b = GS_BUF_INIT(0);
  size_t len;
  int err;

  gpu_families(&b, st);
  slice_families(&b, st);
  if (charges)
    charge_family(&b, c, n);
  char *text = gs_buf_steal(&b, &len, &err);
  if (!text)
    return err;
  *ret_text = text;
  *ret_len = len;
  return 0;
}

int gs_metrics_render(const struct gs_status *st, char **ret_text, size_t *ret_len) {
  return render(st, false, NULL, 0, ret_text, ret_len);
}

int gs_metrics_render_charges(const struct gs_status *st, const struct gs_metrics_charge *c,
                              uint32_t n, char **ret_text, size_t *ret_len) {
  return render(st, true, c, n, ret_text, ret_len);
}

/* ---- snapshot copies ---------------------------------------------------------------- */

static int status_copy(const struct gs_status *src, struct gs_status *ret) {
  struct gs_status c = *src;
  c.slices = NULL;
  if (src->nslices) {
    c.slices = calloc(src->nslices, sizeof(*c.slices));
    if (!c.slices)
      return -ENOMEM;
    memcpy(c.slices, src->slices, src->nslices * sizeof(*c.slices));
  }
  *ret = c;
  return 0;
}

/* ---- address ------------------------------------------------------------------------ */

static int parse_port(const char *s, uint16_t *ret) {
  char *end;
  if (!*s || *s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || *end || v > 65535)
    return -EINVAL;
  *ret = (uint16_t)v;
  return 0;
}

int gs_metrics_parse_addr(const char *addr_port, struct sockaddr_storage *ret_addr,
                          int *ret_loopback) {
  char host[64];
  const char *port_text;
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof(ss));
  if (!addr_port || !*addr_port)
    return -EINVAL;

  const char *colon = strrchr(addr_port, ':');
  if (!colon) {
    /* A bare port: loopback, the safe default. */
    snprintf(host, sizeof(host), "127.0.0.1");
    port_text = addr_port;
  } else {
    size_t hlen = (size_t)(colon - addr_port);
    const char *h = addr_port;
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
      h++;
      hlen -= 2;
    } else if (memchr(h, ':', hlen)) {
      return -EINVAL; /* IPv6 needs brackets: [::1]:9400 */
    }
    if (hlen == 0 || hlen >= sizeof(host))
      return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = 0;
    port_text = colon + 1;
  }
  uint16_t port;
  if (parse_port(port_text, &port) < 0)
    return -EINVAL;
  if (strcmp(host, "localhost") == 0)
    snprintf(host, sizeof(host), "127.0.0.1");

  struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
  int loopback;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
  } else {
    return -EINVAL;
  }
  *ret_addr = ss;
  *ret_loopback = loopback;
  return 0;
}

/* ---- server ------------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *text,
                             size_t len, enum MHD_ResponseMemoryMode mode) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)text, mode);
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                          code == MHD_HTTP_OK ? METRICS_CONTENT_TYPE : "text/plain");
  if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  enum MHD_Result r = MHD_queue_response(conn, code, resp);
  MHD_destroy_response(resp);
  return r;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls) {
  struct gs_metrics *m = cls;
  static const char not_found[] = "not found: gsliced serves /metrics\n";
  static const char not_allowed[] = "method not allowed: use GET\n";

  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed, sizeof(not_allowed) - 1,
                 MHD_RESPMEM_PERSISTENT);
  if (strcmp(url, "/metrics") != 0)
    return reply(conn, MHD_HTTP_NOT_FOUND, not_found, sizeof(not_found) - 1,
                 MHD_RESPMEM_PERSISTENT);

  char *text = NULL;
  size_t len = 0;
  pthread_mutex_lock(&m->lock);
  int r = gs_metrics_render_charges(&m->snap, m->charges, m->ncharges, &text, &len);
  pthread_mutex_unlock(&m->lock);
  if (r < 0) {
    static const char busy[] = "cannot render metrics (out of memory)\n";
    return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, busy, sizeof(busy) - 1,
                 MHD_RESPMEM_PERSISTENT);
  }
  /* MUST_FREE: MHD frees the text with free() when the response is done. */
  return reply(conn, MHD_HTTP_OK, text, len, MHD_RESPMEM_MUST_FREE);
}

int gs_metrics_start(const char *addr_port, struct gs_metrics **ret) {
  struct sockaddr_storage ss;
  int loopback, r;
  if ((r = gs_metrics_parse_addr(addr_port, &ss, &loopback)) < 0)
    return r;

  struct gs_metrics *m = calloc(1, sizeof(*m));
  if (!m)
    return -ENOMEM;
  pthread_mutex_init(&m->lock, NULL);
  m->loopback = loopback;

  /* Our own listening socket: close-on-exec, and a precise errno when the port is taken,
   * which MHD_start_daemon would reduce to NULL. */
  socklen_t slen =
      ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    r = -errno;
    goto fail;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (ss.ss_family == AF_INET6)
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&ss, slen) < 0 || listen(fd, 16) < 0) {
    r = -errno;
    close(fd);
    goto fail;
  }
  struct sockaddr_storage bound;
  socklen_t blen = sizeof(bound);
  if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
    m->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                               : ((struct sockaddr_in6 *)&bound)->sin6_port);

  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
  if (ss.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  m->mhd = MHD_start_daemon(flags, 0, NULL, NULL, handle, m, MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_MAX_CONNECTIONS,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_CONNECTION_TIMEOUT_S,
                            MHD_OPTION_END);
  if (!m->mhd) {
    close(fd);
    r = -EIO;
    goto fail;
  }
  *ret = m;
  return 0;

fail:
  pthread_mutex_destroy(&m->lock);
  free(m);
  return r;
}

uint16_t gs_metrics_port(const struct gs_metrics *m) {
  return m ? m->port : 0;
}

int gs_metrics_loopback(const struct gs_metrics *m) {
  return m ? m->loopback : 1;
}

int gs_metrics_publish(struct gs_metrics *m, const struct gs_status *st) {
  struct gs_status copy, old;
  int r = status_copy(st, &copy);
  if (r < 0)
    return r;
  pthread_mutex_lock(&m->lock);
  old = m->snap;
  m->snap = copy;
  pthread_mutex_unlock(&m->lock);
  gs_status_free(&old);
  return 0;
}

int gs_metrics_publish_charges(struct gs_metrics *m, const struct gs_metrics_charge *c,
                               uint32_t n) {
  struct gs_metrics_charge *copy = n ? malloc(n * sizeof(*copy)) : NULL, *old;
  if (n && !copy)
    return -ENOMEM;
  if (n)
    memcpy(copy, c, n * sizeof(*copy));
  pthread_mutex_lock(&m->lock);
  old = m->charges;
  m->charges = copy;
  m->ncharges = n;
  pthread_mutex_unlock(&m->lock);
  free(old);
  return 0;
}

void gs_metrics_stop(struct gs_metrics *m) {
  if (!m)
    return;
  /* Closes the listening socket too: MHD owns it once started. */
  MHD_stop_daemon(m->mhd);
  gs_status_free(&m->snap);
  free(m->charges);
  pthread_mutex_destroy(&m->lock);
  free(m);
}
