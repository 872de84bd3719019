/* SPDX-License-Identifier: Apache-2.0 */
/* gslice-sim: shows the simulated machine (devices, memory, busy time, processes) from
 * its state file, independent of any hook, and removes it when nobody uses it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "size.h"
#include "state.h"

static const char *state_path(char *buf, size_t len) {
  const char *p = secure_getenv("GSLICE_SIM_STATE");
  if (p && *p)
    return p;
  snprintf(buf, len, "/dev/shm/gslice-sim-%u", (unsigned)getuid());
  return buf;
}

static void usage(FILE *f) {
  fprintf(f, "usage: gslice-sim info [--json]   show the simulated machine\n"
             "       gslice-sim reset           remove its state file if nobody uses it\n"
             "The machine is the file in GSLICE_SIM_STATE (default /dev/shm/gslice-sim-<uid>).\n");
}

static int proc_on_dev(const struct sim_proc *p, unsigned d) {
  return p->pid && (p->mem[d] || p->contexts[d] || p->launches[d]);
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      printf("\\u%04x", *s);
    else
      putchar(*s);
  }
  putchar('"');
}

static int info(const char *path, int json) {
  struct sim_state st;
  int r = sim_state_open_existing(path, &st);
  if (r < 0) {
    fprintf(stderr,
            "gslice-sim: no simulated machine at %s (%s); it is made by the first "
            "program that uses the simulated libcuda or NVML\n",
            path, strerror(-r));
    return 1;
  }
  struct sim_machine *m = st.m;
  sim_lock(m);
  sim_reap(m, 1);
  uint64_t now = sim_now_ns();
  char a[32], b[32], c[32];
  if (json) {
    printf("{\"state\":");
    json_str(path);
    printf(",\"time_ns\":%llu,\"memory_per_device\":%llu,\"context_memory\":%llu,"
           "\"reserved_memory\":%llu,\"sms\":%u,\"devices\":[",
           (unsigned long long)now, (unsigned long long)m->memory,
           (unsigned long long)m->context_memory, (unsigned long long)m->reserved, m->sms);
  } else {
    gs_size_format(m->memory, a, sizeof(a));
    gs_size_format(m->context_memory, b, sizeof(b));
    printf("machine %s: %u device(s) of %s, %s per context, %u SMs\n", path, m->devices, a, b,
           m->sms);
  }
  for (unsigned d = 0; d < m->devices; d++) {
    char uuid[96];
    sim_uuid_text(m, d, uuid, sizeof(uuid));
    uint64_t used = sim_dev_used(m, d);
    uint64_t room = m->memory - m->reserved;
    uint64_t free_b = used < room ? room - used : 0;
    uint64_t busy = sim_busy_total(m, d, -1, now);
    unsigned util = sim_util_percent(m, d, -1, 1000000000ull);
    /* Device time already queued: how long a kernel launched now would wait. */
    uint64_t queued = m->dev[d].queued_ns; /* sim_busy_total ran the engine up to now */
    if (json) {
      printf("%s{\"index\":%u,\"uuid\":\"%s\",\"memory_total\":%llu,\"memory_used\":%llu,"
             "\"memory_free\":%llu,\"busy_ns\":%llu,\"queued_ns\":%llu,\"utilization\":%u,"
             "\"processes\":[",
             d ? "," : "", d, uuid, (unsigned long long)m->memory, (unsigned long long)used,
             (unsigned long long)free_b, (unsigned long long)busy, (unsigned long long)queued,
             util);
    } else {
      gs_size_format(used, a, sizeof(a));
      gs_size_format(m->memory, b, sizeof(b));
      gs_size_format(free_b, c, sizeof(c));
      printf("device %u %s: memory used %s / %s (free %s), busy %.3fs, queued %.3fs, "
             "utilization %u%% (last 1s)\n",
             d, uuid, a, b, c, (double)busy / 1e9, (double)queued / 1e9, util);
    }
    int first = 1;
    for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
      const struct sim_proc *p = &m->proc[i];
      if (!proc_on_dev(p, d))
        continue;
      uint64_t pbusy = sim_busy_total(m, d, (int)i, now);
      if (json) {
        printf("%s{\"pid\":%d,\"name\":", first ? "" : ",", p->pid);
        json_str(p->comm);
        printf(",\"memory\":%llu,\"contexts\":%u,\"busy_ns\":%llu}", (unsigned long long)p->mem[d],
               p->contexts[d], (unsigned long long)pbusy);
      } else {
        gs_size_format(p->mem[d], a, sizeof(a));
        printf("  pid %d (%s): memory %s, contexts %u, busy %.3fs\n", p->pid, p->comm, a,
               p->contexts[d], (double)pbusy / 1e9);
      }
      first = 0;
    }
    if (json)
      printf("]}");
  }
  if (json)
    printf("]}\n");
  sim_unlock(m);
  sim_state_close(&st);
  return 0;
}

static int reset(const char *path) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      printf("gslice-sim: nothing to reset at %s\n", path);
      return 0;
    }
    fprintf(stderr, "gslice-sim: cannot open %s: %s\n", path, strerror(errno));
    return 1;
  }
  /* The presence byte is read-locked by every process that has the machine open. */
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 1, .l_len = 1};
  if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
    fprintf(stderr, "gslice-sim: %s is in use by running processes; not removed\n", path);
    close(fd);
    return 1;
  }
  unlink(path);
  close(fd);
  printf("gslice-sim: removed %s\n", path);
  return 0;
}

int main(int argc, char **argv) {
  char buf[256];
  const char *path = state_path(buf, sizeof(buf));
  if (argc >= 2 && strcmp(argv[1], "info") == 0) {
    int json = argc >= 3 && strcmp(argv[2], "--json") == 0;
    if (argc > 3 || (argc == 3 && !json)) {
      usage(stderr);
      return 2;
    }
    return info(path, json);
  }
  if (argc == 2 && strcmp(argv[1], "reset") == 0)
    return reset(path);
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  usage(stderr);
  return 2;
}
