/* The hook's compute gate: every launch path calls these around the real launch. */
#pragma once
#include <cuda.h>

/* Before the real launch on `stream` (in the calling thread's current context).
 * Returns CUDA_SUCCESS to go ahead; may block until the slice holds a token.
 * Fast path while the token is valid: no syscall, no lock, no allocation. */
CUresult gs_compute_before_launch(CUstream stream);

/* After the real launch, whatever it returned: the launch is no longer in flight. */
void gs_compute_after_launch(void);
