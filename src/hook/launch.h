/* SPDX-License-Identifier: Apache-2.0 */
/* The wrapper of work that runs on the device (launch.c: kernels; work.c: memsets and
 * device-to-device copies): the compute gate before and after the real call. */
#pragma once
#include "compute.h"
#include "hook.h"

/* The start of the wrapper of `name`: r, the real table, and the real entry point there. */
#define REAL_OR_NOT_FOUND(name)                                                                    \
  const struct gs_real *r = gs_real();                                                             \
  if (!r->name)                                                                                    \
  return CUDA_ERROR_NOT_FOUND

/* The gate for `stream`, then `call`, then the gate told the launch is no longer in flight. */
#define GATE_AND_CALL(stream, call)                                                                \
  uintptr_t done = 0;                                                                              \
  CUresult gate = gs_compute_before_launch(stream, &done);                                         \
  if (gate != CUDA_SUCCESS)                                                                        \
    return gate;                                                                                   \
  CUresult rc = call;                                                                              \
  gs_compute_after_launch(done);                                                                   \
  return rc

/* The body of the wrapper of `name`: `call` (which may use r) gated on `stream`. */
#define GATED_LAUNCH(name, stream, call)                                                           \
  REAL_OR_NOT_FOUND(name);                                                                         \
  GATE_AND_CALL(stream, call)

/* In a _ptsz launch the NULL stream is the calling thread's default stream: the gate must time
 * it (and record its events) there, not on the legacy stream that NULL means elsewhere. So does
 * a synchronous _ptds call's work, and a synchronous call's without the suffix goes on the legacy
 * stream (NULL). */
#define PTSZ(stream) ((stream) ? (stream) : CU_STREAM_PER_THREAD)
