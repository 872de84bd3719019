/* SPDX-License-Identifier: Apache-2.0 */
/* Every kernel launch path (memsets and device-to-device copies: work.c): the compute gate
 * (compute.c) before and after the real launch; the legacy launch; the synchronizes that end a
 * burst's segment; the captures the gate passes launches through in; the streams destroyed, which
 * leave the gate's bursts first. */
#include "hook.h"

#include "compute.h"
#include "launch.h"

GS_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                  unsigned int bx, unsigned int by, unsigned int bz,
                                  unsigned int shared, CUstream hStream, void **params,
                                  void **extra) {
  GATED_LAUNCH(cuLaunchKernel, hStream,
               r->cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, hStream, params, extra));
}

GS_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                       unsigned int gz, unsigned int bx, unsigned int by,
                                       unsigned int bz, unsigned int shared, CUstream hStream,
                                       void **params, void **extra) {
  GATED_LAUNCH(cuLaunchKernel_ptsz, PTSZ(hStream),
               r->cuLaunchKernel_ptsz(f, gx, gy, gz, bx, by, bz, shared, hStream, params, extra));
}

GS_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                    void **extra) {
  CUstream stream = config ? config->hStream : NULL;
  GATED_LAUNCH(cuLaunchKernelEx, stream, r->cuLaunchKernelEx(config, f, params, extra));
}

GS_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                                         void **extra) {
  CUstream stream = config ? config->hStream : NULL;
  GATED_LAUNCH(cuLaunchKernelEx_ptsz, PTSZ(stream),
               r->cuLaunchKernelEx_ptsz(config, f, params, extra));
}

GS_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int shared, CUstream hStream,
                                             void **params) {
  GATED_LAUNCH(cuLaunchCooperativeKernel, hStream,
               r->cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared, hStream, params));
}

GS_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                  unsigned int gz, unsigned int bx, unsigned int by,
                                                  unsigned int bz, unsigned int shared,
                                                  CUstream hStream, void **params) {
  GATED_LAUNCH(
      cuLaunchCooperativeKernel_ptsz, PTSZ(hStream),
      r->cuLaunchCooperativeKernel_ptsz(f, gx, gy, gz, bx, by, bz, shared, hStream, params));
}

GS_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  GATED_LAUNCH(cuGraphLaunch, hStream, r->cuGraphLaunch(hGraphExec, hStream));
}

GS_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  GATED_LAUNCH(cuGraphLaunch_ptsz, PTSZ(hStream), r->cuGraphLaunch_ptsz(hGraphExec, hStream));
}

/* The legacy launch (deprecated, still exported): the function's block shape and parameters were
 * set beforehand (cuFuncSetBlockShape, cuParamSet*, which run nothing); cuLaunch and cuLaunchGrid
 * launch on the legacy stream. */
GS_EXPORT CUresult cuLaunch(CUfunction f) {
  GATED_LAUNCH(cuLaunch, NULL, r->cuLaunch(f));
}

GS_EXPORT CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  GATED_LAUNCH(cuLaunchGrid, NULL, r->cuLaunchGrid(f, grid_width, grid_height));
}

GS_EXPORT CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height,
                                     CUstream hStream) {
  GATED_LAUNCH(cuLaunchGridAsync, hStream,
               r->cuLaunchGridAsync(f, grid_width, grid_height, hStream));
}

/* Each entry's kernel runs on its own stream, on its own device: the gate of that stream's
 * context (pushed current for it). One entry: gated as any launch. Several: each device's gate is
 * passed in turn and let go before the next is asked, then the one real call launches them all
 * (a multi-device kernel cannot be split into launches of its own). Holding the first device's
 * launch in flight while waiting for the second's token would stall the first's close, which
 * waits for launches in flight, in the helper thread that reads the second's grant. So with
 * several devices a kernel may start just after its device's burst closed. */
static void multi_device_gates(const CUDA_LAUNCH_PARAMS *list, unsigned n, CUresult *gate) {
  const struct gs_real *r = gs_real();
  *gate = CUDA_SUCCESS;
  for (unsigned i = 0; i < n && *gate == CUDA_SUCCESS; i++) {
    CUcontext ctx = NULL, was;
    int pushed = r->cuStreamGetCtx && r->cuCtxPushCurrent_v2 && r->cuCtxPopCurrent_v2 &&
                 r->cuStreamGetCtx(list[i].hStream, &ctx) == CUDA_SUCCESS && ctx &&
                 r->cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS;
    uintptr_t done = 0;
    *gate = gs_compute_before_launch(list[i].hStream, &done);
    gs_compute_after_launch(done);
    if (pushed)
      r->cuCtxPopCurrent_v2(&was);
  }
}

GS_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
                                                        unsigned int numDevices,
                                                        unsigned int flags) {
  if (launchParamsList && numDevices == 1) {
    GATED_LAUNCH(cuLaunchCooperativeKernelMultiDevice, launchParamsList[0].hStream,
                 r->cuLaunchCooperativeKernelMultiDevice(launchParamsList, numDevices, flags));
  }
  const struct gs_real *r = gs_real();
  if (!r->cuLaunchCooperativeKernelMultiDevice)
    return CUDA_ERROR_NOT_FOUND;
  CUresult gate = CUDA_SUCCESS;
  if (launchParamsList)
    multi_device_gates(launchParamsList, numDevices, &gate);
  if (gate != CUDA_SUCCESS)
    return gate;
  return r->cuLaunchCooperativeKernelMultiDevice(launchParamsList, numDevices, flags);
}

/* Stream capture: work launched into a capturing stream only becomes graph nodes, so the gate
 * passes it through; it must know while a capture goes on (compute.h). */
#define CAPTURE_BEGIN(name, call)                                                                  \
  const struct gs_real *r = gs_real();                                                             \
  if (!r->name)                                                                                    \
    return CUDA_ERROR_NOT_FOUND;                                                                   \
  int token = gs_compute_capture_begin();                                                          \
  CUresult rc = call;                                                                              \
  gs_compute_capture_begun(token, rc);                                                             \
  return rc

GS_EXPORT CUresult cuStreamBeginCapture(CUstream hStream) {
  CAPTURE_BEGIN(cuStreamBeginCapture, r->cuStreamBeginCapture(hStream));
}

GS_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
  CAPTURE_BEGIN(cuStreamBeginCapture_ptsz, r->cuStreamBeginCapture_ptsz(hStream));
}

GS_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  CAPTURE_BEGIN(cuStreamBeginCapture_v2, r->cuStreamBeginCapture_v2(hStream, mode));
}

GS_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  CAPTURE_BEGIN(cuStreamBeginCapture_v2_ptsz, r->cuStreamBeginCapture_v2_ptsz(hStream, mode));
}

GS_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                               const CUgraphNode *dependencies,
                                               const CUgraphEdgeData *dependencyData,
                                               size_t numDependencies, CUstreamCaptureMode mode) {
  CAPTURE_BEGIN(cuStreamBeginCaptureToGraph,
                r->cuStreamBeginCaptureToGraph(hStream, hGraph, dependencies, dependencyData,
                                               numDependencies, mode));
}

GS_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                    const CUgraphNode *dependencies,
                                                    const CUgraphEdgeData *dependencyData,
                                                    size_t numDependencies,
                                                    CUstreamCaptureMode mode) {
  CAPTURE_BEGIN(cuStreamBeginCaptureToGraph_ptsz,
                r->cuStreamBeginCaptureToGraph_ptsz(hStream, hGraph, dependencies, dependencyData,
                                                    numDependencies, mode));
}

#define CAPTURE_END(name, call)                                                                    \
  const struct gs_real *r = gs_real();                                                             \
  if (!r->name)                                                                                    \
    return CUDA_ERROR_NOT_FOUND;                                                                   \
  CUresult rc = call;                                                                              \
  gs_compute_capture_ended(rc);                                                                    \
  return rc

GS_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  CAPTURE_END(cuStreamEndCapture, r->cuStreamEndCapture(hStream, phGraph));
}

GS_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) {
  CAPTURE_END(cuStreamEndCapture_ptsz, r->cuStreamEndCapture_ptsz(hStream, phGraph));
}

/* Synchronizes: where the process waits for what it queued. The gate marks the end of its queue
 * before the wait and, once that has run, ends the burst's current segment there, so the idle
 * time between this synchronize and the next launch is not charged to the slice. */
#define GATED_SYNC(name, kind, stream, call)                                                       \
  const struct gs_real *r = gs_real();                                                             \
  if (!r->name)                                                                                    \
    return CUDA_ERROR_NOT_FOUND;                                                                   \
  struct gs_sync_mark mark;                                                                        \
  gs_compute_before_sync(kind, stream, &mark);                                                     \
  CUresult rc = call;                                                                              \
  if (rc == CUDA_SUCCESS)                                                                          \
    gs_compute_after_sync(&mark);                                                                  \
  return rc

GS_EXPORT CUresult cuCtxSynchronize(void) {
  GATED_SYNC(cuCtxSynchronize, GS_SYNC_CTX, NULL, r->cuCtxSynchronize());
}

GS_EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
  GATED_SYNC(cuStreamSynchronize, GS_SYNC_STREAM, hStream, r->cuStreamSynchronize(hStream));
}

GS_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
  GATED_SYNC(cuStreamSynchronize_ptsz, GS_SYNC_STREAM, PTSZ(hStream),
             r->cuStreamSynchronize_ptsz(hStream));
}

GS_EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
  GATED_SYNC(cuEventSynchronize, GS_SYNC_OTHER, NULL, r->cuEventSynchronize(hEvent));
}

/* A stream destroyed leaves the gate's bursts first: the gate records events on and queries the
 * streams of a burst, and a destroyed handle's memory is the driver's to free. */
GS_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
  const struct gs_real *r = gs_real();
  if (!r->cuStreamDestroy_v2)
    return CUDA_ERROR_NOT_FOUND;
  gs_compute_stream_destroy(hStream);
  return r->cuStreamDestroy_v2(hStream);
}

GS_EXPORT CUresult cuStreamDestroy(CUstream hStream) {
  const struct gs_real *r = gs_real();
  if (!r->cuStreamDestroy)
    return CUDA_ERROR_NOT_FOUND;
  gs_compute_stream_destroy(hStream);
  return r->cuStreamDestroy(hStream);
}
