/* SPDX-License-Identifier: Apache-2.0 */
/* Events on pods (event.h): a ring of fixed-size entries under one mutex, a token bucket for
 * the bound per minute, a table of recent (pod uid, reason, message) hashes for repeats. */
#include "event.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "annot.h"
#include "log.h"

struct qevent {
  char type[16], reason[KUBE_EVENT_REASON_MAX];
  char ns[K8S_NAME_MAX], name[K8S_NAME_MAX], uid[64];
  char message[KUBE_EVENT_MESSAGE_MAX];
  time_t at;
};

struct recent {
  uint64_t hash;
  time_t at;
};

struct kube_events {
  pthread_mutex_t mu;
  pthread_cond_t wake;
  char component[64], host[K8S_NAME_MAX];
  struct qevent q[KUBE_EVENT_QUEUE_MAX];
  size_t head, len;
  struct recent recent[KUBE_EVENT_RECENT];
  double tokens;
  time_t filled; /* when tokens were last topped up */
  uint64_t seq;
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

/* FNV-1a over the strings, each with its terminator. */
static uint64_t key_hash(const char *const *parts, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    for (const unsigned char *p = (const unsigned char *)parts[i];; p++) {
      h = (h ^ *p) * 1099511628211ull;
      if (!*p)
        break;
    }
  return h;
}

/* Under q->mu: whether the key was queued within KUBE_EVENT_REPEAT_S (a repeat does not renew
 * it: one Event a window, however often it comes). */
static bool seen_recently(const struct kube_events *q, uint64_t h, time_t now) {
  for (size_t i = 0; i < KUBE_EVENT_RECENT; i++) {
    const struct recent *r = &q->recent[i];
    if (r->at && r->hash == h && now >= r->at && now - r->at < KUBE_EVENT_REPEAT_S)
      return true;
  }
  return false;
}

/* Under q->mu: the key queued now, in the oldest slot. */
static void remember(struct kube_events *q, uint64_t h, time_t now) {
  struct recent *oldest = &q->recent[0];
  for (size_t i = 1; i < KUBE_EVENT_RECENT && oldest->at; i++)
    if (q->recent[i].at < oldest->at)
      oldest = &q->recent[i];
  oldest->hash = h;
  oldest->at = now ? now : 1;
}

/* Under q->mu: one token, topped up at KUBE_EVENT_PER_MINUTE a minute. */
static bool take_token(struct kube_events *q, time_t now) {
  if (now > q->filled) {
    q->tokens += (double)(now - q->filled) * KUBE_EVENT_PER_MINUTE / 60.0;
    if (q->tokens > KUBE_EVENT_PER_MINUTE)
      q->tokens = KUBE_EVENT_PER_MINUTE;
  }
  q->filled = now;
  if (q->tokens < 1)
    return false;
  q->tokens -= 1;
  return true;
}

static bool fits(const char *s, size_t max) {
  return s && strlen(s) < max;
}

int kube_events_add(struct kube_events *q, const char *type, const char *reason, const char *ns,
                    const char *name, const char *uid, const char *message, time_t now) {
  if (!uid)
    uid = "";
  if (!fits(type, sizeof q->q[0].type) || !fits(reason, KUBE_EVENT_REASON_MAX) || !*reason ||
      !fits(ns, K8S_NAME_MAX) || !*ns || !fits(name, K8S_NAME_MAX) || !*name ||
      !fits(uid, sizeof q->q[0].uid) || !message)
    return -EINVAL;
  const char *parts[] = {ns, name, uid, reason, message};
  uint64_t h = key_hash(parts, 5);
  int rc = 0;

  pthread_mutex_lock(&q->mu);
  if (seen_recently(q, h, now)) {
    q->st.repeated++;
    rc = 1;
  } else if (q->len == KUBE_EVENT_QUEUE_MAX) {
    q->st.dropped_full++;
    rc = -ENOSPC;
  } else if (!take_token(q, now)) {
    q->st.dropped_rate++;
    rc = -EAGAIN;
  } else {
    struct qevent *e = &q->q[(q->head + q->len++) % KUBE_EVENT_QUEUE_MAX];
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->reason, sizeof e->reason, "%s", reason);
    snprintf(e->ns, sizeof e->ns, "%s", ns);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->uid, sizeof e->uid, "%s", uid);
    snprintf(e->message, sizeof e->message, "%s", message);
    e->at = now;
    remember(q, h, now);
    q->st.queued++;
    pthread_cond_signal(&q->wake);
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

/* Names are DNS subdomains: at most 253 characters, the pod's name and a unique suffix, as the
 * kubelet's recorder names them. */
json_t *kube_event_json(const char *component, const char *host, const char *type,
                        const char *reason, const char *ns, const char *name, const char *uid,
                        const char *message, time_t now, uint64_t seq) {
  char ename[K8S_NAME_MAX], ts[32];
  struct timespec t;

  clock_gettime(CLOCK_REALTIME, &t);
  uint64_t suffix = ((uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec) ^ (seq << 48);
  snprintf(ename, sizeof ename, "%.*s.%016llx", 253 - 17, name, (unsigned long long)suffix);
  k8s_time_format(now, ts, sizeof ts);
  json_t *involved = json_pack("{s:s, s:s, s:s, s:s}", "kind", "Pod", "apiVersion", "v1",
                               "namespace", ns, "name", name);
  if (involved && uid && *uid)
    json_object_set_new(involved, "uid", json_string(uid));
  json_t *ev = json_pack(
      "{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:i, s:s, s:s}",
      "apiVersion", "v1", "kind", "Event", "metadata", "name", ename, "namespace", ns,
      "involvedObject", involved, "reason", reason, "message", message, "type", type, "source",
      "component", component, "host", host, "firstTimestamp", ts, "lastTimestamp", ts, "count", 1,
      "reportingComponent", component, "reportingInstance", host);
  return ev;
}

int kube_events_flush(struct kube_events *q, struct kube *k, char *err, size_t errlen) {
  int posted = 0;
  bool said = false;

  for (;;) {
    struct qevent e;
    uint64_t seq;
    pthread_mutex_lock(&q->mu);
    if (!q->len) {
      pthread_mutex_unlock(&q->mu);
      return posted;
    }
    e = q->q[q->head];
    q->head = (q->head + 1) % KUBE_EVENT_QUEUE_MAX;
    q->len--;
    seq = ++q->seq;
    pthread_mutex_unlock(&q->mu);

    char path[K8S_NAME_MAX + 48], why[KUBE_ERR_MAX] = "";
    json_t *ev = kube_event_json(q->component, q->host, e.type, e.reason, e.ns, e.name, e.uid,
                                 e.message, e.at, seq);
    int rc = -ENOMEM;
    if (ev) {
      snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", e.ns);
      rc = kube_post(k, path, ev, NULL, why, sizeof why);
      json_decref(ev);
    }
    pthread_mutex_lock(&q->mu);
    if (rc)
      q->st.failed++;
    else
      q->st.posted++;
    pthread_mutex_unlock(&q->mu);
    if (rc && !said && err) {
      snprintf(err, errlen, "cannot post the %s Event on pod %s/%s: %s", e.reason, e.ns, e.name,
               why[0] ? why : strerror(-rc));
      said = true;
    }
    posted += rc == 0;
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
