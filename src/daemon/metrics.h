/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's /metrics endpoint: the node snapshot in Prometheus text format, served by
 * libmicrohttpd from its own thread. Metric names, types and labels: docs/metrics.md. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "status.h"

struct gs_metrics;

/* Renders the snapshot as Prometheus text exposition (format 0.0.4). Pure.
 * Returns 0 and a malloc'd NUL-terminated text in *ret_text (length in *ret_len),
 * or -ENOMEM; outputs untouched on failure. */
int gs_metrics_render(const struct gs_status *st, char **ret_text, size_t *ret_len);

/* Parses where to listen: "PORT" (loopback), "HOST:PORT", "[V6]:PORT"; HOST is a numeric
 * address or "localhost". Port 0 asks the kernel for a free one (see gs_metrics_port).
 * *ret_loopback says whether the address is a loopback one. Returns 0 or -EINVAL. */
int gs_metrics_parse_addr(const char *addr_port, struct sockaddr_storage *ret_addr,
                          int *ret_loopback);

/* Starts serving GET /metrics on addr_port. A non-loopback address is served only because
 * the operator wrote it out (the daemon logs that metrics are exposed beyond the host).
 * Until the first publish it serves the metrics of an empty node.
 * Returns 0, or -EINVAL (bad address), -EADDRINUSE / -EACCES / -EIO (cannot listen). */
int gs_metrics_start(const char *addr_port, struct gs_metrics **ret);

/* The port actually bound (differs from the one asked for only when that was 0). */
uint16_t gs_metrics_port(const struct gs_metrics *m);

/* Whether it listens on a loopback address only (else the daemon says it is exposed). */
int gs_metrics_loopback(const struct gs_metrics *m);

/* Hands the endpoint a fresh snapshot (copied; the caller keeps its own). Call it from
 * the daemon's timer; scrapes between two publishes see the last one. Returns 0 or -ENOMEM
 * (the previous snapshot stays served). */
int gs_metrics_publish(struct gs_metrics *m, const struct gs_status *st);

/* The daemon's figures that the node snapshot (status.h, the STATUS wire format) does not carry:
 * per slice and GPU, the device time the charge check (charge.c) charged beyond what the slice's
 * releases reported, and the time it held the token idle while others waited, charged to it
 * (sched_token_done). */
struct gs_metrics_charge {
  uint32_t slice_id, gpu;
  char name[GS_NAME_MAX];
  double unreported_seconds_total;
  double idle_held_seconds_total;
};
/* Renders them (gslice_slice_uncharged_device_seconds_total, gslice_slice_idle_held_seconds_total)
 * after the snapshot's:
 * 0 or -ENOMEM, as gs_metrics_render. Pure. */
int gs_metrics_render_charges(const struct gs_status *st, const struct gs_metrics_charge *c,
                              uint32_t n, char **ret_text, size_t *ret_len);
/* Hands the endpoint fresh ones (copied), as gs_metrics_publish. 0 or -ENOMEM. */
int gs_metrics_publish_charges(struct gs_metrics *m, const struct gs_metrics_charge *c, uint32_t n);

/* Stops the server thread and frees everything; NULL is fine. */
void gs_metrics_stop(struct gs_metrics *m);
