/* SPDX-License-Identifier: Apache-2.0 */
/* Takes a slice region's lock and keeps it until killed, as a process stopped inside a critical
 * section would (hook_lockstop.sh). The lock is not public API: it is
 * reached through the region's private header. usage: hook_region_hold DIR */
#include "../../src/common/region_layout.h"

#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
  struct gs_region *r;
  if (argc != 2 || gs_region_open_existing(argv[1], &r) < 0 || region_lock(r) < 0) {
    fprintf(stderr, "hook_region_hold: cannot take the lock\n");
    return 1;
  }
  printf("held\n");
  fflush(stdout);
  for (;;)
    pause();
}
