/* SPDX-License-Identifier: Apache-2.0 */
/* Events on pods (event.h): a ring of fixed-size writes under one mutex; a table of the Events
 * posted (key hash, count, name) for aggregation; a token bucket for the global bound and one
 * per namespace in a small LRU table, with what each namespace asked for in the last minute
 * (its share of the global bucket's reserve). */
#include "event.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "annot.h"
#include "log.h"
#include "prom.h"

/* One write waiting: the Event's text (a POST needs it whole, and a PATCH falls back to a POST
 * when the Event is gone) and which remembered Event it is. */
struct qevent {
  char type[16], reason[KUBE_EVENT_REASON_MAX];
  char ns[K8S_NAME_MAX], name[K8S_NAME_MAX], uid[64];
  char message[KUBE_EVENT_MESSAGE_MAX];
  size_t agg;   /* index in aggs */
  uint64_t gen; /* aggs[agg].gen when queued */
  size_t nsb;   /* index in buckets */
};

/* An Event as the API server has it, or will once its write is sent. */
struct agg {
  uint64_t hash, gen; /* gen: 0 unused; new for each Event the slot holds */
  time_t first, last; /* firstTimestamp, lastTimestamp */
  uint32_t count;
  char ename[K8S_NAME_MAX]; /* its name once created, "" before */
  bool queued;              /* a write of it waits in the queue */
  time_t retry;             /* a repeat refused its write: the next is tried no sooner... */
  bool paced;               /* ...and from then on, one write each KUBE_EVENT_RETRY_S */
};

struct bucket {
  uint64_t hash; /* of the namespace; 0 unused */
  char ns[K8S_NAME_MAX];
  double tokens;
  time_t filled, used; /* used: when it last asked */
  unsigned queued;     /* its writes in the queue */
  /* The writes it asked for (taken or not) in the last KUBE_EVENT_SLOTS slots of
   * KUBE_EVENT_SLOT_S seconds: its demand, against its share of the global bound. */
  int64_t slot[KUBE_EVENT_SLOTS];
  uint16_t asked[KUBE_EVENT_SLOTS];
};

struct kube_events {
  pthread_mutex_t mu;
  pthread_cond_t wake;
  char component[64], host[K8S_NAME_MAX];
  struct qevent q[KUBE_EVENT_QUEUE_MAX];
  size_t head, len;
  struct agg aggs[KUBE_EVENT_RECENT];
  struct bucket buckets[KUBE_EVENT_NAMESPACES];
  double tokens;
  time_t filled;   /* when tokens were last topped up */
  unsigned active; /* namespaces that asked in the last minute, as of the last bucket_of */
  uint64_t seq, gen;
  struct kube_event_stats st;
  /* kube_events_start */
  struct kube *k;
  pthread_t thread;
  bool running, stop;
};

int kube_events_new(const char *component, const char *host, struct kube_events **ret) {
  struct kube_events *q = calloc(1, sizeof(*q));
  if (!q)
    return -ENOMEM;
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->wake, NULL);
  snprintf(q->component, sizeof q->component, "%s", component);
  snprintf(q->host, sizeof q->host, "%s", host ? host : "");
  q->tokens = KUBE_EVENT_PER_MINUTE;
  *ret = q;
  return 0;
}

void kube_events_free(struct kube_events *q) {
  if (!q)
    return;
  pthread_cond_destroy(&q->wake);
  pthread_mutex_destroy(&q->mu);
  free(q);
}

/* FNV-1a over the strings, each with its terminator; never 0 (0 marks a free slot). */
static uint64_t key_hash(const char *const *parts, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    for (const unsigned char *p = (const unsigned char *)parts[i];; p++) {
      h = (h ^ *p) * 1099511628211ull;
      if (!*p)
        break;
    }
  return h ? h : 1;
}

/* Under q->mu: the Event of key h still open at now (its last occurrence within
 * KUBE_EVENT_REPEAT_S), or NULL. */
static struct agg *agg_find(struct kube_events *q, uint64_t h, time_t now) {
  for (size_t i = 0; i < KUBE_EVENT_RECENT; i++) {
    struct agg *a = &q->aggs[i];
    if (a->gen && a->hash == h && now >= a->first && now - a->last < KUBE_EVENT_REPEAT_S)
      return a;
  }
  return NULL;
}

/* Under q->mu: a slot for a new Event, the least recently seen one that has no write queued
 * (there are more slots than places in the queue). */
static struct agg *agg_new(struct kube_events *q, uint64_t h, time_t now) {
  struct agg *pick = NULL;
  for (size_t i = 0; i < KUBE_EVENT_RECENT; i++) {
    struct agg *a = &q->aggs[i];
    if (a->queued)
      continue;
    if (!a->gen) {
      pick = a;
      break;
    }
    if (!pick || a->last < pick->last)
      pick = a;
  }
  *pick = (struct agg){.hash = h, .gen = ++q->gen, .first = now, .last = now, .count = 1};
  return pick;
}

/* Under q->mu: tokens topped up at per_min a minute, to at most burst, since *filled. */
static void top_up(double *tokens, time_t *filled, time_t now, double per_min, double burst) {
  if (now > *filled) {
    *tokens += (double)(now - *filled) * per_min / 60.0;
    if (*tokens > burst)
      *tokens = burst;
  }
  if (now > *filled || !*filled)
    *filled = now;
}

/* Under q->mu: namespace ns's bucket, made (full) in the least recently used place with no
 * write queued when it has none. */
static struct bucket *bucket_of(struct kube_events *q, const char *ns, time_t now) {
  const char *parts[] = {ns};
  uint64_t h = key_hash(parts, 1);
  struct bucket *pick = NULL, *found = NULL;
  unsigned active = 1; /* ns itself */
  for (size_t i = 0; i < KUBE_EVENT_NAMESPACES; i++) {
    struct bucket *b = &q->buckets[i];
    if (!found && b->hash == h && strcmp(b->ns, ns) == 0) {
      found = b;
      continue;
    }
    active += b->hash && now - b->used < 60 && b->used <= now;
    if (!b->queued && (!pick || (pick->hash && (!b->hash || b->used < pick->used))))
      pick = b;
  }
  q->active = active;
  if (found) {
    found->used = now;
    return found;
  }
  *pick = (struct bucket){.hash = h, .tokens = KUBE_EVENT_NS_BURST, .filled = now, .used = now};
  snprintf(pick->ns, sizeof pick->ns, "%s", ns);
  return pick;
}

/* The writes b asked for in the last minute (KUBE_EVENT_SLOTS slots, the current one
 * included). */
static unsigned recent_asks(const struct bucket *b, time_t now) {
  int64_t cur = (int64_t)now / KUBE_EVENT_SLOT_S;
  unsigned n = 0;
  for (size_t i = 0; i < KUBE_EVENT_SLOTS; i++)
    if (b->slot[i] <= cur && b->slot[i] > cur - KUBE_EVENT_SLOTS)
      n += b->asked[i];
  return n;
}

static void count_ask(struct bucket *b, time_t now) {
  int64_t cur = (int64_t)now / KUBE_EVENT_SLOT_S;
  size_t i = (size_t)(cur % KUBE_EVENT_SLOTS);
  if (b->slot[i] != cur) {
    b->slot[i] = cur;
    b->asked[i] = 0;
  }
  if (b->asked[i] < UINT16_MAX)
    b->asked[i]++;
}

/* Under q->mu: whether one more write of namespace b may be queued now (b just looked up by
 * bucket_of, which counted the namespaces active); a token of b's and of the global bucket
 * taken when it may. Max-min fairness on the global bound: a namespace that asked for no more
 * writes in the last minute, this one included, than its fair share (KUBE_EVENT_PER_MINUTE
 * over the namespaces that asked in that minute) may take the global bucket's last
 * KUBE_EVENT_RESERVE tokens; one that asks for more takes only what is above them. Those that
 * ask little together ask for less than the bucket refills, so however many namespaces one
 * tenant floods from, it never runs dry for them. 0, -ENOSPC or -EAGAIN, counted. */
static int admit(struct kube_events *q, struct bucket *b, time_t now) {
  top_up(&q->tokens, &q->filled, now, KUBE_EVENT_PER_MINUTE, KUBE_EVENT_PER_MINUTE);
  top_up(&b->tokens, &b->filled, now, KUBE_EVENT_NS_PER_MINUTE, KUBE_EVENT_NS_BURST);
  count_ask(b, now);
  /* The global tokens it must leave: none within its share, nearly all the reserve when it
   * asks for many times its share. */
  double share = (double)KUBE_EVENT_PER_MINUTE / q->active, asks = recent_asks(b, now);
  double keep = asks <= share ? 0 : KUBE_EVENT_RESERVE * (1 - share / asks);
  int rc = 0;
  bool ns = false;
  if (b->queued >= KUBE_EVENT_NS_QUEUE_MAX || q->len == KUBE_EVENT_QUEUE_MAX) {
    ns = q->len < KUBE_EVENT_QUEUE_MAX;
    rc = -ENOSPC;
    q->st.dropped_full++;
  } else if (b->tokens < 1 || q->tokens < 1 + keep) {
    ns = b->tokens < 1;
    rc = -EAGAIN;
    q->st.dropped_rate++;
    q->st.dropped_share += !ns && q->tokens >= 1;
  } else {
    b->tokens -= 1;
    q->tokens -= 1;
  }
  q->st.dropped_ns += ns;
  return rc;
}

static bool fits(const char *s, size_t max) {
  return s && strlen(s) < max;
}

/* Under q->mu: a write of a's Event, with its text. */
static void enqueue(struct kube_events *q, struct agg *a, struct bucket *b, const char *type,
                    const char *reason, const char *ns, const char *name, const char *uid,
                    const char *message) {
  struct qevent *e = &q->q[(q->head + q->len++) % KUBE_EVENT_QUEUE_MAX];
  snprintf(e->type, sizeof e->type, "%s", type);
  snprintf(e->reason, sizeof e->reason, "%s", reason);
  snprintf(e->ns, sizeof e->ns, "%s", ns);
  snprintf(e->name, sizeof e->name, "%s", name);
  snprintf(e->uid, sizeof e->uid, "%s", uid);
  snprintf(e->message, sizeof e->message, "%s", message);
  e->agg = (size_t)(a - q->aggs);
  e->gen = a->gen;
  e->nsb = (size_t)(b - q->buckets);
  a->queued = true;
  b->queued++;
  pthread_cond_signal(&q->wake);
}

int kube_events_add(struct kube_events *q, const char *type, const char *reason, const char *ns,
                    const char *name, const char *uid, const char *message, time_t now) {
  if (!uid)
    uid = "";
  if (!fits(type, sizeof q->q[0].type) || !fits(reason, KUBE_EVENT_REASON_MAX) || !*reason ||
      !fits(ns, K8S_NAME_MAX) || !*ns || !fits(name, K8S_NAME_MAX) || !*name ||
      !fits(uid, sizeof q->q[0].uid) || !message)
    return -EINVAL;
  const char *parts[] = {ns, name, uid, type, reason, message};
  uint64_t h = key_hash(parts, 6);
  int rc;

  pthread_mutex_lock(&q->mu);
  struct agg *a = agg_find(q, h, now);
  if (a) {
    /* Counted into its Event whatever happens next: a refused PATCH leaves the count to the
     * next write. */
    a->count++;
    if (now > a->last)
      a->last = now;
    q->st.repeated++;
    rc = 1;
    /* Refused once, it is written at most once each KUBE_EVENT_RETRY_S: the repeats meanwhile
     * are only counted (no token, no write), and the next write carries them all. */
    if (!a->queued && now >= a->retry) {
      struct bucket *b = bucket_of(q, ns, now);
      bool ok = !admit(q, b, now);
      if (ok)
        enqueue(q, a, b, type, reason, ns, name, uid, message);
      a->paced |= !ok;
      if (a->paced)
        a->retry = now + KUBE_EVENT_RETRY_S;
    } else if (!a->queued) {
      q->st.deferred++;
    }
  } else {
    struct bucket *b = bucket_of(q, ns, now);
    rc = admit(q, b, now);
    if (!rc) {
      enqueue(q, agg_new(q, h, now), b, type, reason, ns, name, uid, message);
      q->st.queued++;
    }
  }
  pthread_mutex_unlock(&q->mu);
  return rc;
}

bool kube_events_pending(struct kube_events *q) {
  pthread_mutex_lock(&q->mu);
  bool any = q->len > 0;
  pthread_mutex_unlock(&q->mu);
  return any;
}

void kube_events_stats(struct kube_events *q, struct kube_event_stats *ret) {
  pthread_mutex_lock(&q->mu);
  *ret = q->st;
  pthread_mutex_unlock(&q->mu);
}

/* Counter family prefix + suffix: one sample for each of values of label, or (label NULL) one
 * without labels. */
static void prom_counter(struct gs_buf *b, const char *prefix, const char *suffix, const char *help,
                         const char *label, const char *const *values, const uint64_t *n,
                         size_t count) {
  char name[128];
  snprintf(name, sizeof name, "%s%s", prefix, suffix);
  gs_prom_family(b, name, "counter", help);
  for (size_t i = 0; i < count; i++)
    gs_prom_sample_u64(b, name, NULL, label ? (const char *const[]){label, values[i], NULL} : NULL,
                       n[i]);
}

int kube_events_prom(struct kube_events *q, const char *prefix, struct gs_buf *b) {
  struct kube_event_stats st;
  char help[512];
  assert(strlen(prefix) < 64);
  kube_events_stats(q, &st);
  snprintf(help, sizeof help,
           "Events by outcome: posted (created on the API server), failed (the API server "
           "refused them or was not reached), repeated (the same within %d min: counted into "
           "the Event there), patched (a count written to an Event there), dropped_full (the "
           "queue of %d or the namespace's %d places full), dropped_rate (over the bound of %d "
           "a minute, or the namespace's %d at once and %d a minute).",
           KUBE_EVENT_REPEAT_S / 60, KUBE_EVENT_QUEUE_MAX, KUBE_EVENT_NS_QUEUE_MAX,
           KUBE_EVENT_PER_MINUTE, KUBE_EVENT_NS_BURST, KUBE_EVENT_NS_PER_MINUTE);
  prom_counter(b, prefix, "_events_total", help, "outcome",
               (const char *const[]){"posted", "failed", "repeated", "patched", "dropped_full",
                                     "dropped_rate"},
               (const uint64_t[]){st.posted, st.failed, st.repeated, st.patched, st.dropped_full,
                                  st.dropped_rate},
               6);
  prom_counter(b, prefix, "_events_queued_total",
               "New Events taken into the queue to be posted (a repeat's write is counted in "
               "repeated).",
               NULL, NULL, &st.queued, 1);
  snprintf(help, sizeof help,
           "Of the repeated Events, those only counted while their Event waits to be written "
           "again: once a write of it was refused, at most one each %d s, carrying their count.",
           KUBE_EVENT_RETRY_S);
  prom_counter(b, prefix, "_events_deferred_total", help, NULL, NULL, &st.deferred, 1);
  snprintf(help, sizeof help,
           "Of the dropped Events, those over their namespace's own bound (%d at once, %d a "
           "minute, %d queued): one tenant's flood, not the cluster's.",
           KUBE_EVENT_NS_BURST, KUBE_EVENT_NS_PER_MINUTE, KUBE_EVENT_NS_QUEUE_MAX);
  prom_counter(b, prefix, "_events_dropped_namespace_total", help, NULL, NULL, &st.dropped_ns, 1);
  snprintf(help, sizeof help,
           "Of the dropped_rate Events, those over their namespace's fair share of the bound of "
           "%d a minute (that over the namespaces that asked in the last minute) while its last "
           "%d were kept for namespaces asking no more than theirs.",
           KUBE_EVENT_PER_MINUTE, KUBE_EVENT_RESERVE);
  prom_counter(b, prefix, "_events_dropped_share_total", help, NULL, NULL, &st.dropped_share, 1);
  return b->err;
}

/* The Event as created: count occurrences from first to last. Names are DNS subdomains: at
 * most 253 characters, the pod's name and a unique suffix, as the kubelet's recorder names
 * them. */
static json_t *event_json(const char *component, const char *host, const struct qevent *e,
                          time_t first, time_t last, uint32_t count, uint64_t seq) {
  char ename[K8S_NAME_MAX], ts0[32], ts1[32];
  struct timespec t;

  clock_gettime(CLOCK_REALTIME, &t);
  uint64_t suffix = ((uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec) ^ (seq << 48);
  snprintf(ename, sizeof ename, "%.*s.%016llx", 253 - 17, e->name, (unsigned long long)suffix);
  k8s_time_format(first, ts0, sizeof ts0);
  k8s_time_format(last, ts1, sizeof ts1);
  json_t *involved = json_pack("{s:s, s:s, s:s, s:s}", "kind", "Pod", "apiVersion", "v1",
                               "namespace", e->ns, "name", e->name);
  if (involved && e->uid[0])
    json_object_set_new(involved, "uid", json_string(e->uid));
  return json_pack(
      "{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:I, s:s, s:s}",
      "apiVersion", "v1", "kind", "Event", "metadata", "name", ename, "namespace", e->ns,
      "involvedObject", involved, "reason", e->reason, "message", e->message, "type", e->type,
      "source", "component", component, "host", host, "firstTimestamp", ts0, "lastTimestamp", ts1,
      "count", (json_int_t)count, "reportingComponent", component, "reportingInstance", host);
}

json_t *kube_event_json(const char *component, const char *host, const char *type,
                        const char *reason, const char *ns, const char *name, const char *uid,
                        const char *message, time_t now, uint64_t seq) {
  struct qevent e = {0};
  if (!fits(type, sizeof e.type) || !fits(reason, sizeof e.reason) || !fits(ns, sizeof e.ns) ||
      !fits(name, sizeof e.name) || !fits(uid ? uid : "", sizeof e.uid) || !message)
    return NULL;
  snprintf(e.type, sizeof e.type, "%s", type);
  snprintf(e.reason, sizeof e.reason, "%s", reason);
  snprintf(e.ns, sizeof e.ns, "%s", ns);
  snprintf(e.name, sizeof e.name, "%s", name);
  snprintf(e.uid, sizeof e.uid, "%s", uid ? uid : "");
  snprintf(e.message, sizeof e.message, "%s", message);
  return event_json(component, host, &e, now, now, 1, seq);
}

/* What a write sends, read from its Event under q->mu when it leaves the queue. */
struct write {
  struct qevent e;
  time_t first, last;
  uint32_t count;
  char ename[K8S_NAME_MAX];
  uint64_t seq;
  bool stale; /* its Event's slot was taken by another since (not sent) */
};

/* Under q->mu: the oldest write, taken out of the queue. */
static void dequeue(struct kube_events *q, struct write *w) {
  struct qevent *e = &q->q[q->head];
  struct agg *a = &q->aggs[e->agg];
  q->head = (q->head + 1) % KUBE_EVENT_QUEUE_MAX;
  q->len--;
  q->buckets[e->nsb].queued--;
  w->e = *e;
  w->seq = ++q->seq;
  w->stale = a->gen != e->gen;
  if (w->stale)
    return;
  a->queued = false; /* an occurrence from now on queues a write of its own */
  w->first = a->first;
  w->last = a->last;
  w->count = a->count;
  snprintf(w->ename, sizeof w->ename, "%s", a->ename);
}

/* The Event created (POST), its name kept for the PATCHes to come. */
static int create(struct kube_events *q, struct kube *k, struct write *w, char *why,
                  size_t whylen) {
  char path[K8S_NAME_MAX + 48];
  json_t *made = NULL,
         *ev = event_json(q->component, q->host, &w->e, w->first, w->last, w->count, w->seq);
  if (!ev)
    return -ENOMEM;
  snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", w->e.ns);
  int rc = kube_post(k, path, ev, &made, why, whylen);
  const char *name = json_string_value(json_object_get(json_object_get(made, "metadata"), "name"));
  if (!rc && !name)
    name = json_string_value(json_object_get(json_object_get(ev, "metadata"), "name"));
  pthread_mutex_lock(&q->mu);
  struct agg *a = &q->aggs[w->e.agg];
  if (!rc && a->gen == w->e.gen)
    snprintf(a->ename, sizeof a->ename, "%s", name);
  pthread_mutex_unlock(&q->mu);
  json_decref(made);
  json_decref(ev);
  return rc;
}

/* The count and last time written to the Event there (PATCH); -ENOENT when it is gone (the
 * API server keeps Events an hour after their last write). */
static int patch(struct kube *k, const struct write *w, char *why, size_t whylen) {
  char path[2 * K8S_NAME_MAX + 48], ts[32];
  k8s_time_format(w->last, ts, sizeof ts);
  json_t *p = json_pack("{s:I, s:s}", "count", (json_int_t)w->count, "lastTimestamp", ts);
  if (!p)
    return -ENOMEM;
  snprintf(path, sizeof path, "/api/v1/namespaces/%s/events/%s", w->e.ns, w->ename);
  int rc = kube_merge_patch(k, path, p, NULL, why, whylen);
  json_decref(p);
  return rc;
}

/* One write sent: 0, or why not in why. */
static int send_write(struct kube_events *q, struct kube *k, struct write *w, char *why,
                      size_t whylen) {
  int rc;
  bool patched = false;
  if (w->ename[0]) {
    rc = patch(k, w, why, whylen);
    patched = rc == 0;
    if (rc == -ENOENT) {
      why[0] = 0;
      rc = create(q, k, w, why, whylen);
    }
  } else {
    rc = create(q, k, w, why, whylen);
  }
  pthread_mutex_lock(&q->mu);
  if (rc)
    q->st.failed++;
  else if (patched)
    q->st.patched++;
  else
    q->st.posted++;
  pthread_mutex_unlock(&q->mu);
  return rc;
}

int kube_events_flush(struct kube_events *q, struct kube *k, char *err, size_t errlen) {
  int sent = 0;
  bool said = false;

  for (;;) {
    struct write w;
    pthread_mutex_lock(&q->mu);
    if (!q->len) {
      pthread_mutex_unlock(&q->mu);
      return sent;
    }
    dequeue(q, &w);
    pthread_mutex_unlock(&q->mu);
    if (w.stale)
      continue;
    char why[KUBE_ERR_MAX] = "";
    int rc = send_write(q, k, &w, why, sizeof why);
    if (rc && !said && err) {
      snprintf(err, errlen, "cannot %s the %s Event on pod %s/%s: %s",
               w.ename[0] ? "update" : "post", w.e.reason, w.e.ns, w.e.name,
               why[0] ? why : strerror(-rc));
      said = true;
    }
    sent += rc == 0;
  }
}

static void *run(void *arg) {
  struct kube_events *q = arg;
  char err[KUBE_ERR_MAX + 512];
  uint64_t fails = 0;

  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->len && !q->stop)
      pthread_cond_wait(&q->wake, &q->mu);
    if (!q->len)
      break;
    pthread_mutex_unlock(&q->mu);
    err[0] = 0;
    kube_events_flush(q, q->k, err, sizeof err);
    if (err[0] && fails++ % 100 == 0)
      gs_log(GS_LOG_WARNING, "%s (Events not posted are counted, not retried)", err);
    pthread_mutex_lock(&q->mu);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

int kube_events_start(struct kube_events *q, struct kube *k, char *err, size_t errlen) {
  q->k = k;
  int rc = -pthread_create(&q->thread, NULL, run, q);
  if (rc) {
    snprintf(err, errlen, "cannot start a thread: %s", strerror(-rc));
    return rc;
  }
  q->running = true;
  return 0;
}

void kube_events_stop(struct kube_events *q) {
  if (!q || !q->running)
    return;
  pthread_mutex_lock(&q->mu);
  q->stop = true;
  pthread_cond_broadcast(&q->wake);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  q->running = false;
}
