/* SPDX-License-Identifier: Apache-2.0 */
/* Renders a node snapshot (struct gs_status) for people (the status/top table) and for
 * programs (the stable JSON of `gslice status --json`, schema in docs/cli.md). Pure:
 * no I/O except writing to the FILE given, so unit tests feed hand-built snapshots. */
#pragma once
#include <stdio.h>

#include "status.h"
#include "words.h"

/* Version of the JSON document; bumped only when a field changes meaning or goes away
 * (adding fields is compatible and does not bump it). */
#define GS_STATUS_JSON_VERSION 1

struct gs_render_opts {
  /* Cut every line to this many columns (top, on a narrow terminal); 0: no limit. */
  unsigned width;
  /* An earlier snapshot of the same node: adds a NOW column, the share of device time
   * each slice got between the two (top shows it; status has no earlier snapshot). */
  const struct gs_status *prev;
  /* Show the NOW column even without prev ("-"), so top's first frame has the layout of
   * the next ones. */
  int now_column;
};

/* The human table: one block per GPU, its slices under it, slices without a GPU last. */
int gs_render_table(const struct gs_status *st, const struct gs_render_opts *opts, FILE *out);

/* The JSON document, one object, ending in a newline. */
int gs_render_json(const struct gs_status *st, FILE *out);

/* Share of device time slice `s` got on GPU `gpu` between `prev` and `st`, from the
 * busy-seconds counters; returns 0 and sets *ret_ratio, or -ENOENT when either snapshot
 * lacks the slice on that GPU or no time passed. */
int gs_status_share_between(const struct gs_status *prev, const struct gs_status *st,
                            uint32_t slice_id, uint32_t gpu, double *ret_ratio);
