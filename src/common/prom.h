/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text exposition format (version 0.0.4), written into a gs_buf: families,
 * samples with escaped label values, and float values as Prometheus reads them. */
#pragma once
#include <stdint.h>

#include "buf.h"

/* "# HELP name help\n# TYPE name type\n", help escaped. */
int gs_prom_family(struct gs_buf *b, const char *name, const char *type, const char *help);

/* One sample line: name{k1="v1",k2="v2"} value\n. labels is NULL or a NULL-terminated list of
 * key, value pairs; values are escaped (keys are the program's own names, written as given).
 * suffix (may be NULL) follows the name ("_sum", "_bucket"). */
int gs_prom_sample(struct gs_buf *b, const char *name, const char *suffix,
                   const char *const *labels, double value);
int gs_prom_sample_u64(struct gs_buf *b, const char *name, const char *suffix,
                       const char *const *labels, uint64_t value);

/* A value as Prometheus reads it: "NaN", "+Inf", "-Inf", else the shortest exact %g form. */
int gs_prom_value(struct gs_buf *b, double v);
