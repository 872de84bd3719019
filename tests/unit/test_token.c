/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the token mechanism (daemon/token.c) on one GPU, its connections' I/O stubbed
 * out: every path that ends a token (the last release, the last participant's close, a grant
 * nobody could take, the revoke at the release deadline, a preemption, the holder slice removed,
 * the handoff) leaves no connection taking part in it and the token's burst zeroed, and while a
 * token is held exactly the holder's participants have their bit (token.h's invariant). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "conn.h"
#include "daemon.h"
#include "test.h"
#include "token.h"

#define MS 1000000ull

/* A connection with what the token module sent it. */
struct tconn {
  struct conn c; /* first: conn_send's c is a struct tconn */
  unsigned grants, revokes, errors;
  uint32_t gen; /* of its last grant */
};

static struct daemon d;
static bool send_fails; /* conn_send fails as for a client that does not read */

/* The stubs of what token.c calls beyond the scheduler, the registry and the loop. */
int conn_send(struct conn *c, uint32_t type, uint32_t seq, const void *body, size_t len) {
  struct tconn *tc = (struct tconn *)c;

  (void)seq;
  (void)len;
  if (send_fails)
    return -ENOBUFS;
  if (type == GS_MSG_TOKEN_GRANT) {
    const struct gs_msg_token_grant *gr = body;
    tc->grants++;
    tc->gen = gr->generation;
  } else if (type == GS_MSG_TOKEN_REVOKE)
    tc->revokes++;
  else if (type == GS_MSG_ERROR)
    tc->errors++;
  return 0;
}

void conn_send_error(struct conn *c, uint32_t seq, int code, const char *text) {
  (void)code;
  (void)text;
  conn_send(c, GS_MSG_ERROR, seq, NULL, 0);
}

/* No socket: nothing waits unread. */
bool conn_serve(struct conn *c) {
  (void)c;
  return true;
}

static struct gpu *gpu0(void) {
  return &d.gpus[0];
}

static void setup(void) {
  /* Quanta of 200 ms: the test runs on the real clock (loop_now), and a process of the holder
   * slice joins its token only while it is valid, so a busy host must not end one between two
   * lines of a test. The revoke comes 200 ms after expiry, a preemption 40 ms after the grant. */
  struct sched_cfg cfg = {.window_ns = SCHED_DEFAULT_WINDOW_MS * MS,
                          .quantum_min_ns = 200 * MS,
                          .quantum_max_ns = 200 * MS,
                          .quantum_init_ns = 200 * MS,
                          .quantum_kernels = SCHED_DEFAULT_QUANTUM_KERNELS};

  memset(&d, 0, sizeof(d));
  if (loop_new(&d.loop) < 0) {
    fprintf(stderr, "cannot make a loop\n");
    exit(1);
  }
  d.cfg.release_timeout_ms = 1000;
  d.reg.max_slices = REGISTRY_MAX;
  d.ngpus = 1;
  gpu0()->d = &d;
  gpu0()->index = 0;
  sched_init(&gpu0()->s, &cfg, loop_now());
}

static void teardown(void) {
  for (uint32_t i = 0; i < d.reg.n; i++)
    free(d.reg.slices[i]);
  sched_fini(&gpu0()->s);
  loop_free(d.loop);
}

static struct slice *add_slice(uint32_t id, int32_t priority) {
  struct slice *s = calloc(1, sizeof(*s));
  struct sched_params p = {.request_pct = 0, .limit_pct = 100, .priority = priority, .weight = 1};

  if (!s)
    exit(1);
  s->id = id;
  s->spec.compute_limit = 100;
  s->spec.priority = priority;
  s->spec.weight = 1;
  d.reg.slices[d.reg.n++] = s;
  CHECK_EQ_INT(sched_add(&gpu0()->s, id, &p, loop_now()), 0);
  return s;
}

/* A hook connection of s, in s's list as conn.c's HELLO puts it there. */
static struct tconn *add_conn(struct slice *s) {
  struct tconn *tc = calloc(1, sizeof(*tc));

  if (!tc)
    exit(1);
  tc->c.set = &d.conns;
  tc->c.hello = true;
  tc->c.role = GS_ROLE_HOOK;
  tc->c.slice_id = s->id;
  tc->c.slice_next = s->conns;
  if (s->conns)
    s->conns->slice_pprev = &tc->c.slice_next;
  s->conns = &tc->c;
  tc->c.slice_pprev = &s->conns;
  return tc;
}

/* conn_close's order: out of its slice's list, then token_conn_gone. */
static void close_conn(struct tconn *tc) {
  *tc->c.slice_pprev = tc->c.slice_next;
  if (tc->c.slice_next)
    tc->c.slice_next->slice_pprev = tc->c.slice_pprev;
  token_conn_gone(&d, &tc->c);
  free(tc);
}

/* requests_remove_slice's order: token_forget_slice, the connections out of the list, the
 * registry. */
static void remove_slice(uint32_t id) {
  token_forget_slice(&d, id);
  for (uint32_t i = 0; i < d.reg.n; i++) {
    struct slice *s = d.reg.slices[i];
    if (s->id != id)
      continue;
    while (s->conns) {
      struct conn *c = s->conns;
      s->conns = c->slice_next;
      c->slice_next = NULL;
      c->slice_pprev = NULL;
    }
    free(s);
    d.reg.slices[i] = d.reg.slices[--d.reg.n];
    return;
  }
}

static void request(struct tconn *tc) {
  struct gs_msg m = {.hdr.type = GS_MSG_TOKEN_REQUEST};

  token_request(&d, &tc->c, &m);
}

static void release(struct tconn *tc, uint32_t generation, uint32_t flags, uint64_t used_ns,
                    uint32_t more) {
  uint64_t now = loop_now();
  struct gs_msg m = {
      .hdr.type = GS_MSG_TOKEN_RELEASE,
      .u.token_release = {.generation = generation,
                          .used_ns = used_ns,
                          .launches = used_ns ? 1 : 0,
                          .more = more,
                          .flags = flags,
                          .start_ns = used_ns ? now - used_ns : 0,
                          .tail_end_ns = flags & GS_RELEASE_PENDING ? now + MS / 2 : 0}};

  token_release(&d, &tc->c, &m);
}

/* token.h's invariant on GPU 0, checked where it must hold (between two events). */
static bool token_ok(const char *where) {
  struct gpu *g = gpu0();
  uint32_t holder = sched_holder(&g->s);
  const struct token_burst zero = {0};
  unsigned parts = 0;
  bool ok = true;

  for (uint32_t i = 0; i < d.reg.n; i++)
    for (struct conn *c = d.reg.slices[i]->conns; c; c = c->slice_next)
      if (c->tok.holding & 1u) {
        parts++;
        if (c->slice_id != holder) {
          fprintf(stderr, "%s: a connection of slice %u takes part in slice %u's token\n", where,
                  c->slice_id, holder);
          ok = false;
        }
      }
  if (holder && !parts) {
    fprintf(stderr, "%s: slice %u holds the token with no participant\n", where, holder);
    ok = false;
  }
  if (!holder && memcmp(&g->tok.burst, &zero, sizeof(zero)) != 0) {
    fprintf(stderr, "%s: the token is free and its burst is not reset\n", where);
    ok = false;
  }
  return ok;
}

/* Runs the loop (the GPU's timer: release deadline, preemption) until *flag is nonzero or
 * max_ms have passed. */
static const unsigned *poll_flag;
static uint64_t poll_until;

static void poll_cb(struct loop *l, uint64_t id, void *data) {
  uint64_t t;

  (void)id;
  (void)data;
  if (*poll_flag || loop_now() >= poll_until) {
    loop_stop(l);
    return;
  }
  loop_add_timer(l, loop_now() + MS / 2, poll_cb, NULL, &t);
}

static void run_until(const unsigned *flag, uint64_t max_ms) {
  uint64_t t;

  poll_flag = flag;
  poll_until = loop_now() + max_ms * MS;
  loop_add_timer(d.loop, loop_now(), poll_cb, NULL, &t);
  loop_run(d.loop);
}

/* Two processes of a slice share its token; it ends with the last one's release, charged. */
static void test_last_release(void) {
  setup();
  struct slice *a = add_slice(1, GS_PRIORITY_NORMAL);
  struct tconn *a1 = add_conn(a), *a2 = add_conn(a);

  request(a1);
  CHECK_EQ_INT(a1->grants, 1);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 1);
  request(a2); /* joins */
  CHECK_EQ_INT(a2->grants, 1);
  CHECK_EQ_INT(a2->gen, a1->gen);
  CHECK(token_ok("joined"));
  release(a1, a1->gen, 0, 20000, 0);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 1); /* a2 still takes part */
  CHECK(a2->c.tok.holding & 1u);
  CHECK(!(a1->c.tok.holding & 1u));
  CHECK(token_ok("one released"));
  release(a2, a2->gen, 0, 20000, 0);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 0);
  CHECK(token_ok("both released"));
  CHECK(sched_find(&gpu0()->s, 1)->used_total_ns > 0);
  /* A stale release (its token is over) changes nothing. */
  release(a1, a1->gen, 0, 1000, 0);
  CHECK(token_ok("stale release"));
  close_conn(a1);
  close_conn(a2);
  teardown();
}

/* The last participant's close ends the token; the waiting slice gets it. */
static void test_close(void) {
  setup();
  struct slice *a = add_slice(1, GS_PRIORITY_NORMAL), *b = add_slice(2, GS_PRIORITY_NORMAL);
  struct tconn *a1 = add_conn(a), *a2 = add_conn(a), *b1 = add_conn(b);

  request(a1);
  request(a2);
  request(b1);
  CHECK_EQ_INT(b1->grants, 0);
  close_conn(a1);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 1);
  CHECK(token_ok("one closed"));
  close_conn(a2);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 2);
  CHECK_EQ_INT(b1->grants, 1);
  CHECK(token_ok("both closed"));
  close_conn(b1);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 0);
  CHECK(token_ok("holder closed"));
  teardown();
}

/* A grant no connection could take (it does not read) ends the token at once. */
static void test_grant_untaken(void) {
  setup();
  struct slice *a = add_slice(1, GS_PRIORITY_NORMAL);
  struct tconn *a1 = add_conn(a);

  send_fails = true;
  request(a1);
  send_fails = false;
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 0);
  CHECK(!(a1->c.tok.holding & 1u) && !(a1->c.tok.waiting & 1u));
  CHECK(token_ok("grant untaken"));
  request(a1); /* it can ask again */
  CHECK_EQ_INT(a1->grants, 1);
  CHECK(token_ok("asked again"));
  close_conn(a1);
  teardown();
}

/* A holder that keeps its token past the release deadline is revoked, every participant told;
 * its late release is charged without touching the next holder's token. */
static void test_revoke(void) {
  setup();
  struct slice *a = add_slice(1, GS_PRIORITY_NORMAL), *b = add_slice(2, GS_PRIORITY_NORMAL);
  struct tconn *a1 = add_conn(a), *a2 = add_conn(a), *b1 = add_conn(b);

  request(a1);
  request(a2);
  request(b1);
  run_until(&b1->grants, 5000);
  CHECK_EQ_INT(a1->revokes, 1);
  CHECK_EQ_INT(a2->revokes, 1);
  CHECK_EQ_INT(b1->grants, 1);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 2);
  CHECK(token_ok("revoked"));
  uint64_t used = sched_find(&gpu0()->s, 1)->used_total_ns;
  release(a1, a1->gen, 0, 30000, 0);
  CHECK(sched_find(&gpu0()->s, 1)->used_total_ns > used);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 2);
  CHECK(token_ok("late release"));
  close_conn(b1);
  close_conn(a1);
  close_conn(a2);
  teardown();
}

/* A slice of a higher class takes the token from a lower one (after sched_preempt_hold). Here
 * the preempted holder's grant had not been opened by a launching thread yet (the hook drops it,
 * compute_link.c): its release of that generation says nothing ran and asks again. The time held,
 * charged at the revoke, is taken back, and the slice waits for the GPU again: it gets the next
 * token once the high slice is done. */
static void test_preempt_unopened(void) {
  setup();
  struct slice *a = add_slice(1, GS_PRIORITY_LOW), *h = add_slice(2, GS_PRIORITY_HIGH);
  struct tconn *a1 = add_conn(a), *h1 = add_conn(h);

  request(a1);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 1);
  uint32_t gen = a1->gen;
  request(h1);
  run_until(&h1->grants, 5000);
  CHECK_EQ_INT(a1->revokes, 1);
  CHECK_EQ_INT(h1->grants, 1);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 2);
  CHECK(token_ok("preempted"));
  const struct sched_slice *sa = sched_find(&gpu0()->s, 1);
  CHECK_EQ_INT(sa->held_gen, gen); /* charged the time held until a release says what ran */
  CHECK(sa->held_ns > 0);
  CHECK(!sa->waiting);
  release(a1, gen, 0, 0, 1);
  CHECK_EQ_INT(sa->held_gen, 0);
  CHECK_EQ_INT(sa->held_ns, 0);
  CHECK_EQ_INT(sa->used_total_ns, 0);
  CHECK(sa->waiting && (a1->c.tok.waiting & 1u));
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 2);
  CHECK(token_ok("revoked grant handed back"));
  release(h1, h1->gen, 0, 20000, 0);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 1);
  CHECK_EQ_INT(a1->grants, 2);
  CHECK(token_ok("asked again"));
  close_conn(a1);
  close_conn(h1);
  teardown();
}

/* The holder slice removed while a handoff's charge is pending: its token ends as any other, the
 * pending charge with it (it once stayed, and the next holder's token was then charged an
 * estimate of its time held as though it had handed off). */
static void test_forget_holder(void) {
  setup();
  struct slice *a = add_slice(1, GS_PRIORITY_NORMAL), *b = add_slice(2, GS_PRIORITY_NORMAL);
  struct tconn *a1 = add_conn(a), *a2 = add_conn(a), *b1 = add_conn(b);

  request(a1);
  request(a2);
  release(a1, a1->gen, GS_RELEASE_PENDING, 0, 0); /* a1 hands off; a2 still holds */
  CHECK_EQ_INT(gpu0()->tok.burst.pending, 1);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 1);
  request(b1);
  remove_slice(1);
  CHECK(!(a1->c.tok.holding & 1u) && !(a2->c.tok.holding & 1u));
  CHECK(sched_find(&gpu0()->s, 1) == NULL);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 2);
  CHECK_EQ_INT(b1->grants, 1);
  CHECK_EQ_INT(gpu0()->tok.burst.pending, 0);
  CHECK(token_ok("holder removed"));
  release(b1, b1->gen, 0, 20000, 0);
  CHECK_EQ_INT(sched_find(&gpu0()->s, 2)->est_gen, 0); /* no handoff of b's was estimated */
  CHECK(token_ok("next released"));
  free(a1); /* out of every list since the slice went */
  free(a2);
  close_conn(b1);
  teardown();
}

/* The handoff: a PENDING release ends the token (estimated), the next grant says the tail's end;
 * the charge that follows is the old token's, and the new token's burst starts clean. */
static void test_handoff(void) {
  setup();
  struct slice *a = add_slice(1, GS_PRIORITY_NORMAL), *b = add_slice(2, GS_PRIORITY_NORMAL);
  struct tconn *a1 = add_conn(a), *b1 = add_conn(b);

  request(a1);
  request(b1);
  uint32_t gen = a1->gen;
  release(a1, gen, GS_RELEASE_PENDING, 0, 1);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 2);
  CHECK_EQ_INT(b1->grants, 1);
  CHECK(gpu0()->tok.busy_until > 0); /* the grant says it while it lies ahead */
  CHECK_EQ_INT(sched_find(&gpu0()->s, 1)->est_gen, gen);
  CHECK_EQ_INT(gpu0()->tok.burst.pending, 0);
  CHECK(token_ok("handed off"));
  release(a1, gen, GS_RELEASE_CHARGE, 40000, 0);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 2);
  CHECK(!(a1->c.tok.holding & 1u));
  CHECK(token_ok("charged"));
  release(b1, b1->gen, 0, 20000, 0);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 1); /* a1 asked again (more) */
  CHECK(token_ok("next"));
  close_conn(a1);
  close_conn(b1);
  CHECK_EQ_INT(sched_holder(&gpu0()->s), 0);
  CHECK(token_ok("all closed"));
  teardown();
}

int main(void) {
  test_last_release();
  test_close();
  test_grant_untaken();
  test_revoke();
  test_preempt_unopened();
  test_forget_holder();
  test_handoff();
  return test_done();
}
