/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-node's probes: /healthz and /readyz on --health-listen. One thread (libmicrohttpd's
 * internal poll), a few connections, a short timeout: a probe never holds the plugin up. */
#include "health.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node.h"

/* The kubelet probes from the node's one address, a connection a probe, liveness and readiness
 * possibly at once: a few per address, so that a pod filling the listener from its own address
 * (or a few) cannot take every slot and fail the probes, and a slow peer is cut in 2 s. */
#define HEALTH_CONNS 64
#define HEALTH_CONNS_PER_IP 4
#define HEALTH_TIMEOUT_S 2

struct node_health {
  struct node *n;
  struct MHD_Daemon *mhd;
};

int node_health_parse(const char *text, char *host, size_t hostlen, uint16_t *ret_port) {
  const char *port = text, *colon;
  char *end;

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
    snprintf(host, hostlen, "%s", "127.0.0.1");
  }
  errno = 0;
  unsigned long p = strtoul(port, &end, 10);
  if (!*port || *end || errno || p > 65535 || port[0] == '-' || port[0] == '+')
    return -EINVAL;
  *ret_port = (uint16_t)p;
  return 0;
}

/* Registered with the kubelet (the main loop's flag) and the pod cache synced. */
static void readiness(struct node *n, char *why, size_t len) {
  bool reg = __atomic_load_n(&n->registered, __ATOMIC_RELAXED);
  bool pods = n->cfg.no_api || node_pods_synced(n);

  snprintf(why, len, "%s%s%s", reg ? "" : "not registered with the kubelet",
           !reg && !pods ? "; " : "", pods ? "" : "pod cache not synced");
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *text) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_len, void **state) {
  struct node_health *h = cls;
  char why[128], text[160];
  (void)version;
  (void)data;

  if (!*state) { /* headers only: answer once the (empty) body is read */
    *state = h;
    return MHD_YES;
  }
  if (*data_len) {
    *data_len = 0; /* a body is not wanted: dropped */
    return MHD_YES;
  }
  if (strcmp(method, "GET") && strcmp(method, "HEAD"))
    return answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
  if (!strcmp(url, "/healthz"))
    return answer(c, MHD_HTTP_OK, "ok\n");
  if (strcmp(url, "/readyz"))
    return answer(c, MHD_HTTP_NOT_FOUND, "not found: /healthz or /readyz\n");
  readiness(h->n, why, sizeof(why));
  if (!why[0])
    return answer(c, MHD_HTTP_OK, "ok\n");
  snprintf(text, sizeof(text), "not ready: %s\n", why);
  return answer(c, MHD_HTTP_SERVICE_UNAVAILABLE, text);
}

static int listen_fd(const char *at, char *err, size_t err_len) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  char host[256], port[8];
  uint16_t p;
  int fd = -1, one = 1, rc;

  if (node_health_parse(at, host, sizeof(host), &p)) {
    snprintf(err, err_len, "--health-listen \"%s\" is not [HOST:]PORT", at);
    return -1;
  }
  snprintf(port, sizeof(port), "%u", (unsigned)p);
  if ((rc = getaddrinfo(host, port, &hints, &ai))) {
    snprintf(err, err_len, "--health-listen %s: %s", at, gai_strerror(rc));
    return -1;
  }
  fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0)
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, HEALTH_CONNS) < 0) {
    snprintf(err, err_len, "--health-listen %s: %s", at, strerror(errno));
    if (fd >= 0)
      close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  return fd;
}

struct node_health *node_health_start(struct node *n, const char *at, char *err, size_t err_len) {
  struct node_health *h = calloc(1, sizeof(*h));
  int fd = h ? listen_fd(at, err, err_len) : -1;

  if (fd < 0) {
    if (!h)
      snprintf(err, err_len, "out of memory");
    free(h);
    return NULL;
  }
  h->n = n;
  h->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, handle,
                            h, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)HEALTH_CONNS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            (unsigned)HEALTH_CONNS_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)HEALTH_TIMEOUT_S, MHD_OPTION_END);
  if (!h->mhd) {
    snprintf(err, err_len, "--health-listen %s: cannot start the server", at);
    close(fd);
    free(h);
    return NULL;
  }
  return h;
}

void node_health_stop(struct node_health *h) {
  if (!h)
    return;
  MHD_stop_daemon(h->mhd); /* closes the listening socket */
  free(h);
}
