/* SPDX-License-Identifier: Apache-2.0 */
/* `gslice set SLICE ...`: changes a running slice's memory cap, compute request/limit,
 * priority or weight through the daemon, which applies and persists the change. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "size.h"
#include "ui.h"

static void usage(FILE *f) {
  fprintf(f, "usage: gslice set SLICE [--memory SIZE|none] [--compute PCT] [--compute-limit PCT]\n"
             "                        [--priority high|normal|low] [--weight N] [--force]\n"
             "  Changes a running slice (SLICE: its name or id, see gslice status).\n"
             "  Compute changes apply at the slice's next token; every change is persisted.\n"
             "  --memory SIZE       memory cap per GPU (e.g. 2GiB, 512M); 'none' removes it.\n"
             "                      Raising applies at once. Lowering below what the slice\n"
             "                      already uses is refused, unless --force:\n"
             "  --force             accept a cap below current use: new allocations fail until\n"
             "                      the slice's usage falls under the cap (nothing is freed)\n"
             "  --compute PCT       guaranteed share of the GPU, 0-100 (raises the limit to it\n"
             "                      if the limit is lower)\n"
             "  --compute-limit PCT ceiling on the share, 1-100\n"
             "  --priority P        high, normal or low: who gets the GPU first\n"
             "  --weight N          1-1000: share of spare time among equals\n");
}

/* Digits first: strtol alone takes " 60" and "+60" but not "60 "; whitespace is refused on
 * both sides, as in sizes. */
static int parse_percent(const char *s, uint32_t min, uint32_t *ret) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (s[0] < '0' || s[0] > '9' || errno || end == s || (*end && strcmp(end, "%") != 0) ||
      v < (long)min || v > 100)
    return -EINVAL;
  *ret = (uint32_t)v;
  return 0;
}

static void memory_text(uint64_t bytes, char *buf, size_t len) {
  if (bytes)
    gs_size_format(bytes, buf, len);
  else
    snprintf(buf, len, "none");
}

int cmd_set(int argc, char **argv) {
  enum { OPT_MEMORY = 1000, OPT_COMPUTE, OPT_LIMIT, OPT_PRIORITY, OPT_WEIGHT, OPT_FORCE };
  static const struct option opts[] = {{"memory", required_argument, NULL, OPT_MEMORY},
                                       {"compute", required_argument, NULL, OPT_COMPUTE},
                                       {"compute-limit", required_argument, NULL, OPT_LIMIT},
                                       {"priority", required_argument, NULL, OPT_PRIORITY},
                                       {"weight", required_argument, NULL, OPT_WEIGHT},
                                       {"force", no_argument, NULL, OPT_FORCE},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  struct gs_msg_set req;
  memset(&req, 0, sizeof(req));
  int c;
  optind = 1;
  opterr = 0;
  /* Options may come before or after SLICE (getopt permutes; no '+'). */
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
    case OPT_MEMORY:
      if (strcmp(optarg, "none") == 0) {
        req.spec.memory_cap = 0;
      } else if (gs_size_parse(optarg, &req.spec.memory_cap) < 0 || req.spec.memory_cap == 0) {
        fprintf(stderr,
                "gslice set: bad --memory '%s': give a size like 2GiB, 512MiB or "
                "1073741824 (at most " GS_SIZE_MAX_TEXT "), or 'none' to remove the cap\n",
                optarg);
        return 2;
      }
      req.fields |= GS_SET_MEMORY;
      break;
    case OPT_COMPUTE:
      if (parse_percent(optarg, 0, &req.spec.compute_request) < 0) {
        fprintf(stderr, "gslice set: bad --compute '%s': give a percent 0-100, e.g. 60\n", optarg);
        return 2;
      }
      req.fields |= GS_SET_REQUEST;
      break;
    case OPT_LIMIT:
      if (parse_percent(optarg, 1, &req.spec.compute_limit) < 0) {
        fprintf(stderr, "gslice set: bad --compute-limit '%s': give a percent 1-100\n", optarg);
        return 2;
      }
      req.fields |= GS_SET_LIMIT;
      break;
    case OPT_PRIORITY:
      if (gs_priority_parse(optarg, &req.spec.priority) < 0) {
        fprintf(stderr, "gslice set: bad --priority '%s': give high, normal or low\n", optarg);
        return 2;
      }
      req.fields |= GS_SET_PRIORITY;
      break;
    case OPT_WEIGHT: {
      char *end;
      errno = 0;
      long w = strtol(optarg, &end, 10);
      if (optarg[0] < '0' || optarg[0] > '9' || errno || end == optarg || *end || w < 1 ||
          w > 1000) {
        fprintf(stderr, "gslice set: bad --weight '%s': give a whole number 1-1000\n", optarg);
        return 2;
      }
      req.spec.weight = (uint32_t)w;
      req.fields |= GS_SET_WEIGHT;
      break;
    }
    case OPT_FORCE: req.force = 1; break;
    case 'h': usage(stdout); return 0;
    case ':':
      fprintf(stderr, "gslice set: option '%s' needs a value\n", argv[optind - 1]);
      return 2;
    default:
      fprintf(stderr, "gslice set: unknown option '%s'\n", argv[optind - 1]);
      usage(stderr);
      return 2;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, optind == argc ? "gslice set: which slice? give its name or id "
                                     "(gslice status lists them)\n"
                                   : "gslice set: give one slice, not several\n");
    usage(stderr);
    return 2;
  }
  if (!req.fields) {
    fprintf(stderr, "gslice set: nothing to change: give at least one of --memory, --compute, "
                    "--compute-limit, --priority, --weight\n");
    return 2;
  }
  if (req.force && !(req.fields & GS_SET_MEMORY)) {
    fprintf(stderr, "gslice set: --force only applies to --memory\n");
    return 2;
  }
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
  req.slice_id = s->id;
  int rc = 1;

  /* The merged spec must hold together; --compute above the limit carries the limit up
   * (a request the limit forbids would mean nothing). */
  struct gs_slice_spec merged = {
      .compute_request = s->compute_request,
      .compute_limit = s->compute_limit,
      .priority = s->priority,
      .weight = s->weight,
  };
  if (req.fields & GS_SET_REQUEST)
    merged.compute_request = req.spec.compute_request;
  if (req.fields & GS_SET_LIMIT)
    merged.compute_limit = req.spec.compute_limit;
  if ((req.fields & GS_SET_REQUEST) && !(req.fields & GS_SET_LIMIT) &&
      merged.compute_request > merged.compute_limit) {
    merged.compute_limit = merged.compute_request;
    req.spec.compute_limit = merged.compute_limit;
    req.fields |= GS_SET_LIMIT;
  }
  if (merged.compute_request > merged.compute_limit) {
    fprintf(stderr,
            "gslice set: a request of %" PRIu32 "%% is above a limit of %" PRIu32
            "%%: lower --compute too, or raise --compute-limit\n",
            merged.compute_request, merged.compute_limit);
    goto out;
  }

  /* Lowering the cap under what the slice holds: refuse with the figures, unless --force.
   * The daemon checks again (usage moves); this gives the answer before the round trip. */
  if ((req.fields & GS_SET_MEMORY) && req.spec.memory_cap && !req.force) {
    for (uint32_t g = 0; g < s->ngpus && g < GS_MAX_GPUS; g++) {
      if (s->gpus[g].memory_used_bytes <= req.spec.memory_cap)
        continue;
      char used[24], cap[24];
      gs_size_format(s->gpus[g].memory_used_bytes, used, sizeof(used));
      gs_size_format(req.spec.memory_cap, cap, sizeof(cap));
      fprintf(stderr,
              "gslice set: refused: slice '%s' uses %s (%" PRIu64 " bytes) on GPU %" PRIu32
              ", more than the new cap of %s (%" PRIu64 " bytes). Free memory in the slice "
              "first, or add --force to stop new allocations until usage falls under %s.\n",
              s->name, used, s->gpus[g].memory_used_bytes, s->gpus[g].gpu, cap, req.spec.memory_cap,
              cap);
      goto out;
    }
  }

  if (gs_ui_set(&req, err, sizeof(err)) < 0) {
    fprintf(stderr, "gslice set: refused by gsliced: %s\n", err);
    goto out;
  }

  /* Say what the slice is now, from the daemon's own view. */
  struct gs_status after;
  if (gs_ui_fetch_status(&after, err, sizeof(err)) == 0) {
    for (uint32_t k = 0; k < after.nslices; k++) {
      const struct gs_slice_status *a = &after.slices[k];
      if (a->id != req.slice_id)
        continue;
      char mem[24];
      memory_text(a->ngpus ? a->gpus[0].memory_cap_bytes : req.spec.memory_cap, mem, sizeof(mem));
      printf("gslice set: slice '%s' (id %" PRIu32 "): compute %" PRIu32 "%% (limit %" PRIu32
             "%%), priority %s, weight %" PRIu32 ", memory cap %s%s\n",
             a->name, a->id, a->compute_request, a->compute_limit, gs_priority_name(a->priority),
             a->weight, mem,
             a->memory_force ? " (forced: allocations stop until usage falls under it)" : "");
    }
    gs_status_free(&after);
  } else {
    printf("gslice set: slice %" PRIu32 " changed\n", req.slice_id);
  }
  rc = 0;
out:
  gs_status_free(&st);
  return rc;
}
