/* The token policy of one GPU (sched.h): who launches next, for how long, and what it cost. */
#include "sched.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

void sched_cfg_default(struct sched_cfg *ret) {
  /* Measured in docs/compute.md: a token switch costs ~0.1 ms of idle device
   * on the sim under load, so 5 ms keeps switching under 2%; 50 ms bounds
   * what a high-priority burst waits behind a long-kernel slice. */
  *ret = (struct sched_cfg){.window_ns = 1000 * MS,
                            .quantum_min_ns = 5 * MS,
                            .quantum_max_ns = 50 * MS,
                            .quantum_init_ns = 10 * MS,
                            .quantum_kernels = 8};
}

int sched_cfg_check(const struct sched_cfg *cfg) {
  if (cfg->window_ns < 100 * MS || cfg->window_ns > 60000 * MS)
    return -EINVAL;
  if (cfg->quantum_min_ns < 100000 || cfg->quantum_min_ns > cfg->quantum_max_ns ||
      cfg->quantum_max_ns > cfg->window_ns / 4)
    return -EINVAL;
  if (cfg->quantum_init_ns < cfg->quantum_min_ns || cfg->quantum_init_ns > cfg->quantum_max_ns)
    return -EINVAL;
  if (cfg->quantum_kernels < 1 || cfg->quantum_kernels > 1000)
    return -EINVAL;
  return 0;
}

void sched_ring_init(struct sched_ring *r, uint64_t span_ns, uint32_t nbuckets, uint64_t now) {
  if (nbuckets < 1 || nbuckets > SCHED_RING_BUCKETS)
    nbuckets = SCHED_RING_BUCKETS;
  memset(r, 0, sizeof(*r));
  r->nbuckets = nbuckets;
  r->bucket_ns = span_ns / nbuckets ? span_ns / nbuckets : 1;
  r->head_start = now;
}

static void ring_advance(struct sched_ring *r, uint64_t now) {
  uint64_t steps;

  if (now < r->head_start + r->bucket_ns)
    return;
  steps = (now - r->head_start) / r->bucket_ns;
  if (steps >= r->nbuckets) {
    memset(r->v, 0, sizeof(r->v));
    r->head_start += steps * r->bucket_ns;
    return;
  }
  for (uint64_t i = 0; i < steps; i++) {
    r->head = (r->head + 1) % r->nbuckets;
    r->v[r->head] = 0;
  }
  r->head_start += steps * r->bucket_ns;
}

void sched_ring_add(struct sched_ring *r, uint64_t v, uint64_t now) {
  ring_advance(r, now);
  r->v[r->head] += v;
}

uint64_t sched_ring_sum(struct sched_ring *r, uint64_t now) {
  uint64_t sum = 0;

  ring_advance(r, now);
  for (uint32_t i = 0; i < r->nbuckets; i++)
    sum += r->v[i];
  return sum;
}

void sched_init(struct sched *s, const struct sched_cfg *cfg, uint64_t now) {
  memset(s, 0, sizeof(*s));
  s->cfg = *cfg;
  s->holder = -1;
  sched_ring_init(&s->busy, SCHED_STATS_WINDOW_NS, 100, now);
}

void sched_fini(struct sched *s) {
  for (uint32_t i = 0; i < s->nslices; i++)
    free(s->slices[i]);
  s->nslices = 0;
  s->holder = -1;
}

static int find_index(const struct sched *s, uint32_t id) {
  for (uint32_t i = 0; i < s->nslices; i++)
    if (s->slices[i]->id == id)
      return (int)i;
  return -1;
}

struct sched_slice *sched_find(struct sched *s, uint32_t id) {
  int i = find_index(s, id);
  return i < 0 ? NULL : s->slices[i];
}

int sched_add(struct sched *s, uint32_t id, const struct sched_params *p, uint64_t now) {
  struct sched_slice *sl;

  if (find_index(s, id) >= 0)
    return -EEXIST;
  if (s->nslices >= SCHED_MAX_SLICES)
    return -ENOSPC;
  sl = calloc(1, sizeof(*sl));
  if (!sl)
    return -ENOMEM;
  sl->id = id;
  sl->p = *p;
  sl->usage_at = now;
  sched_ring_init(&sl->stats, SCHED_STATS_WINDOW_NS, 100, now);
  s->slices[s->nslices++] = sl;
  return 0;
}

void sched_remove(struct sched *s, uint32_t id) {
  int i = find_index(s, id);

  if (i < 0)
    return;
  if (s->holder == i)
    s->holder = -1;
  else if (s->holder > i)
    s->holder--;
  free(s->slices[i]);
  memmove(&s->slices[i], &s->slices[i + 1], (s->nslices - (uint32_t)i - 1) * sizeof(s->slices[0]));
  s->nslices--;
}

int sched_set_params(struct sched *s, uint32_t id, const struct sched_params *p) {
  struct sched_slice *sl = sched_find(s, id);

  if (!sl)
    return -ENOENT;
  sl->p = *p;
  return 0;
}

double sched_usage(const struct sched *s, struct sched_slice *sl, uint64_t now) {
  if (now > sl->usage_at) {
    sl->usage_ns *= exp(-(double)(now - sl->usage_at) / (double)s->cfg.window_ns);
    sl->usage_at = now;
  }
  return sl->usage_ns;
}

static bool active(const struct sched *s, const struct sched_slice *sl) {
  return sl->waiting || (s->holder >= 0 && s->slices[s->holder] == sl);
}

static double excess_key(const struct sched *s, struct sched_slice *sl, uint64_t now) {
  double req = (double)s->cfg.window_ns * sl->p.request_pct / 100.0;
  return (sched_usage(s, sl, now) - req) / (double)(sl->p.weight ? sl->p.weight : 1);
}

/* A slice coming back from idle banks no credit beyond a quantum: its
 * deficit is capped, and above its request it starts level with the others
 * (as start-time fair queueing does), so its return never starves anyone. */
static void clamp_on_return(struct sched *s, struct sched_slice *sl, uint64_t now) {
  double cap = (double)s->cfg.quantum_max_ns;
  double req = (double)s->cfg.window_ns * sl->p.request_pct / 100.0;
  double use = sched_usage(s, sl, now), lowest = INFINITY;

  if (req - use > cap)
    sl->usage_ns = use = req - cap;
  if (use < req)
    return;
  for (uint32_t i = 0; i < s->nslices; i++) {
    struct sched_slice *o = s->slices[i];
    if (o != sl && active(s, o)) {
      double k = excess_key(s, o, now);
      if (k < lowest)
        lowest = k;
    }
  }
  double w = (double)(sl->p.weight ? sl->p.weight : 1);
  if (lowest != INFINITY && (use - req) / w < lowest - cap / w)
    sl->usage_ns = req + lowest * w - cap;
}

void sched_set_waiting(struct sched *s, uint32_t id, bool waiting, uint64_t now) {
  struct sched_slice *sl = sched_find(s, id);

  if (!sl || sl->waiting == waiting)
    return;
  if (waiting)
    sl->backlogged = active(s, sl);
  if (waiting && !active(s, sl))
    clamp_on_return(s, sl, now);
  sl->waiting = waiting;
  if (waiting) {
    sl->waiting_since = now;
    sl->last_wanted = now;
  }
}

/* Whether a slice of a higher class than sl asked for the GPU within the
 * last window: then sl's bursts are kept to the shortest quantum, so that a
 * high-priority burst waits behind at most that much (kernels cannot be
 * preempted; a short quantum is the only way to bound the wait). */
static bool outranked(const struct sched *s, const struct sched_slice *sl, uint64_t now) {
  for (uint32_t i = 0; i < s->nslices; i++) {
    const struct sched_slice *o = s->slices[i];
    if (o->p.priority > sl->p.priority && o->last_wanted &&
        (o->waiting || now - o->last_wanted < s->cfg.window_ns))
      return true;
  }
  return false;
}

uint64_t sched_quantum(const struct sched *s, const struct sched_slice *sl) {
  uint64_t q;

  if (sl->kernel_ns == 0)
    return s->cfg.quantum_init_ns;
  q = sl->kernel_ns * s->cfg.quantum_kernels;
  if (q < s->cfg.quantum_min_ns)
    q = s->cfg.quantum_min_ns;
  if (q > s->cfg.quantum_max_ns)
    q = s->cfg.quantum_max_ns;
  return q;
}

/* The policy's order, as a key: a slice below its request first (a request
 * is guaranteed, and admission keeps requests within 100%, so honouring them
 * first cannot starve anyone); then the higher priority class; then, below
 * request, the largest unmet request (request·window − used); above it, the
 * smallest weighted use of what is left ((used − request·window) / weight).
 * Ties go to the longest waiter. */
struct key {
  int unmet;
  int priority;
  double order; /* lower goes first */
  uint64_t since;
  uint32_t id;
};

static struct key make_key(struct sched *s, struct sched_slice *sl, uint64_t now) {
  /* Compare slices at the middle of the burst they are about to run: a slice
   * with long bursts picked when its deficit just tops the others' would
   * otherwise sit half a burst ahead of them on average (3 points at 60 ms
   * bursts in a 1 s window). */
  double used = sched_usage(s, sl, now) + (double)sched_quantum(s, sl) / 2;
  double req = (double)s->cfg.window_ns * sl->p.request_pct / 100.0;
  struct key k = {.priority = sl->p.priority, .since = sl->waiting_since, .id = sl->id};

  if (req > used) {
    k.unmet = 1;
    k.order = used - req;
  } else {
    k.order = (used - req) / (double)(sl->p.weight ? sl->p.weight : 1);
  }
  return k;
}

static bool key_before(const struct key *a, const struct key *b) {
  if (a->unmet != b->unmet)
    return a->unmet > b->unmet;
  if (a->priority != b->priority)
    return a->priority > b->priority;
  if (a->order != b->order)
    return a->order < b->order;
  if (a->since != b->since)
    return a->since < b->since;
  return a->id < b->id;
}

static void record_wait(struct sched_slice *sl, uint64_t wait_ns) {
  static const double bounds[GS_WAIT_BUCKETS] = GS_WAIT_BUCKET_BOUNDS;
  double w = (double)wait_ns / 1e9;
  uint32_t b = 0;

  while (b < GS_WAIT_BUCKETS && w > bounds[b])
    b++;
  sl->wait_bucket[b]++;
  sl->wait_total_ns += wait_ns;
  sl->wait_count++;
}

int sched_pick(struct sched *s, uint64_t now, struct sched_grant *ret) {
  struct key best_key = {0};
  int best = -1;
  struct sched_slice *sl;

  if (s->holder >= 0)
    return -EBUSY;
  for (uint32_t i = 0; i < s->nslices; i++) {
    struct key k;
    sl = s->slices[i];
    if (!sl->waiting || now < sl->eligible_at)
      continue;
    k = make_key(s, sl, now);
    if (best < 0 || key_before(&k, &best_key)) {
      best = (int)i;
      best_key = k;
    }
  }
  if (best < 0)
    return -EAGAIN;
  sl = s->slices[best];
  s->holder = best;
  s->generation++;
  if (s->generation == 0)
    s->generation = 1;
  s->granted_at = now;
  /* Ready since `from`, granted only now: the time it waited behind another
   * holder, which its limit pacing makes up (sched_token_done). A slice that
   * kept asking was ready from its pacing time on, even where that lies
   * before this request; one back from idle only from its request. */
  uint64_t from = sl->eligible_at;
  if (!sl->backlogged && sl->waiting_since > from)
    from = sl->waiting_since;
  sl->late_ns = now > from ? now - from : 0;
  uint64_t q = sched_quantum(s, sl);
  if (q > s->cfg.quantum_min_ns && outranked(s, sl, now))
    q = s->cfg.quantum_min_ns;
  s->valid_until = now + q;
  sl->burst_used_ns = 0;
  sl->tokens_total++;
  record_wait(sl, now >= sl->waiting_since ? now - sl->waiting_since : 0);
  sl->waiting = false;
  *ret = (struct sched_grant){.slice_id = sl->id,
                              .generation = s->generation,
                              .quantum_ns = s->valid_until - now,
                              .valid_until_ns = s->valid_until};
  return 0;
}

void sched_charge(struct sched *s, uint32_t id, uint64_t used_ns, uint64_t launches, uint64_t now) {
  int i = find_index(s, id);
  struct sched_slice *sl;

  if (i < 0)
    return;
  sl = s->slices[i];
  sl->used_total_ns += used_ns;
  sl->launches_total += launches;
  sched_usage(s, sl, now);
  sl->usage_ns += (double)used_ns;
  sched_ring_add(&sl->stats, used_ns, now);
  sched_ring_add(&s->busy, used_ns, now);
  if (launches > 0 && used_ns > 0) {
    uint64_t k = used_ns / launches;
    sl->kernel_ns = sl->kernel_ns ? (3 * sl->kernel_ns + k) / 4 : k;
  }
  if (s->holder == i)
    sl->burst_used_ns += used_ns;
}

void sched_token_done(struct sched *s, uint64_t now) {
  struct sched_slice *sl;

  if (s->holder < 0)
    return;
  sl = s->slices[s->holder];
  /* The limit paces: a burst of u at limit L may start its successor only
   * u/L after it started, overrun included, so over any run of bursts the
   * slice gets at most L of the device. The pacing clock starts when the
   * slice could have had the token, not when it got it: a slice that became
   * eligible while another held the token waited out that quantum, and
   * pacing from the late grant lost the wait for good (a hard 30 next to a
   * greedy slice got 24%, 14% behind 48 ms quanta). Making up at most one
   * longest quantum of lateness keeps the catch-up to L of that per window,
   * and an idle slice banks nothing (lateness counts from its request). */
  if (sl->p.limit_pct < 100 && sl->burst_used_ns > 0) {
    uint64_t late = sl->late_ns < s->cfg.quantum_max_ns ? sl->late_ns : s->cfg.quantum_max_ns;
    sl->eligible_at = s->granted_at - late + sl->burst_used_ns * 100 / sl->p.limit_pct;
  }
  s->holder = -1;
}

uint64_t sched_next_wakeup(const struct sched *s, uint64_t now) {
  uint64_t t = UINT64_MAX;

  for (uint32_t i = 0; i < s->nslices; i++) {
    const struct sched_slice *sl = s->slices[i];
    if (sl->waiting && sl->eligible_at > now && sl->eligible_at < t)
      t = sl->eligible_at;
  }
  return t;
}
