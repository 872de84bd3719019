/* SPDX-License-Identifier: Apache-2.0 */
/* The device engine of the shared machine: which context's kernel runs when. Each context
 * has a channel (its queue, in launch order); the engine runs one kernel at a time and,
 * while several channels have work, gives each a timeslice in turn, preempting a kernel
 * at the boundary, as a GPU without MPS time-slices contexts. It keeps the busy figures
 * (per device and process) and the stretches they come from. It never looks at a process's
 * own tables and never sleeps with the machine lock held. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "state.h"

static struct sim_kernel *kernel_at(struct sim_device *d, uint64_t seq) {
  return &d->k[seq % SIM_KERNELS];
}

static int kernel_complete(const struct sim_device *d, uint64_t seq) {
  const struct sim_kernel *k = &d->k[seq % SIM_KERNELS];
  return seq == 0 || k->seq != seq || k->end != 0;
}

/* A channel that has work whose next kernel may start. */
static int runnable(const struct sim_device *d, int c) {
  const struct sim_channel *ch = &d->chan[c];
  return ch->head && kernel_complete(d, d->k[ch->head % SIM_KERNELS].after);
}

static int others_runnable(const struct sim_device *d, int c) {
  for (int i = 0; i < (int)d->nchan; i++)
    if (i != c && runnable(d, i))
      return 1;
  return 0;
}

/* The channel to run at t, or -1 (idle). Switching starts the chosen one's timeslice. */
static int pick(struct sim_device *d, uint64_t q, uint64_t t) {
  int cur = d->cur, best = -1;
  int cur_ok = cur >= 0 && runnable(d, cur);
  if (q == 0) {
    /* No slicing: each kernel runs to its end, the one queued first next. */
    if (cur_ok && kernel_at(d, d->chan[cur].head)->left < kernel_at(d, d->chan[cur].head)->dur)
      return cur;
    for (int i = 0; i < (int)d->nchan; i++)
      if (runnable(d, i) && (best < 0 || d->chan[i].head < d->chan[best].head))
        best = i;
  } else {
    if (cur_ok && t - d->slice_start < q)
      return cur;
    for (int i = 0; i < (int)d->nchan; i++) {
      if (i == cur || !runnable(d, i))
        continue;
      if (best < 0 || d->chan[i].turn < d->chan[best].turn ||
          (d->chan[i].turn == d->chan[best].turn && d->chan[i].head < d->chan[best].head))
        best = i;
    }
    if (best < 0 && cur_ok) {
      /* Alone: its timeslices follow each other; the current one is the one holding t. */
      d->slice_start += (t - d->slice_start) / q * q;
      return cur;
    }
  }
  if (best >= 0 && best != cur) {
    d->cur = best;
    d->slice_start = t;
    d->chan[best].turn = t;
  }
  return best;
}

/* Device time [from, to) went to channel c's head kernel. */
static void run_piece(struct sim_machine *m, unsigned dev, int c, uint64_t from, uint64_t to) {
  struct sim_device *d = &m->dev[dev];
  struct sim_channel *ch = &d->chan[c];
  struct sim_kernel *k = kernel_at(d, ch->head);
  uint64_t dt = to - from;
  k->left -= dt;
  d->queued_ns -= dt;
  d->busy_ns += dt;
  if (m->proc[ch->proc].gen == ch->proc_gen)
    m->proc[ch->proc].busy_ns[dev] += dt;
  struct sim_interval *last = d->nring ? &d->ring[(d->nring - 1) % SIM_RING] : NULL;
  if (last && last->end == from && last->proc == ch->proc && last->proc_gen == ch->proc_gen) {
    last->end = to;
  } else {
    struct sim_interval *iv = &d->ring[d->nring % SIM_RING];
    *iv = (struct sim_interval){from, to, ch->proc, ch->proc_gen};
    d->nring++;
  }
  if (k->left == 0) {
    k->end = to;
    d->queued--;
    ch->head = k->next;
    if (!ch->head)
      ch->tail = 0;
  }
}

void sim_advance(struct sim_machine *m, unsigned dev, uint64_t now) {
  struct sim_device *d = &m->dev[dev];
  uint64_t real = sim_now_ns(), q = m->timeslice_ns;
  if (now > real)
    now = real;
  uint64_t t = d->clock;
  while (t < now && d->queued) {
    int c = pick(d, q, t);
    if (c < 0)
      break; /* cannot happen: a kernel waited for is queued earlier, on this device */
    uint64_t until = t + kernel_at(d, d->chan[c].head)->left;
    int alone = !q || !others_runnable(d, c);
    if (!alone && d->slice_start + q < until)
      until = d->slice_start + q;
    if (until > now)
      until = now;
    run_piece(m, dev, c, t, until);
    t = until;
    /* Alone, its timeslices follow each other: a context that starts queueing waits for
     * the end of the one running now, not of one that began long ago. */
    if (alone && q && t - d->slice_start >= q)
      d->slice_start += (t - d->slice_start) / q * q;
  }
  if (now > d->clock)
    d->clock = now;
}

/* A free channel for (slot, ctx), or the one it already has; -1 if all are taken. */
static int channel_of(struct sim_machine *m, struct sim_device *d, int slot, uint64_t ctx) {
  int free_c = -1;
  for (int i = 0; i < (int)d->nchan; i++) {
    struct sim_channel *ch = &d->chan[i];
    if (ch->head && ch->proc == (uint32_t)slot && ch->proc_gen == m->proc[slot].gen &&
        ch->ctx == ctx)
      return i;
    if (!ch->head && free_c < 0)
      free_c = i;
  }
  if (free_c < 0 && d->nchan < SIM_CHANNELS)
    free_c = (int)d->nchan++;
  if (free_c >= 0) {
    struct sim_channel *ch = &d->chan[free_c];
    /* A context coming back keeps no place: it is the least recently served. */
    *ch = (struct sim_channel){(uint32_t)slot, m->proc[slot].gen, ctx, 0, 0, 0};
  }
  return free_c;
}

uint64_t sim_launch(struct sim_machine *m, int slot, unsigned dev, uint64_t ctx, uint64_t after,
                    uint64_t dur) {
  struct sim_device *d = &m->dev[dev];
  for (;;) {
    sim_advance(m, dev, sim_now_ns());
    uint64_t seq = d->nlaunch + 1;
    int c = d->queued < SIM_QUEUE && kernel_complete(d, kernel_at(d, seq)->seq)
                ? channel_of(m, d, slot, ctx)
                : -1;
    if (c < 0) {
      /* The queue is finite, as a GPU's push buffer: wait for work to complete. */
      struct timespec ts = {0, 200 * 1000};
      sim_unlock(m);
      nanosleep(&ts, NULL);
      sim_lock(m);
      continue;
    }
    struct sim_kernel *k = kernel_at(d, seq);
    if (k->seq && k->end > d->forgot_end)
      d->forgot_end = k->end;
    *k = (struct sim_kernel){seq, 0, after, dur, dur, 0, (uint32_t)c, 0};
    struct sim_channel *ch = &d->chan[c];
    if (ch->tail)
      kernel_at(d, ch->tail)->next = seq;
    else
      ch->head = seq;
    ch->tail = seq;
    d->nlaunch = seq;
    d->queued++;
    d->queued_ns += dur;
    m->proc[slot].launches[dev]++;
    return seq;
  }
}

/* When kernel seq would complete if nothing more were queued: the engine's choices replayed
 * on each channel's total of work left (after-dependencies are not waited for here; a
 * caller that wakes early looks again). */
static uint64_t project(const struct sim_device *d, uint64_t q, uint64_t seq) {
  uint64_t rem[SIM_CHANNELS] = {0}, turn[SIM_CHANNELS];
  const struct sim_kernel *target = &d->k[seq % SIM_KERNELS];
  int tc = (int)target->chan, busy = 0;
  uint64_t need = 0, before = 0;
  for (int i = 0; i < (int)d->nchan; i++) {
    turn[i] = d->chan[i].turn;
    for (uint64_t s = d->chan[i].head; s; s = d->k[s % SIM_KERNELS].next) {
      rem[i] += d->k[s % SIM_KERNELS].left;
      if (i == tc && s <= seq)
        need += d->k[s % SIM_KERNELS].left;
      if (q == 0 && s <= seq)
        before += d->k[s % SIM_KERNELS].left;
    }
    busy += rem[i] > 0;
  }
  uint64_t t = d->clock;
  if (q == 0 || busy <= 1)
    return t + (q == 0 ? before : need);
  int cur = d->cur;
  uint64_t ss = d->slice_start;
  for (int iter = 0; iter < 1000000; iter++) {
    int others = 0, best = -1;
    for (int i = 0; i < (int)d->nchan; i++) {
      if (i == cur || !rem[i])
        continue;
      others = 1;
      if (best < 0 || turn[i] < turn[best])
        best = i;
    }
    int c;
    if (cur >= 0 && rem[cur] && (t - ss < q || !others)) {
      c = cur;
    } else {
      c = best;
      cur = best;
      ss = t;
      turn[c] = t;
    }
    uint64_t run = rem[c];
    if (others && ss + q - t < run)
      run = ss + q - t;
    if (c == tc && need <= run)
      return t + need;
    rem[c] -= run;
    if (c == tc)
      need -= run;
    t += run;
  }
  return t + need;
}

int sim_kernel_done(struct sim_machine *m, unsigned dev, uint64_t seq, uint64_t *ret_end) {
  sim_advance(m, dev, sim_now_ns());
  const struct sim_device *d = &m->dev[dev];
  const struct sim_kernel *k = &d->k[seq % SIM_KERNELS];
  if (seq == 0) {
    *ret_end = 0;
    return 1;
  }
  if (k->seq != seq) {
    /* Its slot was reused after it completed; its end is no longer known exactly. */
    *ret_end = d->forgot_end;
    return 1;
  }
  if (k->end) {
    *ret_end = k->end;
    return 1;
  }
  *ret_end = project(d, m->timeslice_ns, seq);
  return 0;
}

void sim_drop_proc(struct sim_machine *m, unsigned dev, uint32_t slot, uint32_t gen) {
  struct sim_device *d = &m->dev[dev];
  uint64_t now = sim_now_ns();
  sim_advance(m, dev, now);
  for (int i = 0; i < (int)d->nchan; i++) {
    struct sim_channel *ch = &d->chan[i];
    if (!ch->head || ch->proc != slot || ch->proc_gen != gen)
      continue;
    /* A real GPU tears a dead process's context down: what had not run never runs. */
    for (uint64_t s = ch->head; s;) {
      struct sim_kernel *k = kernel_at(d, s);
      d->queued_ns -= k->left;
      d->queued--;
      k->left = 0;
      k->end = now;
      s = k->next;
    }
    ch->head = ch->tail = 0;
    if (d->cur == i)
      d->cur = -1;
  }
}

static int interval_matches(const struct sim_machine *m, const struct sim_interval *iv, int proc) {
  if (proc < 0)
    return 1;
  return iv->proc == (uint32_t)proc && iv->proc_gen == m->proc[proc].gen;
}

uint64_t sim_busy_between(struct sim_machine *m, unsigned dev, int proc, uint64_t from,
                          uint64_t to) {
  uint64_t now = sim_now_ns();
  sim_advance(m, dev, now);
  const struct sim_device *d = &m->dev[dev];
  uint64_t n = d->nring < SIM_RING ? d->nring : SIM_RING;
  if (to > now)
    to = now;
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; i++) {
    const struct sim_interval *iv = &d->ring[i];
    if (!interval_matches(m, iv, proc))
      continue;
    uint64_t s = iv->start > from ? iv->start : from;
    uint64_t e = iv->end < to ? iv->end : to;
    if (e > s)
      sum += e - s;
  }
  return sum;
}

uint64_t sim_busy_total(struct sim_machine *m, unsigned dev, int proc, uint64_t now) {
  sim_advance(m, dev, now);
  return proc < 0 ? m->dev[dev].busy_ns : m->proc[proc].busy_ns[dev];
}

uint64_t sim_ring_since(const struct sim_machine *m, unsigned dev) {
  const struct sim_device *d = &m->dev[dev];
  return d->nring > SIM_RING ? d->ring[d->nring % SIM_RING].start : 0;
}

unsigned sim_util_percent(struct sim_machine *m, unsigned dev, int proc, uint64_t window_ns) {
  uint64_t now = sim_now_ns();
  uint64_t from = now > window_ns ? now - window_ns : 0;
  uint64_t busy = sim_busy_between(m, dev, proc, from, now);
  uint64_t since = sim_ring_since(m, dev);
  if (since > from)
    from = since;
  if (now <= from)
    return 0;
  return (unsigned)((busy * 100 + (now - from) / 2) / (now - from));
}
