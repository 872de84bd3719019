/* SPDX-License-Identifier: Apache-2.0 */
/* Reads (and, as the daemon would, sets the cap in) a slice's region, for the hook's tests.
 * usage: hook_region DIR show | DIR set-limit SIZE [SLOT] | DIR reclaim | DIR fill-devices |
 *        DIR hold SIZE
 * fill-devices: registers made-up devices until the region's device table is full.
 * hold: takes an entry for this process, charges SIZE on device slot 0, says "held" and waits
 * to be killed: a process of the slice that no (simulated) driver knows. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "region.h"
#include "size.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: hook_region DIR show|set-limit SIZE [SLOT]|reclaim\n");
    return 2;
  }
  struct gs_region *r;
  int e = gs_region_open_existing(argv[1], &r);
  if (e < 0) {
    fprintf(stderr, "hook_region: %s: %s\n", argv[1], strerror(-e));
    return 1;
  }
  if (strcmp(argv[2], "set-limit") == 0 && argc >= 4) {
    uint64_t limit;
    if (gs_size_parse(argv[3], &limit) < 0)
      return 2;
    e = gs_region_set_cap(r, argc > 4 ? (unsigned)atoi(argv[4]) : 0, limit, GS_CAP_FROM_DAEMON);
  } else if (strcmp(argv[2], "fill-devices") == 0) {
    unsigned n = 0, slot;
    uint8_t uuid[GS_REGION_UUID_LEN] = {0xfe, 0xed};
    for (uuid[2] = 0; (e = gs_region_device(r, uuid, 1, &slot)) == 0; uuid[2]++)
      n++;
    printf("devices added=%u\n", n);
    e = e == -ENOSPC ? 0 : e;
  } else if (strcmp(argv[2], "hold") == 0 && argc >= 4) {
    uint64_t bytes;
    unsigned proc;
    if (gs_size_parse(argv[3], &bytes) < 0)
      return 2;
    e = gs_region_attach(r, &proc);
    if (e == 0)
      e = gs_region_charge(r, proc, 0, bytes);
    if (e == 0) {
      printf("held\n");
      fflush(stdout);
      for (;;)
        pause();
    }
  } else if (strcmp(argv[2], "reclaim") == 0) {
    e = gs_region_reclaim(r);
    printf("reclaimed %d\n", e);
  } else if (strcmp(argv[2], "show") == 0) {
    struct gs_region_device_info devs[GS_REGION_MAX_DEVICES];
    struct gs_region_proc_info procs[GS_REGION_MAX_PROCS];
    unsigned nd = 0, np = 0;
    e = gs_region_devices(r, devs, GS_REGION_MAX_DEVICES, &nd);
    if (e == 0)
      e = gs_region_procs(r, procs, GS_REGION_MAX_PROCS, &np);
    for (unsigned i = 0; e == 0 && i < nd; i++) {
      char uuid[GS_UUID_STR_LEN];
      gs_uuid_format(devs[i].uuid, uuid);
      printf("device slot=%u uuid=%s used=%llu limit=%lld context=%llu source=%d\n", devs[i].slot,
             uuid, (unsigned long long)devs[i].used,
             devs[i].cap == GS_REGION_NO_CAP ? -1LL : (long long)devs[i].cap,
             (unsigned long long)devs[i].context_cost, devs[i].source);
    }
    for (unsigned i = 0; e == 0 && i < np; i++)
      printf("proc pid=%d used0=%llu\n", (int)procs[i].pid, (unsigned long long)procs[i].used[0]);
  } else {
    e = -EINVAL;
  }
  gs_region_close(r);
  if (e < 0) {
    fprintf(stderr, "hook_region: %s\n", strerror(-e));
    return 1;
  }
  return 0;
}
