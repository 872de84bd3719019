/* The token flow of every GPU: who holds it (struct gpu), grants, releases, the release deadline
 * and revokes, on top of the pure scheduler (sched.h). It owns the per-connection waiting/holding
 * bits; it does not parse messages nor change the registry. */
#pragma once
#include "daemon.h"

/* Hands g's token to the next slice the scheduler picks, if it is free; re-arms g's timer. */
void token_dispatch(struct daemon *d, struct gpu *g);
/* TOKEN_REQUEST and TOKEN_RELEASE of a hook connection of a slice. */
void token_request(struct daemon *d, struct conn *c, const struct gs_msg *m);
void token_release(struct daemon *d, struct conn *c, const struct gs_msg *m);
/* c is closing: it leaves the bursts it took part in and stops waiting. */
void token_conn_gone(struct daemon *d, struct conn *c);
/* Slice id is being removed: off every GPU's scheduler, its token (if held) given to the next. */
void token_forget_slice(struct daemon *d, uint32_t id);
/* Housekeeping: a GPU whose token is free while a slice has waited past its time gets its
 * dispatch (logged as a missed wakeup). */
void token_watchdog(struct daemon *d);
