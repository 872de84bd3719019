/* SPDX-License-Identifier: Apache-2.0 */
/* The log of gslice's programs (gsliced, gslice-node, gslice-extender): one line per message on
 * stderr, one format, levels, and repeats limited per message.
 *
 * A line reads "2026-12-02T01:02:03.456Z gsliced[812] warning: text" (UTC, milliseconds). When
 * stderr is the systemd journal's stream (JOURNAL_STREAM names it), a line is "<4>text": the
 * journal keeps its own time, program and pid, and takes the level from the prefix. Each line
 * is one write(2), so threads never interleave inside one.
 *
 * Repeats: each message (its format string is the key) writes at most GS_LOG_BURST lines in
 * every GS_LOG_INTERVAL_MS; past that its lines are counted, and one line says how many were
 * left out when its interval ends (on its next line or at gs_log_flush). A client that makes a
 * program log on purpose fills no disk. Thread-safe. Library code (the hook, common/) does not
 * call it. */
#pragma once
#include <stdarg.h>
#include <stdbool.h>

enum gs_log_level {
  GS_LOG_DEBUG,
  GS_LOG_INFO,
  GS_LOG_WARNING,
  GS_LOG_ERROR,
};

#define GS_LOG_BURST 10
#define GS_LOG_INTERVAL_MS 1000

/* Names the program in each line and sets the lowest level written (default: info). Reads
 * JOURNAL_STREAM once. Call before the first gs_log; the program name is not copied. */
void gs_log_open(const char *program, enum gs_log_level min);

/* Writes one message at level. */
void gs_log(enum gs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs_logv(enum gs_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Writes the count of each limited message whose interval has ended (call it now and then: a
 * housekeeping timer). */
void gs_log_flush(void);

/* "debug", "info", "warning", "error" <-> level; parse returns 0 or -EINVAL. */
const char *gs_log_level_name(enum gs_log_level level);
int gs_log_level_parse(const char *text, enum gs_log_level *ret);

/* Whether level would be written (to skip building an expensive message). */
bool gs_log_enabled(enum gs_log_level level);
