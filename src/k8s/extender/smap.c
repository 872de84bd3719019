/* SPDX-License-Identifier: Apache-2.0 */
/* The cluster view's string-keyed hash map (smap.h): FNV-1a buckets, chained, doubled at load 1. */
#include "smap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

void *smap_get(const struct smap *m, const char *key) {
  if (!m->nb)
    return NULL;
  for (struct smap_entry *e = m->b[hash(key) % m->nb]; e; e = e->next)
    if (strcmp(e->key, key) == 0)
      return e->value;
  return NULL;
}

static int smap_grow(struct smap *m) {
  size_t nb = m->nb ? m->nb * 2 : 64;
  struct smap_entry **b = calloc(nb, sizeof(*b));
  if (!b)
    return -ENOMEM;
  for (size_t i = 0; i < m->nb; i++) {
    for (struct smap_entry *e = m->b[i], *next; e; e = next) {
      next = e->next;
      size_t h = hash(e->key) % nb;
      e->next = b[h];
      b[h] = e;
    }
  }
  free(m->b);
  m->b = b;
  m->nb = nb;
  return 0;
}

int smap_put(struct smap *m, const char *key, void *value) {
  struct smap_entry *e;
  if (m->n >= m->nb && smap_grow(m))
    return -ENOMEM;
  e = malloc(sizeof(*e));
  if (!e || !(e->key = strdup(key))) {
    free(e);
    return -ENOMEM;
  }
  size_t h = hash(key) % m->nb;
  e->value = value;
  e->next = m->b[h];
  m->b[h] = e;
  m->n++;
  return 0;
}

void smap_del(struct smap *m, const char *key) {
  if (!m->nb)
    return;
  for (struct smap_entry **p = &m->b[hash(key) % m->nb]; *p; p = &(*p)->next) {
    if (strcmp((*p)->key, key) == 0) {
      struct smap_entry *e = *p;
      *p = e->next;
      free(e->key);
      free(e);
      m->n--;
      return;
    }
  }
}

void smap_clear(struct smap *m) {
  for (size_t i = 0; i < m->nb; i++) {
    for (struct smap_entry *e = m->b[i], *next; e; e = next) {
      next = e->next;
      free(e->key);
      free(e);
    }
  }
  free(m->b);
  m->b = NULL;
  m->nb = m->n = 0;
}
