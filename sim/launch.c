/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel launches (cuLaunchKernel and its forms, the legacy cuLaunch*): a function's device time
 * (spin(us), GSLICE_SIM_KERNEL_US) and the one place work is put on the shared engine timeline. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- launches ---- */

/* Device time of one launch: spin(us) takes us microseconds, others what
 * GSLICE_SIM_KERNEL_US says (default 0). */
uint64_t sim_kernel_ns(const struct sim_func *f, void **params, void **extra) {
  if (!f->spin)
    return f->fixed_ns;
  uint64_t us = 0;
  if (params && params[0]) {
    memcpy(&us, params[0], sizeof(us));
  } else if (extra) {
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END && i < 16; i += 2)
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER && extra[i + 1])
        memcpy(&us, extra[i + 1], sizeof(us));
  }
  if (us > 3600ull * 1000000ull)
    us = 3600ull * 1000000ull; /* an hour: past that it is surely a bad argument */
  return us * 1000;
}

void sim_enqueue_locked(struct sim_stream *s, uint64_t dur) {
  struct sim_ctx *c = s->ctx;
  struct sim_mark ready = sim_stream_ready(s);
  if (dur == 0) {
    /* No device time: complete when the context's earlier work is (launch order). */
    struct sim_mark mk = {c->last_seq, ready.wait, 0};
    sim_mark_merge(&s->tail, &mk);
    return;
  }
  struct sim_machine *m = sim.st.m;
  sim_lock(m);
  sim_reap(m, 0);
  /* The context is the channel the engine time-slices; the stream's order within it is
   * the context's launch order, and a wait on another context's work rides along. */
  uint64_t seq = sim_launch(m, sim.slot, sim_pdev(c->dev), (uint64_t)(uintptr_t)c, ready.wait, dur);
  sim_unlock(m);
  c->last_seq = seq;
  s->tail = (struct sim_mark){seq, 0, 0};
}

void sim_mark_merge(struct sim_mark *into, const struct sim_mark *from) {
  if (from->seq > into->seq)
    into->seq = from->seq;
  if (from->wait > into->wait)
    into->wait = from->wait;
  if (from->t > into->t)
    into->t = from->t;
}

int sim_mark_done(int dev, const struct sim_mark *mk, uint64_t *ret_t) {
  uint64_t t = mk->t;
  int done = 1;
  if (mk->seq && !mk->wait) {
    pthread_mutex_lock(&sim.mu);
    int hit = sim.done_seq[dev] == mk->seq;
    uint64_t end = sim.done_end[dev];
    pthread_mutex_unlock(&sim.mu);
    if (hit) {
      *ret_t = end > t ? end : t;
      return t <= sim_now_ns();
    }
  }
  if (mk->seq || mk->wait) {
    struct sim_machine *m = sim.st.m;
    unsigned pd = sim_pdev(dev);
    uint64_t e1, e2;
    sim_lock(m);
    done = sim_kernel_done(m, pd, mk->seq, &e1) & sim_kernel_done(m, pd, mk->wait, &e2);
    sim_unlock(m);
    if (e1 > t)
      t = e1;
    if (e2 > t)
      t = e2;
    if (done && mk->seq && !mk->wait) {
      pthread_mutex_lock(&sim.mu);
      /* The latest found, not the largest: an event recorded behind it next (stream.c) then
       * needs no end time. */
      sim.done_seq[dev] = mk->seq;
      sim.done_end[dev] = e1;
      pthread_mutex_unlock(&sim.mu);
    }
  }
  *ret_t = t;
  return done && mk->t <= sim_now_ns();
}

uint64_t sim_mark_wait(int dev, const struct sim_mark *mk) {
  uint64_t t;
  /* The projection holds unless other contexts queue work meanwhile: look again on waking. */
  while (!sim_mark_done(dev, mk, &t))
    sim_wait_until(t);
  return t;
}

static CUresult launch(CUfunction hf, CUstream h, void **params, void **extra, int ptsz) {
  SIM_REQUIRE_INIT();
  struct sim_func *f = (struct sim_func *)hf;
  if (!f || f->magic != SIM_FUNC_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  uint64_t dur = sim_kernel_ns(f, params, extra);
  struct sim_stream *s;
  CUresult rc = sim_stream_lock(h, ptsz, &s);
  if (rc != CUDA_SUCCESS)
    return rc;
  /* Into a capturing stream a launch does not run: it is a kernel node of the capture. */
  if ((rc = sim_capture_use_locked(s)) != CUDA_SUCCESS) {
  } else if (s->cap) {
    struct sim_node node = {.type = SIM_NODE_KERNEL, .dur = dur};
    rc = sim_capture_add_locked(s, &node);
  } else {
    sim_enqueue_locked(s, dur);
  }
  pthread_mutex_unlock(&sim.mu);
  return rc;
}

SIM_TWINS(cuLaunchKernel, _ptsz, launch,
          (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
           unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
           unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra),
          f, hStream, kernelParams, extra)

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra, int ptsz) {
  if (!config)
    return CUDA_ERROR_INVALID_VALUE;
  return launch(f, config->hStream, kernelParams, extra, ptsz);
}

SIM_TWINS(cuLaunchKernelEx, _ptsz, launch_ex,
          (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra), config,
          f, kernelParams, extra)

SIM_TWINS(cuLaunchCooperativeKernel, _ptsz, launch,
          (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
           unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
           unsigned int sharedMemBytes, CUstream hStream, void **kernelParams),
          f, hStream, kernelParams, NULL)

/* The legacy launch: the block shape and parameters set on the function beforehand
 * (cuFuncSetBlockShape, cuParamSet*), a grid of width x height blocks; cuLaunch is 1 x 1 and,
 * with cuLaunchGrid, on the legacy stream. The parameters are read at the launch, as the
 * driver copies them then. */
static CUresult launch_legacy(CUfunction f, int width, int height, CUstream h) {
  SIM_REQUIRE_INIT();
  unsigned char buf[SIM_PARAM_MAX];
  size_t size;
  if (width <= 0 || height <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = sim_func_legacy_params(f, buf, &size);
  if (rc != CUDA_SUCCESS)
    return rc;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  return launch(f, h, NULL, extra, 0);
}

SIM_API CUresult cuLaunch(CUfunction f) {
  return launch_legacy(f, 1, 1, NULL);
}

SIM_API CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  return launch_legacy(f, grid_width, grid_height, NULL);
}

SIM_API CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height,
                                   CUstream hStream) {
  return launch_legacy(f, grid_width, grid_height, hStream);
}

/* One kernel per entry, each on its own stream (on a GPU each on another device); the flags
 * only say how the launch waits for earlier work, which the sim's launch order already gives. */
SIM_API CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
                                                      unsigned int numDevices, unsigned int flags) {
  SIM_REQUIRE_INIT();
  const unsigned known = CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_PRE_LAUNCH_SYNC |
                         CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_POST_LAUNCH_SYNC;
  if (!launchParamsList || !numDevices || (flags & ~known))
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < numDevices; i++) {
    const CUDA_LAUNCH_PARAMS *p = &launchParamsList[i];
    CUresult rc = launch(p->function, p->hStream, p->kernelParams, NULL, 0);
    if (rc != CUDA_SUCCESS)
      return rc;
  }
  return CUDA_SUCCESS;
}
