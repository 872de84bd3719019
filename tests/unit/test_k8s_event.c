/* SPDX-License-Identifier: Apache-2.0 */
/* Events on pods (src/k8s/common/event.h): a repeat within the window is not queued again, a
 * new message or the window's end is; the bound per minute refuses a storm and refills; a full
 * queue drops, counted; the Event object is what `kubectl describe pod` shows (involvedObject
 * the pod, reason, type, count, source); posting to a server that is not there counts failures
 * and empties the queue. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "test.h"

static int add(struct kube_events *q, const char *name, const char *msg, time_t now) {
  return kube_events_add(q, "Warning", "GSliceRefused", "default", name, "uid-1", msg, now);
}

int main(void) {
  struct kube_events *q = NULL;
  struct kube_event_stats st;
  time_t t = 1800000000;
  char name[32];

  CHECK_EQ_INT(kube_events_new("gslice-node", "node-a", &q), 0);
  /* Repeats: the same pod, reason and message once a window. */
  CHECK_EQ_INT(add(q, "p", "why", t), 0);
  CHECK_EQ_INT(add(q, "p", "why", t + 1), 1);
  CHECK_EQ_INT(add(q, "p", "another why", t + 1), 0);
  CHECK_EQ_INT(add(q, "q", "why", t + 1), 0);
  CHECK_EQ_INT(add(q, "p", "why", t + KUBE_EVENT_REPEAT_S - 1), 1);
  CHECK_EQ_INT(add(q, "p", "why", t + KUBE_EVENT_REPEAT_S), 0);
  CHECK_EQ_INT(kube_events_add(q, "Warning", "", "default", "p", "", "m", t), -EINVAL);
  CHECK_EQ_INT(kube_events_add(q, "Warning", "R", "", "p", "", "m", t), -EINVAL);
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.queued, 4);
  CHECK_EQ_U64(st.repeated, 2);
  CHECK(kube_events_pending(q));

  /* A server that is not there: each queued Event fails once, none is kept. */
  struct kube_config *cfg = calloc(1, sizeof(*cfg));
  struct kube *k = NULL;
  cfg->server = strdup("http://127.0.0.1:1");
  CHECK_EQ_INT(kube_open_config(cfg, &k), 0);
  char err[1024] = "";
  CHECK_EQ_INT(kube_events_flush(q, k, err, sizeof err), 0);
  CHECK(strstr(err, "cannot post the GSliceRefused Event on pod default/") != NULL);
  CHECK(!kube_events_pending(q));
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.failed, 4);
  CHECK_EQ_U64(st.posted, 0);
  kube_events_free(q);

  /* A storm: KUBE_EVENT_PER_MINUTE at once, then refused until the bucket refills. */
  CHECK_EQ_INT(kube_events_new("gslice-node", "node-a", &q), 0);
  for (int i = 0; i < KUBE_EVENT_PER_MINUTE; i++) {
    snprintf(name, sizeof name, "p%d", i);
    CHECK_EQ_INT(add(q, name, "why", t), 0);
  }
  CHECK_EQ_INT(add(q, "late", "why", t), -EAGAIN);
  CHECK_EQ_INT(add(q, "late", "why", t), -EAGAIN); /* not remembered as posted */
  CHECK_EQ_INT(add(q, "late", "why", t + 1), 0);   /* one token a second */
  CHECK_EQ_INT(add(q, "later", "why", t + 1), -EAGAIN);
  /* A full queue (nothing flushed): dropped, counted. */
  int r = 0, i = 0;
  for (; i < 100 && r != -ENOSPC; i++) {
    snprintf(name, sizeof name, "f%d", i);
    r = add(q, name, "why", t + 60);
  }
  CHECK_EQ_INT(r, -ENOSPC);
  kube_events_stats(q, &st);
  CHECK_EQ_U64(st.queued, KUBE_EVENT_QUEUE_MAX);
  CHECK_EQ_U64(st.dropped_full, 1);
  CHECK_EQ_U64(st.dropped_rate, 3);
  kube_events_free(q);

  /* The object. */
  json_t *ev = kube_event_json("gslice-node", "node-a", "Warning", "GSliceRefused", "ns1", "pod1",
                               "u-1", "no GPU", t, 7);
  CHECK(ev != NULL);
  json_t *inv = json_object_get(ev, "involvedObject");
  CHECK_STR(json_string_value(json_object_get(inv, "kind")), "Pod");
  CHECK_STR(json_string_value(json_object_get(inv, "namespace")), "ns1");
  CHECK_STR(json_string_value(json_object_get(inv, "name")), "pod1");
  CHECK_STR(json_string_value(json_object_get(inv, "uid")), "u-1");
  CHECK_STR(json_string_value(json_object_get(ev, "reason")), "GSliceRefused");
  CHECK_STR(json_string_value(json_object_get(ev, "type")), "Warning");
  CHECK_STR(json_string_value(json_object_get(ev, "message")), "no GPU");
  CHECK_STR(json_string_value(json_object_get(ev, "firstTimestamp")), "2027-01-15T08:00:00Z");
  CHECK_EQ_INT((int)json_integer_value(json_object_get(ev, "count")), 1);
  json_t *meta = json_object_get(ev, "metadata");
  CHECK_STR(json_string_value(json_object_get(meta, "namespace")), "ns1");
  CHECK(strncmp(json_string_value(json_object_get(meta, "name")), "pod1.", 5) == 0);
  CHECK_STR(json_string_value(json_object_get(json_object_get(ev, "source"), "host")), "node-a");
  json_decref(ev);
  /* A pod name of 253 characters still makes a name of at most 253. */
  char longname[254];
  memset(longname, 'a', 253);
  longname[253] = 0;
  ev = kube_event_json("c", "", "Normal", "R", "ns", longname, "", "m", t, 1);
  CHECK(strlen(json_string_value(json_object_get(json_object_get(ev, "metadata"), "name"))) <= 253);
  CHECK(json_object_get(json_object_get(ev, "involvedObject"), "uid") == NULL);
  json_decref(ev);
  kube_close(k);
  return test_done();
}
