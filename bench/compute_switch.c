/* SPDX-License-Identifier: Apache-2.0 */
/* Bench: the device's idle time at each token switch, on the simulated GPU. The sim records
 * every stretch of device time a process's kernels ran (its busy ring, CLOCK_MONOTONIC); this
 * copies the stretches of device 0 as they complete and, over a measuring window, finds the
 * switches: one process's stretch followed by another's. The gap between them is the device
 * idle from one holder's last kernel end to the next holder's first kernel start. Gaps between
 * two stretches of the same process (its own synchronize-and-relaunch) are counted apart.
 *
 *   compute_switch START_EPOCH_S WARMUP_S DURATION_S
 *
 * The window is [START + WARMUP, START + WARMUP + DURATION] on the real-time clock, as
 * compute_spin measures its shares. Prints one line of key=value. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "state.h"

struct stretch {
  uint64_t start, end;
  uint32_t proc, gen;
};

static double real_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double pctl(const uint64_t *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t i = (size_t)((double)n * p);
  return (double)v[i < n ? i : n - 1];
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: compute_switch START_EPOCH_S WARMUP_S DURATION_S\n");
    return 2;
  }
  double start = strtod(argv[1], NULL), warmup = strtod(argv[2], NULL);
  double duration = strtod(argv[3], NULL);
  const char *path = getenv("GSLICE_SIM_STATE");
  char def[64];
  if (!path) {
    snprintf(def, sizeof(def), "/dev/shm/gslice-sim-%u", (unsigned)getuid());
    path = def;
  }
  /* The machine appears at the workloads' first cuInit. */
  struct sim_state st;
  int r = -ENOENT;
  while (real_s() < start + warmup && (r = sim_state_open_existing(path, &st)) < 0)
    usleep(20000);
  if (r < 0 && (r = sim_state_open_existing(path, &st)) < 0) {
    fprintf(stderr, "compute_switch: no simulated machine at %s: %s\n", path, strerror(-r));
    return 1;
  }
  /* The window on the device clock: the offset between the two clocks, read once. */
  struct timespec mono;
  double now_real = real_s();
  clock_gettime(CLOCK_MONOTONIC, &mono);
  double off = now_real - ((double)mono.tv_sec + (double)mono.tv_nsec / 1e9);
  uint64_t w0 = (uint64_t)((start + warmup - off) * 1e9);
  uint64_t w1 = w0 + (uint64_t)(duration * 1e9);

  size_t cap = 1 << 16, n = 0;
  struct stretch *v = malloc(cap * sizeof(*v));
  uint64_t seen = 0, missed = 0;
  struct sim_machine *m = st.m;
  for (;;) {
    uint64_t t = sim_now_ns();
    sim_lock(m);
    sim_advance(m, 0, t);
    const struct sim_device *d = &m->dev[0];
    /* Every stretch but the newest is final (the newest may still grow). */
    uint64_t last = d->nring ? d->nring - 1 : 0;
    if (last > seen + SIM_RING) {
      missed += last - SIM_RING - seen;
      seen = last - SIM_RING;
    }
    for (; seen < last; seen++) {
      const struct sim_interval *iv = &d->ring[seen % SIM_RING];
      if (iv->end < w0 || iv->start > w1)
        continue;
      if (n == cap)
        v = realloc(v, (cap *= 2) * sizeof(*v));
      v[n++] = (struct stretch){iv->start, iv->end, iv->proc, iv->proc_gen};
    }
    sim_unlock(m);
    if (t > w1 + 50000000ull)
      break;
    usleep(50000);
  }
  sim_state_close(&st);

  const char *dump = getenv("GSLICE_SWITCH_DUMP");
  FILE *df = dump ? fopen(dump, "we") : NULL;
  for (size_t i = 0; df && i < n; i++)
    fprintf(df, "%llu %llu %u\n", (unsigned long long)v[i].start, (unsigned long long)v[i].end,
            v[i].proc);
  if (df)
    fclose(df);
  uint64_t *gaps = malloc((n ? n : 1) * sizeof(uint64_t)), own_idle = 0, busy = 0, switch_idle = 0;
  size_t ng = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t a = v[i].start > w0 ? v[i].start : w0, z = v[i].end < w1 ? v[i].end : w1;
    if (z > a)
      busy += z - a;
    if (i == 0 || v[i].start < w0 || v[i].start > w1)
      continue;
    uint64_t gap = v[i].start > v[i - 1].end ? v[i].start - v[i - 1].end : 0;
    if (v[i].proc != v[i - 1].proc || v[i].gen != v[i - 1].gen) {
      gaps[ng++] = gap;
      switch_idle += gap;
    } else {
      own_idle += gap;
    }
  }
  qsort(gaps, ng, sizeof(uint64_t), cmp_u64);
  double win = (double)(w1 - w0);
  printf("switches=%zu per_s=%.0f idle_p50_us=%.1f idle_p90_us=%.1f idle_p99_us=%.1f "
         "idle_max_us=%.1f idle_mean_us=%.1f switch_idle_pct=%.2f own_idle_pct=%.2f busy_pct=%.2f "
         "missed=%llu\n",
         ng, (double)ng / (win / 1e9), pctl(gaps, ng, 0.5) / 1e3, pctl(gaps, ng, 0.9) / 1e3,
         pctl(gaps, ng, 0.99) / 1e3, ng ? (double)gaps[ng - 1] / 1e3 : 0,
         ng ? (double)switch_idle / (double)ng / 1e3 : 0, 100.0 * (double)switch_idle / win,
         100.0 * (double)own_idle / win, 100.0 * (double)busy / win, (unsigned long long)missed);
  free(gaps);
  free(v);
  return 0;
}
