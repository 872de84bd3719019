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

#include "token_state.h"

struct conn;
struct daemon;
struct gpu;
struct gs_msg;

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
