/* SPDX-License-Identifier: Apache-2.0 */
/* core/v1 Events on pods, as `kubectl describe pod` shows them: a bounded queue that a caller on
 * any thread adds to without I/O, posted by one API thread (kube_events_flush), with the
 * kubelet's kind of restraint.
 *
 * Aggregation, as client-go's recorder does it for the kubelet: the same pod, type, reason and
 * message again within KUBE_EVENT_REPEAT_S of its last time is counted into the Event already
 * posted (one POST, then a PATCH of its count and lastTimestamp), so ten refusals are one Event
 * "x10 over 5m". core/v1 with count/lastTimestamp rather than events.k8s.io/v1's series: the
 * names others rely on are core/v1 Events, `kubectl describe` and every Event tool read these
 * fields, the RBAC is the kubelet's own (create and patch on events), and a series is kept by
 * a state machine of its own (client-go's events/v1 recorder beats it every 30 minutes) for no
 * more than the same count. The PATCH is
 * a JSON merge patch (RFC 7386) of those two scalars, which the API server applies exactly as
 * the strategic merge patch client-go sends. Repeats coalesce: while a write of an Event waits
 * in the queue, another occurrence only raises the count that write will carry.
 *
 * Fairness: every write (POST or PATCH) takes a token from its namespace's bucket and from the
 * global one, and a namespace holds at most KUBE_EVENT_NS_QUEUE_MAX places of the queue, so one
 * tenant's flood of refused pods leaves the others their Events. The global bucket is shared
 * max-min fairly: its last KUBE_EVENT_RESERVE tokens are kept for the namespaces that asked in
 * the last minute for no more than their share (KUBE_EVENT_PER_MINUTE over the namespaces that
 * asked in it); one asking for more may take of them only in proportion (it leaves the
 * reserve times 1 - share/asked), so a tenant flooding from many namespaces (each over its
 * share) cannot starve a namespace that asks little. Namespaces are tracked in a table of
 * KUBE_EVENT_NAMESPACES, the least recently used forgotten first (a forgotten one starts again
 * with a full bucket and no demand; the global bound still holds). What is refused is counted
 * (dropped_*). A repeat refused its write is still counted into the Event's count; from then
 * on its Event is written at most once each KUBE_EVENT_RETRY_S, the repeats between only
 * counted (no token each), the next write carrying them all. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kube.h"

#define KUBE_EVENT_QUEUE_MAX 64     /* writes waiting to be sent */
#define KUBE_EVENT_PER_MINUTE 60    /* writes at most, over all objects (burst as large) */
#define KUBE_EVENT_NS_PER_MINUTE 12 /* one namespace's writes a minute... */
#define KUBE_EVENT_NS_BURST 20      /* ...and at once */
#define KUBE_EVENT_NS_QUEUE_MAX 16  /* one namespace's places in the queue */
#define KUBE_EVENT_NAMESPACES 256   /* namespaces whose buckets are remembered */
#define KUBE_EVENT_RESERVE 10       /* global tokens only a namespace within its fair share takes */
#define KUBE_EVENT_SLOTS 6          /* the writes a namespace asked for, counted in... */
#define KUBE_EVENT_SLOT_S 10        /* ...slots of 10 s (a minute in all) */
#define KUBE_EVENT_RETRY_S 30       /* a repeat refused its write: the next tried this much later */
#define KUBE_EVENT_REPEAT_S 600     /* a repeat this soon after the last is counted, not posted */
#define KUBE_EVENT_RECENT 512       /* Events remembered for that */
#define KUBE_EVENT_MESSAGE_MAX 1024 /* the API server takes up to 1 KiB; longer is cut */
#define KUBE_EVENT_REASON_MAX 128

struct kube_events;

/* What happened to the events added so far. */
struct kube_event_stats {
  uint64_t queued;        /* new Events taken into the queue */
  uint64_t posted;        /* created on the API server */
  uint64_t repeated;      /* counted into an Event already there (or queued) */
  uint64_t dropped_full;  /* a write not queued: the queue, or the namespace's share, was full */
  uint64_t dropped_rate;  /* a write not queued: over the global or the namespace's bound */
  uint64_t failed;        /* the API server refused them or could not be reached */
  uint64_t patched;       /* counts written to Events already there */
  uint64_t dropped_ns;    /* of dropped_full and dropped_rate: the namespace's own bound */
  uint64_t dropped_share; /* of dropped_rate: over its fair share while the reserve was kept */
  uint64_t deferred;      /* repeats counted while their Event waits to be written again */
};

/* component: source.component and reportingComponent ("gslice-node"); host: source.host and
 * reportingInstance (the node's name, or ""). 0 or -ENOMEM. */
int kube_events_new(const char *component, const char *host, struct kube_events **ret);
/* After kube_events_stop. */
void kube_events_free(struct kube_events *q);

/* An Event (type "Normal" or "Warning") on pod ns/name (uid may be ""), without I/O and
 * without waiting: 0 queued, 1 a repeat (counted into its Event: a PATCH queued, or one
 * already waiting), -ENOSPC the queue or the namespace's share is full, -EAGAIN over the
 * global bound or the namespace's, -EINVAL a malformed name. now: the wall clock (time(NULL);
 * tests give their own). */
int kube_events_add(struct kube_events *q, const char *type, const char *reason, const char *ns,
                    const char *name, const char *uid, const char *message, time_t now);
bool kube_events_pending(struct kube_events *q);
/* Sends what is queued through k on the calling thread (one request a write: a POST of a new
 * Event, a PATCH of one there, a POST again when that one is gone): how many succeeded. The
 * first failure's reason goes into err (may be NULL). One thread at a time flushes a queue. */
int kube_events_flush(struct kube_events *q, struct kube *k, char *err, size_t errlen);
void kube_events_stats(struct kube_events *q, struct kube_event_stats *ret);

struct gs_buf;
/* The stats as Prometheus counters, the same set in every program that records Events:
 * PREFIX_events_total{outcome="posted"|"failed"|"repeated"|"patched"|"dropped_full"|
 * "dropped_rate"}, and PREFIX_events_queued_total, PREFIX_events_deferred_total (of repeated),
 * PREFIX_events_dropped_namespace_total and PREFIX_events_dropped_share_total (of the dropped).
 * prefix: the program's ("gslice_extender"), under 64 bytes. Returns b->err (prom.h). */
int kube_events_prom(struct kube_events *q, const char *prefix, struct gs_buf *b);

/* A thread of its own that flushes through k as events come (for a program without an API
 * thread to spare); stop ends it (what is queued then is posted first, once). */
int kube_events_start(struct kube_events *q, struct kube *k, char *err, size_t errlen);
void kube_events_stop(struct kube_events *q);

/* The Event object as first posted (count 1, both timestamps now; for tests): the caller
 * json_decrefs it. */
json_t *kube_event_json(const char *component, const char *host, const char *type,
                        const char *reason, const char *ns, const char *name, const char *uid,
                        const char *message, time_t now, uint64_t seq);
