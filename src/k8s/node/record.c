/* SPDX-License-Identifier: Apache-2.0 */
/* Records as text: one KEY=VALUE line a field, written and read through one table of fields,
 * parsed with gs_kv_parse. A container's (state_dir/records/<key>, struct node_rec) and, through
 * the same two functions, a prepared claim's (state_dir/claims/<uid>, dra.c). */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "kv.h"
#include "node.h"

#define REC(k, t, f, req)                                                                          \
  { k, t, offsetof(struct node_rec, f), sizeof(((struct node_rec *)0)->f), req }
static const struct node_kv_field rec_fields[] = {
    REC("slots", REC_STR, slots, true),
    REC("namespace", REC_STR, ns, true),
    REC("pod", REC_STR, pod, true),
    REC("container", REC_STR, container, true),
    REC("uid", REC_STR, pod_uid, true),
    REC("slice", REC_U32, slice_id, true),
    REC("nonce", REC_NONCE, nonce, true),
    REC("pending", REC_BOOL, pending, false),
    REC("superseded", REC_BOOL, superseded, false),
    REC("name", REC_STR, name, false),
    REC("start", REC_STR, start, false),
    REC("slice_dir", REC_STR, slice_dir, false),
    REC("memory", REC_STR, memory, false),
    REC("devices", REC_STR, devices, false),
    REC("compute_limit", REC_U32, compute_limit, false),
};
#undef REC
#define REC_NFIELDS (sizeof(rec_fields) / sizeof(rec_fields[0]))

int node_kv_format(const struct node_kv_field *fields, size_t nfields, const void *r, size_t max,
                   char **ret, size_t *ret_len) {
  struct gs_buf b = GS_BUF_INIT(max);
  int err;

  for (size_t i = 0; i < nfields; i++) {
    const struct node_kv_field *f = &fields[i];
    const char *p = (const char *)r + f->off;
    gs_buf_printf(&b, "%s=", f->key);
    switch (f->type) {
    case REC_STR: gs_buf_puts(&b, p); break;
    case REC_U32: gs_buf_printf(&b, "%" PRIu32, *(const uint32_t *)p); break;
    case REC_BOOL: gs_buf_printf(&b, "%d", *(const bool *)p); break;
    case REC_NONCE: gs_buf_printf(&b, "%016" PRIx64, *(const uint64_t *)p); break;
    }
    gs_buf_putc(&b, '\n');
  }
  char *text = gs_buf_steal(&b, ret_len, &err);
  if (!text)
    return err;
  *ret = text;
  return 0;
}

int node_rec_format(const struct node_rec *r, char **ret, size_t *ret_len) {
  return node_kv_format(rec_fields, REC_NFIELDS, r, NODE_REC_MAX, ret, ret_len);
}

struct rec_parse {
  const struct node_kv_field *fields;
  size_t nfields;
  void *r;
  uint32_t seen; /* bit i: fields[i] */
};

static int rec_field(const char *key, const char *value, unsigned line, void *user, char *err,
                     size_t err_len) {
  struct rec_parse *ps = user;
  size_t i;
  char *end;

  (void)line;
  (void)err;
  (void)err_len;
  for (i = 0; i < ps->nfields && strcmp(ps->fields[i].key, key); i++)
    ;
  if (i == ps->nfields)
    return 0; /* a newer gslice-node's field */
  const struct node_kv_field *f = &ps->fields[i];
  char *p = (char *)ps->r + f->off;
  if (ps->seen & (1u << i))
    return -EBADMSG;
  ps->seen |= 1u << i;
  if (f->type == REC_STR) {
    size_t l = strlen(value);
    if (l >= f->size)
      return -EBADMSG;
    memcpy(p, value, l + 1);
    return 0;
  }
  if (!*value || *value == '-' || *value == '+' || *value == ' ')
    return -EBADMSG;
  errno = 0;
  unsigned long long v = strtoull(value, &end, f->type == REC_NONCE ? 16 : 10);
  if (*end || errno || (f->type != REC_NONCE && v > UINT32_MAX))
    return -EBADMSG;
  if (f->type == REC_NONCE)
    *(uint64_t *)p = v;
  else if (f->type == REC_U32)
    *(uint32_t *)p = (uint32_t)v;
  else
    *(bool *)p = v != 0;
  return 0;
}

int node_kv_parse(const struct node_kv_field *fields, size_t nfields, char *text, void *r) {
  struct rec_parse ps = {.fields = fields, .nfields = nfields, .r = r};
  assert(nfields <= 32); /* seen is a 32-bit mask */
  int e = gs_kv_parse(text, '\n', 0, rec_field, &ps, NULL, 0);
  if (e < 0)
    return e;
  for (size_t i = 0; i < nfields; i++)
    if (fields[i].required && !(ps.seen & (1u << i)))
      return -EBADMSG;
  return 0;
}

int node_rec_parse(char *text, struct node_rec *r) {
  return node_kv_parse(rec_fields, REC_NFIELDS, text, r);
}
