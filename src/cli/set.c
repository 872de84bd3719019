/* SPDX-License-Identifier: Apache-2.0 */
/* `gslice set SLICE ...`: changes a running slice's memory cap, compute request/limit,
 * priority or weight through the daemon, which applies and persists the change. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flags.h"
#include "render.h"
#include "size.h"
#include "ui.h"

static void memory_text(uint64_t bytes, char *buf, size_t len) {
  if (bytes)
    gs_size_format(bytes, buf, len);
  else
    snprintf(buf, len, "none");
}

/* Flags, then one SLICE operand and at least one change. Returns 0, or the exit status. */
static int set_parse(int argc, char **argv, struct cli_slice_flags *f) {
  int r = cli_flags_parse(CLI_SET, argc, argv, f);
  if (r)
    return r == 1 ? -1 : r;
  if (optind != argc - 1) {
    fprintf(stderr, optind == argc ? "gslice set: which slice? give its name or id "
                                     "(gslice status lists them)\n"
                                   : "gslice set: give one slice, not several\n");
    cli_flags_usage(CLI_SET, stderr);
    return 2;
  }
  if (!f->set.fields) {
    fprintf(stderr, "gslice set: nothing to change: give at least one of --memory, --compute, "
                    "--compute-limit, --priority, --weight\n");
    return 2;
  }
  if (f->set.force && !(f->set.fields & GS_SET_MEMORY)) {
    fprintf(stderr, "gslice set: --force only applies to --memory\n");
    return 2;
  }
  return 0;
}

/* The slice's spec with the change must hold together; --compute above the limit carries the
 * limit up (a request the limit forbids would mean nothing). */
static int set_merge(struct gs_msg_set *req, const struct gs_slice_status *s) {
  uint32_t request = s->compute_request, limit = s->compute_limit;

  if (req->fields & GS_SET_REQUEST)
    request = req->spec.compute_request;
  if (req->fields & GS_SET_LIMIT)
    limit = req->spec.compute_limit;
  if ((req->fields & GS_SET_REQUEST) && !(req->fields & GS_SET_LIMIT) && request > limit) {
    limit = request;
    req->spec.compute_limit = limit;
    req->fields |= GS_SET_LIMIT;
  }
  if (request > limit) {
    fprintf(stderr,
            "gslice set: a request of %" PRIu32 "%% is above a limit of %" PRIu32
            "%%: lower --compute too, or raise --compute-limit\n",
            request, limit);
    return -EINVAL;
  }
  return 0;
}

/* A cap lowered under what the slice holds is refused with the figures, unless --force. The
 * daemon checks again (usage moves); this answers before the round trip. */
static int set_check_memory(const struct gs_msg_set *req, const struct gs_slice_status *s) {
  if (!(req->fields & GS_SET_MEMORY) || !req->spec.memory_cap || req->force)
    return 0;
  for (uint32_t g = 0; g < s->ngpus && g < GS_MAX_GPUS; g++) {
    if (s->gpus[g].memory_used_bytes <= req->spec.memory_cap)
      continue;
    char used[24], cap[24];
    gs_size_format(s->gpus[g].memory_used_bytes, used, sizeof(used));
    gs_size_format(req->spec.memory_cap, cap, sizeof(cap));
    fprintf(stderr,
            "gslice set: refused: slice '%s' uses %s (%" PRIu64 " bytes) on GPU %" PRIu32
            ", more than the new cap of %s (%" PRIu64 " bytes). Free memory in the slice "
            "first, or add --force to stop new allocations until usage falls under %s.\n",
            s->name, used, s->gpus[g].memory_used_bytes, s->gpus[g].gpu, cap, req->spec.memory_cap,
            cap);
    return -EINVAL;
  }
  return 0;
}

/* Says what the slice is now, from the daemon's own view. */
static void set_report(const struct gs_msg_set *req) {
  struct gs_status after;
  char err[512];

  if (gs_ui_fetch_status(&after, err, sizeof(err)) < 0) {
    printf("gslice set: slice %" PRIu32 " changed\n", req->slice_id);
    return;
  }
  for (uint32_t k = 0; k < after.nslices; k++) {
    const struct gs_slice_status *a = &after.slices[k];
    if (a->id != req->slice_id)
      continue;
    char mem[24];
    memory_text(a->ngpus ? a->gpus[0].memory_cap_bytes : req->spec.memory_cap, mem, sizeof(mem));
    printf("gslice set: slice '%s' (id %" PRIu32 "): compute %" PRIu32 "%% (limit %" PRIu32
           "%%), priority %s, weight %" PRIu32 ", memory cap %s%s\n",
           a->name, a->id, a->compute_request, a->compute_limit, gs_priority_name(a->priority),
           a->weight, mem,
           a->memory_force ? " (forced: allocations stop until usage falls under it)" : "");
  }
  gs_status_free(&after);
}

int cmd_set(int argc, char **argv) {
  struct cli_slice_flags f;
  int r = set_parse(argc, argv, &f);
  if (r)
    return r < 0 ? 0 : r;
  struct gs_msg_set *req = &f.set;
  const char *which = argv[optind];

  struct gs_status st;
  char err[512];
  if (gs_ui_fetch_status(&st, err, sizeof(err)) < 0) {
    fprintf(stderr, "gslice set: %s\n", err);
    return 1;
  }
  int idx = gs_ui_find_slice(&st, which, err, sizeof(err));
  if (idx < 0) {
    fprintf(stderr, "gslice set: %s\n", err);
    gs_status_free(&st);
    return 1;
  }
  const struct gs_slice_status *s = &st.slices[idx];
  req->slice_id = s->id;
  int rc = 1;
  if (set_merge(req, s) < 0 || set_check_memory(req, s) < 0)
    goto out;
  if (gs_ui_set(req, err, sizeof(err)) < 0) {
    fprintf(stderr, "gslice set: refused by gsliced: %s\n", err);
    goto out;
  }
  set_report(req);
  rc = 0;
out:
  gs_status_free(&st);
  return rc;
}
