/* SPDX-License-Identifier: Apache-2.0 */
/* Owns the memory of a node snapshot (struct gs_status). */
#include "status.h"

#include <stdlib.h>

void gs_status_free(struct gs_status *st) {
  if (!st)
    return;
  free(st->slices);
  st->slices = NULL;
  st->nslices = 0;
}
