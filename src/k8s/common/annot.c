/* SPDX-License-Identifier: Apache-2.0 */
/* Codecs of gslice.io/gpus and gslice.io/assigned (annot.h): strict on what is read,
 * silent on fields it does not know. */
#include "annot.h"
#include "errtext.h"
#include "words.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- times and names ------------------------------------------------------------------ */

static int digits(const char **p, int n, int *ret) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    char c = (*p)[i];
    if (c < '0' || c > '9')
      return -EINVAL;
    v = v * 10 + (c - '0');
  }
  *p += n;
  *ret = v;
  return 0;
}

/* An RFC 3339 date-time's fields as written; offset in minutes east of UTC. */
struct rfc3339 {
  int year, month, day, hour, minute, second, offset;
};

/* The syntax alone: "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)", 't' and 'z' too. */
static int time_fields(const char *p, struct rfc3339 *t) {
  int oh = 0, om = 0;

  if (digits(&p, 4, &t->year) || *p++ != '-' || digits(&p, 2, &t->month) || *p++ != '-' ||
      digits(&p, 2, &t->day) || (*p != 'T' && *p != 't'))
    return -EINVAL;
  p++;
  if (digits(&p, 2, &t->hour) || *p++ != ':' || digits(&p, 2, &t->minute) || *p++ != ':' ||
      digits(&p, 2, &t->second))
    return -EINVAL;
  if (*p == '.') {
    p++;
    if (*p < '0' || *p > '9')
      return -EINVAL;
    while (*p >= '0' && *p <= '9')
      p++; /* fractions of a second do not matter for a heartbeat */
  }
  t->offset = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int sign = *p++ == '-' ? -1 : 1;
    if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om))
      return -EINVAL;
    t->offset = sign * (oh * 60 + om);
    if (oh > 23 || om > 59)
      return -ERANGE;
  } else {
    return -EINVAL;
  }
  return *p ? -EINVAL : 0;
}

static const char *const month_names[12] = {"January",   "February", "March",    "April",
                                            "May",       "June",     "July",     "August",
                                            "September", "October",  "November", "December"};

/* Whether the fields name an instant that exists (timegm would take Feb 31 as Mar 3). */
static int time_check(const struct rfc3339 *t, char *err, size_t errlen) {
  static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (t->year % 4 == 0 && t->year % 100 != 0) || t->year % 400 == 0;
  int utc_minute = ((t->hour * 60 + t->minute - t->offset) % 1440 + 1440) % 1440;

  if (t->month < 1 || t->month > 12)
    return k8s_err(err, errlen, -EINVAL, "month %d is not 1..12", t->month);
  int last = mdays[t->month - 1] + (t->month == 2 && leap);
  if (t->day < 1 || t->day > last)
    return k8s_err(err, errlen, -EINVAL, "day %d: %s %d has %d days", t->day,
                   month_names[t->month - 1], t->year, last);
  if (t->hour > 23)
    return k8s_err(err, errlen, -EINVAL, "hour %d is not 0..23", t->hour);
  if (t->minute > 59)
    return k8s_err(err, errlen, -EINVAL, "minute %d is not 0..59", t->minute);
  if (t->second > 60)
    return k8s_err(err, errlen, -EINVAL, "second %d is not 0..59 (60 in a leap second)", t->second);
  if (t->second == 60 && utc_minute != 23 * 60 + 59)
    return k8s_err(err, errlen, -EINVAL,
                   "second 60 is a leap second, which comes only at 23:59 UTC");
  return 0;
}

int k8s_time_parse_err(const char *text, time_t *ret, char *err, size_t errlen) {
  struct rfc3339 t;
  struct tm tm = {0};
  int rc = text ? time_fields(text, &t) : -EINVAL;

  if (rc == -ERANGE)
    return k8s_err(err, errlen, -EINVAL, "the offset from UTC is beyond 23:59");
  if (rc)
    return k8s_err(err, errlen, rc, "not of the form 2026-11-30T18:00:00Z");
  if ((rc = time_check(&t, err, errlen)))
    return rc;
  tm.tm_year = t.year - 1900;
  tm.tm_mon = t.month - 1;
  tm.tm_mday = t.day;
  tm.tm_hour = t.hour;
  tm.tm_min = t.minute;
  tm.tm_sec = t.second;
  *ret = timegm(&tm) - (time_t)t.offset * 60;
  return 0;
}

int k8s_time_parse(const char *text, time_t *ret) {
  return k8s_time_parse_err(text, ret, NULL, 0);
}

void k8s_time_format(time_t t, char *buf, size_t len) {
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* enum k8s_priority -> gsliced's; the words are words.h's, the same on the wire. */
static const int32_t gs_priorities[] = {
    [K8S_PRIO_LOW] = GS_PRIORITY_LOW,
    [K8S_PRIO_NORMAL] = GS_PRIORITY_NORMAL,
    [K8S_PRIO_HIGH] = GS_PRIORITY_HIGH,
};

int32_t k8s_priority_gs(enum k8s_priority p) {
  return (unsigned)p <= K8S_PRIO_HIGH ? gs_priorities[p] : INT32_MIN;
}

int k8s_priority_parse(const char *text, enum k8s_priority *ret) {
  int32_t v;
  if (gs_priority_parse(text, &v))
    return -EINVAL;
  for (unsigned i = K8S_PRIO_LOW; i <= K8S_PRIO_HIGH; i++)
    if (gs_priorities[i] == v) {
      *ret = (enum k8s_priority)i;
      return 0;
    }
  return -EINVAL;
}

const char *k8s_priority_name(enum k8s_priority p) {
  return gs_priority_name(k8s_priority_gs(p));
}

/* ---- field readers: each names the field it refuses ---------------------------------- */

struct reader {
  char *err;
  size_t errlen;
  const char *where; /* "gpus[2]" ... for the message */
};

static int need(const struct reader *r, const json_t *obj, const char *key, json_t **ret) {
  json_t *v = json_object_get(obj, key);
  if (!v)
    return k8s_err(r->err, r->errlen, -EINVAL, "%s: missing field \"%s\"", r->where, key);
  *ret = v;
  return 0;
}

static int get_uint(const struct reader *r, const json_t *obj, const char *key, uint64_t min,
                    uint64_t max, bool required, uint64_t dflt, uint64_t *ret) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    if (required)
      return k8s_err(r->err, r->errlen, -EINVAL, "%s: missing field \"%s\"", r->where, key);
    *ret = dflt;
    return 0;
  }
  if (!json_is_integer(v))
    return k8s_err(r->err, r->errlen, -EINVAL, "%s: \"%s\" must be an integer", r->where, key);
  json_int_t i = json_integer_value(v);
  if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
    return k8s_err(r->err, r->errlen, -EINVAL, "%s: \"%s\" is %lld, outside %llu..%llu", r->where,
                   key, (long long)i, (unsigned long long)min, (unsigned long long)max);
  *ret = (uint64_t)i;
  return 0;
}

static int get_str(const struct reader *r, const json_t *obj, const char *key, char *buf,
                   size_t len) {
  json_t *v = NULL;
  int rc = need(r, obj, key, &v);
  if (rc)
    return rc;
  if (!json_is_string(v))
    return k8s_err(r->err, r->errlen, -EINVAL, "%s: \"%s\" must be a string", r->where, key);
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  if (n == 0 || n >= len || strlen(s) != n)
    return k8s_err(r->err, r->errlen, -EINVAL, "%s: \"%s\" must be 1..%zu characters", r->where,
                   key, len - 1);
  memcpy(buf, s, n + 1);
  return 0;
}

static int get_bool(const struct reader *r, const json_t *obj, const char *key, bool dflt,
                    bool *ret) {
  json_t *v = json_object_get(obj, key);
  if (!v) {
    *ret = dflt;
    return 0;
  }
  if (!json_is_boolean(v))
    return k8s_err(r->err, r->errlen, -EINVAL, "%s: \"%s\" must be true or false", r->where, key);
  *ret = json_is_true(v);
  return 0;
}

static int load_object(const char *text, const char *what, json_t **ret, char *err, size_t errlen) {
  json_error_t je;
  json_t *root;
  if (!text || !*text)
    return k8s_err(err, errlen, -EINVAL, "%s is empty", what);
  root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return k8s_err(err, errlen, -EINVAL, "%s is not JSON: %s (at character %d)", what, je.text,
                   je.position);
  if (!json_is_object(root)) {
    json_decref(root);
    return k8s_err(err, errlen, -EINVAL, "%s must be a JSON object", what);
  }
  *ret = root;
  return 0;
}

static int check_version(const struct reader *r, const json_t *root, int newest, int *ret) {
  uint64_t v;
  int rc = get_uint(r, root, "version", 1, INT32_MAX, true, 0, &v);
  if (rc)
    return rc;
  if (v > (uint64_t)newest)
    return k8s_err(r->err, r->errlen, -EPROTONOSUPPORT,
                   "%s: version %llu is newer than this gslice reads (%d); upgrade gslice",
                   r->where, (unsigned long long)v, newest);
  *ret = (int)v;
  return 0;
}

/* ---- gslice.io/gpus ------------------------------------------------------------------- */

int k8s_node_gpus_decode(const char *text, struct k8s_node_gpus *ret, char *err, size_t errlen) {
  struct k8s_node_gpus *g = NULL;
  json_t *root = NULL, *list = NULL, *v;
  struct reader r = {err, errlen, K8S_ANNOT_GPUS};
  char where[64], hb[64], why[96];
  uint64_t u;
  int rc;

  rc = load_object(text, K8S_ANNOT_GPUS, &root, err, errlen);
  if (rc)
    return rc;
  g = calloc(1, sizeof(*g));
  if (!g) {
    rc = -ENOMEM;
    goto out;
  }
  rc = check_version(&r, root, K8S_ANNOT_VERSION, &g->version);
  if (rc)
    goto out;
  rc = get_str(&r, root, "heartbeat", hb, sizeof hb);
  if (rc)
    goto out;
  if (k8s_time_parse_err(hb, &g->heartbeat, why, sizeof why) < 0) {
    rc = k8s_err(err, errlen, -EINVAL,
                 "%s: \"heartbeat\" is \"%s\": %s (want an RFC 3339 time like "
                 "2026-11-30T18:00:00Z)",
                 r.where, hb, why);
    goto out;
  }
  rc = get_uint(&r, root, "slotsPerGpu", 1, K8S_MAX_SLOTS, true, 0, &u);
  if (rc)
    goto out;
  g->slots_per_gpu = (uint32_t)u;
  rc = need(&r, root, "gpus", &list);
  if (rc)
    goto out;
  if (!json_is_array(list) || json_array_size(list) > K8S_MAX_GPUS) {
    rc = k8s_err(err, errlen, -EINVAL, "%s: \"gpus\" must be an array of at most %d GPUs", r.where,
                 K8S_MAX_GPUS);
    goto out;
  }
  for (size_t i = 0; i < json_array_size(list); i++) {
    struct k8s_gpu *gpu = &g->gpus[i];
    v = json_array_get(list, i);
    snprintf(where, sizeof where, "%s: gpus[%zu]", K8S_ANNOT_GPUS, i);
    r.where = where;
    if (!json_is_object(v)) {
      rc = k8s_err(err, errlen, -EINVAL, "%s must be an object", where);
      goto out;
    }
    if ((rc = get_uint(&r, v, "index", 0, K8S_MAX_GPUS - 1, true, 0, &u)))
      goto out;
    gpu->index = (uint32_t)u;
    if ((rc = get_str(&r, v, "uuid", gpu->uuid, sizeof gpu->uuid)))
      goto out;
    if ((rc = get_uint(&r, v, "memory", 1, INT64_MAX, true, 0, &gpu->memory)))
      goto out;
    if ((rc = get_bool(&r, v, "healthy", true, &gpu->healthy)))
      goto out;
    if ((rc = get_uint(&r, v, "slots", 0, K8S_MAX_SLOTS, false, g->slots_per_gpu, &u)))
      goto out;
    gpu->slots = (uint32_t)u;
    for (size_t j = 0; j < i; j++) {
      if (g->gpus[j].index == gpu->index || strcmp(g->gpus[j].uuid, gpu->uuid) == 0) {
        rc = k8s_err(err, errlen, -EINVAL, "%s: index %u or uuid %s appears twice", where,
                     gpu->index, gpu->uuid);
        goto out;
      }
    }
    g->ngpus++;
  }
  *ret = *g;
  rc = 0;
out:
  free(g);
  json_decref(root);
  return rc;
}

/* The encoders' last step: root as compact text, fields in the order they were packed, in
 * *ret_text; root is released either way. 0 or -ENOMEM. */
static int dump_compact(json_t *root, char **ret_text) {
  char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);

  json_decref(root);
  if (!text)
    return -ENOMEM;
  *ret_text = text;
  return 0;
}

int k8s_node_gpus_encode(const struct k8s_node_gpus *g, char **ret_text) {
  json_t *root = NULL, *list;
  char hb[32];
  int rc = -ENOMEM;

  if (g->ngpus > K8S_MAX_GPUS || g->slots_per_gpu < 1 || g->slots_per_gpu > K8S_MAX_SLOTS)
    return -EINVAL;
  k8s_time_format(g->heartbeat, hb, sizeof hb);
  list = json_array();
  root = json_pack("{s:i, s:s, s:I, s:o}", "version", K8S_ANNOT_VERSION, "heartbeat", hb,
                   "slotsPerGpu", (json_int_t)g->slots_per_gpu, "gpus", list);
  if (!root)
    return -ENOMEM;
  for (uint32_t i = 0; i < g->ngpus; i++) {
    const struct k8s_gpu *gpu = &g->gpus[i];
    if (!gpu->uuid[0] || gpu->index >= K8S_MAX_GPUS || gpu->memory == 0 ||
        gpu->memory > INT64_MAX || gpu->slots > K8S_MAX_SLOTS) {
      rc = -EINVAL;
      goto out;
    }
    if (json_array_append_new(list, json_pack("{s:I, s:s, s:I, s:b, s:I}", "index",
                                              (json_int_t)gpu->index, "uuid", gpu->uuid, "memory",
                                              (json_int_t)gpu->memory, "healthy", gpu->healthy,
                                              "slots", (json_int_t)gpu->slots)))
      goto out;
  }
  return dump_compact(root, ret_text);
out:
  json_decref(root);
  return rc;
}

/* ---- gslice.io/assigned --------------------------------------------------------------- */

void k8s_assigned_free(struct k8s_assigned *a) {
  if (!a)
    return;
  for (uint32_t i = 0; i < a->ncontainers; i++)
    free(a->containers[i].gpus);
  free(a->containers);
  a->containers = NULL;
  a->ncontainers = 0;
}

static int decode_container(struct reader *r, const json_t *v, int version,
                            struct k8s_assigned_container *c) {
  json_t *list = NULL, *pv;
  char where[160];
  const char *outer = r->where;
  uint64_t u;
  int rc;

  if (!json_is_object(v))
    return k8s_err(r->err, r->errlen, -EINVAL, "%s must be an object", outer);
  if ((rc = get_str(r, v, "name", c->name, sizeof c->name)))
    return rc;
  if ((rc = get_bool(r, v, "init", false, &c->init)))
    return rc;
  if ((rc = get_bool(r, v, "sidecar", false, &c->sidecar)))
    return rc;
  if (c->sidecar && (!c->init || version < K8S_ANNOT_ASSIGNED_SIDECAR_VERSION))
    return k8s_err(r->err, r->errlen, -EINVAL,
                   "%s: a sidecar is an init container, in an assignment of version %d or later",
                   outer, K8S_ANNOT_ASSIGNED_SIDECAR_VERSION);
  if ((rc = get_uint(r, v, "computeLimit", 1, GS_PERCENT_MAX, false, GS_PERCENT_MAX, &u)))
    return rc;
  c->compute_limit = (uint32_t)u;
  if ((rc = get_uint(r, v, "weight", GS_WEIGHT_MIN, GS_WEIGHT_MAX, false, GS_WEIGHT_MIN, &u)))
    return rc;
  c->weight = (uint32_t)u;
  c->priority = K8S_PRIO_NORMAL;
  pv = json_object_get(v, "priority");
  if (pv && (!json_is_string(pv) || k8s_priority_parse(json_string_value(pv), &c->priority)))
    return k8s_err(r->err, r->errlen, -EINVAL, "%s: \"priority\" must be %s", outer,
                   GS_PRIORITY_WORDS);
  if ((rc = need(r, v, "gpus", &list)))
    return rc;
  if (!json_is_array(list) || json_array_size(list) < 1 || json_array_size(list) > K8S_MAX_GPUS)
    return k8s_err(r->err, r->errlen, -EINVAL, "%s: \"gpus\" must be an array of 1..%d GPUs", outer,
                   K8S_MAX_GPUS);
  c->gpus = calloc(json_array_size(list), sizeof(*c->gpus));
  if (!c->gpus)
    return -ENOMEM;
  for (size_t i = 0; i < json_array_size(list); i++) {
    struct k8s_assigned_gpu *g = &c->gpus[i];
    json_t *gv = json_array_get(list, i);
    snprintf(where, sizeof where, "%s.gpus[%zu]", outer, i);
    r->where = where;
    if (!json_is_object(gv))
      return k8s_err(r->err, r->errlen, -EINVAL, "%s must be an object", where);
    if ((rc = get_str(r, gv, "uuid", g->uuid, sizeof g->uuid)))
      return rc;
    if ((rc = get_uint(r, gv, "index", 0, K8S_MAX_GPUS - 1, true, 0, &u)))
      return rc;
    g->index = (uint32_t)u;
    if ((rc = get_uint(r, gv, "memory", 0, INT64_MAX, true, 0, &g->memory)))
      return rc;
    if ((rc = get_uint(r, gv, "compute", 0, GS_PERCENT_MAX, true, 0, &u)))
      return rc;
    g->compute = (uint32_t)u;
    if (g->compute > c->compute_limit)
      return k8s_err(r->err, r->errlen, -EINVAL,
                     "%s: compute %u%% is above the container's computeLimit %u%%", where,
                     g->compute, c->compute_limit);
    for (size_t j = 0; j < i; j++)
      if (strcmp(c->gpus[j].uuid, g->uuid) == 0 || c->gpus[j].index == g->index)
        return k8s_err(r->err, r->errlen, -EINVAL, "%s: GPU %s appears twice in one container",
                       where, g->uuid);
    c->ngpus++;
  }
  r->where = outer;
  return 0;
}

int k8s_assigned_decode(const char *text, struct k8s_assigned *ret, char *err, size_t errlen) {
  struct k8s_assigned a = {0};
  json_t *root = NULL, *list = NULL;
  struct reader r = {err, errlen, K8S_ANNOT_ASSIGNED};
  char where[96];
  int rc;

  rc = load_object(text, K8S_ANNOT_ASSIGNED, &root, err, errlen);
  if (rc)
    return rc;
  if ((rc = check_version(&r, root, K8S_ANNOT_ASSIGNED_SIDECAR_VERSION, &a.version)))
    goto out;
  if ((rc = get_str(&r, root, "node", a.node, sizeof a.node)))
    goto out;
  if ((rc = need(&r, root, "containers", &list)))
    goto out;
  if (!json_is_array(list) || json_array_size(list) > K8S_MAX_CONTAINERS) {
    rc = k8s_err(err, errlen, -EINVAL, "%s: \"containers\" must be an array of at most %d", r.where,
                 K8S_MAX_CONTAINERS);
    goto out;
  }
  a.containers = calloc(json_array_size(list) + 1, sizeof(*a.containers));
  if (!a.containers) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < json_array_size(list); i++) {
    snprintf(where, sizeof where, "%s: containers[%zu]", K8S_ANNOT_ASSIGNED, i);
    r.where = where;
    a.ncontainers++; /* counted first so k8s_assigned_free frees a half-read one */
    if ((rc = decode_container(&r, json_array_get(list, i), a.version, &a.containers[i])))
      goto out;
    for (size_t j = 0; j < i; j++)
      if (strcmp(a.containers[j].name, a.containers[i].name) == 0 &&
          a.containers[j].init == a.containers[i].init) {
        rc = k8s_err(err, errlen, -EINVAL, "%s: container \"%s\" appears twice", where,
                     a.containers[i].name);
        goto out;
      }
  }
  *ret = a;
  a.containers = NULL;
  a.ncontainers = 0;
  rc = 0;
out:
  k8s_assigned_free(&a);
  json_decref(root);
  return rc;
}

int k8s_assigned_encode(const struct k8s_assigned *a, char **ret_text) {
  json_t *root, *list;
  int rc = -ENOMEM, version = K8S_ANNOT_VERSION;

  if (!a->node[0] || a->ncontainers > K8S_MAX_CONTAINERS)
    return -EINVAL;
  for (uint32_t i = 0; i < a->ncontainers; i++) {
    if (a->containers[i].sidecar && !a->containers[i].init)
      return -EINVAL;
    if (a->containers[i].sidecar)
      version = K8S_ANNOT_ASSIGNED_SIDECAR_VERSION;
  }
  list = json_array();
  root = json_pack("{s:i, s:s, s:o}", "version", version, "node", a->node, "containers", list);
  if (!root)
    return -ENOMEM;
  for (uint32_t i = 0; i < a->ncontainers; i++) {
    const struct k8s_assigned_container *c = &a->containers[i];
    json_t *gpus = json_array();
    if (!c->name[0] || c->ngpus < 1 || c->ngpus > K8S_MAX_GPUS || c->compute_limit < 1 ||
        c->compute_limit > GS_PERCENT_MAX || c->weight < GS_WEIGHT_MIN ||
        c->weight > GS_WEIGHT_MAX || (unsigned)c->priority > K8S_PRIO_HIGH) {
      json_decref(gpus);
      rc = -EINVAL;
      goto out;
    }
    json_t *entry =
        json_pack("{s:s, s:b, s:o, s:I, s:s, s:I}", "name", c->name, "init", c->init, "gpus", gpus,
                  "computeLimit", (json_int_t)c->compute_limit, "priority",
                  k8s_priority_name(c->priority), "weight", (json_int_t)c->weight);
    /* Only on a sidecar's entry: the text of every other assignment stays as it was. */
    if (entry && c->sidecar && json_object_set_new(entry, "sidecar", json_true())) {
      json_decref(entry);
      entry = NULL;
    }
    if (json_array_append_new(list, entry))
      goto out;
    for (uint32_t j = 0; j < c->ngpus; j++) {
      const struct k8s_assigned_gpu *g = &c->gpus[j];
      if (!g->uuid[0] || g->index >= K8S_MAX_GPUS || g->compute > c->compute_limit ||
          g->memory > INT64_MAX) {
        rc = -EINVAL;
        goto out;
      }
      if (json_array_append_new(gpus,
                                json_pack("{s:s, s:I, s:I, s:I}", "uuid", g->uuid, "index",
                                          (json_int_t)g->index, "memory", (json_int_t)g->memory,
                                          "compute", (json_int_t)g->compute)))
        goto out;
    }
  }
  return dump_compact(root, ret_text);
out:
  json_decref(root);
  return rc;
}

bool k8s_assigned_equal(const struct k8s_assigned *a, const struct k8s_assigned *b) {
  if (strcmp(a->node, b->node) != 0 || a->ncontainers != b->ncontainers)
    return false;
  for (uint32_t i = 0; i < a->ncontainers; i++) {
    const struct k8s_assigned_container *x = &a->containers[i], *y = &b->containers[i];
    if (strcmp(x->name, y->name) != 0 || x->init != y->init || x->sidecar != y->sidecar ||
        x->ngpus != y->ngpus || x->compute_limit != y->compute_limit ||
        x->priority != y->priority || x->weight != y->weight)
      return false;
    for (uint32_t j = 0; j < x->ngpus; j++)
      if (strcmp(x->gpus[j].uuid, y->gpus[j].uuid) != 0 || x->gpus[j].index != y->gpus[j].index ||
          x->gpus[j].memory != y->gpus[j].memory || x->gpus[j].compute != y->gpus[j].compute)
        return false;
  }
  return true;
}
