/* SPDX-License-Identifier: Apache-2.0 */
/* A string-keyed hash map (chained, grows at load 1) of the cluster view's nodes and pods. It owns
 * its entries and copies of their keys, never the values; it takes no lock (the caller's lock
 * covers it). A zeroed struct smap is an empty map. */
#pragma once
#include <stddef.h>

struct smap_entry {
  char *key;
  void *value;
  struct smap_entry *next;
};

struct smap {
  struct smap_entry **b;
  size_t nb, n;
};

/* The value under key, or NULL. */
void *smap_get(const struct smap *m, const char *key);
/* Adds key (copied) -> value; the key must not be there yet. 0 or -ENOMEM. */
int smap_put(struct smap *m, const char *key, void *value);
/* Removes key's entry (not its value), if any. */
void smap_del(struct smap *m, const char *key);

/* Every entry e of m; e may be freed in the body (the next one is taken first). */
#define SMAP_EACH(m, e)                                                                            \
  for (size_t i_##e = 0; i_##e < (m)->nb; i_##e++)                                                 \
    for (struct smap_entry *e = (m)->b[i_##e], *e##_next = e ? e->next : NULL; e;                  \
         e = e##_next, e##_next = e ? e->next : NULL)

/* Removes every entry (not the values) and the buckets: m is an empty map again. */
void smap_clear(struct smap *m);
