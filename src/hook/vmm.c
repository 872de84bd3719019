/* SPDX-License-Identifier: Apache-2.0 */
/* VMM mappings (slice_state.h): physical memory stays counted until it is released *and* every
 * mapping of it is unmapped. */
#include "slice_state.h"

void gs_vmm_mapped(uint64_t handle, uint64_t va, uint64_t size) {
  gs_slice_lock();
  struct gs_alloc *h = gs_allocs_find(&S.allocs, GS_ALLOC_VMM, handle);
  if (h) {
    /* Only counted handles: an uncounted one has nothing to keep counted after its release. */
    struct gs_alloc m = {
        .key = va, .kind = GS_ALLOC_MAP, .slot = h->slot, .bytes = size, .ref = handle};
    h->maps++;
    if (gs_allocs_put(&S.allocs, &m) < 0)
      h->maps--; /* -EEXIST (the driver never maps twice at one address) or no memory */
  }
  gs_slice_unlock();
}

void gs_vmm_released(const struct gs_alloc *a) {
  gs_slice_lock();
  if (a->maps == 0) {
    if (S.attached)
      gs_region_release(S.region, S.proc, a->slot, a->bytes);
  } else {
    /* The driver frees the memory at the last unmap: until then it stays counted, under a
     * serial number, since the handle's value may be handed out again; its mappings then name
     * the serial. */
    struct gs_alloc gone = *a;
    gone.kind = GS_ALLOC_VMM_GONE;
    gone.key = ++S.serials;
    if (gs_allocs_put(&S.allocs, &gone) == 0)
      gs_allocs_rekey(&S.allocs, GS_ALLOC_MAP, a->key, GS_ALLOC_MAP_GONE, gone.key, NULL);
    /* Without room to remember it, the bytes stay counted until the process exits. */
  }
  gs_slice_unlock();
}

void gs_vmm_unmapped(uint64_t va, uint64_t size) {
  gs_slice_lock();
  uint64_t at = va, end = va + size < va ? UINT64_MAX : va + size;
  while (at < end) {
    struct gs_alloc m, *h;
    if (gs_allocs_take(&S.allocs, GS_ALLOC_MAP, at, &m) == 0) {
      if ((h = gs_allocs_find(&S.allocs, GS_ALLOC_VMM, m.ref)) && h->maps)
        h->maps--;
    } else if (gs_allocs_take(&S.allocs, GS_ALLOC_MAP_GONE, at, &m) == 0) {
      struct gs_alloc g;
      if (gs_allocs_take(&S.allocs, GS_ALLOC_VMM_GONE, m.ref, &g) == 0) {
        if (--g.maps == 0) {
          if (S.attached)
            gs_region_release(S.region, S.proc, g.slot, g.bytes);
        } else {
          gs_allocs_put(&S.allocs, &g);
        }
      }
    } else {
      break; /* the driver unmaps whole mappings from `va` on; nothing more of ours */
    }
    if (!m.bytes || at + m.bytes < at)
      break;
    at += m.bytes;
  }
  gs_slice_unlock();
}
