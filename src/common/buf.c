/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded growable string of buf.h and its JSON and Prometheus escaping. */
#include "buf.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FIRST 256

void gs_buf_init(struct gs_buf *b, size_t max) {
  *b = (struct gs_buf)GS_BUF_INIT(max);
}

static size_t bound(const struct gs_buf *b) {
  return b->max ? b->max : SIZE_MAX / 2;
}

int gs_buf_reserve(struct gs_buf *b, size_t extra) {
  if (b->err)
    return b->err;
  if (extra > bound(b) || b->len > bound(b) - extra)
    return b->err = -EFBIG;
  size_t need = b->len + extra + 1;
  if (need <= b->cap)
    return 0;
  size_t cap = b->cap ? b->cap : BUF_FIRST;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  if (cap > bound(b) + 1)
    cap = bound(b) + 1;
  char *p = realloc(b->p, cap);
  if (!p)
    return b->err = -ENOMEM;
  if (!b->p)
    p[0] = 0;
  b->p = p;
  b->cap = cap;
  return 0;
}

int gs_buf_add(struct gs_buf *b, const void *data, size_t n) {
  if (gs_buf_reserve(b, n))
    return b->err;
  if (n)
    memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = 0;
  return 0;
}

int gs_buf_puts(struct gs_buf *b, const char *s) {
  return gs_buf_add(b, s, strlen(s));
}

int gs_buf_putc(struct gs_buf *b, char c) {
  return gs_buf_add(b, &c, 1);
}

int gs_buf_vprintf(struct gs_buf *b, const char *fmt, va_list ap) {
  va_list again;
  char small[256];

  if (b->err)
    return b->err;
  va_copy(again, ap);
  int n = vsnprintf(small, sizeof(small), fmt, ap);
  if (n < 0) {
    va_end(again);
    return b->err = -EINVAL;
  }
  if ((size_t)n < sizeof(small)) {
    va_end(again);
    return gs_buf_add(b, small, (size_t)n);
  }
  if (gs_buf_reserve(b, (size_t)n) == 0) {
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
    b->len += (size_t)n;
  }
  va_end(again);
  return b->err;
}

int gs_buf_printf(struct gs_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = gs_buf_vprintf(b, fmt, ap);
  va_end(ap);
  return r;
}

/* The length of the well-formed UTF-8 sequence at s (n bytes left), or 0 when it is not one
 * (overlong forms, surrogates and code points past U+10FFFF are not). */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned cp, min;

  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, cp = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, cp = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

int gs_buf_json_strn(struct gs_buf *b, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, run = 0;

  gs_buf_putc(b, '"');
  while (i < n) {
    unsigned c = u[i];
    size_t ul = c >= 0x20 && c != '"' && c != '\\' ? utf8_len(u + i, n - i) : 0;
    if (ul) {
      i += ul;
      run += ul;
      continue;
    }
    gs_buf_add(b, s + i - run, run);
    run = 0;
    switch (c) {
    case '"': gs_buf_puts(b, "\\\""); break;
    case '\\': gs_buf_puts(b, "\\\\"); break;
    case '\n': gs_buf_puts(b, "\\n"); break;
    case '\r': gs_buf_puts(b, "\\r"); break;
    case '\t': gs_buf_puts(b, "\\t"); break;
    case '\b': gs_buf_puts(b, "\\b"); break;
    case '\f': gs_buf_puts(b, "\\f"); break;
    default:
      if (c < 0x20)
        gs_buf_printf(b, "\\u%04x", c);
      else
        gs_buf_puts(b, "\\ufffd");
    }
    i++;
  }
  gs_buf_add(b, s + i - run, run);
  return gs_buf_putc(b, '"');
}

int gs_buf_json_str(struct gs_buf *b, const char *s) {
  return gs_buf_json_strn(b, s, strlen(s));
}

static int prom_escape(struct gs_buf *b, const char *s, int quote) {
  for (const char *p = s; *p; p++) {
    if (*p == '\\')
      gs_buf_puts(b, "\\\\");
    else if (*p == '\n')
      gs_buf_puts(b, "\\n");
    else if (*p == '"' && quote)
      gs_buf_puts(b, "\\\"");
    else
      gs_buf_putc(b, *p);
  }
  return b->err;
}

int gs_buf_prom_label(struct gs_buf *b, const char *s) {
  return prom_escape(b, s, 1);
}

int gs_buf_prom_help(struct gs_buf *b, const char *s) {
  return prom_escape(b, s, 0);
}

void gs_buf_consume(struct gs_buf *b, size_t n) {
  assert(n <= b->len);
  if (!n)
    return;
  memmove(b->p, b->p + n, b->len - n + 1);
  b->len -= n;
}

void gs_buf_clear(struct gs_buf *b) {
  b->len = 0;
  b->err = 0;
  if (b->p)
    b->p[0] = 0;
}

void gs_buf_shrink(struct gs_buf *b, size_t keep) {
  if (b->cap <= keep || b->len >= keep)
    return;
  char *p = realloc(b->p, keep ? keep : 1);
  if (p) {
    b->p = p;
    b->cap = keep ? keep : 1;
  }
}

void gs_buf_free(struct gs_buf *b) {
  free(b->p);
  size_t max = b->max;
  gs_buf_init(b, max);
}

char *gs_buf_steal(struct gs_buf *b, size_t *ret_len, int *ret_err) {
  int err = b->err;
  if (!err && !b->p)
    err = gs_buf_reserve(b, 0);
  if (err) {
    gs_buf_free(b);
    if (ret_err)
      *ret_err = err;
    return NULL;
  }
  char *p = b->p;
  if (ret_len)
    *ret_len = b->len;
  if (ret_err)
    *ret_err = 0;
  size_t max = b->max;
  gs_buf_init(b, max);
  return p;
}
