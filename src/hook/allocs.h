/* SPDX-License-Identifier: Apache-2.0 */
/* The process's table of what it holds on the device: handle -> (device slot, bytes, context),
 * so a free gives back exactly what its allocation took. Not thread-safe: slice.c locks. */
#pragma once
#include <stddef.h>
#include <stdint.h>

enum gs_alloc_kind {
  GS_ALLOC_NONE = 0,  /* an empty cell */
  GS_ALLOC_PTR,       /* cuMemAlloc, Pitch, Managed, Async (counted per allocation) */
  GS_ALLOC_ARRAY,     /* cuArrayCreate, cuArray3DCreate */
  GS_ALLOC_MIPMAP,    /* cuMipmappedArrayCreate */
  GS_ALLOC_VMM,       /* cuMemCreate, cuMemImportFromShareableHandle */
  GS_ALLOC_IPC,       /* cuIpcOpenMemHandle */
  GS_ALLOC_CTX,       /* a context's own cost, by context handle */
  GS_ALLOC_MAP,       /* a cuMemMap of a counted VMM handle, by address (bytes: its size; ref:
                         the handle); costs nothing itself */
  GS_ALLOC_VMM_GONE,  /* a VMM handle released while still mapped, by serial number: the driver
                         frees its memory only at the last cuMemUnmap, so it stays counted */
  GS_ALLOC_MAP_GONE,  /* a mapping of a GS_ALLOC_VMM_GONE entry (ref: its serial) */
  GS_ALLOC_POOL,      /* a memory pool's device, by pool handle (ref: the device ordinal) */
  GS_ALLOC_POOL_PTR,  /* an allocation from a pool counted by its reservation, by pointer (bytes:
                         its size; ref: the pool); costs nothing itself */
  GS_ALLOC_POOL_GONE, /* a pool destroyed with allocations outstanding, by serial number: the
                         driver keeps their memory until the last is freed (maps: how many) */
  GS_ALLOC_POOL_GONE_PTR, /* an outstanding allocation of a GS_ALLOC_POOL_GONE (ref: serial) */
};

struct gs_alloc {
  uint64_t key;  /* device pointer or handle */
  uint32_t kind; /* enum gs_alloc_kind */
  uint32_t slot; /* device slot in the region */
  uint64_t bytes;
  const void *ctx; /* the context that owns it (freed with it), NULL if none */
  uint64_t ref;    /* GS_ALLOC_MAP: the handle; GS_ALLOC_MAP_GONE: the released handle's serial */
  uint64_t maps;   /* GS_ALLOC_VMM, GS_ALLOC_VMM_GONE: live mappings of the memory */
};

struct gs_allocs {
  struct gs_alloc *cell;
  size_t cap; /* power of two, or 0 */
  size_t n;
};

/* Adds `a`; -EEXIST if (kind, key) is present, -ENOMEM if the table cannot grow. */
int gs_allocs_put(struct gs_allocs *m, const struct gs_alloc *a);
/* The entry (kind, key), or NULL; valid until the table next changes. */
struct gs_alloc *gs_allocs_find(struct gs_allocs *m, uint32_t kind, uint64_t key);
/* Removes (kind, key) into *ret; -ENOENT if absent. */
int gs_allocs_take(struct gs_allocs *m, uint32_t kind, uint64_t key, struct gs_alloc *ret);
/* Removes every entry owned by `ctx`, adding its bytes per slot into bytes_per_slot[nslots]. */
size_t gs_allocs_take_ctx(struct gs_allocs *m, const void *ctx, uint64_t *bytes_per_slot,
                          unsigned nslots);
void gs_allocs_clear(struct gs_allocs *m);
/* Re-keys every entry of `kind` whose ref is `ref` as `new_kind` with ref `new_ref` (a pool's
 * allocations, a handle's mappings, once what they point at is gone); returns how many, their
 * bytes added into *ret_bytes (saturating) when it is not NULL. */
size_t gs_allocs_rekey(struct gs_allocs *m, uint32_t kind, uint64_t ref, uint32_t new_kind,
                       uint64_t new_ref, uint64_t *ret_bytes);
