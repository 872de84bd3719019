/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text-format writing over gs_buf (prom.h). */
#include "prom.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int gs_prom_family(struct gs_buf *b, const char *name, const char *type, const char *help) {
  gs_buf_printf(b, "# HELP %s ", name);
  gs_buf_prom_help(b, help);
  return gs_buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

static void sample_head(struct gs_buf *b, const char *name, const char *suffix,
                        const char *const *labels) {
  gs_buf_puts(b, name);
  if (suffix)
    gs_buf_puts(b, suffix);
  if (labels && labels[0]) {
    gs_buf_putc(b, '{');
    for (size_t i = 0; labels[i] && labels[i + 1]; i += 2) {
      gs_buf_printf(b, "%s%s=\"", i ? "," : "", labels[i]);
      gs_buf_prom_label(b, labels[i + 1]);
      gs_buf_putc(b, '"');
    }
    gs_buf_putc(b, '}');
  }
  gs_buf_putc(b, ' ');
}

int gs_prom_value(struct gs_buf *b, double v) {
  char text[32];
  if (isnan(v))
    return gs_buf_puts(b, "NaN");
  if (isinf(v))
    return gs_buf_puts(b, v > 0 ? "+Inf" : "-Inf");
  /* The shortest of %.15g .. %.17g that reads back as v. */
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(text, sizeof(text), "%.*g", prec, v);
    if (strtod(text, NULL) == v)
      break;
  }
  return gs_buf_puts(b, text);
}

int gs_prom_sample(struct gs_buf *b, const char *name, const char *suffix,
                   const char *const *labels, double value) {
  sample_head(b, name, suffix, labels);
  gs_prom_value(b, value);
  return gs_buf_putc(b, '\n');
}

int gs_prom_sample_u64(struct gs_buf *b, const char *name, const char *suffix,
                       const char *const *labels, uint64_t value) {
  sample_head(b, name, suffix, labels);
  return gs_buf_printf(b, "%" PRIu64 "\n", value);
}
