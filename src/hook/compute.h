/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's compute gate: every launch path calls these around the real launch. */
#pragma once
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>

/* Before the real launch on `stream` (in the calling thread's current context).
 * Returns CUDA_SUCCESS to go ahead; may block until the slice holds a token. *inflight: what to
 * give gs_compute_after_launch (NULL: the launch was not counted).
 * Fast path while the token is valid: no syscall, no lock, no allocation. */
CUresult gs_compute_before_launch(CUstream stream, _Atomic uint64_t **inflight);

/* After the real launch, whatever it returned: the launch is no longer in flight (inline: one
 * atomic subtract from the burst's gate word, no call). */
static inline void gs_compute_after_launch(_Atomic uint64_t *inflight) {
  if (inflight)
    atomic_fetch_sub(inflight, 1);
}

/* Before the real synchronize (any kind) in the calling thread's context: marks where the
 * burst's queue ends now. Returns a mark for gs_compute_after_sync, 0 for none. */
uint64_t gs_compute_before_sync(void);

/* After the real synchronize returned CUDA_SUCCESS: if everything the burst queued up to the
 * mark has run (and nothing was launched since), the burst's segment ends at that mark. */
void gs_compute_after_sync(uint64_t mark);

/* Around the real cuStreamBeginCapture* (every variant): the capture is counted and begins with
 * C.mu held, so that no event of the gate is recorded into its stream; returns what to give
 * gs_compute_capture_begun with the real call's result. */
int gs_compute_capture_begin(void);
void gs_compute_capture_begun(int token, CUresult rc);

/* After the real cuStreamEndCapture: a capture that ended (its graph, or invalidated) is no
 * longer counted. */
void gs_compute_capture_ended(CUresult rc);

/* Before the real cuStreamDestroy (either version): the stream leaves the gate's bursts, so that
 * the gate never records into or queries a destroyed stream. Not the launch path: takes C.mu when
 * the gate is on. */
void gs_compute_stream_destroy(CUstream stream);
