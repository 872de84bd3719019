/* SPDX-License-Identifier: Apache-2.0 */
/* A slice's process that speaks the hook's protocol itself, run without the hook (its launches go
 * straight to the driver): it joins its slice (GSLICE_SLICE, GSLICE_SLICE_NONCE), takes GPU 0's
 * token and releases each one reporting nothing run.
 *   zero:      runs `spin` kernels under each token until just before valid_until, then releases
 *              it with used_ns = 0, launches = 0, more = 1 (the fourth attack run's zero-charge
 *              release, with the device time it takes); prints its device time in the window as
 *              compute_spin does (device_s, share)
 *   hold:      the same with no kernels: holds each token idle (beside the slice's workload run
 *              unhooked, forge_plus_spin of that run, it kept the other slices' launches waiting)
 *   zerograce: claims 600 ms kernels with nothing charged and holds each token 0.9 s past
 *              expiry; prints how late past expiry the revokes came (the release grace it got:
 *              the median, and the most)
 *   pend0:     holds each token idle to just before valid_until, hands it off (a PENDING
 *              release, claiming 20 ms kernels) and then charges 0 (the sixth attack run's R1)
 *   allow:     holds each token idle 1.9 ms, inside the idle allowance, and releases it with 0
 *              and more = 1 (the sixth run's R2)
 *   (hold, pend0, allow print the share of the window they held the token: held_share)
 * Usage: compute_forge zero|hold|zerograce|pend0|allow [--start EPOCH_S] [--warmup S] [--duration
 * S]
 *        [--kernel-us N] [--label L] */
#include <cuda.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "progs_common.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return 0;
  fprintf(stderr, "compute_forge: %s: %d\n", what, (int)r);
  return -1;
}

static int join(void) {
  const char *slice = getenv("GSLICE_SLICE"), *nonce = getenv("GSLICE_SLICE_NONCE");
  char err[256] = "";
  int fd;
  if (!slice || gs_client_connect(gs_client_socket_path(), &fd) < 0 ||
      gs_client_hello_slice(fd, GS_ROLE_HOOK, (uint32_t)atoi(slice),
                            nonce ? strtoull(nonce, NULL, 16) : 0, NULL, err, sizeof(err)) < 0) {
    fprintf(stderr, "compute_forge: cannot join the slice: %s\n", err);
    return -1;
  }
  return fd;
}

static void release(int fd, uint32_t gen, uint64_t kernel_ns) {
  struct gs_msg_token_release rl = {.gpu = 0, .generation = gen, .more = 1, .kernel_ns = kernel_ns};
  gs_client_send(fd, GS_MSG_TOKEN_RELEASE, 0, &rl, sizeof(rl));
}

/* The next grant (others skipped) within ms; -1 on none. */
static int next_grant(int fd, int ms, struct gs_msg *m) {
  static uint64_t buf[1024];
  uint64_t end = gs_mono_ns() + (uint64_t)ms * 1000000ull;
  while (gs_mono_ns() < end) {
    if (gs_client_recv(fd, buf, sizeof(buf), 100, m) == -ETIMEDOUT)
      continue;
    if (m->hdr.type == GS_MSG_TOKEN_GRANT)
      return 0;
  }
  return -1;
}

static int run_zero(int fd, CUfunction fn, unsigned long long kernel_us, double m0, double m1,
                    const char *label) {
  struct gs_msg_token_request rq = {.gpu = 0};
  double counted = 0;
  unsigned long long grants = 0;
  gs_client_send(fd, GS_MSG_TOKEN_REQUEST, 1, &rq, sizeof(rq));
  while (real_s() < m1) {
    struct gs_msg m;
    if (next_grant(fd, 200, &m) < 0)
      continue;
    grants++;
    uint64_t until = m.u.token_grant.valid_until_ns - 300000, k = kernel_us * 1000;
    unsigned long long n = 0;
    double t0 = real_s();
    while (!fn && gs_mono_ns() < until)
      usleep(100);
    while (fn && gs_mono_ns() + k * (n + 1) < until) {
      void *params[] = {&kernel_us};
      if (check(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel"))
        return 1;
      n++;
    }
    if (fn && check(cuCtxSynchronize(), "cuCtxSynchronize"))
      return 1;
    double t1 = real_s(), in0 = t0 > m0 ? t0 : m0, in1 = t1 < m1 ? t1 : m1;
    if (in1 > in0 && t1 > t0)
      counted += (double)n * (in1 - in0) / (t1 - t0);
    release(fd, m.u.token_grant.generation, 0);
  }
  double dev = counted * (double)kernel_us / 1e6;
  printf("label=%s kernels=%.0f grants=%llu device_s=%.4f share=%.4f window_s=%.1f\n", label,
         counted, grants, dev, dev / (m1 - m0), m1 - m0);
  return 0;
}

/* Holds each token 0.9 s past expiry, claiming 600 ms kernels with nothing charged. */
static int run_zerograce(int fd, double m1) {
  struct gs_msg_token_request rq = {.gpu = 0};
  static uint64_t buf[1024];
  unsigned grants = 0, revokes = 0;
  double late[256];
  gs_client_send(fd, GS_MSG_TOKEN_REQUEST, 1, &rq, sizeof(rq));
  while (real_s() < m1) {
    struct gs_msg m;
    if (next_grant(fd, 200, &m) < 0)
      continue;
    grants++;
    uint32_t gen = m.u.token_grant.generation;
    uint64_t expiry = m.u.token_grant.valid_until_ns, hold = expiry + 900000000ull;
    while (gs_mono_ns() < hold) {
      int left = (int)((hold - gs_mono_ns()) / 1000000) + 1;
      struct gs_msg r;
      if (gs_client_recv(fd, buf, sizeof(buf), left, &r) < 0)
        continue;
      if (r.hdr.type == GS_MSG_TOKEN_REVOKE && r.u.token_revoke.generation == gen) {
        if (revokes < sizeof(late) / sizeof(late[0]))
          late[revokes] = ((double)gs_mono_ns() - (double)expiry) / 1e6;
        revokes++;
        break;
      }
    }
    release(fd, gen, 600000000ull);
  }
  unsigned n = revokes < sizeof(late) / sizeof(late[0]) ? revokes : sizeof(late) / sizeof(late[0]);
  qsort(late, n, sizeof(late[0]), cmp_double);
  printf("zerograce: grants=%u revokes=%u revoke_late_p50_ms=%.0f revoke_late_max_ms=%.0f\n",
         grants, revokes, n ? late[n / 2] : 0, n ? late[n - 1] : 0);
  return 0;
}

/* pend0 and allow: each token held idle and released charged nothing, in the two ways the sixth
 * attack run found the idle charge blind to. */
static int run_idle(int fd, bool pend, double m0, double m1, const char *label) {
  struct gs_msg_token_request rq = {.gpu = 0};
  unsigned long long grants = 0;
  double held = 0;
  gs_client_send(fd, GS_MSG_TOKEN_REQUEST, 1, &rq, sizeof(rq));
  while (real_s() < m1) {
    struct gs_msg m;
    if (next_grant(fd, 200, &m) < 0)
      continue;
    grants++;
    uint32_t gen = m.u.token_grant.generation;
    uint64_t g0 = gs_mono_ns(),
             until = pend ? m.u.token_grant.valid_until_ns - 300000 : g0 + 1900000;
    double t0 = real_s();
    while (gs_mono_ns() < until)
      ;
    struct gs_msg_token_release rl = {.gpu = 0, .generation = gen, .more = 1};
    if (pend) {
      rl.flags = GS_RELEASE_PENDING;
      rl.kernel_ns = 20000000;
      rl.start_ns = g0;
      rl.tail_end_ns = gs_mono_ns();
    }
    gs_client_send(fd, GS_MSG_TOKEN_RELEASE, 0, &rl, sizeof(rl));
    if (pend) {
      struct gs_msg_token_release c = {.gpu = 0, .generation = gen, .flags = GS_RELEASE_CHARGE};
      gs_client_send(fd, GS_MSG_TOKEN_RELEASE, 0, &c, sizeof(c));
    }
    double t1 = real_s(), in0 = t0 > m0 ? t0 : m0, in1 = t1 < m1 ? t1 : m1;
    if (in1 > in0)
      held += in1 - in0;
  }
  printf("label=%s grants=%llu held_s=%.3f held_share=%.4f window_s=%.1f\n", label, grants, held,
         held / (m1 - m0), m1 - m0);
  return 0;
}

int main(int argc, char **argv) {
  const char *label = "forger", *mode = argc > 1 ? argv[1] : "";
  unsigned long long kernel_us = 2000;
  double start = 0, warmup = 1, duration = 5;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--start"))
      start = strtod(argv[i + 1], NULL);
    else if (!strcmp(argv[i], "--warmup"))
      warmup = strtod(argv[i + 1], NULL);
    else if (!strcmp(argv[i], "--duration"))
      duration = strtod(argv[i + 1], NULL);
    else if (!strcmp(argv[i], "--kernel-us"))
      kernel_us = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--label"))
      label = argv[i + 1];
  }
  if (strcmp(mode, "zero") && strcmp(mode, "hold") && strcmp(mode, "zerograce") &&
      strcmp(mode, "pend0") && strcmp(mode, "allow")) {
    fprintf(stderr,
            "usage: compute_forge zero|hold|zerograce|pend0|allow [--start EPOCH_S] [--warmup S] "
            "[--duration S] [--kernel-us N] [--label L]\n");
    return 2;
  }
  int fd = join();
  if (fd < 0)
    return 1;
  if (start == 0)
    start = real_s();
  while (real_s() < start)
    usleep(1000);
  if (!strcmp(mode, "zerograce"))
    return run_zerograce(fd, start + warmup + duration);
  if (!strcmp(mode, "pend0") || !strcmp(mode, "allow"))
    return run_idle(fd, !strcmp(mode, "pend0"), start + warmup, start + warmup + duration, label);
  if (!strcmp(mode, "hold"))
    return run_zero(fd, NULL, kernel_us, start + warmup, start + warmup + duration, label);
  char ptx_buf[4096];
  CUfunction fn;
  if (spin_setup(spin_ptx_path(NULL, ptx_buf, sizeof(ptx_buf)), &fn, check) < 0)
    return 1;
  return run_zero(fd, fn, kernel_us, start + warmup, start + warmup + duration, label);
}
