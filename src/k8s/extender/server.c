/* The extender's HTTP server (server.h): one thread per connection (kube-scheduler keeps a
 * few long-lived ones; /bind waits on the API server without holding up the others). */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "verbs.h"

/* Last: it expects the system headers it builds on to be in already. */
#include <microhttpd.h>

#define MAX_BODY (64u << 20) /* ExtenderArgs with a whole NodeList of thousands of nodes */
#define MAX_CONNECTIONS 128
#define CONNECTION_TIMEOUT_S 120

struct ext_server {
  struct MHD_Daemon *mhd;
  uint16_t port;
  struct cluster *cluster;
  struct kube *kube;
  FILE *log;
  struct verb_stats stats;
};

struct req {
  char *p;
  size_t len, cap;
  bool too_big;
};

int ext_listen_parse(const char *text, char *host, size_t hostlen, uint16_t *ret_port) {
  const char *colon, *port;
  char *end;
  unsigned long p;

  if (!text || !*text)
    return -EINVAL;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (!close || close[1] != ':' || (size_t)(close - text - 1) >= hostlen)
      return -EINVAL;
    snprintf(host, hostlen, "%.*s", (int)(close - text - 1), text + 1);
    port = close + 2;
  } else if ((colon = strrchr(text, ':'))) {
    if ((size_t)(colon - text) >= hostlen || colon == text || memchr(text, ':', colon - text))
      return -EINVAL;
    snprintf(host, hostlen, "%.*s", (int)(colon - text), text);
    port = colon + 1;
  } else {
    snprintf(host, hostlen, "%s", "");
    port = text;
  }
  errno = 0;
  p = strtoul(port, &end, 10);
  if (!*port || *end || errno || p > 65535 || port[0] == '-' || port[0] == '+')
    return -EINVAL;
  *ret_port = (uint16_t)p;
  return 0;
}

static enum MHD_Result reply(struct MHD_Connection *conn, int status, char *body, size_t len,
                             const char *ctype) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  enum MHD_Result ret;
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", ctype);
  ret = MHD_queue_response(conn, (unsigned)status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, int status, const char *text) {
  char *b = strdup(text);
  return b ? reply(conn, status, b, strlen(b), "text/plain; charset=utf-8") : MHD_NO;
}

static void metrics(struct ext_server *s, char **ret, size_t *ret_len) {
  FILE *f = open_memstream(ret, ret_len);
  struct verb_stats *st = &s->stats;
  if (!f) {
    *ret = NULL;
    return;
  }
  cluster_metrics(s->cluster, f, gs_mono_ms());
  fprintf(f,
          "# HELP gslice_extender_requests_total Extender calls by verb.\n"
          "# TYPE gslice_extender_requests_total counter\n"
          "gslice_extender_requests_total{verb=\"filter\"} %llu\n"
          "gslice_extender_requests_total{verb=\"prioritize\"} %llu\n"
          "gslice_extender_requests_total{verb=\"bind\"} %llu\n"
          "# HELP gslice_extender_bind_errors_total Binds answered with an Error.\n"
          "# TYPE gslice_extender_bind_errors_total counter\n"
          "gslice_extender_bind_errors_total %llu\n"
          "# HELP gslice_extender_bind_repeated_total Binds whose Binding was already in place "
          "with the same assignment (409, counted as success).\n"
          "# TYPE gslice_extender_bind_repeated_total counter\n"
          "gslice_extender_bind_repeated_total %llu\n"
          "# HELP gslice_extender_not_ready_total Filter or prioritize calls answered 503 "
          "before the first sync.\n# TYPE gslice_extender_not_ready_total counter\n"
          "gslice_extender_not_ready_total %llu\n"
          "# HELP gslice_extender_bad_requests_total Calls with a malformed body.\n"
          "# TYPE gslice_extender_bad_requests_total counter\n"
          "gslice_extender_bad_requests_total %llu\n"
          "# HELP gslice_extender_ready Whether the first list of nodes and pods is done.\n"
          "# TYPE gslice_extender_ready gauge\ngslice_extender_ready %d\n",
          (unsigned long long)st->filter, (unsigned long long)st->prioritize,
          (unsigned long long)st->bind, (unsigned long long)st->bind_errors,
          (unsigned long long)st->bind_conflicts_same, (unsigned long long)st->not_ready,
          (unsigned long long)st->bad_requests, cluster_synced(s->cluster) ? 1 : 0);
  fclose(f);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req_cls) {
  struct ext_server *s = cls;
  struct req *r = *req_cls;
  bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
  char *body = NULL;
  size_t len = 0;
  int status;

  if (strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0) {
    if (strcmp(url, "/healthz") == 0)
      return reply_text(conn, 200, "ok\n");
    if (strcmp(url, "/metrics") == 0) {
      metrics(s, &body, &len);
      return body ? reply(conn, 200, body, len, "text/plain; version=0.0.4; charset=utf-8")
                  : MHD_NO;
    }
    return reply_text(conn, 404,
                      "not found: gslice-extender serves POST /filter, /prioritize, /bind and "
                      "GET /healthz, /metrics\n");
  }
  if (!post)
    return reply_text(conn, 405, "method not allowed\n");
  if (!r) {
    r = calloc(1, sizeof(*r));
    if (!r)
      return MHD_NO;
    *req_cls = r;
    return MHD_YES;
  }
  if (*upload_size) {
    if (r->len + *upload_size > MAX_BODY) {
      r->too_big = true;
    } else if (!r->too_big) {
      if (r->len + *upload_size + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 65536;
        while (cap < r->len + *upload_size + 1)
          cap *= 2;
        char *p = realloc(r->p, cap);
        if (!p)
          return MHD_NO;
        r->p = p;
        r->cap = cap;
      }
      memcpy(r->p + r->len, upload, *upload_size);
      r->len += *upload_size;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (r->too_big)
    return reply_text(conn, 413, "request body over 64 MiB\n");
  if (strcmp(url, "/filter") == 0)
    status = verb_filter(s->cluster, r->p ? r->p : "", r->len, gs_mono_ms(), s->log, &s->stats,
                         &body, &len);
  else if (strcmp(url, "/prioritize") == 0)
    status = verb_prioritize(s->cluster, r->p ? r->p : "", r->len, gs_mono_ms(), s->log, &s->stats,
                             &body, &len);
  else if (strcmp(url, "/bind") == 0)
    status = verb_bind(s->cluster, s->kube, r->p ? r->p : "", r->len, gs_mono_ms(), s->log,
                       &s->stats, &body, &len);
  else
    return reply_text(conn, 404, "not found: the verbs are /filter, /prioritize and /bind\n");
  if (!body)
    return MHD_NO;
  return reply(conn, status, body, len, "application/json");
}

static void done(void *cls, struct MHD_Connection *conn, void **req_cls,
                 enum MHD_RequestTerminationCode toe) {
  struct req *r = *req_cls;
  if (r) {
    free(r->p);
    free(r);
    *req_cls = NULL;
  }
}

int ext_server_start(const struct ext_server_cfg *cfg, struct ext_server **ret, char *err,
                     size_t errlen) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  struct ext_server *s = NULL;
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  char host[256], port[8];
  uint16_t p;
  int fd = -1, one = 1, rc;

  if (ext_listen_parse(cfg->listen, host, sizeof host, &p)) {
    snprintf(err, errlen, "--listen \"%s\" is not [HOST:]PORT (e.g. 8765 or 127.0.0.1:8765)",
             cfg->listen);
    return -EINVAL;
  }
  snprintf(port, sizeof port, "%u", p);
  if (!host[0])
    hints.ai_family = AF_INET;
  rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
  if (rc) {
    snprintf(err, errlen, "--listen %s: %s", cfg->listen, gai_strerror(rc));
    return -EINVAL;
  }
  /* Our own socket: close-on-exec, and the real errno when the port is taken. */
  fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    rc = -errno;
    goto fail;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
    rc = -errno;
    goto fail;
  }
  s = calloc(1, sizeof(*s));
  if (!s) {
    rc = -ENOMEM;
    goto fail;
  }
  if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
    s->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                               : ((struct sockaddr_in6 *)&bound)->sin6_port);
  s->cluster = cfg->cluster;
  s->kube = cfg->kube;
  s->log = cfg->log;
  s->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                                MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
                            0, NULL, NULL, handle, s, MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
                            MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_END);
  if (!s->mhd) {
    rc = -EIO;
    goto fail;
  }
  freeaddrinfo(ai);
  *ret = s;
  return 0;
fail:
  snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen, strerror(-rc));
  if (fd >= 0)
    close(fd);
  free(s);
  freeaddrinfo(ai);
  return rc;
}

uint16_t ext_server_port(const struct ext_server *s) {
  return s->port;
}

void ext_server_stop(struct ext_server *s) {
  if (!s)
    return;
  MHD_stop_daemon(s->mhd);
  free(s);
}
