/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the status renderers (table and JSON) over a hand-built snapshot. */
#include <errno.h>

#include "render.h"
#include "test.h"
#include "ui_snapshot.h"

static char *render_table(const struct gs_status *st, const struct gs_render_opts *o) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CHECK_EQ_INT(gs_render_table(st, o, f), 0);
  fclose(f);
  return text;
}

static char *render_json(const struct gs_status *st) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CHECK_EQ_INT(gs_render_json(st, f), 0);
  fclose(f);
  return text;
}

/* The JSON is one object whose brackets balance outside strings, with no raw control
 * bytes inside strings: what a parser needs before the schema even matters. */
static int json_well_formed(const char *s) {
  int depth = 0, in_str = 0;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (in_str) {
      if (c < 0x20)
        return 0;
      if (c == '\\')
        s++;
      else if (c == '"')
        in_str = 0;
    } else if (c == '"') {
      in_str = 1;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (--depth < 0)
        return 0;
    } else if (c == 'n' && strncmp(s, "nan", 3) == 0) {
      return 0;
    }
  }
  return depth == 0 && !in_str;
}

static void test_priority(void) {
  int32_t p = 99;
  CHECK_EQ_INT(gs_priority_parse("high", &p), 0);
  CHECK_EQ_INT(p, GS_PRIORITY_HIGH);
  CHECK_EQ_INT(gs_priority_parse("low", &p), 0);
  CHECK_EQ_INT(p, GS_PRIORITY_LOW);
  CHECK_EQ_INT(gs_priority_parse("normal", &p), 0);
  CHECK_EQ_INT(p, GS_PRIORITY_NORMAL);
  p = 99;
  CHECK_EQ_INT(gs_priority_parse("urgent", &p), -EINVAL);
  CHECK_EQ_INT(gs_priority_parse("", &p), -EINVAL);
  CHECK_EQ_INT(p, 99);
  CHECK_STR(gs_priority_name(7), "unknown");
}

static void test_table(void) {
  struct gs_status st;
  ui_snapshot(&st);
  char *t = render_table(&st, NULL);
  fputs(t, stdout);
  CHECK(strstr(t, "gslice: 2 GPUs, 3 slices, shares over 10s  2025-11-30 10:00:00 UTC\n") != NULL);
  CHECK(strstr(t, "GPU 0  Simulated GPU 0  GPU-00000000-sim  busy 97.5%  memory 1.5GiB / 16GiB  "
                  "requested 70%\n") != NULL);
  /* train: capped below usage with --force, marked and explained. */
  CHECK(strstr(t, "train") != NULL);
  CHECK(strstr(t, "1GiB / 512MiB!") != NULL);
  CHECK(strstr(t, "31.2%") != NULL);
  CHECK(strstr(t, "0.42s") != NULL);
  CHECK(strstr(t, "high") != NULL);
  CHECK(strstr(t, "! cap lowered below usage with --force") != NULL);
  /* infer sits under both GPUs, its newline never reaches the terminal. */
  const char *first = strstr(t, "infer \"q\"?");
  CHECK(first != NULL);
  CHECK(first && strstr(first + 1, "infer \"q\"?") != NULL);
  CHECK(strstr(t, "256MiB / -") != NULL);
  /* idle has no GPU yet. */
  CHECK(strstr(t, "Slices without a GPU\n") != NULL);
  CHECK(strstr(t, "idle") > strstr(t, "Slices without a GPU"));
  /* No NOW column without an earlier snapshot. */
  CHECK(strstr(t, " NOW ") == NULL);
  free(t);

  /* Width cuts every line; nothing longer gets through. */
  struct gs_render_opts o = {.width = 40};
  t = render_table(&st, &o);
  for (char *l = t; *l;) {
    char *nl = strchr(l, '\n');
    CHECK(nl != NULL);
    if (!nl)
      break;
    CHECK((size_t)(nl - l) <= 40);
    l = nl + 1;
  }
  free(t);

  /* top asks for the NOW column from its first frame on: "-" until there is a prev. */
  struct gs_render_opts o_first = {.now_column = 1};
  t = render_table(&st, &o_first);
  CHECK(strstr(t, "    NOW ") != NULL);
  CHECK(strstr(t, "31.2%      -   0.42s") != NULL);
  free(t);

  /* An empty node still renders. */
  struct gs_status empty = {.time_ns = 0};
  t = render_table(&empty, NULL);
  CHECK(strstr(t, "gslice: 0 GPUs, 0 slices") != NULL);
  free(t);
  gs_status_free(&st);
}

static void test_share_between(void) {
  struct gs_status a, b;
  ui_snapshot(&a);
  ui_snapshot(&b);
  b.time_ns += 2000000000ULL;                    /* 2 s later */
  b.slices[0].gpus[0].busy_seconds_total += 1.2; /* train ran 1.2 s of them */
  double r = -1;
  CHECK_EQ_INT(gs_status_share_between(&a, &b, 1, 0, &r), 0);
  CHECK(r > 0.5999 && r < 0.6001);
  CHECK_EQ_INT(gs_status_share_between(&a, &b, 2, 1, &r), 0);
  CHECK(r == 0.0);
  CHECK_EQ_INT(gs_status_share_between(&a, &b, 3, 0, &r), -ENOENT); /* no GPU */
  CHECK_EQ_INT(gs_status_share_between(&a, &b, 9, 0, &r), -ENOENT); /* no slice */
  CHECK_EQ_INT(gs_status_share_between(&b, &a, 1, 0, &r), -ENOENT); /* time backwards */

  struct gs_render_opts o = {.prev = &a};
  char *t = render_table(&b, &o);
  CHECK(strstr(t, " NOW ") != NULL);
  CHECK(strstr(t, "60.0%") != NULL);
  free(t);
  gs_status_free(&a);
  gs_status_free(&b);
}

static void test_json(void) {
  struct gs_status st;
  ui_snapshot(&st);
  st.slices[1].gpus[1].share_ratio = 0.0 / 0.0; /* a NaN from the daemon must not leak */
  st.gpus[0].switch_lost_ratio = 0.0125;
  st.gpus[0].switch_lost_seconds_total = 3.5;
  char *j = render_json(&st);
  fputs(j, stdout);
  CHECK(json_well_formed(j));
  CHECK(j[strlen(j) - 1] == '\n');
  CHECK(strncmp(j, "{\"version\":1,\"time\":1764496800.500,\"gpus\":[{\"index\":0,", 54) == 0);
  CHECK(
      strstr(j,
             "\"name\":\"Simulated GPU 0\",\"uuid\":\"GPU-00000000-sim\",\"busy_ratio\":0.975,"
             "\"window_seconds\":10,\"switch_lost_ratio\":0.0125,\"switch_lost_seconds_total\":3.5,"
             "\"memory_used_bytes\":1610612736,"
             "\"memory_total_bytes\":17179869184,\"compute_requested_percent\":70,"
             "\"device_busy_ratio\":null,\"unaccounted\":null}") != NULL);
  CHECK(strstr(j,
               "{\"id\":1,\"name\":\"train\",\"compute_request_percent\":30,"
               "\"compute_limit_percent\":60,\"priority\":\"high\",\"weight\":2,"
               "\"memory_force\":true,\"processes\":2,\"pids\":[4242,4243],\"gpus\":[{\"index\":0,"
               "\"compute_request_percent\":0,\"memory_used_bytes\":1073741824,\"memory_cap_"
               "bytes\":536870912,"
               "\"share_ratio\":0.3125,\"busy_seconds_total\":12.5,\"launches_total\":1000,"
               "\"tokens_total\":50,\"wait_seconds_total\":0.42,\"wait_count\":50,"
               "\"wait_buckets\":[{\"le\":0.0001,\"count\":0},{\"le\":0.0005,\"count\":10}") !=
        NULL);
  CHECK(strstr(j, "{\"le\":null,\"count\":50}]}]}") != NULL);
  CHECK(strstr(j, "\"name\":\"infer \\\"q\\\"\\n\"") != NULL);
  CHECK(strstr(j, "\"memory_cap_bytes\":null") != NULL);
  CHECK(strstr(j, "\"share_ratio\":0,") != NULL);
  CHECK(strstr(j, "{\"id\":3,\"name\":\"idle\",") != NULL);
  CHECK(strstr(j, "\"pids\":[],\"gpus\":[]}") != NULL);
  free(j);

  struct gs_status empty = {.time_ns = 0};
  j = render_json(&empty);
  CHECK_STR(j, "{\"version\":1,\"time\":0.000,\"gpus\":[],\"slices\":[]}\n");
  free(j);
  gs_status_free(&st);
}

/* Each byte of s is part of a valid UTF-8 sequence (RFC 3629: no overlongs, no surrogates). */
static int utf8_valid(const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  while (*u) {
    size_t n = *u < 0x80             ? 1
               : (*u & 0xe0) == 0xc0 ? 2
               : (*u & 0xf0) == 0xe0 ? 3
               : (*u & 0xf8) == 0xf0 ? 4
                                     : 0;
    if (!n || (n == 2 && *u < 0xc2) || (n == 4 && *u > 0xf4))
      return 0;
    for (size_t k = 1; k < n; k++)
      if ((u[k] & 0xc0) != 0x80)
        return 0;
    u += n;
  }
  return 1;
}

/* A name is a user's bytes: whatever they hold, the document stays JSON a strict reader takes
 * (the old writer let a byte that is not UTF-8 through as it was). */
static void test_json_names(void) {
  struct gs_status st;
  ui_snapshot(&st);
  snprintf(st.slices[0].name, sizeof(st.slices[0].name),
           "tr\xff\xc3"
           "ain\x7f\t\xc3\xa9");
  memset(st.gpus[0].name, 'g', sizeof(st.gpus[0].name)); /* no NUL: cut at GS_NAME_MAX */
  char *j = render_json(&st);
  CHECK(json_well_formed(j));
  CHECK(utf8_valid(j));
  CHECK(strstr(j, "\"name\":\"tr\\ufffd\\ufffdain\x7f\\t\xc3\xa9\"") != NULL);
  char want[GS_NAME_MAX + 16];
  snprintf(want, sizeof(want), "\"name\":\"%.*s\",", GS_NAME_MAX, st.gpus[0].name);
  CHECK(strstr(j, want) != NULL);
  free(j);
  gs_status_free(&st);
}

/* What NVML says beside the slices: the device's busy ratio and the processes no slice
 * accounts for, in the table and the JSON; "unknown" stays null, never 0. */
static void test_unaccounted(void) {
  struct gs_status st;
  ui_snapshot(&st);
  struct gs_gpu_status *g = &st.gpus[0];
  g->device_known = GS_DEVICE_BUSY | GS_DEVICE_PROCS | GS_DEVICE_PROC_BUSY;
  g->device_busy_ratio = 1.0;
  g->unaccounted_count = 2;
  g->unaccounted_memory_bytes = 15ULL << 30;
  g->unaccounted_busy_ratio = 0.5;
  g->unaccounted[0] = (struct gs_unaccounted_proc){
      .pid = 5151, .slice_id = 1, .memory_bytes = 15ULL << 30, .busy_ratio = 0.5};
  g->unaccounted[1] = (struct gs_unaccounted_proc){.pid = 6161, .memory_bytes = 0};
  st.gpus[1].device_known = GS_DEVICE_BUSY | GS_DEVICE_PROCS;
  st.gpus[1].device_busy_ratio = 0.25;
  char *t = render_table(&st, NULL);
  fputs(t, stdout);
  CHECK(strstr(t, "busy 97.5% (device 100%)  memory") != NULL);
  CHECK(strstr(t, "  ! 2 processes on this GPU outside every slice's accounting (no hook): 15GiB, "
                  "50% of the device\n") != NULL);
  CHECK(strstr(t, "    pid 5151     inside slice 1   15GiB  50% busy\n") != NULL);
  CHECK(strstr(t, "    pid 6161     in no slice      0B  0% busy\n") != NULL);
  CHECK(strstr(t, "busy 25.0% (device 25%)") != NULL);
  free(t);
  char *j = render_json(&st);
  fputs(j, stdout);
  CHECK(json_well_formed(j));
  CHECK(strstr(j, "\"compute_requested_percent\":70,\"device_busy_ratio\":1,\"unaccounted\":{"
                  "\"processes\":2,\"memory_bytes\":16106127360,\"busy_ratio\":0.5,\"pids\":["
                  "{\"pid\":5151,\"slice\":1,\"memory_bytes\":16106127360,\"busy_ratio\":0.5},"
                  "{\"pid\":6161,\"slice\":null,\"memory_bytes\":0,\"busy_ratio\":0}]}}") != NULL);
  CHECK(strstr(j, "\"device_busy_ratio\":0.25,\"unaccounted\":{\"processes\":0,"
                  "\"memory_bytes\":0,\"busy_ratio\":null,\"pids\":[]}}") != NULL);
  free(j);
  gs_status_free(&st);
}

int main(void) {
  test_priority();
  test_unaccounted();
  test_table();
  test_share_between();
  test_json();
  test_json_names();
  return test_done();
}
