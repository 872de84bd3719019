/* Takes a slice region's lock and keeps it until killed, as a process stopped inside a critical
 * section would (hook_lockstop.sh). Built from region.c (and proc.c) itself: the lock is not public
 * API. usage: hook_region_hold DIR */
#include "../../src/common/proc.c"
#include "../../src/common/region.c"

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
