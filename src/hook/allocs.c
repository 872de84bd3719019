/* SPDX-License-Identifier: Apache-2.0 */
/* Open addressing with linear probing and backward-shift deletion: no tombstones, so the table
 * is as large as what the process holds at its peak, never larger. */
#include "allocs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t hash(uint32_t kind, uint64_t key) {
  uint64_t x = key ^ ((uint64_t)kind << 59);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return (size_t)x;
}

static size_t find(const struct gs_allocs *m, uint32_t kind, uint64_t key, int *ret_found) {
  size_t mask = m->cap - 1, i = hash(kind, key) & mask;
  while (m->cell[i].kind != GS_ALLOC_NONE) {
    if (m->cell[i].kind == kind && m->cell[i].key == key) {
      *ret_found = 1;
      return i;
    }
    i = (i + 1) & mask;
  }
  *ret_found = 0;
  return i;
}

static int grow(struct gs_allocs *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  struct gs_alloc *cell = calloc(cap, sizeof(*cell));
  if (!cell)
    return -ENOMEM;
  struct gs_allocs bigger = {cell, cap, 0};
  for (size_t i = 0; i < m->cap; i++) {
    if (m->cell[i].kind == GS_ALLOC_NONE)
      continue;
    int found;
    size_t j = find(&bigger, m->cell[i].kind, m->cell[i].key, &found);
    bigger.cell[j] = m->cell[i];
    bigger.n++;
  }
  free(m->cell);
  *m = bigger;
  return 0;
}

int gs_allocs_put(struct gs_allocs *m, const struct gs_alloc *a) {
  if (a->kind == GS_ALLOC_NONE)
    return -EINVAL;
  if ((m->n + 1) * 2 > m->cap) {
    int e = grow(m);
    if (e < 0)
      return e;
  }
  int found;
  size_t i = find(m, a->kind, a->key, &found);
  if (found)
    return -EEXIST;
  m->cell[i] = *a;
  m->n++;
  return 0;
}

static void remove_at(struct gs_allocs *m, size_t i) {
  size_t mask = m->cap - 1, j = i;
  m->cell[i].kind = GS_ALLOC_NONE;
  m->n--;
  /* Shift back every following entry that would no longer be reachable past the hole. */
  for (;;) {
    j = (j + 1) & mask;
    if (m->cell[j].kind == GS_ALLOC_NONE)
      return;
    size_t home = hash(m->cell[j].kind, m->cell[j].key) & mask;
    int reachable = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (reachable)
      continue;
    m->cell[i] = m->cell[j];
    m->cell[j].kind = GS_ALLOC_NONE;
    i = j;
  }
}

struct gs_alloc *gs_allocs_find(struct gs_allocs *m, uint32_t kind, uint64_t key) {
  if (!m->cap)
    return NULL;
  int found;
  size_t i = find(m, kind, key, &found);
  return found ? &m->cell[i] : NULL;
}

int gs_allocs_take(struct gs_allocs *m, uint32_t kind, uint64_t key, struct gs_alloc *ret) {
  if (!m->cap)
    return -ENOENT;
  int found;
  size_t i = find(m, kind, key, &found);
  if (!found)
    return -ENOENT;
  *ret = m->cell[i];
  remove_at(m, i);
  return 0;
}

size_t gs_allocs_take_ctx(struct gs_allocs *m, const void *ctx, uint64_t *bytes_per_slot,
                          unsigned nslots) {
  size_t taken = 0;
  for (size_t i = 0; i < m->cap;) {
    struct gs_alloc *a = &m->cell[i];
    if (a->kind != GS_ALLOC_NONE && a->ctx == ctx) {
      if (a->slot < nslots)
        bytes_per_slot[a->slot] += a->bytes;
      remove_at(m, i);
      taken++;
      continue; /* a shifted entry may now sit at i */
    }
    i++;
  }
  return taken;
}

void gs_allocs_clear(struct gs_allocs *m) {
  free(m->cell);
  m->cell = NULL;
  m->cap = 0;
  m->n = 0;
}

size_t gs_allocs_rekey(struct gs_allocs *m, uint32_t kind, uint64_t ref, uint32_t new_kind,
                       uint64_t new_ref, uint64_t *ret_bytes) {
  size_t n = 0;
  for (size_t i = 0; i < m->cap;) {
    struct gs_alloc *c = &m->cell[i];
    if (c->kind == kind && c->ref == ref) {
      struct gs_alloc a;
      gs_allocs_take(m, kind, c->key, &a);
      a.kind = new_kind;
      a.ref = new_ref;
      /* Same count of entries, so put cannot fail for room. */
      gs_allocs_put(m, &a);
      n++;
      if (ret_bytes)
        *ret_bytes = *ret_bytes + a.bytes < *ret_bytes ? UINT64_MAX : *ret_bytes + a.bytes;
      i = 0; /* take shifted entries, put may have landed anywhere: start over (rare path) */
      continue;
    }
    i++;
  }
  return n;
}
