/* SPDX-License-Identifier: Apache-2.0 */
/* core/v1 Events on pods, as `kubectl describe pod` shows them: a bounded queue that a caller on
 * any thread adds to without I/O, posted by an API thread (kube_events_flush), with the
 * kubelet's kind of restraint: the same pod, reason and message again within a window is not
 * posted again (counted as repeated), and a global bound per minute keeps a storm of them off
 * the API server (counted as dropped). */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kube.h"

#define KUBE_EVENT_QUEUE_MAX 64     /* events waiting to be posted */
#define KUBE_EVENT_PER_MINUTE 60    /* posted at most, over all objects (burst as large) */
#define KUBE_EVENT_REPEAT_S 600     /* the same pod, reason and message: once in this long */
#define KUBE_EVENT_RECENT 512       /* (pod, reason, message) keys remembered for that */
#define KUBE_EVENT_MESSAGE_MAX 1024 /* the API server takes up to 1 KiB; longer is cut */
#define KUBE_EVENT_REASON_MAX 128

struct kube_events;

/* What happened to the events added so far. */
struct kube_event_stats {
  uint64_t queued;       /* taken into the queue */
  uint64_t posted;       /* created on the API server */
  uint64_t repeated;     /* not posted: the same within KUBE_EVENT_REPEAT_S */
  uint64_t dropped_full; /* not posted: the queue was full */
  uint64_t dropped_rate; /* not posted: over KUBE_EVENT_PER_MINUTE */
  uint64_t failed;       /* the API server refused them or could not be reached */
};

/* component: source.component and reportingComponent ("gslice-node"); host: source.host and
 * reportingInstance (the node's name, or ""). 0 or -ENOMEM. */
int kube_events_new(const char *component, const char *host, struct kube_events **ret);
/* After kube_events_stop. */
void kube_events_free(struct kube_events *q);

/* An Event (type "Normal" or "Warning") on pod ns/name (uid may be ""), without I/O and
 * without waiting: 0 queued, 1 a repeat (not queued), -ENOSPC the queue is full, -EAGAIN over
 * the bound per minute, -EINVAL a malformed name. now: the wall clock (time(NULL); tests give
 * their own). */
int kube_events_add(struct kube_events *q, const char *type, const char *reason, const char *ns,
                    const char *name, const char *uid, const char *message, time_t now);
bool kube_events_pending(struct kube_events *q);
/* Posts what is queued through k on the calling thread (one request an event): how many were
 * posted. The first failure's reason goes into err (may be NULL). */
int kube_events_flush(struct kube_events *q, struct kube *k, char *err, size_t errlen);
void kube_events_stats(struct kube_events *q, struct kube_event_stats *ret);

/* A thread of its own that flushes through k as events come (for a program without an API
 * thread to spare); stop ends it (what is queued then is posted first, once). */
int kube_events_start(struct kube_events *q, struct kube *k, char *err, size_t errlen);
void kube_events_stop(struct kube_events *q);

/* The Event object as posted (for tests): the caller json_decrefs it. */
json_t *kube_event_json(const char *component, const char *host, const char *type,
                        const char *reason, const char *ns, const char *name, const char *uid,
                        const char *message, time_t now, uint64_t seq);
