/* SPDX-License-Identifier: Apache-2.0 */
/* A growable byte string with a bound, and the JSON and Prometheus escaping every writer of
 * those formats uses: the one buffer of gslice's programs.
 *
 * Errors are sticky: the first failed append (-ENOMEM, or -EFBIG past the bound) is kept in
 * b->err, every later append does nothing and returns it, so a writer appends freely and checks
 * once at the end. The text is always NUL-terminated once anything was added (p is NULL before).
 * Not thread-safe: one owner at a time. Never logs. */
#pragma once
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct gs_buf {
  char *p;    /* the bytes, NUL-terminated; NULL until the first append */
  size_t len; /* bytes held, without the NUL */
  size_t cap; /* bytes allocated */
  size_t max; /* most bytes it may hold (without the NUL) */
  int err;    /* 0, or the first append's failure (negative errno) */
};

/* A buffer of at most max bytes (0: no bound but memory). */
#define GS_BUF_INIT(max_)                                                                          \
  { NULL, 0, 0, (max_), 0 }
void gs_buf_init(struct gs_buf *b, size_t max);

/* Makes room for extra more bytes (and the NUL) without adding any. */
int gs_buf_reserve(struct gs_buf *b, size_t extra);

/* Appends; each returns b->err afterwards (0 on success). */
int gs_buf_add(struct gs_buf *b, const void *data, size_t n);
int gs_buf_puts(struct gs_buf *b, const char *s);
int gs_buf_putc(struct gs_buf *b, char c);
int gs_buf_printf(struct gs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int gs_buf_vprintf(struct gs_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Appends s as one JSON string, quotes included (RFC 8259): '"', '\\' and control characters
 * escaped, bytes that are not UTF-8 replaced by U+FFFD, so the result is valid JSON whatever s
 * holds. gs_buf_json_strn takes n bytes (NULs in them escaped). */
int gs_buf_json_str(struct gs_buf *b, const char *s);
int gs_buf_json_strn(struct gs_buf *b, const char *s, size_t n);

/* Appends s escaped as a Prometheus text-format label value (without its quotes): '\\', '"'
 * and newline become \\, \" and \n. gs_buf_prom_help escapes a HELP text ('\\' and newline). */
int gs_buf_prom_label(struct gs_buf *b, const char *s);
int gs_buf_prom_help(struct gs_buf *b, const char *s);

/* Drops the first n bytes (what a sender has written out); n > len is a programming error. */
void gs_buf_consume(struct gs_buf *b, size_t n);

/* Empties the buffer and clears its error; keeps its memory for the next use. */
void gs_buf_clear(struct gs_buf *b);

/* Gives back memory above keep bytes (a large request's buffer after it is served). */
void gs_buf_shrink(struct gs_buf *b, size_t keep);

/* Frees the memory; the buffer is empty and usable again. */
void gs_buf_free(struct gs_buf *b);

/* Hands the bytes to the caller (free() them) and empties the buffer: a NUL-terminated string
 * ("" when nothing was added), or NULL with *ret_err set when an append had failed or no memory
 * is left. ret_len and ret_err may be NULL. */
char *gs_buf_steal(struct gs_buf *b, size_t *ret_len, int *ret_err);
