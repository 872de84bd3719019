/* SPDX-License-Identifier: Apache-2.0 */
/* The hook's compute gate: every launch path calls these around the real launch. */
#pragma once
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>

/* Before the real launch on `stream` (in the calling thread's current context).
 * Returns CUDA_SUCCESS to go ahead; may block until the slice holds a token. *done: what to give
 * gs_compute_after_launch (0: the launch was not counted).
 * Fast path while the token is valid: no syscall, no lock, no allocation, one atomic add. */
CUresult gs_compute_before_launch(CUstream stream, uintptr_t *done);

/* After the real launch, whatever it returned: the launch is no longer in flight. Inline, no
 * call: a plain store to the calling thread's own counter (bit 0 set: a counter threads share,
 * an atomic add). */
static inline void gs_compute_after_launch(uintptr_t done) {
  _Atomic uint32_t *d = (_Atomic uint32_t *)(done & ~(uintptr_t)1);
  if (!done)
    return;
  if (done & 1)
    atomic_fetch_add_explicit(d, 1, memory_order_release);
  else
    atomic_store_explicit(d, atomic_load_explicit(d, memory_order_relaxed) + 1,
                          memory_order_release);
}

/* What a synchronize waits for, as far as the gate can tell without asking the driver: the whole
 * current context, one stream, or something else (an event). */
enum gs_sync_kind { GS_SYNC_CTX, GS_SYNC_STREAM, GS_SYNC_OTHER };

/* Where the burst's queue stood at a synchronize, for gs_compute_after_sync (on the caller's
 * stack: all 0 for nothing to do after). */
struct gs_sync_mark {
  uint64_t mark;
  uint64_t t0; /* a quick synchronize's start (gs_gate_ticks); 0: an event mark or none */
};

/* Before the real synchronize of `kind` (`stream`: the one it waits for, GS_SYNC_STREAM) in the
 * calling thread's context: marks where the burst's queue ends now. */
void gs_compute_before_sync(enum gs_sync_kind kind, CUstream stream, struct gs_sync_mark *m);

/* After the real synchronize returned CUDA_SUCCESS: if everything the burst queued up to the
 * mark has run (and nothing was launched since), the burst's segment ends at that mark, or its
 * idle time begins now. */
void gs_compute_after_sync(const struct gs_sync_mark *m);

/* Around the real cuStreamBeginCapture* (every variant): the capture is counted and begins with
 * C.mu held, so that no event of the gate is recorded into its stream; returns what to give
 * gs_compute_capture_begun with the real call's result. */
int gs_compute_capture_begin(void);
void gs_compute_capture_begun(int token, CUresult rc);

/* After the real cuStreamEndCapture: a capture that ended (its graph, or invalidated) is no
 * longer counted. */
void gs_compute_capture_ended(CUresult rc);

/* A context of device `dev` exists (created, retained, or found current by the gate): the gate
 * notes each device's first, and from a second one on any device on, a launch on NULL, the
 * legacy or the per-thread stream is the burst's only in the burst's own context (the handles
 * name each context's own stream). Any thread, no lock; cheap once noted. */
void gs_compute_context_seen(CUcontext ctx, int dev);

/* Before the real cuStreamDestroy (either version): the stream leaves the gate's bursts, so that
 * the gate never records into or queries a destroyed stream. Not the launch path: takes C.mu when
 * the gate is on. */
void gs_compute_stream_destroy(CUstream stream);
