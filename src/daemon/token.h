/* SPDX-License-Identifier: Apache-2.0 */
/* The token flow of every GPU: grants, joins, releases, the handoff, the release deadline and
 * revokes, on top of the pure scheduler (sched.h).
 *
 * It owns the mechanism's state of a token, and nothing else writes it: struct token (one per
 * GPU, in struct gpu) and struct token_conn (one per connection, in struct conn). The policy's
 * view stays in struct sched: who holds the token (sched_holder), its generation, when it was
 * granted and until when it is valid are read there and kept nowhere else, so the two cannot
 * disagree.
 *
 * Who takes part in a token is kept on the connections (token_conn.holding), not as a list or a
 * count in struct token: a token's participants are always connections of its holder slice, and
 * the slice's own list of connections (slice.conns) already finds them, so a bit per GPU is all
 * a connection needs, a count would be a second copy of the bits, and a list in the token would
 * be a second list of the same connections to keep in step with their close. The one invariant:
 * a connection's holding bit for GPU g is set exactly while it takes part in g's current token
 * (so it is of the holder slice, and the generation it took part in is the current one). Every
 * path that ends a token (the last participant's release or close, a revoke at the release
 * deadline, a preemption, a grant nobody could take, the holder slice removed) goes through one
 * reset, token.c's token_end, which clears the holder's connections' bits and the burst.
 *
 * It does not parse messages (requests.c), change the registry, nor decide who is next
 * (sched.c). */
#pragma once
#include <stdint.h>

struct conn;
struct daemon;
struct gpu;
struct gs_msg;

/* Device intervals charged last on a GPU (token.c clip_charge). */
#define TOKEN_CHARGED_MAX 8

/* The mechanism's state of one GPU's token; written by token.c only. */
struct token {
  /* The current token's: all zero while the token is free; token_end alone resets it. */
  struct token_burst {
    /* The token's span of device time: from the first participant's start to the last one's
     * end. Processes of a slice queue behind each other on the device, so their bursts overlap;
     * summing them would charge the overlap twice (measured: a hard-30 slice of two processes
     * got 18%). */
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

/* Hands g's token to the next slice the scheduler picks, if it is free; re-arms g's timer. */
void token_dispatch(struct daemon *d, struct gpu *g);
/* TOKEN_REQUEST and TOKEN_RELEASE of a hook connection of a slice. */
void token_request(struct daemon *d, struct conn *c, const struct gs_msg *m);
void token_release(struct daemon *d, struct conn *c, const struct gs_msg *m);
/* c is closing (already out of its slice's list): it leaves the tokens it took part in and
 * stops waiting. */
void token_conn_gone(struct daemon *d, struct conn *c);
/* Slice id is being removed (before its connections leave its list): the token it holds ends,
 * it leaves every GPU's scheduler, the token goes to the next. */
void token_forget_slice(struct daemon *d, uint32_t id);
/* Housekeeping: a GPU whose token is free while a slice has waited past its time gets its
 * dispatch (logged as a missed wakeup). */
void token_watchdog(struct daemon *d);
