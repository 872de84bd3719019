/* SPDX-License-Identifier: Apache-2.0 */
/* The token flow of every GPU (token.h): grants, joins, releases, the handoff, the release
 * deadline, revokes, and the one reset of a token (token_end). */
#include "token.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "conn.h"
#include "daemon.h"
#include "log.h"

static void gpu_timer_cb(struct loop *l, uint64_t id, void *data);

/* Idle holding is looked at over a second or more, said when at least IDLE_WARN_NS of it is more
 * than half the time held, once a minute a slice (idle_look). */
#define IDLE_LOOK_NS 1000000000ull
#define IDLE_WARN_NS 50000000ull
#define IDLE_WARN_EVERY_NS (60ull * 1000000000ull)

/* The most a hook's handoff may make the next holder wait for its tail (it says 0.5 ms). */
#define HANDOFF_MAX_NS 2000000ull

/* How long past expiry the holder may take to close its burst: its last kernels finish (a
 * kernel cannot be cut) and its release crosses the socket. One quantum, or two of its
 * kernels (its time per launch as its processes reported it, sched_set_kernel, no longer than its
 * last release paid for, sched_set_paid_kernel) when longer, covers a holder that works; a stopped
 * or hostile one loses the token that much after expiry, not release_timeout_ms (1 s) later, so
 * the others wait about one quantum. release_timeout_ms stays the ceiling. A kernel length is the
 * hook's word: reported with nothing charged (a holder claiming 600 ms kernels), it kept the
 * token 0.9 s past expiry while its neighbour waited. */
static uint64_t release_grace(struct daemon *d, struct gpu *g) {
  struct sched_slice *sl = sched_find(&g->s, sched_holder(&g->s));
  uint64_t grace = g->s.valid_until - g->s.granted_at, cap = d->cfg.release_timeout_ms * 1000000ull;

  uint64_t k = sl ? (sl->kernel_ns < sl->paid_kernel_ns ? sl->kernel_ns : sl->paid_kernel_ns) : 0;
  if (2 * k > grace)
    grace = 2 * k;
  return grace < cap ? grace : cap;
}

/* One timer per GPU: the release deadline while the token is held, else
 * the moment a slice held back by its limit may have it. */
static void rearm(struct daemon *d, struct gpu *g) {
  uint64_t when = UINT64_MAX;

  if (sched_holder(&g->s)) {
    uint64_t pre = sched_preempt_at(&g->s, loop_now());
    when = g->s.valid_until + release_grace(d, g);
    if (pre < when)
      when = pre;
  } else
    when = sched_next_wakeup(&g->s, loop_now());
  if (g->tok.timer && g->tok.timer_when == when)
    return;
  if (g->tok.timer)
    loop_del_timer(d->loop, g->tok.timer);
  g->tok.timer = 0;
  if (when != UINT64_MAX && loop_add_timer(d->loop, when, gpu_timer_cb, g, &g->tok.timer) == 0)
    g->tok.timer_when = when;
}

static void slice_waiting_update(struct daemon *d, struct gpu *g, uint32_t slice_id, uint64_t now) {
  struct slice *s = registry_find(&d->reg, slice_id);
  bool waiting = false;

  for (struct conn *c = s ? s->conns : NULL; c; c = c->slice_next)
    if (c->tok.waiting & (1u << g->index))
      waiting = true;
  sched_set_waiting(&g->s, slice_id, waiting, now);
}

/* Of the device time [start, start + used), what no interval charged before on this GPU covers;
 * the interval joins them. With the handoff, the next holder's work is queued behind the
 * previous holder's tail: its burst's events start before that tail has run, and the tail is
 * the previous holder's (charged when its work completed, usually first). So each stretch of
 * device time is charged once, to whoever reported it first: the charges of a GPU never add up
 * to more than the time it was busy. */
static uint64_t clip_charge(struct gpu *g, uint64_t start, uint64_t used) {
  enum { N = TOKEN_CHARGED_MAX };
  struct token *t = &g->tok;
  uint64_t end = start + used, cs[N], ce[N], covered = 0, reach = 0;
  unsigned n = 0;

  if (!start || !used)
    return used;
  for (unsigned i = 0; i < N; i++) {
    uint64_t s = t->charged[i].start > start ? t->charged[i].start : start;
    uint64_t e = t->charged[i].end < end ? t->charged[i].end : end;
    if (e <= s)
      continue;
    unsigned j = n++;
    for (; j > 0 && cs[j - 1] > s; j--) {
      cs[j] = cs[j - 1];
      ce[j] = ce[j - 1];
    }
    cs[j] = s;
    ce[j] = e;
  }
  for (unsigned i = 0; i < n; i++) { /* the union of the overlaps, sorted by start */
    uint64_t s = cs[i] > reach ? cs[i] : reach;
    if (ce[i] > s)
      covered += ce[i] - s;
    if (ce[i] > reach)
      reach = ce[i];
  }
  t->charged[t->charged_next % N].start = start;
  t->charged[t->charged_next % N].end = end;
  t->charged_next++;
  return used > covered ? used - covered : 0;
}

/* The slice holding g's token, NULL while it is free. */
static struct slice *holder_slice(struct daemon *d, struct gpu *g) {
  uint32_t id = sched_holder(&g->s);

  return id ? registry_find(&d->reg, id) : NULL;
}

/* Whether a connection still takes part in g's token: its participants are connections of the
 * holder slice with their holding bit set (token.h), so the slice's list finds them all. */
static bool has_participants(struct daemon *d, struct gpu *g) {
  struct slice *s = holder_slice(d, g);

  for (struct conn *c = s ? s->conns : NULL; c; c = c->slice_next)
    if (c->tok.holding & (1u << g->index))
      return true;
  return false;
}

/* Says a slice that keeps tokens it does not use, once a minute: over a look of a second or more,
 * more than half the time it held tokens charged as idle. An honest hook hands a token back within
 * a few ms of its last work (beside a build, 3% of the time it held was charged as idle); the
 * idle holder of the fifth attack run, 85%. */
static void idle_look(struct gpu *g, struct slice *s, const struct sched_slice *sl, uint64_t now) {
  if (!s->idle_look_at)
    s->idle_look_at = now;
  if (now - s->idle_look_at < IDLE_LOOK_NS)
    return;
  uint64_t idle = sl->idle_charged_total_ns - s->idle_look_idle_ns,
           held = sl->held_total_ns - s->idle_look_held_ns;
  s->idle_look_at = now;
  s->idle_look_idle_ns = sl->idle_charged_total_ns;
  s->idle_look_held_ns = sl->held_total_ns;
  if (idle < IDLE_WARN_NS || 2 * idle < held ||
      (s->idle_warned_at && now - s->idle_warned_at < IDLE_WARN_EVERY_NS))
    return;
  s->idle_warned_at = now;
  gs_log(GS_LOG_WARNING,
         "gpu %u: slice %u '%s' held the token %.1f ms in the last %.1f s, %.1f ms of it idle "
         "beyond its releases' device time while another slice waited, charged to it: a process "
         "of the slice keeps tokens it does not use (a hook that is not gslice's, or one "
         "changed); gslice_slice_idle_held_seconds_total counts it; said once a minute",
         g->index, s->id, s->spec.name, (double)held / 1e6, (double)IDLE_LOOK_NS / 1e9,
         (double)idle / 1e6);
}

/* The one reset of a token: every path that ends one comes here (token.h). No connection takes
 * part in it any longer, its burst is zeroed whole (a field added to struct token_burst is reset
 * with it), and the scheduler frees it (sched_token_done: the holder's limit pacing, the
 * switching loss, the time held idle). Charging it is the caller's; dispatching the next is too. */
static void token_end(struct daemon *d, struct gpu *g, uint64_t now) {
  struct slice *s = holder_slice(d, g);
  struct sched_slice *sl = s ? sched_find(&g->s, s->id) : NULL;

  for (struct conn *c = s ? s->conns : NULL; c; c = c->slice_next)
    c->tok.holding &= ~(1u << g->index);
  g->tok.burst = (struct token_burst){0};
  sched_token_done(&g->s, now);
  if (sl)
    idle_look(g, s, sl, now);
}

/* The token's burst is over (its last participant released or is gone, or it was taken back):
 * charged, ended, and handed to the next. */
static void token_done(struct daemon *d, struct gpu *g) {
  const struct token_burst *b = &g->tok.burst;
  uint32_t holder = sched_holder(&g->s);
  uint64_t now = loop_now(), charged = 0;

  /* Every burst of the token opened after its grant and was reported after it ran: a span
   * longer than the time since the grant is a hook's wrong clock, charged no more than that. */
  if (holder && b->span_end > b->span_start) {
    uint64_t span = b->span_end - b->span_start, held = now - g->s.granted_at;
    charged = span < held ? span : held;
    sched_charge(&g->s, holder, clip_charge(g, b->span_start, charged), b->span_launches, now);
  }
  struct sched_slice *hs = holder ? sched_find(&g->s, holder) : NULL;
  if (hs && b->pending && hs->held_gen != g->s.generation) {
    /* Released at the handoff: until its charge says what ran, the token is charged the time
     * it was held, so the pick that follows does not see it as free (unless a revoke or a
     * preemption charged that already). */
    uint64_t held = now - g->s.granted_at;
    sched_charge_estimate(&g->s, held > charged ? held - charged : 0, now);
  }
  token_end(d, g, now);
  token_dispatch(d, g);
}

/* Takes the token back from its holder's connections (REVOKE to each), charging the time it
 * held it up to `end` until its late release says what ran. The caller ends the token. */
static void take_back(struct daemon *d, struct gpu *g, uint64_t end, uint64_t now) {
  struct slice *s = holder_slice(d, g);
  struct gs_msg_token_revoke rv = {.generation = g->s.generation};
  uint32_t bit = 1u << g->index;
  uint64_t held = end > g->s.granted_at ? end - g->s.granted_at : 0;
  uint64_t reported = g->tok.burst.span_end - g->tok.burst.span_start;

  sched_charge_held(&g->s, held > reported ? held - reported : 0, now);
  for (struct conn *c = s ? s->conns : NULL; c; c = c->slice_next) {
    if (!(c->tok.holding & bit))
      continue;
    rv.gpu = slice_ordinal(s, g->index);
    conn_send(c, GS_MSG_TOKEN_REVOKE, 0, &rv, sizeof(rv));
  }
}

/* Takes the token from its holder for a slice of a higher class (sched_preempt_at): the holder
 * stops launching, what it queued still runs and its release reports it, late, as after a
 * revoke. Until then it is charged the time it held the token. */
static void preempt(struct daemon *d, struct gpu *g) {
  uint64_t now = loop_now();

  take_back(d, g, now, now);
  token_done(d, g);
}

void token_dispatch(struct daemon *d, struct gpu *g) {
  uint64_t now = loop_now();
  struct sched_grant gr;

  /* A token is held only while a connection takes part in it (token_end otherwise). */
  if (sched_holder(&g->s) && sched_preempt_at(&g->s, now) <= now) {
    preempt(d, g); /* token_done dispatches the token again, free now */
    return;
  }
  while (!sched_holder(&g->s) && sched_pick(&g->s, now, &gr) == 0) {
    struct slice *s = registry_find(&d->reg, gr.slice_id);
    uint32_t bit = 1u << g->index;
    bool taken = false;
    for (struct conn *c = s ? s->conns : NULL; c; c = c->slice_next) {
      if (!(c->tok.waiting & bit))
        continue;
      struct gs_msg_token_grant m = {.gpu = slice_ordinal(s, g->index),
                                     .generation = gr.generation,
                                     .quantum_ns = gr.quantum_ns,
                                     .valid_until_ns = gr.valid_until_ns,
                                     .busy_until_ns =
                                         g->tok.busy_until > now ? g->tok.busy_until : 0};
      c->tok.waiting &= ~bit;
      if (conn_send(c, GS_MSG_TOKEN_GRANT, 0, &m, sizeof(m)) < 0)
        continue;
      c->tok.holding |= bit;
      taken = true;
    }
    if (!taken)
      token_end(d, g, now); /* nobody is left to take it: free again, try the next */
  }
  rearm(d, g);
}

static void gpu_timer_cb(struct loop *l, uint64_t id, void *data) {
  struct gpu *g = data;
  struct daemon *d = g->d;

  (void)l;
  (void)id;
  g->tok.timer = 0;
  uint32_t holder = sched_holder(&g->s);
  if (holder && loop_now() >= g->s.valid_until) {
    uint32_t bit = 1u << g->index;
    uint64_t gen = g->s.generation;
    struct slice *hs = holder_slice(d, g);
    /* The holders' releases may be waiting unread behind a loop that was itself held up: read
     * first, so that a slice is not revoked for the daemon's delay. Only the holder's
     * connections take part in its token. */
    for (struct conn *c = hs ? hs->conns : NULL, *next; c; c = next) {
      next = c->slice_next; /* conn_serve closes at most c */
      if (c->tok.holding & bit)
        conn_serve(c);
    }
    if (!sched_holder(&g->s) || g->s.generation != gen) {
      if (!g->tok.timer)
        token_dispatch(d, g);
      return;
    }
    /* A holder that never closed its burst (stuck kernel, stopped process):
     * take the token back so the others run; its late release is charged. */
    uint64_t now = loop_now(), end = now;
    /* Charged up to its release deadline at most: a timer that fires later is the daemon's own
     * delay (a stalled loop), never the slice's. */
    if (g->tok.timer_when && end > g->tok.timer_when)
      end = g->tok.timer_when;
    if (now - end > 50000000ull)
      gs_log(GS_LOG_WARNING,
             "gpu %u: slice %u kept its token %" PRIu64 " ms past expiry; revoked (the daemon "
             "itself was %" PRIu64 " ms late: not charged to the slice)",
             g->index, holder, (end - g->s.valid_until) / 1000000, (now - end) / 1000000);
    else
      gs_log(GS_LOG_WARNING, "gpu %u: slice %u kept its token %" PRIu64 " ms past expiry; revoked",
             g->index, holder, (end - g->s.valid_until) / 1000000);
    /* It held the GPU from the grant to its deadline: until its late release says what ran,
     * that is what it is charged (a hook that never releases gets nothing for free and cannot
     * win every pick on an empty account, starving its neighbours). Then it is charged what
     * ran, not the time held: on a loaded machine, where a release comes late for the host's
     * doing, the time held would charge a slice many times what its kernels ran. */
    take_back(d, g, end, now);
    token_done(d, g);
    return;
  }
  token_dispatch(d, g);
}

static void leave_token(struct daemon *d, struct conn *c, struct gpu *g) {
  uint32_t bit = 1u << g->index;

  if (!(c->tok.holding & bit))
    return;
  c->tok.holding &= ~bit;
  if (!has_participants(d, g))
    token_done(d, g);
}

static struct gpu *hook_gpu(struct daemon *d, struct conn *c, uint32_t ordinal) {
  struct slice *s = registry_find(&d->reg, c->slice_id);
  uint32_t g;

  if (!s || slice_gpu(s, ordinal, &g) < 0 || g >= d->ngpus)
    return NULL;
  return &d->gpus[g];
}

void token_request(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  struct gpu *g = hook_gpu(d, c, m->u.token_request.gpu);
  uint64_t now = loop_now();

  if (!g) {
    conn_send_error(c, m->hdr.seq, -ENODEV, "no such GPU in this slice");
    return;
  }
  uint32_t bit = 1u << g->index;
  if (sched_holder(&g->s) == c->slice_id && now < g->s.valid_until) {
    /* Processes of one slice share its token: join the burst. */
    struct gs_msg_token_grant gr = {.gpu = m->u.token_request.gpu,
                                    .generation = g->s.generation,
                                    .quantum_ns = g->s.quantum_ns,
                                    .valid_until_ns = g->s.valid_until};
    c->tok.holding |= bit;
    conn_send(c, GS_MSG_TOKEN_GRANT, m->hdr.seq, &gr, sizeof(gr));
    return;
  }
  c->tok.waiting |= bit;
  sched_set_waiting(&g->s, c->slice_id, true, now);
  token_dispatch(d, g);
}

void token_release(struct daemon *d, struct conn *c, const struct gs_msg *m) {
  const struct gs_msg_token_release *rl = &m->u.token_release;
  struct gpu *g = hook_gpu(d, c, rl->gpu);

  if (!g)
    return;
  /* The hook's kernel length is the slice's (the one estimate): before the pick this release may
   * lead to, so that the slice's next quantum is made of it (held to quantum_max: a length it
   * has not paid for buys no more than that). Its release grace is of what it paid for: a
   * handoff's PENDING release charges nothing yet and leaves it as it was. */
  sched_set_kernel(&g->s, c->slice_id, rl->generation, (uint32_t)c->pid, rl->kernel_ns);
  if (!(rl->flags & GS_RELEASE_PENDING))
    sched_set_paid_kernel(&g->s, c->slice_id, rl->kernel_ns, rl->used_ns);
  /* A connection takes part only in the current token (token.h): its generation is g's. */
  bool current = (c->tok.holding & (1u << g->index)) && g->s.generation == rl->generation;
  struct token_burst *b = &g->tok.burst;

  if (current && (rl->flags & GS_RELEASE_PENDING)) {
    /* The handoff: its last work is still running; its charge follows (GS_RELEASE_CHARGE). The
     * next holder queues its first launch for about when that work ends: a hook's word, so no
     * more than HANDOFF_MAX_NS ahead. */
    uint64_t now = loop_now(), until = rl->tail_end_ns;
    b->pending++;
    if (until > now + HANDOFF_MAX_NS)
      until = now + HANDOFF_MAX_NS;
    if (until > g->tok.busy_until)
      g->tok.busy_until = until;
  } else if ((current && !rl->flags && (rl->used_ns || rl->launches)) ||
             ((rl->flags & GS_RELEASE_CHARGE) && b->pending && sched_holder(&g->s) == c->slice_id &&
              g->s.generation == rl->generation)) {
    /* A handoff's charge while another process of the slice still holds the token is part of
     * the token's span, as a release (processes of a slice overlap on the device). */
    if (rl->flags & GS_RELEASE_CHARGE)
      b->pending--;
    /* Charged as the token's span when the last participant is done. A grant handed back
     * unused (start 0, nothing run) has no part in it: counted, it would open the span at 0 and
     * charge the slice the daemon's uptime, wedging it behind its own limit's pacing. */
    uint64_t end = rl->start_ns + rl->used_ns;
    if (!b->span_end || rl->start_ns < b->span_start)
      b->span_start = rl->start_ns;
    if (end > b->span_end)
      b->span_end = end;
    b->span_launches += rl->launches;
  } else if (!current || (rl->flags & GS_RELEASE_CHARGE)) {
    /* Device time is charged whatever token it ran under: a handoff's charge or a late report
     * after a revoke (each replaces the time held charged then), or one from before a daemon
     * restart. */
    sched_charge_late(&g->s, c->slice_id, rl->generation, clip_charge(g, rl->start_ns, rl->used_ns),
                      rl->launches, loop_now());
  }
  /* Waiting before the token is free: the pick that follows weighs this
   * slice too, instead of handing the token to whoever else asked. */
  if (rl->more) {
    c->tok.waiting |= 1u << g->index;
    sched_set_waiting(&g->s, c->slice_id, true, loop_now());
  }
  if (current && !(rl->flags & GS_RELEASE_CHARGE))
    leave_token(d, c, g);
  else if (rl->more)
    token_dispatch(d, g);
}

void token_conn_gone(struct daemon *d, struct conn *c) {
  /* A killed token holder: its burst is over as far as anyone can tell. */
  for (uint32_t i = 0; i < d->ngpus; i++) {
    struct gpu *g = &d->gpus[i];
    bool was_waiting = c->tok.waiting & (1u << i);
    c->tok.waiting &= ~(1u << i);
    leave_token(d, c, g);
    if (was_waiting && c->slice_id)
      slice_waiting_update(d, g, c->slice_id, loop_now());
  }
}

void token_forget_slice(struct daemon *d, uint32_t id) {
  struct slice *s = registry_find(&d->reg, id);

  for (uint32_t i = 0; i < d->ngpus; i++) {
    struct gpu *g = &d->gpus[i];
    /* Its token ends as any other: its connections, still in its list, are the participants
     * token_end clears (a connection of the slice takes part in no other slice's token). */
    if (sched_holder(&g->s) == id)
      token_end(d, g, loop_now());
    for (struct conn *c = s ? s->conns : NULL; c; c = c->slice_next)
      c->tok.waiting &= ~(1u << i);
    sched_remove(&g->s, id);
    token_dispatch(d, g);
  }
}

/* A slice that waits past its pacing time with the token free is a missed wakeup: every such
 * path is a bug (it would hang a process for good: sched_next_wakeup), and this bounds what the
 * next one costs to a housekeeping period, said in the log so that it gets fixed. */
#define MISSED_WAKEUP_NS 100000000ull

void token_watchdog(struct daemon *d) {
  uint64_t now = loop_now();

  for (uint32_t i = 0; i < d->ngpus; i++) {
    struct gpu *g = &d->gpus[i];
    if (sched_holder(&g->s))
      continue;
    for (uint32_t k = 0; k < g->s.nslices; k++) {
      const struct sched_slice *sl = g->s.slices[k];
      uint64_t since = sl->eligible_at > sl->waiting_since ? sl->eligible_at : sl->waiting_since;
      if (sl->waiting && now > since + MISSED_WAKEUP_NS) {
        gs_log(GS_LOG_WARNING,
               "gpu %u: slice %u waited %" PRIu64 " ms with the token free and no grant (a missed "
               "wakeup: please report); granting now",
               g->index, sl->id, (now - since) / 1000000);
        token_dispatch(d, g);
        break;
      }
    }
  }
}
