/* gslice-extender's HTTP side (libmicrohttpd): the kube-scheduler extender verbs /filter,
 * /prioritize and /bind, plus /healthz and /metrics, over a cluster view. */
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "kube.h"

struct ext_server;

struct ext_server_cfg {
  const char *listen; /* "[HOST:]PORT"; port 0: any free one (see ext_server_port) */
  struct cluster *cluster;
  struct kube *kube; /* for /bind; NULL: /bind answers an error (bench) */
  FILE *log;         /* may be NULL */
};

/* Parses "[HOST:]PORT" (HOST: an address or name, "[v6]" for IPv6; default all
 * IPv4 addresses). 0 or -EINVAL. */
int ext_listen_parse(const char *text, char *host, size_t hostlen, uint16_t *ret_port);

/* 0, or a negative errno with err saying what (a taken port: -EADDRINUSE). */
int ext_server_start(const struct ext_server_cfg *cfg, struct ext_server **ret, char *err,
                     size_t errlen);
uint16_t ext_server_port(const struct ext_server *s);
void ext_server_stop(struct ext_server *s);
