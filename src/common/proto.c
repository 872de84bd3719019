/* SPDX-License-Identifier: Apache-2.0 */
/* Encoding, framing checks and validation of the gsliced wire protocol (proto.h). */
#include "proto.h"

#include "size.h"
#include "words.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const struct {
  const char *name;
  size_t body;
} msg_types[GS_MSG_TYPE_END] = {
    [GS_MSG_HELLO] = {"HELLO", sizeof(struct gs_msg_hello)},
    [GS_MSG_HELLO_OK] = {"HELLO_OK", sizeof(struct gs_msg_hello_ok)},
    [GS_MSG_ERROR] = {"ERROR", sizeof(struct gs_msg_error)},
    [GS_MSG_OK] = {"OK", sizeof(struct gs_msg_ok)},
    [GS_MSG_REGISTER] = {"REGISTER", sizeof(struct gs_msg_register)},
    [GS_MSG_REGISTERED] = {"REGISTERED", sizeof(struct gs_msg_registered)},
    [GS_MSG_UNREGISTER] = {"UNREGISTER", sizeof(struct gs_msg_unregister)},
    [GS_MSG_TOKEN_REQUEST] = {"TOKEN_REQUEST", sizeof(struct gs_msg_token_request)},
    [GS_MSG_TOKEN_GRANT] = {"TOKEN_GRANT", sizeof(struct gs_msg_token_grant)},
    [GS_MSG_TOKEN_RELEASE] = {"TOKEN_RELEASE", sizeof(struct gs_msg_token_release)},
    [GS_MSG_TOKEN_REVOKE] = {"TOKEN_REVOKE", sizeof(struct gs_msg_token_revoke)},
    [GS_MSG_STATUS] = {"STATUS", sizeof(struct gs_msg_status)},
    [GS_MSG_STATUS_REPLY] = {"STATUS_REPLY", sizeof(struct gs_msg_status_reply)},
    [GS_MSG_SET] = {"SET", sizeof(struct gs_msg_set)},
    [GS_MSG_PING] = {"PING", sizeof(struct gs_msg_ping)},
    [GS_MSG_PONG] = {"PONG", sizeof(struct gs_msg_ping)},
};

const char *gs_msg_type_name(uint32_t type) {
  if (type == 0 || type >= GS_MSG_TYPE_END)
    return "?";
  return msg_types[type].name;
}

size_t gs_msg_body_size(uint32_t type) {
  if (type == 0 || type >= GS_MSG_TYPE_END)
    return 0;
  return msg_types[type].body;
}

int gs_msg_encode(void *buf, size_t cap, uint32_t type, uint32_t seq, const void *body,
                  size_t body_len, size_t *ret_len) {
  size_t want = gs_msg_body_size(type);
  struct gs_msg_hdr h;

  if (want == 0 || !buf || (body_len && !body))
    return -EINVAL;
  if (type == GS_MSG_STATUS_REPLY) {
    const struct gs_msg_status_reply *r = body;
    if (body_len < want || r->nslices > GS_PROTO_MAX_SLICES ||
        body_len != want + (size_t)r->nslices * sizeof(struct gs_slice_status))
      return -EINVAL;
  } else if (body_len != want) {
    return -EINVAL;
  }
  if (cap < sizeof(h) + body_len)
    return -ENOBUFS;
  h = (struct gs_msg_hdr){.magic = GS_PROTO_MAGIC,
                          .version = GS_PROTO_VERSION,
                          .type = (uint16_t)type,
                          .length = (uint32_t)(sizeof(h) + body_len),
                          .seq = seq};
  memcpy(buf, &h, sizeof(h));
  memcpy((char *)buf + sizeof(h), body, body_len);
  *ret_len = sizeof(h) + body_len;
  return 0;
}

int gs_msg_frame(const void *buf, size_t len, size_t cap, size_t *ret_len) {
  size_t want;
  int r = gs_msg_peek(buf, len, &want);

  if (r < 0)
    return r;
  if (want > cap)
    return -EPROTO;
  if (len < want)
    return -EAGAIN;
  *ret_len = want;
  return 0;
}

void gs_msg_consume(void *buf, size_t *len, size_t n) {
  memmove(buf, (unsigned char *)buf + n, *len - n);
  *len -= n;
}

int gs_msg_peek(const void *buf, size_t len, size_t *ret_len) {
  struct gs_msg_hdr h;
  size_t body, min, max;

  if (len < sizeof(h))
    return -EAGAIN;
  memcpy(&h, buf, sizeof(h));
  if (h.magic != GS_PROTO_MAGIC || h.version != GS_PROTO_VERSION)
    return -EPROTO;
  body = gs_msg_body_size(h.type);
  if (body == 0)
    return -EPROTO;
  min = sizeof(h) + body;
  max = h.type == GS_MSG_STATUS_REPLY ? GS_PROTO_MAX_MSG : min;
  if (h.length < min || h.length > max)
    return -EPROTO;
  *ret_len = h.length;
  return 0;
}

static int str_ok(const char *s, size_t cap) {
  return memchr(s, '\0', cap) != NULL;
}

/* The per-GPU arrays (proto.h, gs_spec_per_gpu): 0 outside the mask and where their bit is
 * clear; a request within the limit, a cap within GS_SIZE_MAX. */
static int per_gpu_check(const struct gs_slice_spec *spec, char *why, size_t why_len) {
  uint32_t mask = gs_spec_mask(spec);

  for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
    uint32_t request = spec->gpu_compute_request[g];
    uint64_t cap = spec->gpu_memory_cap[g];
    int in = (mask & (1u << g)) != 0;
    const char *reason = NULL;

    if ((request && (!in || !(spec->per_gpu & GS_SPEC_GPU_REQUEST))) ||
        (cap && (!in || !(spec->per_gpu & GS_SPEC_GPU_MEMORY))))
      reason = "a per-GPU value for a GPU outside the mask, or without its per_gpu flag";
    else if (request > spec->compute_limit)
      reason = "compute limit is below the request on a GPU";
    else if (cap > GS_SIZE_MAX)
      reason = "memory cap is over " GS_SIZE_MAX_TEXT " on a GPU";
    if (reason) {
      if (why && why_len)
        snprintf(why, why_len, "GPU %u: %s", g, reason);
      return -EINVAL;
    }
  }
  return 0;
}

int gs_slice_spec_check(const struct gs_slice_spec *spec, char *why, size_t why_len) {
  /* A format taking lo and hi, the bounds it names (when it names any). */
  const char *reason = NULL;
  unsigned lo = 0, hi = 0;

  if (!str_ok(spec->name, sizeof(spec->name))) {
    reason = "name is not terminated";
  } else if (spec->compute_request > GS_PERCENT_MAX) {
    reason = "compute request is over %u%%";
    lo = GS_PERCENT_MAX;
  } else if (spec->compute_limit == 0 || spec->compute_limit > GS_PERCENT_MAX) {
    reason = "compute limit must be %u..%u%%";
    lo = 1;
    hi = GS_PERCENT_MAX;
  } else if (spec->compute_limit < spec->compute_request) {
    reason = "compute limit is below the request";
  } else if (spec->priority < GS_PRIORITY_LOW || spec->priority > GS_PRIORITY_HIGH) {
    reason = "priority must be " GS_PRIORITY_WORDS;
  } else if (spec->weight < GS_WEIGHT_MIN || spec->weight > GS_WEIGHT_MAX) {
    reason = "weight must be %u..%u";
    lo = GS_WEIGHT_MIN;
    hi = GS_WEIGHT_MAX;
  } else if (GS_MAX_GPUS < 32 && (spec->gpu_mask >> GS_MAX_GPUS) != 0) {
    reason = "GPU index out of range";
  } else if (spec->memory_cap > GS_SIZE_MAX) {
    reason = "memory cap is over " GS_SIZE_MAX_TEXT;
  } else if (spec->per_gpu & ~(uint32_t)GS_SPEC_GPU_KNOWN) {
    reason = "unknown per-GPU flags";
  }
  if (!reason)
    return per_gpu_check(spec, why, why_len);
  if (why && why_len) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(why, why_len, reason, lo, hi);
#pragma GCC diagnostic pop
  }
  return -EINVAL;
}

uint32_t gs_spec_mask(const struct gs_slice_spec *spec) {
  return spec->gpu_mask ? spec->gpu_mask : 1u;
}

uint32_t gs_spec_request(const struct gs_slice_spec *spec, uint32_t gpu) {
  if ((spec->per_gpu & GS_SPEC_GPU_REQUEST) && gpu < GS_MAX_GPUS)
    return spec->gpu_compute_request[gpu];
  return spec->compute_request;
}

uint64_t gs_spec_memory_cap(const struct gs_slice_spec *spec, uint32_t gpu) {
  if ((spec->per_gpu & GS_SPEC_GPU_MEMORY) && gpu < GS_MAX_GPUS)
    return spec->gpu_memory_cap[gpu];
  return spec->memory_cap;
}

void gs_spec_normalize(struct gs_slice_spec *spec) {
  uint32_t mask = gs_spec_mask(spec), request = 0;
  uint64_t cap = 0;
  int uncapped = 0;
  struct gs_slice_spec n = *spec;

  for (uint32_t g = 0; g < GS_MAX_GPUS; g++) {
    n.gpu_compute_request[g] = (mask & (1u << g)) ? gs_spec_request(spec, g) : 0;
    n.gpu_memory_cap[g] = (mask & (1u << g)) ? gs_spec_memory_cap(spec, g) : 0;
    if (!(mask & (1u << g)))
      continue;
    if (n.gpu_compute_request[g] > request)
      request = n.gpu_compute_request[g];
    if (n.gpu_memory_cap[g] > cap)
      cap = n.gpu_memory_cap[g];
    uncapped |= n.gpu_memory_cap[g] == 0;
  }
  n.per_gpu = GS_SPEC_GPU_REQUEST | GS_SPEC_GPU_MEMORY;
  n.compute_request = request;
  n.memory_cap = uncapped ? 0 : cap;
  *spec = n;
}

static int check_body(const struct gs_msg *m) {
  switch (m->hdr.type) {
  case GS_MSG_HELLO:
    if (m->u.hello.role < GS_ROLE_CLI || m->u.hello.role > GS_ROLE_RUNNER)
      return -EPROTO;
    return 0;
  case GS_MSG_HELLO_OK:
    if (m->u.hello_ok.slice_id && gs_slice_spec_check(&m->u.hello_ok.spec, NULL, 0))
      return -EPROTO;
    return 0;
  case GS_MSG_ERROR:
    if (m->u.error.code >= 0 || !str_ok(m->u.error.text, sizeof(m->u.error.text)))
      return -EPROTO;
    return 0;
  case GS_MSG_REGISTER:
    if (m->u.reg.flags & ~(uint32_t)GS_REGISTER_KNOWN)
      return -EPROTO;
    return gs_slice_spec_check(&m->u.reg.spec, NULL, 0) ? -EPROTO : 0;
  case GS_MSG_REGISTERED:
    if (m->u.registered.slice_id == 0 ||
        !str_ok(m->u.registered.state_dir, sizeof(m->u.registered.state_dir)))
      return -EPROTO;
    return 0;
  case GS_MSG_UNREGISTER: return m->u.unregister.slice_id ? 0 : -EPROTO;
  case GS_MSG_TOKEN_REQUEST: return m->u.token_request.gpu < GS_MAX_GPUS ? 0 : -EPROTO;
  case GS_MSG_TOKEN_GRANT: return m->u.token_grant.gpu < GS_MAX_GPUS ? 0 : -EPROTO;
  case GS_MSG_TOKEN_RELEASE:
    /* A burst (or a kernel) longer than an hour is a lie or a bug; refuse it rather than
     * let one message wreck every share on the GPU. */
    if (m->u.token_release.gpu >= GS_MAX_GPUS || m->u.token_release.more > 1 ||
        m->u.token_release.used_ns > 3600ull * 1000000000 ||
        m->u.token_release.kernel_ns > 3600ull * 1000000000 ||
        (m->u.token_release.flags & ~(GS_RELEASE_PENDING | GS_RELEASE_CHARGE)) ||
        m->u.token_release.flags == (GS_RELEASE_PENDING | GS_RELEASE_CHARGE))
      return -EPROTO;
    return 0;
  case GS_MSG_TOKEN_REVOKE: return m->u.token_revoke.gpu < GS_MAX_GPUS ? 0 : -EPROTO;
  case GS_MSG_STATUS_REPLY:
    if (m->u.status_reply.ngpus > GS_MAX_GPUS)
      return -EPROTO;
    for (uint32_t i = 0; i < m->u.status_reply.nslices; i++) {
      const struct gs_slice_status *s = &m->status_slices[i];
      if (!str_ok(s->name, sizeof(s->name)) || s->nprocs > GS_SLICE_MAX_PIDS ||
          s->ngpus > GS_MAX_GPUS)
        return -EPROTO;
    }
    return 0;
  case GS_MSG_SET: {
    /* Each field being set must make sense alone; the daemon checks the
     * merged spec (limit against request) and says why it refuses. */
    const struct gs_msg_set *st = &m->u.set;
    if (st->slice_id == 0 || st->fields == 0 || (st->fields & ~(uint32_t)GS_SET_ALL))
      return -EPROTO;
    if ((st->fields & GS_SET_REQUEST) && st->spec.compute_request > GS_PERCENT_MAX)
      return -EPROTO;
    if ((st->fields & GS_SET_LIMIT) &&
        (st->spec.compute_limit == 0 || st->spec.compute_limit > GS_PERCENT_MAX))
      return -EPROTO;
    if ((st->fields & GS_SET_PRIORITY) &&
        (st->spec.priority < GS_PRIORITY_LOW || st->spec.priority > GS_PRIORITY_HIGH))
      return -EPROTO;
    if ((st->fields & GS_SET_WEIGHT) &&
        (st->spec.weight < GS_WEIGHT_MIN || st->spec.weight > GS_WEIGHT_MAX))
      return -EPROTO;
    if (st->spec.per_gpu & ~(uint32_t)GS_SPEC_GPU_KNOWN)
      return -EPROTO;
    for (uint32_t g = 0; g < GS_MAX_GPUS; g++)
      if (st->spec.gpu_compute_request[g] > GS_PERCENT_MAX ||
          st->spec.gpu_memory_cap[g] > GS_SIZE_MAX)
        return -EPROTO;
    return 0;
  }
  default: return 0;
  }
}

/* Only the header and the type's own body are written, here and in *ret: a struct gs_msg is
 * 6 KB (the status reply's), and a token message's 40 bytes decoded through a zeroed copy of all
 * of it wrote 12 KB a message, 200 cache lines of the hook's helper thread's a token cycle. The
 * rest of the union is not the type's and is never read. */
int gs_msg_decode(const void *buf, size_t len, struct gs_msg *ret) {
  struct gs_msg m;
  size_t want, body;
  int r;

  r = gs_msg_peek(buf, len, &want);
  if (r < 0)
    return r == -EAGAIN ? -EPROTO : r;
  if (want != len)
    return -EPROTO;
  memcpy(&m.hdr, buf, sizeof(m.hdr));
  body = gs_msg_body_size(m.hdr.type);
  memcpy(&m.u, (const char *)buf + sizeof(m.hdr), body);
  m.status_slices = NULL;
  if (m.hdr.type == GS_MSG_STATUS_REPLY) {
    if (m.u.status_reply.nslices > GS_PROTO_MAX_SLICES ||
        len != sizeof(m.hdr) + body +
                   (size_t)m.u.status_reply.nslices * sizeof(struct gs_slice_status))
      return -EPROTO;
    m.status_slices = (const struct gs_slice_status *)((const char *)buf + sizeof(m.hdr) + body);
  }
  r = check_body(&m);
  if (r < 0)
    return r;
  memcpy(ret, &m, offsetof(struct gs_msg, u) + body);
  ret->status_slices = m.status_slices;
  return 0;
}
