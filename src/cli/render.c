/* SPDX-License-Identifier: Apache-2.0 */
/* The status renderers: the human table (status, top) and the stable JSON (status --json). */
#include "render.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "size.h"
#include "words.h"

/* Ratios come from division by measured time; never let a NaN or Inf reach a reader. */
static double finite_or_zero(double v) {
  return isfinite(v) ? v : 0.0;
}

static const struct gs_slice_status *find_slice(const struct gs_status *st, uint32_t id) {
  for (uint32_t i = 0; i < st->nslices; i++)
    if (st->slices[i].id == id)
      return &st->slices[i];
  return NULL;
}

static const struct gs_slice_gpu_status *find_slice_gpu(const struct gs_slice_status *s,
                                                        uint32_t gpu) {
  uint32_t n = s->ngpus < GS_MAX_GPUS ? s->ngpus : GS_MAX_GPUS;
  for (uint32_t i = 0; i < n; i++)
    if (s->gpus[i].gpu == gpu)
      return &s->gpus[i];
  return NULL;
}

int gs_status_share_between(const struct gs_status *prev, const struct gs_status *st,
                            uint32_t slice_id, uint32_t gpu, double *ret_ratio) {
  if (!prev || !st || st->time_ns <= prev->time_ns)
    return -ENOENT;
  const struct gs_slice_status *a = find_slice(prev, slice_id), *b = find_slice(st, slice_id);
  if (!a || !b)
    return -ENOENT;
  const struct gs_slice_gpu_status *ga = find_slice_gpu(a, gpu), *gb = find_slice_gpu(b, gpu);
  if (!ga || !gb)
    return -ENOENT;
  double dt = (double)(st->time_ns - prev->time_ns) / 1e9;
  double busy = gb->busy_seconds_total - ga->busy_seconds_total;
  /* A restarted slice's counters start again from zero. */
  if (busy < 0)
    return -ENOENT;
  *ret_ratio = finite_or_zero(busy / dt);
  return 0;
}

/* Names come from users and end up on a terminal: no control bytes get through. */
static void sanitize(const char *in, char *out, size_t len) {
  size_t i = 0;
  for (; in[i] && i + 1 < len && i < GS_NAME_MAX; i++) {
    unsigned char c = (unsigned char)in[i];
    out[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  out[i] = 0;
}

/* One line of the table, cut to the width (top on a narrow terminal). */
__attribute__((format(printf, 3, 4))) static int line(FILE *out, unsigned width, const char *fmt,
                                                      ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0)
    return -EIO;
  size_t len = strlen(buf);
  while (len > 0 && buf[len - 1] == ' ')
    len--;
  if (width && len > width)
    len = width;
  if (fwrite(buf, 1, len, out) != len || fputc('\n', out) == EOF)
    return -EIO;
  return 0;
}

static void format_percent(double ratio, char *buf, size_t len) {
  snprintf(buf, len, "%.1f%%", finite_or_zero(ratio) * 100.0);
}

static void format_memory(const struct gs_slice_gpu_status *g, uint32_t force, char *buf,
                          size_t len) {
  char used[24], cap[24];
  gs_size_format(g->memory_used_bytes, used, sizeof(used));
  if (g->memory_cap_bytes)
    gs_size_format(g->memory_cap_bytes, cap, sizeof(cap));
  else
    snprintf(cap, sizeof(cap), "-");
  snprintf(buf, len, "%s / %s%s", used, cap, force ? "!" : "");
}

static int slice_row(FILE *out, const struct gs_render_opts *opts, const struct gs_status *st,
                     const struct gs_slice_status *s, const struct gs_slice_gpu_status *g) {
  char name[GS_NAME_MAX + 1], mem[64], share[16], now[16] = "", wait[24];
  sanitize(s->name, name, sizeof(name));
  if (!name[0])
    snprintf(name, sizeof(name), "-");
  if (g) {
    format_memory(g, s->memory_force, mem, sizeof(mem));
    format_percent(g->share_ratio, share, sizeof(share));
    snprintf(wait, sizeof(wait), "%.2fs", finite_or_zero(g->wait_seconds_total));
    double r;
    if (opts->prev || opts->now_column) {
      if (opts->prev && gs_status_share_between(opts->prev, st, s->id, g->gpu, &r) == 0)
        format_percent(r, now, sizeof(now));
      else
        snprintf(now, sizeof(now), "-");
    }
  } else {
    snprintf(mem, sizeof(mem), "-");
    snprintf(share, sizeof(share), "-");
    snprintf(wait, sizeof(wait), "-");
    if (opts->prev || opts->now_column)
      snprintf(now, sizeof(now), "-");
  }
  char req[8], lim[8];
  snprintf(req, sizeof(req), "%" PRIu32 "%%", s->compute_request);
  snprintf(lim, sizeof(lim), "%" PRIu32 "%%", s->compute_limit);
  char nowcol[24] = "";
  if (opts->prev || opts->now_column)
    snprintf(nowcol, sizeof(nowcol), " %6s", now);
  return line(out, opts->width,
              "  %-14s %3" PRIu32 " %5" PRIu32 "  %-19s %4s %5s  %-6s %6" PRIu32 " %6s%s %7s", name,
              s->id, s->nprocs, mem, req, lim, gs_priority_name(s->priority), s->weight, share,
              nowcol, wait);
}

static int slice_header(FILE *out, const struct gs_render_opts *opts) {
  return line(out, opts->width, "  %-14s %3s %5s  %-19s %4s %5s  %-6s %6s %6s%s %7s", "SLICE", "ID",
              "PROCS", "MEMORY USED / CAP", "REQ", "LIMIT", "PRIO", "WEIGHT", "SHARE",
              opts->prev || opts->now_column ? "    NOW" : "", "WAIT");
}

static int table_title(FILE *out, const struct gs_render_opts *opts, const struct gs_status *st,
                       uint32_t ngpus) {
  char when[40] = "-";
  time_t secs = (time_t)(st->time_ns / 1000000000ULL);
  struct tm tm;
  if (gmtime_r(&secs, &tm))
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
  double window = ngpus ? st->gpus[0].window_seconds : 0;
  return line(out, opts->width,
              "gslice: %" PRIu32 " GPU%s, %" PRIu32 " slice%s, shares over %.0fs  %s", ngpus,
              ngpus == 1 ? "" : "s", st->nslices, st->nslices == 1 ? "" : "s",
              finite_or_zero(window), when);
}

/* The processes NVML sees on the GPU that no slice accounts for (no hook in them). */
static int table_unaccounted(FILE *out, const struct gs_render_opts *opts,
                             const struct gs_gpu_status *gpu) {
  char mem[24], share[32] = "";
  int r;

  gs_size_format(gpu->unaccounted_memory_bytes, mem, sizeof(mem));
  if (gpu->device_known & GS_DEVICE_PROC_BUSY)
    snprintf(share, sizeof(share), ", %.0f%% of the device", gpu->unaccounted_busy_ratio * 100.0);
  r = line(out, opts->width,
           "  ! %" PRIu32 " process%s on this GPU outside every slice's accounting (no "
           "hook): %s%s",
           gpu->unaccounted_count, gpu->unaccounted_count == 1 ? "" : "es", mem, share);
  uint32_t n =
      gpu->unaccounted_count < GS_UNACCOUNTED_MAX ? gpu->unaccounted_count : GS_UNACCOUNTED_MAX;
  for (uint32_t k = 0; r == 0 && k < n; k++) {
    const struct gs_unaccounted_proc *p = &gpu->unaccounted[k];
    char pm[24], where[48], pb[24] = "";
    gs_size_format(p->memory_bytes, pm, sizeof(pm));
    if (p->slice_id)
      snprintf(where, sizeof(where), "inside slice %" PRIu32, p->slice_id);
    else
      snprintf(where, sizeof(where), "in no slice");
    if (gpu->device_known & GS_DEVICE_PROC_BUSY)
      snprintf(pb, sizeof(pb), "  %.0f%% busy", p->busy_ratio * 100.0);
    r = line(out, opts->width, "    pid %-8" PRId32 " %-16s %s%s", p->pid, where, pm, pb);
  }
  return r;
}

/* One GPU's block: its line, what no slice accounts for, its slices. *forced is set when one of
 * them has a cap lowered below its usage with --force. */
static int table_gpu(FILE *out, const struct gs_render_opts *opts, const struct gs_status *st,
                     const struct gs_gpu_status *gpu, int *forced) {
  char name[GS_NAME_MAX + 1], uuid[GS_UUID_MAX + 1], used[24], total[24], busy[16];
  int r;

  sanitize(gpu->name, name, sizeof(name));
  sanitize(gpu->uuid, uuid, sizeof(uuid));
  gs_size_format(gpu->memory_used_bytes, used, sizeof(used));
  gs_size_format(gpu->memory_total_bytes, total, sizeof(total));
  format_percent(gpu->busy_ratio, busy, sizeof(busy));
  /* The device's own figure beside the slices': a gap is work no slice accounts for. */
  char device[32] = "";
  if (gpu->device_known & GS_DEVICE_BUSY)
    snprintf(device, sizeof(device), " (device %.0f%%)", gpu->device_busy_ratio * 100.0);
  if ((r = line(out, opts->width, "%s", "")) < 0)
    return r;
  r = line(out, opts->width,
           "GPU %" PRIu32 "  %s  %s  busy %s%s  memory %s / %s  requested %" PRIu32 "%%",
           gpu->index, name, uuid, busy, device, used, total, gpu->compute_requested);
  if (r < 0)
    return r;
  if (gpu->unaccounted_count && (r = table_unaccounted(out, opts, gpu)) < 0)
    return r;
  int any = 0;
  for (uint32_t k = 0; k < st->nslices; k++) {
    const struct gs_slice_status *s = &st->slices[k];
    const struct gs_slice_gpu_status *g = find_slice_gpu(s, gpu->index);
    if (!g)
      continue;
    if (!any && (r = slice_header(out, opts)) < 0)
      return r;
    any = 1;
    *forced |= s->memory_force && g->memory_cap_bytes;
    if ((r = slice_row(out, opts, st, s, g)) < 0)
      return r;
  }
  if (!any)
    return line(out, opts->width, "  (no slices)");
  return 0;
}

/* Slices the daemon knows that hold no GPU yet (registered, no process started). */
static int table_unplaced(FILE *out, const struct gs_render_opts *opts,
                          const struct gs_status *st) {
  int r, header = 0;

  for (uint32_t k = 0; k < st->nslices; k++) {
    const struct gs_slice_status *s = &st->slices[k];
    if (s->ngpus)
      continue;
    if (!header) {
      if ((r = line(out, opts->width, "%s", "")) < 0 ||
          (r = line(out, opts->width, "Slices without a GPU")) < 0 ||
          (r = slice_header(out, opts)) < 0)
        return r;
      header = 1;
    }
    if ((r = slice_row(out, opts, st, s, NULL)) < 0)
      return r;
  }
  return 0;
}

int gs_render_table(const struct gs_status *st, const struct gs_render_opts *opts_in, FILE *out) {
  struct gs_render_opts opts = {0};
  if (opts_in)
    opts = *opts_in;
  uint32_t ngpus = st->ngpus < GS_MAX_GPUS ? st->ngpus : GS_MAX_GPUS;
  int r, forced = 0;

  if ((r = table_title(out, &opts, st, ngpus)) < 0)
    return r;
  for (uint32_t i = 0; i < ngpus; i++)
    if ((r = table_gpu(out, &opts, st, &st->gpus[i], &forced)) < 0)
      return r;
  if ((r = table_unplaced(out, &opts, st)) < 0)
    return r;
  if (forced) {
    if ((r = line(out, opts.width, "%s", "")) < 0 ||
        (r = line(out, opts.width,
                  "! cap lowered below usage with --force: new allocations fail until usage "
                  "falls under it")) < 0)
      return r;
  }
  return ferror(out) ? -EIO : 0;
}

/* A name or uuid of at most max bytes, as one JSON string. */
static void json_string(struct gs_buf *b, const char *s, size_t max) {
  gs_buf_json_strn(b, s, strnlen(s, max));
}

/* Ratios and seconds: enough digits to be exact to a microsecond, never NaN/Inf. */
static void json_number(struct gs_buf *b, double v) {
  gs_buf_printf(b, "%.9g", finite_or_zero(v));
}

/* A ratio NVML may not know: null then (no NVML, or no figure), not "idle". */
static void json_ratio_or_null(struct gs_buf *b, int known, double v) {
  if (known)
    json_number(b, v);
  else
    gs_buf_puts(b, "null");
}

static void json_unaccounted(struct gs_buf *b, const struct gs_gpu_status *g) {
  int busy = (g->device_known & GS_DEVICE_PROC_BUSY) != 0;

  gs_buf_printf(
      b, ",\"unaccounted\":{\"processes\":%" PRIu32 ",\"memory_bytes\":%" PRIu64 ",\"busy_ratio\":",
      g->unaccounted_count, g->unaccounted_memory_bytes);
  json_ratio_or_null(b, busy, g->unaccounted_busy_ratio);
  gs_buf_puts(b, ",\"pids\":[");
  uint32_t n =
      g->unaccounted_count < GS_UNACCOUNTED_MAX ? g->unaccounted_count : GS_UNACCOUNTED_MAX;
  for (uint32_t k = 0; k < n; k++) {
    const struct gs_unaccounted_proc *p = &g->unaccounted[k];
    gs_buf_printf(b, "%s{\"pid\":%" PRId32 ",\"slice\":", k ? "," : "", p->pid);
    if (p->slice_id)
      gs_buf_printf(b, "%" PRIu32, p->slice_id);
    else
      gs_buf_puts(b, "null");
    gs_buf_printf(b, ",\"memory_bytes\":%" PRIu64 ",\"busy_ratio\":", p->memory_bytes);
    json_ratio_or_null(b, busy, p->busy_ratio);
    gs_buf_putc(b, '}');
  }
  gs_buf_puts(b, "]}");
}

static void json_gpu(struct gs_buf *b, const struct gs_gpu_status *g) {
  gs_buf_printf(b, "{\"index\":%" PRIu32 ",\"name\":", g->index);
  json_string(b, g->name, GS_NAME_MAX);
  gs_buf_puts(b, ",\"uuid\":");
  json_string(b, g->uuid, GS_UUID_MAX);
  gs_buf_puts(b, ",\"busy_ratio\":");
  json_number(b, g->busy_ratio);
  gs_buf_puts(b, ",\"window_seconds\":");
  json_number(b, g->window_seconds);
  gs_buf_puts(b, ",\"switch_lost_ratio\":");
  json_number(b, g->switch_lost_ratio);
  gs_buf_puts(b, ",\"switch_lost_seconds_total\":");
  json_number(b, g->switch_lost_seconds_total);
  gs_buf_printf(b,
                ",\"memory_used_bytes\":%" PRIu64 ",\"memory_total_bytes\":%" PRIu64
                ",\"compute_requested_percent\":%" PRIu32 ",\"device_busy_ratio\":",
                g->memory_used_bytes, g->memory_total_bytes, g->compute_requested);
  json_ratio_or_null(b, g->device_known & GS_DEVICE_BUSY, g->device_busy_ratio);
  if (g->device_known & GS_DEVICE_PROCS)
    json_unaccounted(b, g);
  else
    gs_buf_puts(b, ",\"unaccounted\":null");
  gs_buf_putc(b, '}');
}

static void json_slice_gpu(struct gs_buf *b, const struct gs_slice_gpu_status *g) {
  static const double bounds[GS_WAIT_BUCKETS] = GS_WAIT_BUCKET_BOUNDS;

  /* The request on this GPU: a slice over several GPUs may ask each its own (proto.h). */
  gs_buf_printf(b,
                "{\"index\":%" PRIu32 ",\"compute_request_percent\":%" PRIu32
                ",\"memory_used_bytes\":%" PRIu64 ",\"memory_cap_bytes\":",
                g->gpu, g->compute_request, g->memory_used_bytes);
  /* null, not 0: "no cap" must not read as "a cap of zero bytes". */
  if (g->memory_cap_bytes)
    gs_buf_printf(b, "%" PRIu64, g->memory_cap_bytes);
  else
    gs_buf_puts(b, "null");
  gs_buf_puts(b, ",\"share_ratio\":");
  json_number(b, g->share_ratio);
  gs_buf_puts(b, ",\"busy_seconds_total\":");
  json_number(b, g->busy_seconds_total);
  gs_buf_printf(
      b, ",\"launches_total\":%" PRIu64 ",\"tokens_total\":%" PRIu64 ",\"wait_seconds_total\":",
      g->launches_total, g->tokens_total);
  json_number(b, g->wait_seconds_total);
  gs_buf_printf(b, ",\"wait_count\":%" PRIu64 ",\"wait_buckets\":[", g->wait_count);
  for (int k = 0; k <= GS_WAIT_BUCKETS; k++) {
    gs_buf_puts(b, k ? ",{\"le\":" : "{\"le\":");
    json_ratio_or_null(b, k < GS_WAIT_BUCKETS, k < GS_WAIT_BUCKETS ? bounds[k] : 0);
    gs_buf_printf(b, ",\"count\":%" PRIu64 "}", g->wait_bucket[k]);
  }
  gs_buf_puts(b, "]}");
}

static void json_slice(struct gs_buf *b, const struct gs_slice_status *s) {
  gs_buf_printf(b, "{\"id\":%" PRIu32 ",\"name\":", s->id);
  json_string(b, s->name, GS_NAME_MAX);
  gs_buf_printf(b,
                ",\"compute_request_percent\":%" PRIu32 ",\"compute_limit_percent\":%" PRIu32
                ",\"priority\":\"%s\",\"weight\":%" PRIu32 ",\"memory_force\":%s"
                ",\"processes\":%" PRIu32 ",\"pids\":[",
                s->compute_request, s->compute_limit, gs_priority_name(s->priority), s->weight,
                s->memory_force ? "true" : "false", s->nprocs);
  uint32_t npids = s->nprocs < GS_SLICE_MAX_PIDS ? s->nprocs : GS_SLICE_MAX_PIDS;
  for (uint32_t p = 0; p < npids; p++)
    gs_buf_printf(b, "%s%" PRId32, p ? "," : "", s->pids[p]);
  gs_buf_puts(b, "],\"gpus\":[");
  uint32_t n = s->ngpus < GS_MAX_GPUS ? s->ngpus : GS_MAX_GPUS;
  for (uint32_t i = 0; i < n; i++) {
    if (i)
      gs_buf_putc(b, ',');
    json_slice_gpu(b, &s->gpus[i]);
  }
  gs_buf_puts(b, "]}");
}

int gs_render_json(const struct gs_status *st, FILE *out) {
  struct gs_buf b = GS_BUF_INIT(0);
  uint32_t ngpus = st->ngpus < GS_MAX_GPUS ? st->ngpus : GS_MAX_GPUS;

  /* Seconds since the epoch to the millisecond: a double's %g would round it to 10 s. */
  gs_buf_printf(&b, "{\"version\":%d,\"time\":%" PRIu64 ".%03u,\"gpus\":[", GS_STATUS_JSON_VERSION,
                (uint64_t)(st->time_ns / 1000000000ULL),
                (unsigned)(st->time_ns % 1000000000ULL / 1000000ULL));
  for (uint32_t i = 0; i < ngpus; i++) {
    if (i)
      gs_buf_putc(&b, ',');
    json_gpu(&b, &st->gpus[i]);
  }
  gs_buf_puts(&b, "],\"slices\":[");
  for (uint32_t k = 0; k < st->nslices; k++) {
    if (k)
      gs_buf_putc(&b, ',');
    json_slice(&b, &st->slices[k]);
  }
  int r = gs_buf_puts(&b, "]}\n");
  if (r == 0 && fwrite(b.p, 1, b.len, out) != b.len)
    r = -EIO;
  gs_buf_free(&b);
  if (r < 0)
    return r;
  return ferror(out) ? -EIO : 0;
}
