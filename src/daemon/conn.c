/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's connections (conn.h): a client's bytes in and out, its share of a loop turn, its
 * close. */
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "registry.h"

static void resume_cb(struct loop *l, uint64_t id, void *data);

/* Requests left in c->in (or in its socket) when its share of the turn ran out: handled at the
 * next turn, after the connections that were waiting. A timer due now runs after this turn's fd
 * events; the socket alone would not do, its data may already all be in c->in. */
static void conn_resume_later(struct conn *c) {
  if (!c->resume_timer && loop_add_timer(c->set->loop, 0, resume_cb, c, &c->resume_timer) < 0)
    c->resume_timer = 0; /* no timer: the next byte it sends wakes it, as before */
}

static void conn_flush(struct conn *c) {
  while (c->out.len) {
    ssize_t n = send(c->fd, c->out.p, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN)
        break;
      return; /* the read side sees the error and closes */
    }
    gs_buf_consume(&c->out, (size_t)n);
  }
  if (!c->out.len && c->out.cap > CONN_OUT_KEEP) {
    c->set->freed_since_trim += c->out.cap;
    gs_buf_free(&c->out);
  }
  /* Its requests wait while a reply waits (conn_serve): they go on once it is read. */
  if (!c->out.len && c->inlen)
    conn_resume_later(c);
  loop_mod_fd(c->set->loop, c->fd, EPOLLIN | EPOLLRDHUP | (c->out.len ? EPOLLOUT : 0));
}

/* Queues one message; a client that does not read is dropped, not buffered forever. */
int conn_send(struct conn *c, uint32_t type, uint32_t seq, const void *body, size_t len) {
  size_t need = sizeof(struct gs_msg_hdr) + len, n;

  /* Closed where that is safe (conn_cb, housekeeping): callers may be walking the list. A
   * buffer that cannot grow (no memory) drops the client too: its reply would be lost. */
  if (c->out.len + need > CONN_OUT_MAX || gs_buf_reserve(&c->out, need) < 0) {
    c->dropped = true;
    return c->out.err ? c->out.err : -ENOBUFS;
  }
  int r = gs_msg_encode(c->out.p + c->out.len, c->out.cap - c->out.len, type, seq, body, len, &n);
  if (r < 0)
    return r;
  c->out.len += n;
  c->out.p[c->out.len] = 0;
  conn_flush(c);
  return 0;
}

void conn_send_error(struct conn *c, uint32_t seq, int code, const char *text) {
  struct gs_msg_error e = {.code = code < 0 ? code : -EINVAL};
  snprintf(e.text, sizeof(e.text), "%s", text);
  conn_send(c, GS_MSG_ERROR, seq, &e, sizeof(e));
}

void conn_send_ok(struct conn *c, uint32_t seq) {
  struct gs_msg_ok ok = {0};
  conn_send(c, GS_MSG_OK, seq, &ok, sizeof(ok));
}

void conn_join_slice(struct conn *c, struct slice *s) {
  c->slice_next = s->conns;
  if (s->conns)
    s->conns->slice_pprev = &c->slice_next;
  s->conns = c;
  c->slice_pprev = &s->conns;
}

static void conn_leave_slice(struct conn *c) {
  if (!c->slice_pprev)
    return;
  *c->slice_pprev = c->slice_next;
  if (c->slice_next)
    c->slice_next->slice_pprev = c->slice_pprev;
  c->slice_next = NULL;
  c->slice_pprev = NULL;
}

void conn_slice_gone(struct slice *s) {
  while (s->conns)
    conn_leave_slice(s->conns);
}

void conn_close(struct conn *c, const char *why) {
  struct conns *set = c->set;

  if (why)
    gs_log(GS_LOG_INFO, "closing connection of pid %d (slice %u): %s", (int)c->pid, c->slice_id,
           why);
  *c->pprev = c->next;
  if (c->next)
    c->next->pprev = c->pprev;
  set->n--;
  set->nhook -= c->hook_only;
  if (c->resume_timer)
    loop_del_timer(set->loop, c->resume_timer);
  loop_del_fd(set->loop, c->fd);
  close(c->fd);
  /* Out of its slice's list first: the token's bookkeeping no longer counts it. */
  conn_leave_slice(c);
  set->ops->gone(set->data, c);
  if (c->out.cap > CONN_OUT_KEEP)
    set->freed_since_trim += c->out.cap;
  gs_buf_free(&c->out);
  free(c);
}

/* Handles what c sent, within its share of one loop turn (CONN_TURN_MSGS requests, one STATUS),
 * and none while a reply to it waits to be read: what the daemon holds for a client that does not
 * read is one reply, not all it asked for. Such a client that fills c->in with more requests is
 * closed. Returns false when c was closed. */
bool conn_serve(struct conn *c) {
  uint32_t msgs = 0, statuses = 0;

  for (;;) {
    /* The whole requests already in first: c->in holds at most CONN_IN_MAX bytes. */
    while (!c->out.len) {
      struct gs_msg_hdr h;
      struct gs_msg m;
      size_t len;
      int r = gs_msg_frame(c->in, c->inlen, sizeof(c->in), &len);
      if (r == -EAGAIN)
        break;
      if (r < 0) {
        conn_close(c, "malformed message");
        return false;
      }
      memcpy(&h, c->in, sizeof(h));
      if (msgs == CONN_TURN_MSGS || (statuses && h.type == GS_MSG_STATUS)) {
        conn_resume_later(c);
        return true;
      }
      if (gs_msg_decode(c->in, len, &m) < 0) {
        conn_close(c, "invalid message");
        return false;
      }
      gs_msg_consume(c->in, &c->inlen, len);
      msgs++;
      statuses += h.type == GS_MSG_STATUS;
      if (!c->set->ops->handle(c->set->data, c, &m)) {
        conn_close(c, c->hellos_refused >= HELLO_REFUSED_MAX ? "too many refused HELLOs"
                                                             : "message out of protocol");
        return false;
      }
      if (c->dropped) {
        conn_close(c, "does not read its replies");
        return false;
      }
    }
    if (c->inlen == sizeof(c->in)) {
      /* Only a connection with replies waiting stops with whole requests left in c->in. */
      conn_close(c, "does not read its replies");
      return false;
    }
    ssize_t n = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, MSG_DONTWAIT);
    if (n == 0) {
      conn_close(c, NULL);
      return false;
    }
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN)
        return true;
      /* A reset is how a process that exits with replies unread says goodbye. */
      conn_close(c, errno == ECONNRESET ? NULL : strerror(errno));
      return false;
    }
    c->inlen += (size_t)n;
  }
}

static void resume_cb(struct loop *l, uint64_t id, void *data) {
  struct conn *c = data;

  (void)l;
  (void)id;
  c->resume_timer = 0;
  conn_serve(c);
}

/* Dispatched to the connection itself (the loop's per-fd data), not found by walking them. */
static void conn_cb(struct loop *l, int fd, uint32_t events, void *data) {
  struct conn *c = data;

  (void)l;
  (void)fd;
  if (events & EPOLLOUT)
    conn_flush(c);
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)))
    return;
  if (!conn_serve(c))
    return;
  if (events & (EPOLLHUP | EPOLLERR))
    conn_close(c, NULL);
}

struct conn *conn_new(struct conns *set, int fd, bool hook_only) {
  struct conn *c = calloc(1, sizeof(*c));

  if (!c)
    return NULL;
  c->fd = fd;
  c->set = set;
  c->hook_only = hook_only;
  c->accepted_at = loop_now();
  gs_buf_init(&c->out, CONN_OUT_MAX);
  if (loop_add_fd(set->loop, fd, EPOLLIN | EPOLLRDHUP, conn_cb, c) < 0) {
    free(c);
    return NULL;
  }
  c->next = set->head;
  if (set->head)
    set->head->pprev = &c->next;
  set->head = c;
  c->pprev = &set->head;
  set->n++;
  set->nhook += hook_only;
  return c;
}
