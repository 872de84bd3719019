/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the /metrics renderer and of the endpoint served over a real loopback socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <unistd.h>

#include "metrics.h"
#include "test.h"
#include "ui_snapshot.h"

static void test_render(void) {
  struct gs_status st;
  ui_snapshot(&st);
  st.gpus[1].switch_lost_ratio = 0.02;
  st.gpus[1].switch_lost_seconds_total = 7.25;
  char *text = NULL;
  size_t len = 0;
  CHECK_EQ_INT(gs_metrics_render(&st, &text, &len), 0);
  CHECK_EQ_U64(len, strlen(text));
  /* Time lost to token switches, per GPU: a ratio of the window and a counter. */
  CHECK(strstr(text, "gslice_gpu_switch_lost_ratio{gpu=\"1\",uuid=\"GPU-00000001-sim\"} 0.02\n") !=
        NULL);
  CHECK(strstr(text, "# TYPE gslice_gpu_switch_lost_seconds_total counter\n"
                     "gslice_gpu_switch_lost_seconds_total{gpu=\"0\",uuid=\"GPU-00000000-sim\"} 0\n"
                     "gslice_gpu_switch_lost_seconds_total{gpu=\"1\",uuid=\"GPU-00000001-sim\"} "
                     "7.25\n") != NULL);
  CHECK(strstr(text,
               "# TYPE gslice_gpu_memory_used_bytes gauge\n"
               "gslice_gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-00000000-sim\"} 1610612736\n") !=
        NULL);
  CHECK(strstr(text, "gslice_gpu_busy_ratio{gpu=\"0\",uuid=\"GPU-00000000-sim\"} 0.975\n") != NULL);
  CHECK(strstr(text,
               "gslice_gpu_compute_requested_ratio{gpu=\"1\",uuid=\"GPU-00000001-sim\"} 0.4\n") !=
        NULL);
  CHECK(strstr(text, "gslice_slice_info{slice=\"train\",slice_id=\"1\",priority=\"high\"} 1\n") !=
        NULL);
  CHECK(strstr(text, "gslice_slice_compute_request_ratio{slice=\"train\",slice_id=\"1\"} 0.3\n") !=
        NULL);
  CHECK(strstr(text, "gslice_slice_compute_limit_ratio{slice=\"train\",slice_id=\"1\"} 0.6\n") !=
        NULL);
  CHECK(
      strstr(
          text,
          "gslice_slice_memory_cap_bytes{slice=\"train\",slice_id=\"1\",gpu=\"0\"} 536870912\n") !=
      NULL);
  CHECK(strstr(text, "gslice_slice_memory_forced{slice=\"train\",slice_id=\"1\"} 1\n") != NULL);
  /* No cap, no sample. */
  CHECK(strstr(text, "gslice_slice_memory_cap_bytes{slice=\"infer") == NULL);
  /* Label values escaped as the text format wants. */
  CHECK(strstr(text, "gslice_slice_share_ratio{slice=\"infer "
                     "\\\"q\\\"\\n\",slice_id=\"2\",gpu=\"1\"} 0.25\n") != NULL);
  CHECK(strstr(text, "# TYPE gslice_slice_launches_total counter\n") != NULL);
  CHECK(strstr(text,
               "gslice_slice_launches_total{slice=\"train\",slice_id=\"1\",gpu=\"0\"} 1000\n") !=
        NULL);
  CHECK(
      strstr(text,
             "gslice_slice_busy_seconds_total{slice=\"train\",slice_id=\"1\",gpu=\"0\"} 12.5\n") !=
      NULL);
  CHECK(strstr(text, "# TYPE gslice_slice_token_wait_seconds histogram\n") != NULL);
  CHECK(strstr(text, "gslice_slice_token_wait_seconds_bucket{slice=\"train\",slice_id=\"1\",gpu="
                     "\"0\",le=\"0.0005\"} 10\n") != NULL);
  CHECK(strstr(text, "gslice_slice_token_wait_seconds_bucket{slice=\"train\",slice_id=\"1\",gpu="
                     "\"0\",le=\"+Inf\"} 50\n") != NULL);
  CHECK(
      strstr(
          text,
          "gslice_slice_token_wait_seconds_sum{slice=\"train\",slice_id=\"1\",gpu=\"0\"} 0.42\n") !=
      NULL);
  CHECK(
      strstr(
          text,
          "gslice_slice_token_wait_seconds_count{slice=\"train\",slice_id=\"1\",gpu=\"0\"} 50\n") !=
      NULL);
  /* The slice without a GPU has slice-level series only. */
  CHECK(strstr(text, "gslice_slice_compute_limit_ratio{slice=\"idle\",slice_id=\"3\"} 1\n") !=
        NULL);
  CHECK(strstr(text, "slice=\"idle\",slice_id=\"3\",gpu=") == NULL);
  free(text);
  gs_status_free(&st);
}

static void test_parse_addr(void) {
  struct sockaddr_storage ss;
  int lo = -1;
  CHECK_EQ_INT(gs_metrics_parse_addr("9400", &ss, &lo), 0);
  CHECK_EQ_INT(ss.ss_family, AF_INET);
  CHECK_EQ_INT(lo, 1);
  CHECK_EQ_INT(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9400);
  CHECK_EQ_INT(gs_metrics_parse_addr("127.0.0.1:9400", &ss, &lo), 0);
  CHECK_EQ_INT(lo, 1);
  CHECK_EQ_INT(gs_metrics_parse_addr("localhost:1", &ss, &lo), 0);
  CHECK_EQ_INT(lo, 1);
  CHECK_EQ_INT(gs_metrics_parse_addr("[::1]:9400", &ss, &lo), 0);
  CHECK_EQ_INT(ss.ss_family, AF_INET6);
  CHECK_EQ_INT(lo, 1);
  CHECK_EQ_INT(gs_metrics_parse_addr("0.0.0.0:9400", &ss, &lo), 0);
  CHECK_EQ_INT(lo, 0);
  CHECK_EQ_INT(gs_metrics_parse_addr("10.1.2.3:80", &ss, &lo), 0);
  CHECK_EQ_INT(lo, 0);
  CHECK_EQ_INT(gs_metrics_parse_addr("", &ss, &lo), -EINVAL);
  CHECK_EQ_INT(gs_metrics_parse_addr("127.0.0.1:", &ss, &lo), -EINVAL);
  CHECK_EQ_INT(gs_metrics_parse_addr("127.0.0.1:65536", &ss, &lo), -EINVAL);
  CHECK_EQ_INT(gs_metrics_parse_addr("127.0.0.1:-1", &ss, &lo), -EINVAL);
  CHECK_EQ_INT(gs_metrics_parse_addr("::1:9400", &ss, &lo), -EINVAL);
  CHECK_EQ_INT(gs_metrics_parse_addr("example.org:9400", &ss, &lo), -EINVAL);
  CHECK_EQ_INT(gs_metrics_parse_addr(":9400", &ss, &lo), -EINVAL);
}

/* One HTTP/1.0 request over loopback; returns the whole response (headers + body). */
static char *http(uint16_t port, const char *request) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
    CHECK(!"connect to the metrics endpoint");
    if (fd >= 0)
      close(fd);
    return strdup("");
  }
  CHECK(write(fd, request, strlen(request)) == (ssize_t)strlen(request));
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  ssize_t n;
  while ((n = read(fd, buf + len, cap - 1 - len)) > 0) {
    len += (size_t)n;
    if (len + 1 == cap)
      buf = realloc(buf, cap *= 2);
  }
  buf[len] = 0;
  close(fd);
  return buf;
}

static void test_server(void) {
  struct gs_metrics *m = NULL;
  CHECK_EQ_INT(gs_metrics_start("nonsense", &m), -EINVAL);
  CHECK(m == NULL);
  CHECK_EQ_INT(gs_metrics_start("127.0.0.1:0", &m), 0);
  if (!m)
    return;
  uint16_t port = gs_metrics_port(m);
  CHECK(port != 0);

  /* Before any publish: an empty node, still valid. */
  char *r = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
  CHECK(strncmp(r, "HTTP/1.0 200", 12) == 0 || strncmp(r, "HTTP/1.1 200", 12) == 0);
  CHECK(strstr(r, "Content-Type: text/plain; version=0.0.4") != NULL);
  CHECK(strstr(r, "# TYPE gslice_gpu_busy_ratio gauge") != NULL);
  CHECK(strstr(r, "gslice_gpu_busy_ratio{") == NULL);
  free(r);

  struct gs_status st;
  ui_snapshot(&st);
  CHECK_EQ_INT(gs_metrics_publish(m, &st), 0);
  gs_status_free(&st); /* the endpoint kept its own copy */
  r = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
  CHECK(strstr(r, "gslice_slice_launches_total{slice=\"train\",slice_id=\"1\",gpu=\"0\"} 1000\n") !=
        NULL);
  free(r);

  r = http(port, "GET / HTTP/1.0\r\n\r\n");
  CHECK(strstr(r, " 404 ") != NULL);
  free(r);
  r = http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
  CHECK(strstr(r, " 405 ") != NULL);
  free(r);

  /* The port is taken while we serve: a second start says so precisely. */
  char addr[32];
  snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
  struct gs_metrics *m2 = NULL;
  CHECK_EQ_INT(gs_metrics_start(addr, &m2), -EADDRINUSE);
  gs_metrics_stop(m);
  /* ...and free again once stopped (the listening socket went with it). */
  CHECK_EQ_INT(gs_metrics_start(addr, &m2), 0);
  gs_metrics_stop(m2);
  gs_metrics_stop(NULL);
}

/* Publishes while scrapes run: every scrape must see one whole snapshot (ASan/TSan food). */
static int publishing; /* __atomic: the test's own flag between its threads */
static void *publisher(void *arg) {
  struct gs_metrics *m = arg;
  struct gs_status st;
  ui_snapshot(&st);
  for (uint64_t i = 0; __atomic_load_n(&publishing, __ATOMIC_RELAXED); i++) {
    st.slices[0].gpus[0].launches_total = i;
    st.nslices = 1 + (uint32_t)(i % 3);
    gs_metrics_publish(m, &st);
  }
  gs_status_free(&st);
  return NULL;
}

static void test_concurrent(void) {
  struct gs_metrics *m = NULL;
  CHECK_EQ_INT(gs_metrics_start("127.0.0.1:0", &m), 0);
  if (!m)
    return;
  pthread_t t;
  struct gs_status first;
  ui_snapshot(&first);
  CHECK_EQ_INT(gs_metrics_publish(m, &first), 0);
  gs_status_free(&first);
  __atomic_store_n(&publishing, 1, __ATOMIC_RELAXED);
  pthread_create(&t, NULL, publisher, m);
  for (int i = 0; i < 50; i++) {
    char *r = http(gs_metrics_port(m), "GET /metrics HTTP/1.0\r\n\r\n");
    CHECK(strstr(r, "slice=\"train\"") != NULL);
    /* Families are whole: the histogram's last line is always there. */
    CHECK(strstr(r, "gslice_slice_token_wait_seconds_count{slice=\"train\"") != NULL);
    free(r);
  }
  __atomic_store_n(&publishing, 0, __ATOMIC_RELAXED);
  pthread_join(t, NULL);
  gs_metrics_stop(m);
}

int main(int argc, char **argv) {
  /* --dump: print the hand-built snapshot's metrics only, for promtool (ui_promtool.sh). */
  if (argc > 1 && strcmp(argv[1], "--dump") == 0) {
    struct gs_status st;
    char *text;
    size_t len;
    ui_snapshot(&st);
    if (gs_metrics_render(&st, &text, &len) < 0)
      return 1;
    fwrite(text, 1, len, stdout);
    free(text);
    gs_status_free(&st);
    return 0;
  }
  test_render();
  test_parse_addr();
  test_server();
  test_concurrent();
  return test_done();
}
