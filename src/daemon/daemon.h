/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's state, passed around as struct daemon *: config, loop, registry, GPUs,
 * connections and listening sockets, each part's struct defined by its module's header. No
 * functions: each lives with its module (the layers: docs/architecture.md). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "charge.h"
#include "config.h"
#include "conn.h"
#include "gpu.h"
#include "loop.h"
#include "proto.h"
#include "registry.h"
#include "sock.h"

struct nvml;

struct daemon {
  struct config cfg;
  char config_path[CONFIG_STR_MAX];
  struct loop *loop;
  struct sock sock;   /* the listening sockets (sock.h) */
  struct conns conns; /* every connection (conn.h) */
  int signal_fd;
  int lock_fd;
  struct registry reg;
  struct gpu gpus[GS_MAX_GPUS];
  uint32_t ngpus;
  uint64_t started;
  uint64_t housekeeping_timer;
  struct nvml *nvml;
  struct gs_metrics *metrics;
  struct charge charge; /* the charge check (charge.h) */
};
