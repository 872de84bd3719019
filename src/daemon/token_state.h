/* SPDX-License-Identifier: Apache-2.0 */
/* The token mechanism's state (token.h), apart from its functions: struct token lives in each
 * struct gpu (gpu.h) and struct token_conn in each struct conn (conn.h), which the layers below
 * token.c define; token.c alone writes them. */
#pragma once
#include <stdint.h>

/* Device intervals charged last on a GPU (token.c clip_charge). */
#define TOKEN_CHARGED_MAX 8

/* The mechanism's state of one GPU's token; written by token.c only. */
struct token {
  /* The current token's: all zero while the token is free; token_end alone resets it. */
  struct token_burst {
    /* The token's span of device time: from the first participant's start to the last one's
     * end. Processes of a slice queue behind each other on the device, so their bursts overlap;
     * summing them would charge the overlap twice (a slice of two processes would get less than
     * its limit). */
    uint64_t span_start, span_end, span_launches;
    uint32_t pending; /* participants released early (the handoff) whose charge has not come */
  } burst;
  /* Across tokens. The burst of a token released early (the handoff) is measured after the next
   * holder has queued work behind its tail: the device intervals charged last, so that no
   * stretch of device time is charged twice (clip_charge). */
  struct {
    uint64_t start, end;
  } charged[TOKEN_CHARGED_MAX];
  uint32_t charged_next;
  uint64_t busy_until; /* the device runs the last holder's tail until then (its handoff) */
  uint64_t timer;      /* release deadline or limit wakeup, 0: none */
  uint64_t timer_when;
};

/* A connection's part in the tokens of the GPUs (bits by physical GPU index); written by
 * token.c only. */
struct token_conn {
  uint32_t waiting; /* GPUs this process asked a token for */
  uint32_t holding; /* GPUs whose current token it takes part in (the invariant above) */
};
