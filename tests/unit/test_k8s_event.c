/* SPDX-License-Identifier: Apache-2.0 */
/* Events on pods (src/k8s/common/event.h). Aggregation: repeats of the same pod, type, reason
 * and message within the window are counted into one Event (one POST, then PATCHes of count and
 * lastTimestamp; repeats while a write waits only raise its count), a PATCH of an Event gone
 * posts it again with the count, a failed POST leaves the count to the next write, the window's
 * end starts a new Event. Fairness: one namespace's flood takes its own bucket and share of the
 * queue, never another namespace's; the global bound still holds over all; a table of
 * namespaces that stays bounded; the attack run (5 to 64 namespaces flooding at 10/s: a
 * namespace asking one Event in 10 s still gets 90% of them, within the global bound); a repeat
 * refused its write takes no token for the repeats after it, one write later carries them. The
 * Event object is what `kubectl describe pod` shows (involvedObject the pod, reason, type, count,
 * source); a server that is not there counts failures and empties the queue. The API server is
 * kube_post and kube_merge_patch replaced at link time (-Wl,--wrap), calling the real ones when
 * `real` is set. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "event.h"
#include "test.h"

/* What the wrapped API server was sent, and what it answers. */
static struct {
  bool real;
  int posts, patches;
  int post_rc, patch_rc; /* answered (a negative errno, or 0) */
  json_t *last_post;     /* the last Event POSTed */
  json_t *last_patch;    /* the last PATCH's body */
  char patch_path[512];
  int names; /* the server's names: ev-1, ev-2... */
} api;

int __real_kube_post(struct kube *k, const char *path, const json_t *body, json_t **ret_body,
                     char *err, size_t errlen);
int __wrap_kube_post(struct kube *k, const char *path, const json_t *body, json_t **ret_body,
                     char *err, size_t errlen);
int __real_kube_merge_patch(struct kube *k, const char *path, const json_t *patch,
                            json_t **ret_body, char *err, size_t errlen);
int __wrap_kube_merge_patch(struct kube *k, const char *path, const json_t *patch,
                            json_t **ret_body, char *err, size_t errlen);

int __wrap_kube_post(struct kube *k, const char *path, const json_t *body, json_t **ret_body,
                     char *err, size_t errlen) {
  if (api.real)
    return __real_kube_post(k, path, body, ret_body, err, errlen);
  api.posts++;
  json_decref(api.last_post);
  api.last_post = json_deep_copy(body);
  if (api.post_rc) {
    snprintf(err, errlen, "refused");
    return api.post_rc;
  }
  if (ret_body) { /* the server's own name, as a generateName would be */
    char name[32];
    snprintf(name, sizeof name, "ev-%d", ++api.names);
    *ret_body = json_pack("{s:{s:s}}", "metadata", "name", name);
  }
  return 0;
}

int __wrap_kube_merge_patch(struct kube *k, const char *path, const json_t *patch,
                            json_t **ret_body, char *err, size_t errlen) {
  if (api.real)
    return __real_kube_merge_patch(k, path, patch, ret_body, err, errlen);
  api.patches++;
  json_decref(api.last_patch);
  api.last_patch = json_deep_copy(patch);
  snprintf(api.patch_path, sizeof api.patch_path, "%s", path);
  if (api.patch_rc)
    snprintf(err, errlen, "refused");
  return api.patch_rc;
}

static struct kube *k;

static int add_ns(struct kube_events *q, const char *ns, const char *name, const char *msg,
                  time_t now) {
  return kube_events_add(q, "Warning", "GSliceRefused", ns, name, "uid-1", msg, now);
}

static int add(struct kube_events *q, const char *name, const char *msg, time_t now) {
  return add_ns(q, "default", name, msg, now);
}

static int jint(const json_t *o, const char *key) {
  return (int)json_integer_value(json_object_get(o, key));
}

static const char *jstr(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

static void reset_api(void) {
  json_decref(api.last_post);
  json_decref(api.last_patch);
  memset(&api, 0, sizeof api);
}

/* Ten identical refusals are one Event with count 10, however the flushes fall. */
static void test_aggregated(time_t t) {
  struct kube_events *q = NULL;
  struct kube_event_stats st;
  char err[1024] = "";

  reset_api();
  CHECK_EQ_INT(kube_events_new("gslice-node", "node-a", &q), 0);
  /* A flush after each: one POST (count 1), then nine PATCHes of that Event. */
  CHECK_EQ_INT(add(q, "p", "why", t), 0);
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 1);
  for (int i = 1; i < 10; i++) {
    CHECK_EQ_INT(add(q, "p", "why", t + 10 * i), 1);
    CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 1);
  }
  CHECK_EQ_INT(api.posts, 1);
  CHECK_EQ_INT(api.patches, 9);
  CHECK_EQ_INT(jint(api.last_post, "count"), 1);
  CHECK_STR(api.patch_path, "/api/v1/namespaces/default/events/ev-1");
  CHECK_EQ_INT(jint(api.last_patch, "count"), 10);
  CHECK_STR(jstr(api.last_patch, "lastTimestamp"), "2027-01-15T08:01:30Z");
  CHECK_EQ_U64(json_object_size(api.last_patch), 2); /* count and lastTimestamp, nothing else */
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.queued, 1);
  CHECK_EQ_U64(st.posted, 1);
  CHECK_EQ_U64(st.patched, 9);
  CHECK_EQ_U64(st.repeated, 9);
  /* Another message, another pod: Events of their own. */
  CHECK_EQ_INT(add(q, "p", "another why", t + 100), 0);
  CHECK_EQ_INT(add(q, "q", "why", t + 100), 0);
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 2);
  CHECK_EQ_INT(api.posts, 3);

  /* Ten before a flush: the write waiting carries them all, one POST of count 10. */
  for (int i = 0; i < 10; i++)
    CHECK_EQ_INT(add(q, "r", "why", t + i), i ? 1 : 0);
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 1);
  CHECK_EQ_INT(api.posts, 4);
  CHECK_EQ_INT(api.patches, 9);
  CHECK_EQ_INT(jint(api.last_post, "count"), 10);
  CHECK_STR(jstr(api.last_post, "firstTimestamp"), "2027-01-15T08:00:00Z");
  CHECK_STR(jstr(api.last_post, "lastTimestamp"), "2027-01-15T08:00:09Z");

  /* The window slides with each repeat; past it, a new Event. */
  time_t last = t + 90;
  CHECK_EQ_INT(add(q, "p", "why", last + KUBE_EVENT_REPEAT_S - 1), 1);
  last += KUBE_EVENT_REPEAT_S - 1;
  CHECK_EQ_INT(add(q, "p", "why", last + KUBE_EVENT_REPEAT_S), 0);
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 2);
  CHECK_EQ_INT(api.posts, 5);
  CHECK_EQ_INT(jint(api.last_post, "count"), 1);
  kube_events_free(q);
}

/* The Event is gone (expired): the PATCH's 404 posts it again, with its count. A failed POST
 * leaves its count to the next write. */
static void test_gone(time_t t) {
  struct kube_events *q = NULL;
  struct kube_event_stats st;
  char err[1024] = "";

  reset_api();
  CHECK_EQ_INT(kube_events_new("gslice-node", "node-a", &q), 0);
  CHECK_EQ_INT(add(q, "p", "why", t), 0);
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 1);
  api.patch_rc = -ENOENT;
  CHECK_EQ_INT(add(q, "p", "why", t + 1), 1);
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 1);
  CHECK_EQ_INT(api.patches, 1);
  CHECK_EQ_INT(api.posts, 2);
  CHECK_EQ_INT(jint(api.last_post, "count"), 2);
  api.patch_rc = 0;
  CHECK_EQ_INT(add(q, "p", "why", t + 2), 1);
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 1);
  CHECK_STR(api.patch_path, "/api/v1/namespaces/default/events/ev-2"); /* the new one */
  CHECK_EQ_INT(jint(api.last_patch, "count"), 3);

  api.post_rc = -EIO;
  CHECK_EQ_INT(add(q, "s", "why", t), 0);
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 0);
  CHECK(strstr(err, "cannot post the GSliceRefused Event on pod default/s: refused") != NULL);
  api.post_rc = 0;
  CHECK_EQ_INT(add(q, "s", "why", t + 5), 1);
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 1);
  CHECK_EQ_INT(jint(api.last_post, "count"), 2);
  CHECK_STR(jstr(api.last_post, "reason"), "GSliceRefused");
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.failed, 1);
  CHECK_EQ_U64(st.posted, 3);
  CHECK_EQ_U64(st.patched, 1);
  kube_events_free(q);
}

/* A flood from namespace A leaves namespace B its Events. */
static void test_fair(time_t t) {
  struct kube_events *q = NULL;
  struct kube_event_stats st;
  char name[32], err[1024];
  int ok = 0, rate = 0;

  reset_api();
  CHECK_EQ_INT(kube_events_new("gslice-node", "node-a", &q), 0);
  /* A's burst, flushed as it comes: KUBE_EVENT_NS_BURST, then A's own bound. */
  for (int i = 0; i < 100; i++) {
    snprintf(name, sizeof name, "a%d", i);
    int r = add_ns(q, "tenant-a", name, "why", t);
    ok += r == 0;
    rate += r == -EAGAIN;
    kube_events_flush(q, k, err, sizeof err);
  }
  CHECK_EQ_INT(ok, KUBE_EVENT_NS_BURST);
  CHECK_EQ_INT(rate, 100 - KUBE_EVENT_NS_BURST);
  /* B is untouched by it. */
  for (int i = 0; i < 10; i++) {
    snprintf(name, sizeof name, "b%d", i);
    CHECK_EQ_INT(add_ns(q, "tenant-b", name, "why", t), 0);
  }
  /* A's repeats are counted, their PATCH over A's bound (dropped, counted). */
  CHECK_EQ_INT(add_ns(q, "tenant-a", "a0", "why", t), 1);
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.dropped_rate, 100 - KUBE_EVENT_NS_BURST + 1);
  CHECK_EQ_U64(st.dropped_ns, 100 - KUBE_EVENT_NS_BURST + 1);
  CHECK_EQ_U64(st.repeated, 1);
  /* A's bucket refills at its own pace: 12 a minute, one each 5 s. */
  CHECK_EQ_INT(add_ns(q, "tenant-a", "late", "why", t + 5), 0);
  CHECK_EQ_INT(add_ns(q, "tenant-a", "later", "why", t + 5), -EAGAIN);
  kube_events_flush(q, k, err, sizeof err);

  /* Not flushed: A holds at most KUBE_EVENT_NS_QUEUE_MAX places; B still finds one. */
  time_t t2 = t + 3600; /* every bucket full again */
  int full = 0;
  for (int i = 0; i < KUBE_EVENT_NS_QUEUE_MAX + 4; i++) {
    snprintf(name, sizeof name, "qa%d", i);
    full += add_ns(q, "tenant-a", name, "why", t2) == -ENOSPC;
  }
  CHECK_EQ_INT(full, 4);
  CHECK_EQ_INT(add_ns(q, "tenant-b", "qb", "why", t2), 0);
  kube_events_flush(q, k, err, sizeof err);

  /* The global bound over all namespaces: KUBE_EVENT_PER_MINUTE a minute, whoever asks. */
  time_t t3 = t2 + 3600;
  ok = 0;
  for (int n = 0; n < 6; n++)
    for (int i = 0; i < KUBE_EVENT_NS_BURST; i++) {
      char ns[16];
      snprintf(ns, sizeof ns, "g%d", n);
      snprintf(name, sizeof name, "p%d", i);
      ok += add_ns(q, ns, name, "why", t3) == 0;
      kube_events_flush(q, k, err, sizeof err);
    }
  CHECK_EQ_INT(ok, KUBE_EVENT_PER_MINUTE);
  kube_events_stats(q, &st);
  uint64_t ns_before = st.dropped_ns;
  CHECK_EQ_INT(add_ns(q, "fresh", "p", "why", t3), -EAGAIN); /* its own bucket is full */
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.dropped_ns, ns_before);

  /* Many namespaces: the table stays bounded (the oldest forgotten), each still served. */
  time_t t4 = t3 + 3600;
  ok = 0;
  for (int n = 0; n < 3 * KUBE_EVENT_NAMESPACES; n++) {
    char ns[16];
    snprintf(ns, sizeof ns, "m%d", n);
    ok += add_ns(q, ns, "p", "why", t4 + n) == 0;
    kube_events_flush(q, k, err, sizeof err);
  }
  CHECK_EQ_INT(ok, 3 * KUBE_EVENT_NAMESPACES);
  kube_events_free(q);
}

/* A full queue, the global storm and malformed names, as before aggregation. */
static void test_bounds(time_t t) {
  struct kube_events *q = NULL;
  struct kube_event_stats st;
  char name[32], ns[16];

  reset_api();
  CHECK_EQ_INT(kube_events_new("gslice-node", "node-a", &q), 0);
  CHECK_EQ_INT(kube_events_add(q, "Warning", "", "default", "p", "", "m", t), -EINVAL);
  CHECK_EQ_INT(kube_events_add(q, "Warning", "R", "", "p", "", "m", t), -EINVAL);
  /* Nothing flushed, spread over namespaces: the queue fills at KUBE_EVENT_QUEUE_MAX. */
  int r = 0, i = 0;
  for (; i < 200 && r != -ENOSPC; i++) {
    snprintf(ns, sizeof ns, "n%d", i % 8);
    snprintf(name, sizeof name, "f%d", i);
    r = add_ns(q, ns, name, "why", t + i); /* a token a second: the global bucket holds */
  }
  CHECK_EQ_INT(r, -ENOSPC);
  CHECK_EQ_INT(i, KUBE_EVENT_QUEUE_MAX + 1);
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.queued, KUBE_EVENT_QUEUE_MAX);
  CHECK_EQ_U64(st.dropped_full, 1);
  CHECK_EQ_U64(st.dropped_ns, 0);
  CHECK(kube_events_pending(q));

  /* A server that is not there: each queued Event fails once, none is kept. */
  api.real = true;
  char err[1024] = "";
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 0);
  CHECK(strstr(err, "cannot post the GSliceRefused Event on pod n0/") != NULL);
  CHECK(!kube_events_pending(q));
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.failed, KUBE_EVENT_QUEUE_MAX);
  CHECK_EQ_U64(st.posted, 0);
  api.real = false;
  kube_events_free(q);
}

/* A repeat refused its write takes no token for the repeats after it: they are counted, and
 * one write KUBE_EVENT_RETRY_S later carries them all; the namespace's tokens meanwhile are
 * its other Events'. */
static void test_paced(time_t t) {
  struct kube_events *q = NULL;
  struct kube_event_stats st;
  char name[32], err[1024];

  reset_api();
  CHECK_EQ_INT(kube_events_new("gslice-node", "node-a", &q), 0);
  for (int i = 0; i < KUBE_EVENT_NS_BURST; i++) {
    snprintf(name, sizeof name, "p%d", i);
    CHECK_EQ_INT(add_ns(q, "r", name, "why", t), 0);
    kube_events_flush(q, k, err, sizeof err);
  }
  CHECK_EQ_INT(add_ns(q, "r", "p0", "why", t), 1); /* r's bucket is empty: refused, counted */
  kube_events_flush(q, k, err, sizeof err);
  CHECK_EQ_INT(api.patches, 0);
  /* Ten a second for KUBE_EVENT_RETRY_S - 1 s: r's bucket refills (one each 5 s), no write. */
  for (int s = 1; s < KUBE_EVENT_RETRY_S; s++)
    for (int i = 0; i < 10; i++) {
      CHECK_EQ_INT(add_ns(q, "r", "p0", "why", t + s), 1);
      kube_events_flush(q, k, err, sizeof err);
    }
  CHECK_EQ_INT(api.patches, 0);
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.deferred, 10 * (KUBE_EVENT_RETRY_S - 1));
  CHECK_EQ_U64(st.dropped_rate, 1);
  /* Then one write: the count of all of them. */
  CHECK_EQ_INT(add_ns(q, "r", "p0", "why", t + KUBE_EVENT_RETRY_S), 1);
  kube_events_flush(q, k, err, sizeof err);
  CHECK_EQ_INT(api.patches, 1);
  CHECK_EQ_INT(jint(api.last_patch, "count"), 2 + 10 * (KUBE_EVENT_RETRY_S - 1) + 1);
  /* r's tokens were kept for its other Events: 6 refilled, one taken by that write. */
  int ok = 0;
  for (int i = 0; i < 10; i++) {
    snprintf(name, sizeof name, "n%d", i);
    ok += add_ns(q, "r", name, "why", t + KUBE_EVENT_RETRY_S) == 0;
    kube_events_flush(q, k, err, sizeof err);
  }
  CHECK_EQ_INT(ok, KUBE_EVENT_RETRY_S * KUBE_EVENT_NS_PER_MINUTE / 60 - 1);
  /* Still paced: the next repeats wait KUBE_EVENT_RETRY_S after that write. */
  CHECK_EQ_INT(add_ns(q, "r", "p0", "why", t + KUBE_EVENT_RETRY_S + 1), 1);
  kube_events_flush(q, k, err, sizeof err);
  CHECK_EQ_INT(api.patches, 1);
  kube_events_free(q);
}

/* The attack run: ATTACK_S simulated seconds in tenths, flushed as events come (the API stubbed),
 * nattack namespaces each adding one every `every` tenths of a second (new pods, or the same
 * refusal again when `same`) and a victim namespace one new Event every 10 s, after the
 * attackers' in its tenth. How many of the victim's were taken; writes[] per second. */
#define ATTACK_S 600
struct attack {
  int victim, asked;     /* the victim's Events taken, of asked */
  int writes[ATTACK_S];  /* POSTs and PATCHes sent in each second */
  int attackers_written; /* the attackers' writes */
};

static void attack_run(time_t t, int nattack, int every, bool same, struct attack *r) {
  struct kube_events *q = NULL;
  char name[32], ns[32], err[1024];
  memset(r, 0, sizeof *r);
  reset_api();
  CHECK_EQ_INT(kube_events_new("gslice-extender", "", &q), 0);
  for (int tick = 0; tick < ATTACK_S * 10; tick++) {
    time_t now = t + tick / 10;
    int before = api.posts + api.patches;
    if (tick % every == 0)
      for (int a = 0; a < nattack; a++) {
        snprintf(ns, sizeof ns, "attacker-%d", a);
        snprintf(name, sizeof name, "p%d", same ? 0 : tick);
        add_ns(q, ns, name, "why", now);
        kube_events_flush(q, k, err, sizeof err);
      }
    r->attackers_written += api.posts + api.patches - before;
    if (tick % 100 == 0) {
      snprintf(name, sizeof name, "v%d", tick);
      r->asked++;
      r->victim += add_ns(q, "victim", name, "why", now) == 0;
    }
    kube_events_flush(q, k, err, sizeof err);
    r->writes[tick / 10] += api.posts + api.patches - before;
  }
  kube_events_free(q);
}

/* The most writes in any 60 s (the global bound: KUBE_EVENT_PER_MINUTE at once, refilled at
 * KUBE_EVENT_PER_MINUTE a minute), and in any 60 s after the first minute's burst. */
static int window_max(const struct attack *r, int from) {
  int most = 0;
  for (int s = from; s + 60 <= ATTACK_S; s++) {
    int n = 0;
    for (int i = s; i < s + 60; i++)
      n += r->writes[i];
    if (n > most)
      most = n;
  }
  return most;
}

/* One tenant with several namespaces floods; a namespace that asks little (one Event in 10 s,
 * under its fair share of the global bound) still gets its Events, and the global bound holds
 * over all. The attack run's table, printed. */
static void test_attack(time_t t) {
  static const struct {
    int n, every;
    bool same;
  } runs[] = {{1, 1, false}, {3, 1, false}, {4, 1, false}, {5, 1, false},  {5, 40, false},
              {5, 1, true},  {8, 1, false}, {8, 1, true},  {16, 1, false}, {64, 1, false}};
  static struct attack r;
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    attack_run(t, runs[i].n, runs[i].every, runs[i].same, &r);
    int total = 0;
    for (int s = 0; s < ATTACK_S; s++)
      total += r.writes[s];
    printf("attack: %2d namespaces x one each %2d/10 s%s: victim %2d of %d; writes %d in %d s, "
           "at most %d in 60 s (%d after the first minute)\n",
           runs[i].n, runs[i].every, runs[i].same ? " (repeats)" : "", r.victim, r.asked, total,
           ATTACK_S, window_max(&r, 0), window_max(&r, 60));
    /* The victim gets 90%: up to 8 floods its 6 a minute are within its share (60/9), and
     * past that it asks for less than they do, so it leaves less of the reserve. */
    CHECK(r.victim * 10 >= r.asked * 9);
    /* The global bucket: KUBE_EVENT_PER_MINUTE at once, and as many a minute. */
    CHECK(window_max(&r, 0) <= 2 * KUBE_EVENT_PER_MINUTE);
    CHECK(total <= KUBE_EVENT_PER_MINUTE * (ATTACK_S / 60 + 1));
  }
}

static void test_object(time_t t) {
  json_t *ev = kube_event_json("gslice-node", "node-a", "Warning", "GSliceRefused", "ns1", "pod1",
                               "u-1", "no GPU", t, 7);
  CHECK(ev != NULL);
  json_t *inv = json_object_get(ev, "involvedObject");
  CHECK_STR(jstr(inv, "kind"), "Pod");
  CHECK_STR(jstr(inv, "namespace"), "ns1");
  CHECK_STR(jstr(inv, "name"), "pod1");
  CHECK_STR(jstr(inv, "uid"), "u-1");
  CHECK_STR(jstr(ev, "reason"), "GSliceRefused");
  CHECK_STR(jstr(ev, "type"), "Warning");
  CHECK_STR(jstr(ev, "message"), "no GPU");
  CHECK_STR(jstr(ev, "firstTimestamp"), "2027-01-15T08:00:00Z");
  CHECK_STR(jstr(ev, "lastTimestamp"), "2027-01-15T08:00:00Z");
  CHECK_EQ_INT(jint(ev, "count"), 1);
  json_t *meta = json_object_get(ev, "metadata");
  CHECK_STR(jstr(meta, "namespace"), "ns1");
  CHECK(strncmp(jstr(meta, "name"), "pod1.", 5) == 0);
  CHECK_STR(jstr(json_object_get(ev, "source"), "host"), "node-a");
  json_decref(ev);
  /* A pod name of 253 characters still makes a name of at most 253. */
  char longname[254];
  memset(longname, 'a', 253);
  longname[253] = 0;
  ev = kube_event_json("c", "", "Normal", "R", "ns", longname, "", "m", t, 1);
  CHECK(strlen(jstr(json_object_get(ev, "metadata"), "name")) <= 253);
  CHECK(json_object_get(json_object_get(ev, "involvedObject"), "uid") == NULL);
  json_decref(ev);
}

/* Whether text has the sample line "name value". */
static bool has_sample(const char *text, const char *name, uint64_t value) {
  char line[256];
  snprintf(line, sizeof line, "\n%s %llu\n", name, (unsigned long long)value);
  return strstr(text, line) != NULL;
}

/* kube_events_prom: every stat, under its name, as a counter; the families there (at 0) before
 * anything happened. Driven to non-zero deferred and dropped_share: a repeat refused, then
 * repeated within KUBE_EVENT_RETRY_S; seven namespaces asking in turn past their share of the
 * global bucket, which keeps its reserve for a namespace asking little. */
static void test_prom(time_t t) {
  struct kube_events *q = NULL;
  struct kube_event_stats st;
  struct gs_buf b = GS_BUF_INIT(0);
  char name[32], ns[16], err[1024];

  reset_api();
  CHECK_EQ_INT(kube_events_new("gslice-x", "", &q), 0);
  CHECK_EQ_INT(kube_events_prom(q, "gslice_x", &b), 0);
  CHECK(strstr(b.p, "# TYPE gslice_x_events_total counter\n") != NULL);
  CHECK(strstr(b.p, "\ngslice_x_events_total{outcome=\"dropped_rate\"} 0\n") != NULL);
  const char *fam[] = {"queued", "deferred", "dropped_namespace", "dropped_share"};
  for (size_t i = 0; i < 4; i++) {
    char f[64], type[128];
    snprintf(f, sizeof f, "gslice_x_events_%s_total", fam[i]);
    snprintf(type, sizeof type, "# TYPE %s counter\n", f);
    CHECK(strstr(b.p, type) != NULL);
    CHECK(has_sample(b.p, f, 0));
  }
  free(b.p);

  for (int i = 0; i < KUBE_EVENT_NS_BURST; i++) {
    snprintf(name, sizeof name, "p%d", i);
    CHECK_EQ_INT(add_ns(q, "r", name, "why", t), 0);
    kube_events_flush(q, k, err, sizeof err);
  }
  CHECK_EQ_INT(add_ns(q, "r", "p0", "why", t), 1);     /* refused: r's bucket is empty */
  CHECK_EQ_INT(add_ns(q, "r", "p0", "why", t + 1), 1); /* deferred */
  time_t t2 = t + 3600;
  int share_drops = 0;
  for (int round = 0; round < 20; round++)
    for (int n = 0; n < 7; n++) {
      snprintf(ns, sizeof ns, "s%d", n);
      snprintf(name, sizeof name, "p%d", round);
      share_drops += add_ns(q, ns, name, "why", t2) == -EAGAIN;
      kube_events_flush(q, k, err, sizeof err);
    }
  CHECK_EQ_INT(add_ns(q, "quiet", "q", "why", t2), 0);
  kube_events_flush(q, k, err, sizeof err);
  api.post_rc = -EIO;
  CHECK_EQ_INT(add_ns(q, "quiet", "q2", "why", t2 + 60), 0);
  kube_events_flush(q, k, err, sizeof err);

  kube_events_stats(q, &st);
  CHECK(st.deferred == 1 && st.dropped_share > 0 && st.failed == 1 && st.dropped_ns == 1);
  CHECK_EQ_U64(st.dropped_share, (uint64_t)share_drops);
  b = (struct gs_buf)GS_BUF_INIT(0);
  CHECK_EQ_INT(kube_events_prom(q, "gslice_x", &b), 0);
  const char *outcome[] = {"posted",  "failed",       "repeated",
                           "patched", "dropped_full", "dropped_rate"};
  const uint64_t by_outcome[] = {st.posted,  st.failed,       st.repeated,
                                 st.patched, st.dropped_full, st.dropped_rate};
  for (size_t i = 0; i < 6; i++) {
    char sample[128];
    snprintf(sample, sizeof sample, "gslice_x_events_total{outcome=\"%s\"}", outcome[i]);
    CHECK(has_sample(b.p, sample, by_outcome[i]));
  }
  CHECK(has_sample(b.p, "gslice_x_events_queued_total", st.queued));
  CHECK(has_sample(b.p, "gslice_x_events_deferred_total", st.deferred));
  CHECK(has_sample(b.p, "gslice_x_events_dropped_namespace_total", st.dropped_ns));
  CHECK(has_sample(b.p, "gslice_x_events_dropped_share_total", st.dropped_share));
  free(b.p);
  /* A bounded buffer: its error, not a cut text passed off as whole. */
  b = (struct gs_buf)GS_BUF_INIT(100);
  CHECK_EQ_INT(kube_events_prom(q, "gslice_x", &b), -EFBIG);
  free(b.p);
  kube_events_free(q);
}

int main(void) {
  time_t t = 1800000000;
  struct kube_config *cfg = calloc(1, sizeof(*cfg));
  cfg->server = strdup("http://127.0.0.1:1");
  CHECK_EQ_INT(kube_open_config(cfg, &k), 0);

  test_aggregated(t);
  test_gone(t);
  test_fair(t);
  test_bounds(t);
  test_object(t);
  test_paced(t);
  test_attack(t);
  test_prom(t);
  reset_api();
  kube_close(k);
  return test_done();
}
